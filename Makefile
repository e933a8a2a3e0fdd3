# dlqbot — see README.md.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 10s
BENCH_MESSAGES ?= 100000

.PHONY: all build test test-unit fuzz bench demo vet image clean

all: build

build:
	$(GO) build -o bin/dlqbot ./cmd/dlqbot

vet:
	$(GO) vet $(PKGS)

## test: the whole suite against the local RabbitMQ and Redis, then brief fuzzing.
test: vet
	$(GO) test -race -count=1 -timeout 9m $(PKGS)
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseMeta$$' -fuzztime $(FUZZTIME) ./engine
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./commands

## bench: benchmarks against the reference programs, figures to docs/benchmarks.md.
bench:
	./scripts/bench.sh $(BENCH_MESSAGES)

## demo: the whole flow on this machine with a local Slack stand-in.
demo: build
	./bin/dlqbot demo

clean:
	rm -rf bin

.PHONY: chaos

## image: the container image dlqbot:dev (needs a Docker engine).
image:
	docker build -t dlqbot:dev .

## chaos: fault-injection runs and 1 minute of fuzzing per target (about 7
## minutes); figures in bin/chaos/figures.txt, quoted in docs/reliability.md.
chaos:
	./scripts/chaos/chaos.sh
