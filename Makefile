# cotal-deliveryd: the two commands a new user runs are `make demo` and
# `make check`. Everything else here wraps CMake and ctest.

BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
# Tests at a time: twice the cores. The e2e suites mostly wait (a lease's
# TTL, a timer, a broker's acknowledgement): at two at a time on 2 cores the
# whole of `make check` kept the cores 13 % busy (7.3 CPU-minutes in 28.4).
TEST_JOBS  ?= $(shell echo $$(( $(JOBS) * 2 )))
BROKERS    := $(CURDIR)/build/brokers
NATS_210   := $(BROKERS)/nats-server-2.10/usr/sbin/nats-server
NATS_29    ?= /usr/sbin/nats-server
NATS_214   := $(BROKERS)/nats-server-2.14/package/bin/nats-server
BROKER_ENV  = COTAL_TEST_NATS_SERVER=$(NATS_210) COTAL_TEST_NATS_SERVER_29=$(NATS_29) \
	      COTAL_TEST_NATS_SERVER_214=$(NATS_214)
N          ?= 5
DEMO_ROOT  ?= $(CURDIR)/demo-mesh
DEMO_SPACE ?= demo
DEMO_PORT  ?= 4333
DEMO_METRICS ?= 127.0.0.1:4339

# make chaos: the daemon under random faults (issue 32, docs/RELIABILITY.md);
# root (network namespaces, nft). CHAOS_SECONDS of faults on one node, then
# on a 3-node cluster; CHAOS_SEED replays a run's schedule.
CHAOS_SECONDS ?= 1800
CHAOS_SEED    ?=
CHAOS_DIR     ?= $(CURDIR)/build/chaos

.PHONY: all build asan deps deb check check-reproducible chaos check-systemd check-systemd-loaded check-repeat check-unit demo demo-stop clean fuzz fuzz-registry fuzz-http bench bench-guard bench-host bench-hostile bench-scale

all: build

deps:
	@COTAL_BROKER_DIR=$(BROKERS) sh cmake/deps.sh

# The Debian package, checked by lintian (dist/deb.sh): build/deb/*.deb.
deb: deps
	@sh dist/deb.sh

# Issue 41: HEAD's package built twice, in two directories at two times
# (the second under faketime), byte-identical (dist/check-reproducible.sh;
# on a difference, which files and diffoscope's report). CI runs it after
# `make check`: it checks a commit, not the working tree.
check-reproducible: deps
	@BROKERS=$(BROKERS) sh dist/check-reproducible.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOTAL_TEST_HOOKS=ON -DCOTAL_BROKER_DIR=$(BROKERS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

asan:
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCOTAL_SANITIZE=ON -DCOTAL_TEST_HOOKS=ON -DCOTAL_BROKER_DIR=$(BROKERS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS)

# All tests: the release build, its data path's guard (bench-guard), then
# the ASan+UBSan build (LeakSanitizer on), each through ctest; the fuzzers;
# the Debian package and lintian. The e2e tests run against nats-server 2.10, and
# their core subset also against Debian 12's 2.9.10 (tests labelled
# "nats29") and the npm registry's 2.14 ("nats214").
check: deps build asan
	@echo "• tests of the release build"
	@cd $(BUILD) && $(BROKER_ENV) ctest --output-on-failure -j$(TEST_JOBS)
	$(GUARD)
	@echo "• tests of the ASan+UBSan build"
	@cd $(ASAN_BUILD) && $(BROKER_ENV) \
	    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j$(TEST_JOBS)
	@$(MAKE) --no-print-directory fuzz-registry
	@$(MAKE) --no-print-directory fuzz-http
	@$(MAKE) --no-print-directory deb

# The daemon under random faults: one node (nats-server 2.10, every write
# synced) then a 3-node R3 cluster in network namespaces (2.14), each for
# CHAOS_SECONDS, with the checker's verdict; reports in $(CHAOS_DIR).
chaos: deps build
	@mkdir -p $(CHAOS_DIR)
	@echo "• chaos, one node: $(CHAOS_SECONDS) s of faults (log: $(CHAOS_DIR)/single.log)"
	@$(BROKER_ENV) $(BUILD)/tests/cotal-chaos --seconds $(CHAOS_SECONDS) \
	    $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) --out $(CHAOS_DIR)/single.json \
	    > $(CHAOS_DIR)/single.log 2>&1; rc=$$?; grep -E '^\[.*\] (faults|  |posts|frames|latency|daemon|slow|✓|✗|cotal-chaos)' $(CHAOS_DIR)/single.log; \
	    echo "• chaos, 3-node cluster: $(CHAOS_SECONDS) s of faults (log: $(CHAOS_DIR)/cluster.log)"; \
	    $(BROKER_ENV) $(BUILD)/tests/cotal-chaos --cluster --broker-214 --seconds $(CHAOS_SECONDS) \
	    $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) --out $(CHAOS_DIR)/cluster.json \
	    > $(CHAOS_DIR)/cluster.log 2>&1; rc2=$$?; grep -E '^\[.*\] (faults|  |posts|frames|latency|daemon|slow|✓|✗|cotal-chaos)' $(CHAOS_DIR)/cluster.log; \
	    [ $$rc = 0 ] && [ $$rc2 = 0 ]

# The delivery service preset under a real systemd (root only): a Debian 12
# root (cached in build/systemd/) booted with systemd-nspawn, the units and
# the built daemon in it (tests/systemd/).
check-systemd: deps build deb
	@BUILD=$(BUILD) bash tests/systemd/check-systemd.sh

# The same under load (issue 30's test of the test): a busy loop on every
# core for as long as it runs.
check-systemd-loaded: deps build deb
	@BUILD=$(BUILD) bash tests/systemd/loaded.sh

# The whole of `make check`, N times over (N=5 by default): one line per
# run, pass or fail, with its time; each run's output in build/repeat/.
check-repeat:
	@sh dist/check-repeat.sh $(N)

check-unit: build
	@cd $(BUILD) && ctest --output-on-failure -L unit

# Fuzz the parsers for a minute each (clang, libFuzzer).
fuzz:
	@CC=clang cmake -S . -B build-fuzz -DCOTAL_FUZZ=ON -DCOTAL_BROKER_DIR=$(BROKERS) >/dev/null
	@cmake --build build-fuzz -j$(JOBS)
	@for t in jwt creds nkeys ipc records ctlreq timers manifest registry msgget; do \
	    mkdir -p build-fuzz/corpus/$$t; \
	    build-fuzz/tests/fuzz/fuzz_$$t -max_total_time=60 build-fuzz/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

# Part of `make check` (issue 28): the registry's request path under
# libFuzzer for 60 s (decode, the fair queue, each op's arguments, the
# reply); a crash fails the check and leaves its input in build-fuzz/.
FUZZ_SECONDS ?= 60
fuzz-registry:
	@echo "• fuzzing the registry's request path for $(FUZZ_SECONDS) s (libFuzzer)"
	@CC=clang cmake -S . -B build-fuzz -DCOTAL_FUZZ=ON -DCOTAL_BROKER_DIR=$(BROKERS) >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target fuzz_registry >/dev/null
	@mkdir -p build-fuzz/corpus/registry
	@cd build-fuzz && tests/fuzz/fuzz_registry -max_total_time=$(FUZZ_SECONDS) \
	    -print_final_stats=1 corpus/registry ../tests/fuzz/corpus/registry 2>fuzz-registry.log \
	    || { tail -40 fuzz-registry.log; exit 1; }; \
	    grep -E 'stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' \
	    fuzz-registry.log

# The metrics server's reading of a request head (issue 29: metrics/http.c,
# the first code a stranger's bytes reach) under libFuzzer for
# $(FUZZ_SECONDS) s; a crash fails and leaves its input in $(FUZZ_BUILD)/.
FUZZ_BUILD ?= build-fuzz
fuzz-http:
	@echo "• fuzzing the metrics server's request heads for $(FUZZ_SECONDS) s (libFuzzer)"
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DCOTAL_FUZZ=ON -DCOTAL_BROKER_DIR=$(BROKERS) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_http >/dev/null
	@mkdir -p $(FUZZ_BUILD)/corpus/http
	@cd $(FUZZ_BUILD) && tests/fuzz/fuzz_http -max_total_time=$(FUZZ_SECONDS) -max_len=16384 \
	    -print_final_stats=1 corpus/http $(CURDIR)/tests/fuzz/corpus/http 2>fuzz-http.log \
	    || { tail -40 fuzz-http.log; exit 1; }; \
	    grep -E 'stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' \
	    fuzz-http.log

# The data path's benchmark (reported, not asserted): docs/BENCHMARKS.md.
# BEFORE=<an earlier build's cotal-deliveryd>: each M on both, in one run.
bench: deps build
	@COTAL_TEST_NATS_SERVER=$(NATS_210) $(BUILD)/bench/bench_fanout \
	    $(if $(BEFORE),--before $(BEFORE)) $(BENCH_ARGS)

# Issue 40, run by `make check`: the daemon's CPU per copy over the broker's
# per raw stored publish, and the broker's per copy over its floor, both
# measured in the run, under the bounds docs/BENCHMARKS.md gives ("The
# guard"). DAEMON=<an earlier build's cotal-deliveryd> checks that one.
GUARD = @echo "• bench-guard: the data path's cost per copy against the broker's (about a minute)"; \
	COTAL_TEST_NATS_SERVER=$(NATS_210) $(BUILD)/bench/bench_guard \
	    $(if $(DAEMON),--daemon $(DAEMON)) $(GUARD_ARGS)
bench-guard: deps build
	$(GUARD)

# What one agent flooding its rail costs the others (issue 28): join latency
# and copies/s with and without the flood, in one run.
bench-hostile: deps build
	@COTAL_TEST_NATS_SERVER=$(NATS_210) $(BUILD)/bench/bench_hostile $(BENCH_ARGS)

# Issue 39: one space at many lifecycles, this build beside BEFORE (a daemon
# binary of an earlier build, optional): build/bench-scale.csv, and
# docs/scale.svg when gnuplot is there. SCALE_SIZES=L:T,... (live:tombstones).
SCALE_SIZES ?= 10000:30000,30000:90000,100000:300000,300000:900000
bench-scale: deps build
	@COTAL_TEST_NATS_SERVER=$(NATS_210) $(BUILD)/bench/bench_scale --sizes $(SCALE_SIZES) \
	    --csv $(BUILD)/bench-scale.csv $(if $(BEFORE),--before $(BEFORE)) $(BENCH_ARGS)
	@if command -v gnuplot >/dev/null; then \
	    gnuplot -e "csv='$(BUILD)/bench-scale.csv'; out='docs/scale.svg'" bench/scale.gnuplot && \
	    echo "• docs/scale.svg"; fi

# A delivery host's memory per lane and start-up at 1, 10 and 50 lanes.
bench-host: deps build
	@COTAL_TEST_NATS_SERVER=$(NATS_210) $(BUILD)/bench/bench_host $(BENCH_ARGS)

# A local authenticated dev mesh with one provisioned space and two agents.
demo: deps build
	@COTAL_NATS_SERVER=$(NATS_210) COTAL_HOME=$(DEMO_ROOT)/home BUILD=$(BUILD) \
	    DEMO_ROOT=$(DEMO_ROOT) DEMO_SPACE=$(DEMO_SPACE) DEMO_PORT=$(DEMO_PORT) \
	    DEMO_METRICS=$(DEMO_METRICS) sh dist/demo.sh

demo-stop:
	@COTAL_HOME=$(DEMO_ROOT)/home $(BUILD)/cotal/cotal down --space $(DEMO_SPACE) --root $(DEMO_ROOT)
	@$(BUILD)/cotal/cotal mesh stop --root $(DEMO_ROOT)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
