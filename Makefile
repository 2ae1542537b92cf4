# bloomamq: approximate membership query filters for PostgreSQL (PGXS build)

EXTENSION = bloomamq
EXTVERSION = 0.5.0

MODULE_big = bloomamq
# Pure-C filter core (no PostgreSQL calls): also built into the unit tests,
# fuzz harnesses and C benchmarks.
CORE_OBJS = src/core_format.o src/core_kinds.o src/core_parquet.o \
	src/core_sort.o src/core_union.o \
	$(patsubst %.c,%.o,$(sort $(wildcard src/kind_*.c)))
OBJS = $(CORE_OBJS) src/bloomamq.o src/amq_hashing.o src/amqfilter.o \
	src/amq_bridge.o src/amq_funcs.o src/amq_parquet.o src/amq_agg.o \
	src/amq_probe.o src/amq_selfuncs.o \
	$(patsubst %.c,%.o,$(sort $(wildcard src/amqidx*.c)))
OBJS += src/amq_join.o src/amq_join_exec.o

# the current install script (built) and, committed, the install scripts of
# earlier releases and the upgrade scripts between releases
DATA = $(sort sql/$(EXTENSION)--$(EXTVERSION).sql $(wildcard sql/$(EXTENSION)--*.sql))
EXTRA_CLEAN = sql/$(EXTENSION)--$(EXTVERSION).sql test/unit/test_kinds \
	test/bench/bench_kinds

REGRESS = $(patsubst sql/%.sql,%,$(sort $(filter-out sql/$(EXTENSION)%.sql,$(wildcard sql/*.sql))))
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)

TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

PG_CONFIG ?= pg_config
PG_CPPFLAGS = -I$(srcdir)/src
# Warnings are shown, not fatal: a newer compiler's new warning must not
# break a user's build.  tools/strict-build sets WERROR=-Werror.
WERROR ?=
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	-Wno-sign-compare $(WERROR)
SHLIB_LINK =

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: a changed header (the ops table in
# core.h, say) must rebuild every object.
$(OBJS): $(wildcard $(srcdir)/src/*.h)

# One hand-written install script, copied to the versioned name.
sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	cp $< $@

all: sql/$(EXTENSION)--$(EXTVERSION).sql

# C unit tests of the filter kinds: no server needed.
UNIT_SRCS = $(CORE_OBJS:.o=.c) $(sort $(wildcard test/unit/*.c))
test/unit/test_kinds: $(UNIT_SRCS) $(wildcard src/*.h test/unit/*.h)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter $(WERROR) \
		-Isrc -Itest/unit -o $@ $(UNIT_SRCS) -lm

.PHONY: unittest
unittest: test/unit/test_kinds
	test/unit/test_kinds

# C benchmark of every kind at 10^7 keys beside one measured DRAM miss.
test/bench/bench_kinds: test/bench/bench_kinds.c $(CORE_OBJS:.o=.c) $(wildcard src/*.h)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter $(WERROR) \
		-Isrc -o $@ test/bench/bench_kinds.c $(CORE_OBJS:.o=.c) -lm

.PHONY: bench-kinds
bench-kinds: test/bench/bench_kinds
	test/bench/bench_kinds $(BENCH_ARGS)

# Benchmarks against the peers in one run (SPEC section 12), on a throwaway
# cluster; never fails on timing.  e.g. make bench BENCH_ARGS="1000000 10000"
.PHONY: bench
bench:
	tools/bench $(BENCH_ARGS)

# Hash-join pre-filters (bloomamq.join_prefilter), in one run on a throwaway
# cluster: the 22 TPC-H-shaped queries at scale factor 1 (test/bench/tpch,
# generated on the server: about 3 minutes each time, the cluster being new)
# with the setting off and on, parallel plans on and off, results checked
# equal; the semi-join of make bench; never fails on timing.
#   e.g. make bench-joins BENCH_ARGS="--runs 1 --queries q03,q08 --star"
# Like tools/bench, the tools' own default server (PostgreSQL 15) unless
# PG_CONFIG is given on the command line or in the environment (make exports
# it then): make's default, a bare "pg_config", is not a path tools/setup takes.
# Against a server of one's own: PGHOST=... PGPORT=... /usr/bin/python3
# test/bench/bench_joins.py (see its --help).
.PHONY: bench-joins bench-joins-chroot
bench-joins:
	tools/setup --bench
	eval "$$(tools/pgcluster start shared_buffers=2GB \
		maintenance_work_mem=1GB jit=off)" && \
	trap 'tools/pgcluster stop' EXIT && \
	/usr/bin/python3 test/bench/bench_joins.py $(BENCH_ARGS)

# The same in a copy of a chroot of tools/pgmajor (17: trixie, 19: sid):
# bloomamq built and installed in it, its server started for the run and
# stopped after, its data (the loaded TPC-H tables) kept for the next run.
#   cp -a /var/cache/bloomamq/trixie-17 /var/cache/bloomamq/bench-17
#   make bench-joins-chroot BENCH_CHROOT=/var/cache/bloomamq/bench-17
bench-joins-chroot:
	@test -n "$(BENCH_CHROOT)" || \
		{ echo "make bench-joins-chroot: set BENCH_CHROOT, a copy of a chroot of tools/pgmajor" >&2; exit 2; }
	tools/pgchroot $(BENCH_CHROOT) build
	eval "$$(tools/pgchroot $(BENCH_CHROOT) start shared_buffers=2GB \
		maintenance_work_mem=1GB jit=off)" && \
	trap 'tools/pgchroot $(BENCH_CHROOT) stop' EXIT && \
	/usr/bin/python3 test/bench/bench_joins.py $(BENCH_ARGS)

# amq_agg's state type (0.5.0) against the internal state of 0.4.0: two
# databases on one throwaway cluster, alternating; never fails on timing.
#   e.g. make bench-aggstate BENCH_ARGS="--rows 1000000 --runs 3"
.PHONY: bench-aggstate
bench-aggstate:
	tools/setup --bench
	eval "$$(tools/pgcluster start shared_buffers=2GB work_mem=256MB jit=off)" && \
	trap 'tools/pgcluster stop' EXIT && \
	/usr/bin/python3 test/bench/bench_aggstate.py $(BENCH_ARGS)

# The Citus suite (test/citus): a coordinator and two workers with Citus
# and bloomamq preloaded; needs Citus installed (tools/citus builds it from
# ../shared/vendor) and, like installcheck, bloomamq installed.  Not part of
# installcheck: tools/test runs it on PostgreSQL 15 when Citus's source is
# present.
.PHONY: installcheck-citus
installcheck-citus:
	$(MAKE) installcheck REGRESS= PROVE_TESTS='test/citus/*.pl'

# bloomamq on a three-node Citus cluster (tools/citus-cluster, Citus built by
# tools/citus): amq_agg pushed down against coordinator aggregation, and a
# filter sent to the shards against Citus's plan for IN (SELECT ...); bytes
# moved between nodes and seconds.  Never fails on timing.
#   e.g. make bench-citus BENCH_ARGS="--rows 1000000 --users 20000"
.PHONY: bench-citus
bench-citus:
	tools/setup --bench
	eval "$$(tools/citus-cluster start shared_buffers=1GB work_mem=256MB \
		max_parallel_workers_per_gather=0 jit=off)" && \
	trap 'tools/citus-cluster stop' EXIT && \
	/usr/bin/python3 test/bench/bench_citus.py $(BENCH_ARGS)

# ---- fuzzing and valgrind (test/fuzz, tools/valgrind-check) ----
# libFuzzer harnesses of every input path of the filter core, built with
# clang under AddressSanitizer and UndefinedBehaviorSanitizer from the same
# sources as the extension.  make fuzz FUZZ_TIME=60 fuzzes each harness for
# FUZZ_TIME seconds; make fuzz-smoke runs each for FUZZ_RUNS inputs from a
# fixed seed and ends with "N passed, N failed".
FUZZ_CC ?= clang
FUZZ_TIME ?= 60
FUZZ_RUNS ?= 20000
FUZZ_HARNESSES = filter text aggstate parquet
FUZZ_BINS = $(patsubst %,test/fuzz/fuzz_%,$(FUZZ_HARNESSES))
FUZZ_CFLAGS = -std=gnu11 -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Wall -Wextra -Wno-unused-parameter $(WERROR) -Isrc -Itest/fuzz
FUZZ_DEPS = test/fuzz/fuzz_common.c $(CORE_OBJS:.o=.c) $(wildcard src/*.h test/fuzz/*.h)

$(FUZZ_BINS): test/fuzz/fuzz_%: test/fuzz/fuzz_%.c $(FUZZ_DEPS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< test/fuzz/fuzz_common.c \
		$(CORE_OBJS:.o=.c) -lm

# the seed corpus: real filters and states of every kind, made by the core
test/fuzz/make_corpus: test/fuzz/make_corpus.c $(CORE_OBJS:.o=.c) $(wildcard src/*.h)
	$(CC) -std=gnu11 -O1 -g -Wall -Wextra -Wno-unused-parameter $(WERROR) \
		-Isrc -o $@ test/fuzz/make_corpus.c $(CORE_OBJS:.o=.c) -lm

test/fuzz/corpus/.made: test/fuzz/make_corpus
	rm -rf test/fuzz/corpus
	test/fuzz/make_corpus test/fuzz/corpus
	touch $@

.PHONY: fuzz fuzz-smoke fuzz-build
fuzz-build: $(FUZZ_BINS) test/fuzz/corpus/.made

fuzz: fuzz-build
	FUZZ_HARNESSES="$(FUZZ_HARNESSES)" test/fuzz/run fuzz $(FUZZ_TIME)

fuzz-smoke: fuzz-build
	FUZZ_HARNESSES="$(FUZZ_HARNESSES)" test/fuzz/run smoke $(FUZZ_RUNS)

EXTRA_CLEAN += $(FUZZ_BINS) test/fuzz/make_corpus test/fuzz/corpus test/fuzz/work

# The regression files and TAP tests with the servers under valgrind's
# memcheck, and the strict builds (gcc and clang, -Werror, assertions
# compiled).
.PHONY: valgrind-check strict-build
valgrind-check:
	PG_CONFIG=$(PG_CONFIG) tools/valgrind-check

strict-build:
	PG_CONFIG=$(PG_CONFIG) tools/strict-build
