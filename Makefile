# Spine — run `make help` for the targets.
GO       ?= go
BIN      ?= bin/spine
PKGS     ?= ./...
# spine version reports this (empty outside a git checkout: spine version then
# says what Go's build info knows, else "dev").
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS  ?= -X main.version=$(VERSION)
# make chaos: load per scenario run, runs per scenario (consecutive seeds),
# first seed (empty: random), scenarios (all, or names: docs/reliability.md),
# the tests it runs (a -run pattern, anchored: TestChaos alone leaves out
# the power-loss and corruption tests)
CHAOS_DURATION  ?= 90s
CHAOS_RUNS      ?= 1
CHAOS_SEED      ?=
CHAOS_SCENARIOS ?= all
CHAOS_TESTS     ?= TestChaos|TestPowerLoss.*|TestCorrupt.*
CHAOS_TIMEOUT   ?= 3h
# make bench-compare: the base commit (default main; or BASE_BIN, a prebuilt
# base binary; NEW_BIN, a prebuilt new one instead of the working tree's),
# alternating pairs of runs, jobs per run, PROFILE=1 for the leaders' profiles
BASE     ?= main
PAIRS    ?= 3
JOBS     ?= 20000
BASE_BIN ?=
NEW_BIN  ?=
PROFILE  ?=
# make bench-peer: rounds of three runs (NATS default, Spine, NATS sync always;
# JOBS jobs each), natsbench's source dir (empty: ../shared/peerbench) or a
# prebuilt natsbench, where the runs are kept (empty: bin/bench-peer-<UTC time>),
# where the clients connect on both sides (rr: over the three nodes; leader),
# a tmpfs dir for a control run of Spine with no disk per round (empty: none)
ROUNDS    ?= 3
CONNECT   ?= rr
TMPFS     ?=
PEERBENCH ?=
NATSBENCH ?=
OUT       ?=
# make bench-scale: the largest queue size, or the sizes (SIZES=1k,30k,100k);
# how long the cluster then rests before each node's RSS is read again (0: not)
N        ?= 300000
SIZES    ?=
IDLE     ?= 30s
# make fuzz: time per fuzz target, and per minimization of an input it finds
FUZZTIME         ?= 10s
FUZZMINIMIZETIME ?= 3s

.DEFAULT_GOAL := help

.PHONY: help build run test test-short lint fuzz bench bench-compare bench-peer bench-scale bench-fsm drill chaos chaos-short clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build bin/spine, its version stamped from git describe
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/spine

# exec: the script, not an intermediate sh that would die of the Ctrl-C, is
# make's child, so a clean stop is a clean exit.
run: build ## start a local cluster in the foreground, Ctrl-C stops it (NODES=3 BASE_PORT=36725 DATA=./data)
	exec env BIN=$(BIN) scripts/run-cluster.sh

test: ## run every test with the race detector (includes multi-process system tests)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

test-short: ## unit tests only (no multi-process system tests)
	$(GO) test -race -count=1 -short $(PKGS)

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	GOOS=darwin $(GO) vet $(PKGS)  # Linux-only calls stay behind build tags: spine builds on macOS

# Every FuzzXxx in a *_test.go, one at a time (go test -fuzz takes one
# target): all run, then the failures are listed. A failing input is
# written to the package's testdata/fuzz/FuzzXxx/, where `make test` runs
# it from then on; keep it as the regression test of the fix. A run that
# fails with "context deadline exceeded" and no failing input is Go's own
# race at the -fuzztime deadline (golang.org/issue/75804, fixed in Go 1.27):
# it runs again, up to four tries, and fails only if every try does.
fuzz: ## run each fuzz target for FUZZTIME (default 10s), e.g. make fuzz FUZZTIME=5m
	@failed=""; log=$$(mktemp); \
	for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$dir/*_test.go); do \
	    for try in 1 2 3 4; do \
	      echo "== $$dir $$t ($(FUZZTIME))"; \
	      $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$dir >$$log 2>&1; \
	      rc=$$?; cat $$log; \
	      [ $$try -lt 4 ] && [ $$rc -ne 0 ] && grep -q 'context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log || break; \
	      echo "(no failing input: the fuzzing engine's deadline race, golang.org/issue/75804; again, up to 4 tries)"; \
	    done; \
	    [ $$rc -eq 0 ] || failed="$$failed $$dir:$$t"; \
	  done; \
	done; \
	rm -f $$log; \
	if [ -n "$$failed" ]; then echo "fuzz targets failed:$$failed"; exit 1; fi

bench: build ## start a local 3-node cluster, run `spine-bench` against it, stop it
	BIN=$(BIN) scripts/bench.sh

bench-compare: ## compare the node of BASE (default main) with the working tree's: PAIRS (3) alternating pairs of `spine-bench --local 3 --jobs JOBS` (20000), per metric the runs, means and new/base (BASE_BIN=, NEW_BIN= prebuilt binaries; PROFILE=1 the leaders' CPU and heap profiles)
	BASE='$(BASE)' PAIRS='$(PAIRS)' JOBS='$(JOBS)' BASE_BIN='$(BASE_BIN)' NEW_BIN='$(NEW_BIN)' PROFILE='$(PROFILE)' scripts/bench-compare.sh

bench-peer: ## Spine next to NATS JetStream (natsbench, in PEERBENCH or NATSBENCH): ROUNDS (3) rounds of NATS default, `spine-bench --local 3` and NATS sync always, JOBS (20000) each, first system rotated; per system the rounds, Spine's ratios to each NATS mode (min–max); CONNECT=leader puts the clients on the leader on both sides; TMPFS=/dev/shm adds a control run of Spine with its data on tmpfs
	ROUNDS='$(ROUNDS)' JOBS='$(JOBS)' CONNECT='$(CONNECT)' PEERBENCH='$(PEERBENCH)' NATSBENCH='$(NATSBENCH)' OUT='$(OUT)' TMPFS='$(TMPFS)' scripts/bench-peer.sh

bench-scale: build ## grow a local 3-node cluster's queue to N jobs (300000; SIZES=1k,30k overrides), time every route and read the memory at each size and after IDLE (30s) at rest, then backup, restore and failover times at the largest, then every job finished and the memory per finished job after IDLE (about 3 min on 2 vCPUs; N=30000 under 1 min)
	$(GO) build -o $(dir $(BIN))spine-bench ./cmd/spine-bench
	$(dir $(BIN))spine-bench scale --binary $(BIN) $(if $(SIZES),--sizes $(SIZES),--n $(N)) --idle $(IDLE)

bench-fsm: ## state machine micro-benchmarks (apply rate, claim scaling, memory, snapshots)
	$(GO) test -run xxx -bench 'ApplyCreate|ClaimNext' -benchtime 200000x ./fsm/
	$(GO) test -run xxx -bench 'MemoryPerJob|Snapshot1M' -benchtime 1x ./fsm/

drill: build ## failover drill: SIGKILL the leader KILLS times under load and verify nothing is lost
	BIN=$(BIN) scripts/failover-drill.sh

chaos: SHELL := /bin/bash
chaos: ## the fault suite: kills, pauses, partitions (3 and 5 nodes), power loss, corruption; one VERDICT line each (about 10 min; CHAOS_DURATION=90s CHAOS_RUNS=1 CHAOS_SEED= CHAOS_SCENARIOS=all CHAOS_TESTS='TestChaos|TestPowerLoss.*|TestCorrupt.*')
	CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_RUNS=$(CHAOS_RUNS) CHAOS_SEED=$(CHAOS_SEED) CHAOS_SCENARIOS=$(CHAOS_SCENARIOS) \
	  $(GO) test -race -count=1 -timeout $(CHAOS_TIMEOUT) -run '^($(CHAOS_TESTS))$$' -v ./systemtest \
	  | tee chaos.log | grep --line-buffered -E '^(=== RUN|--- |\s+--- |ok|FAIL|PASS)|VERDICT'; \
	  status=$${PIPESTATUS[0]}; echo "full output in chaos.log; the verdicts:"; grep -h 'VERDICT' chaos.log | sed 's/^ *[a-z_]*\.go:[0-9]*: //' | sort -u; exit $$status

chaos-short: ## the short form of the fault suite: TestChaos alone, kills+pauses/3 and partitions/5 for 25 s of load each (about 2 min; make test runs it too)
	@$(MAKE) --no-print-directory chaos CHAOS_TESTS=TestChaos CHAOS_DURATION=25s CHAOS_SCENARIOS=kills+pauses/3,partitions/5 CHAOS_TIMEOUT=20m

clean: ## remove bin/ and ./data (the local cluster's data and dev tokens); stop make run first (scripts/teardown.sh stops it and deletes ./data)
	rm -rf bin data
