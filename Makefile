# PodDB — one entry point.
#   make           build everything into build/ (binaries in build/bin/)
#   make test      install missing deps, build the tests with ASan+UBSan, run them all
#   make tsan      run the concurrency tests under ThreadSanitizer
#   make run       install deps, build, start the default emulated pod and run a workload
#   make module SRC=path/to/mod.c [OUT=path/to/mod.so]   a stored-procedure module
#   make clean
# Sources are found by wildcard: a new file in cxl/, src/<module>/, workloads/<w>/
# is part of the core library; tools/poddb-*.c are programs; tests/unit/test_*.c are
# Check test programs.

CC      ?= gcc
# libfabric joins when the disaggregated-memory mode (src/dm/) needs it: linking it
# loads libinfinipath, whose startup code replaces fatal-signal handlers.
PKGS    := numa libpmem2 yaml-0.1
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

WARN    := -Wall -Wextra -Werror
BASE_CFLAGS := -std=gnu17 $(WARN) -g -pthread -I. -Isrc -Iinclude $(PKG_CFLAGS) -D_GNU_SOURCE
OPT     ?= -O2
# mimalloc ships no .pc file (Debian 2.0.9): plain -lmimalloc.
LIBS    := $(PKG_LIBS) -lmimalloc -pthread -lm

BIN_SRCS  := $(wildcard tools/poddb-*.c)
LIB_SRCS  := $(filter-out $(BIN_SRCS),$(wildcard cxl/*.c src/*/*.c workloads/*/*.c))
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_HELPER_SRCS := $(wildcard tests/unit/helpers/*.c)
TEST_HELPER_HDRS := $(wildcard tests/unit/helpers/*.h)
# Concurrency tests that also run under ThreadSanitizer (make tsan).
TSAN_TESTS := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*_mt.c))

BINS := $(patsubst tools/%.c,build/bin/%,$(BIN_SRCS))
# The client library (include/poddb/client.h): the protocol codec and the
# client, position-independent, without the engine.
CLIENT_SRCS := src/net/proto.c src/net/status.c $(wildcard src/client/*.c)
CLIENT_OBJS := $(patsubst %.c,build/obj/pic/%.o,$(CLIENT_SRCS))
CLIENT_LIBS := build/lib/libpoddb.a build/lib/libpoddb.so

.PHONY: all deps test tsan run clean bench check-deps module
.DEFAULT_GOAL := all

all: $(BINS) $(CLIENT_LIBS)

deps:
	@tools/install-deps

# ---- variants: rel (-O2), asan (ASan+UBSan), tsan -------------------------------
define variant
$(1)_OBJS := $$(patsubst %.c,build/obj/$(1)/%.o,$$(LIB_SRCS))
build/obj/$(1)/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(BASE_CFLAGS) $(2) -MMD -MP -c $$< -o $$@
build/lib/libpoddb_core_$(1).a: $$($(1)_OBJS)
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	ar rcs $$@ $$^
-include $$($(1)_OBJS:.o=.d)
endef

SAN_ASAN := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SAN_TSAN := -O1 -fno-omit-frame-pointer -fsanitize=thread

$(eval $(call variant,rel,$(OPT)))
$(eval $(call variant,asan,$(SAN_ASAN)))
$(eval $(call variant,tsan,$(SAN_TSAN)))

build/obj/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(OPT) -fPIC -MMD -MP -c $< -o $@
-include $(CLIENT_OBJS:.o=.d)
build/lib/libpoddb.a: $(CLIENT_OBJS)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^
build/lib/libpoddb.so: $(CLIENT_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libpoddb.so.0 $^ -o $@
	ln -sf libpoddb.so build/lib/libpoddb.so.0

build/bin/%: tools/%.c build/lib/libpoddb_core_rel.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(OPT) -MMD -MP $< build/lib/libpoddb_core_rel.a $(LIBS) -o $@

# Sanitized copies of the programs, for the integration tests.
build/asan/bin/%: tools/%.c build/lib/libpoddb_core_asan.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(SAN_ASAN) $< build/lib/libpoddb_core_asan.a $(LIBS) -o $@

build/tsan/bin/%: tools/%.c build/lib/libpoddb_core_tsan.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(SAN_TSAN) $< build/lib/libpoddb_core_tsan.a $(LIBS) -o $@

build/test/asan/%: tests/unit/%.c $(TEST_HELPER_SRCS) $(TEST_HELPER_HDRS) build/lib/libpoddb_core_asan.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(SAN_ASAN) -Itests/unit $< $(TEST_HELPER_SRCS) build/lib/libpoddb_core_asan.a $(CHECK_LIBS) $(LIBS) -o $@

build/test/tsan/%: tests/unit/%.c $(TEST_HELPER_SRCS) $(TEST_HELPER_HDRS) build/lib/libpoddb_core_tsan.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(SAN_TSAN) -Itests/unit $< $(TEST_HELPER_SRCS) build/lib/libpoddb_core_tsan.a $(CHECK_LIBS) $(LIBS) -o $@

-include $(wildcard build/bin/*.d)

# Per-program libraries. The server exports its symbols so that procedure
# modules (dlopen'ed) can call the API of include/poddb/proc.h.
build/bin/poddb-cli build/asan/bin/poddb-cli build/tsan/bin/poddb-cli: LIBS += -lreadline
build/bin/poddb-server build/asan/bin/poddb-server build/tsan/bin/poddb-server: LIBS += -rdynamic

# Example procedure modules for the tests.
TEST_MODULES := $(patsubst tests/modules/%.c,build/test/modules/%.so,$(wildcard tests/modules/*.c))
build/test/modules/%.so: tests/modules/%.c include/poddb/proc.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -fPIC -shared $< -o $@

# A stored-procedure module from one C file (docs/procedures.md, which has the
# same as a plain cc line): it needs only include/poddb/proc.h, since the
# server provides the API's functions when it loads the module. No -Werror:
# a user's module should build with warnings shown.
MODULE_CFLAGS := -std=gnu17 -Wall -Wextra -O2 -g -fPIC -shared -Iinclude
OUT ?= build/modules/$(basename $(notdir $(SRC))).so
module: include/poddb/proc.h
	@if [ -z "$(SRC)" ]; then \
	  echo "make module: no source (make module SRC=path/to/mod.c [OUT=path/to/mod.so])" >&2; \
	  exit 2; fi
	@if [ ! -f "$(SRC)" ]; then echo "make module: $(SRC): no such file" >&2; exit 2; fi
	@mkdir -p "$(dir $(OUT))"
	$(CC) $(MODULE_CFLAGS) "$(SRC)" -o "$(OUT)"

ASAN_TESTS := $(patsubst tests/unit/%.c,build/test/asan/%,$(TEST_SRCS))
ASAN_BINS  := $(patsubst tools/%.c,build/asan/bin/%,$(BIN_SRCS))

# make test: deps, the modules' include order (tools/check-layers: docs/architecture.md,
# "Layers"), the release build (integration tests use it too), sanitized unit
# tests, then the integration scripts against the sanitized programs.
test: deps
	@tools/check-layers
	@$(MAKE) --no-print-directory all $(ASAN_TESTS) $(ASAN_BINS) $(TEST_MODULES)
	@tests/run-tests --variant asan $(ASAN_TESTS) -- $(wildcard tests/integration/*.sh)

# The server's threads are checked by running its integration test against
# ThreadSanitizer builds of the programs, and the benchmark scripts (the
# workers' bench jobs next to their socket queue) the same way.
# test_pod_mp: the pod's servers (owner handlers, move-out, remote transactions) under TSan;
# test_dm_store_mp and dm_pod.sh (on shm: DM_POD_PROVIDERS): the memory node and compute nodes' workers on the dm store.
TSAN_SERVER_TESTS := test_server test_pod_mp test_liveness_mp test_server_limits test_dm_store_mp
TSAN_SCRIPTS := $(wildcard tests/integration/bench_*.sh) tests/integration/dm_pod.sh tests/integration/dm_nic.sh \
                tests/integration/dm_cn_kill.sh tests/integration/dm_cn_kill_motor.sh \
                tests/integration/dm_cn_kill_lotus.sh \
                tests/integration/dm_mn_kill.sh
TSAN_BINS := $(patsubst tools/%.c,build/tsan/bin/%,$(BIN_SRCS))
tsan: deps
	@$(MAKE) --no-print-directory $(patsubst %,build/test/tsan/%,$(TSAN_TESTS) $(TSAN_SERVER_TESTS)) $(TSAN_BINS) $(TEST_MODULES)
	@DM_POD_PROVIDERS=shm PODDB_BIN=build/tsan/bin tests/run-tests --variant tsan $(patsubst %,build/test/tsan/%,$(TSAN_TESTS) $(TSAN_SERVER_TESTS)) -- $(TSAN_SCRIPTS)

# The demo: the default pod with a small TPC-C, ~10 s, --check (tools/run-demo).
run: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@tools/run-demo

# The figures of docs/benchmarks.md come from poddb-bench on the pod of
# conf/bench.yaml; the exact commands are there.
bench: all
	@echo "start the pod: tools/pod up --conf conf/bench.yaml"
	@echo "then e.g.:     build/bin/poddb-bench --conf conf/bench.yaml --workload tpcc --remote 10/15 --check"
	@echo "the workload table of docs/benchmarks.md: tools/bench-workloads (--help)"
	@echo "docs/benchmarks.md has every command and figure; poddb-bench --help every option"

clean:
	rm -rf build
