# dlqbot — see README.md.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 10s
BENCH_MESSAGES ?= 100000

.PHONY: all build test fuzz bench demo vet image clean services services-all services4 chaos

all: build

build:
	$(GO) build -o bin/dlqbot ./cmd/dlqbot

vet:
	$(GO) vet $(PKGS)

## services: start (installing from Debian's packages if needed) Redis and
## RabbitMQ 3.10 with the management plugin; changes nothing when they run.
services:
	./scripts/services.sh

## services-all: the same plus the RabbitMQ 4.0 and 4.3 brokers the suite
## also tests against (AMQP 127.0.0.1:5673 and :5674, management :15673 and
## :15674), each in its own Debian chroot; services4 is its old name.
services-all services4:
	./scripts/services.sh all

## test: the whole suite against the local RabbitMQ 3.10, 4.0 and 4.3 and
## Redis with the race detector; then, alone and without it (which makes
## them several times slower, so they skip under -race), the whole-DLQ
## replays of 100,000 (README "Tests" says which run on which broker); then
## brief fuzzing.
test: services-all vet
	$(GO) test -race -count=1 -timeout 9m $(PKGS)
	$(GO) test -count=1 -timeout 15m -parallel 8 -run 'Of100k' ./engine/
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseMeta$$' -fuzztime $(FUZZTIME) ./engine
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./commands

## bench: benchmarks against the reference programs, figures to docs/benchmarks.md.
bench:
	./scripts/bench.sh $(BENCH_MESSAGES)

## demo: the whole flow on this machine with a local Slack stand-in.
demo: services build
	./bin/dlqbot demo

clean:
	rm -rf bin

## image: the container image dlqbot:dev (needs a Docker engine).
image:
	docker build -t dlqbot:dev .

## chaos: fault-injection runs and 1 minute of fuzzing per target (about 7
## minutes); figures in bin/chaos/figures.txt, quoted in docs/reliability.md.
chaos:
	./scripts/chaos/chaos.sh
