# dlqbot — see README.md and docs/.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 10s
FUZZFLAGS ?=
BENCH_MESSAGES ?= 20000

.PHONY: all build test test-all fuzz bench demo vet image clean services services-all services4 chaos

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
## Redis, in three lanes at once (scripts/test.sh): the engine package with
## the race detector but for its long fault cases; every other package
## with it; and, without the race detector (which makes them several
## times slower, so they skip under -race), the whole-DLQ replays of
## 100,000 (docs/reliability.md "Tests and benchmarks" says which run on
## which broker), the blocks package and the pacing test at 3,000, then
## those fault cases with it (they mostly wait, and start once the
## busiest minutes are over). The long engine scenarios run their classic and their quorum
## case on one broker each, two different ones, rotating over 3.10, 4.0
## and 4.3 by the test's name (testkit.ClassicOn, testkit.QuorumOn); tests
## whose claim differs by version on every broker. The fuzz targets' seed
## corpora run as tests; make fuzz fuzzes, make vet vets (CI runs it
## first). Each lane's log is in bin/test/; docs/reliability.md says how
## long it takes.
test: services-all
	PKGS="$(PKGS)" GO=$(GO) ./scripts/test.sh

## test-all: make test with every case on every broker: the classic and
## quorum cases make test rotates on all three (DLQBOT_CLASSIC_ALL=1) and
## every 100,000-message replay on every broker and queue type
## (DLQBOT_100K_ALL=1); about three times as long.
test-all: services-all
	DLQBOT_CLASSIC_ALL=1 DLQBOT_100K_ALL=1 PKGS="$(PKGS)" GO=$(GO) ./scripts/test.sh

## fuzz: run every fuzz target for FUZZTIME each (FUZZFLAGS: more go test
## flags, e.g. -parallel 1 for one worker, as make test's 100k lane does).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseMeta$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./engine/letter
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./commands
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeToken$$' -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./store

## bench: the built binary's preview and replay (--json, the binary's own
## defaults) beside their references in the same run — a confirm-then-ack
## mover, the management shovel, a one-pass filtered mover — on a DLQ fed
## through the default exchange and on one bound to a DLX, BENCH_MESSAGES
## dead letters each (100000 and 1000000 by hand, on a quiet machine);
## figures to docs/benchmarks.md (scripts/bench.sh, package bench).
bench: build
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
