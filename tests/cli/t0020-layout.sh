#!/usr/bin/env bash
# t0020-layout.sh: the library boundaries of docs/README.md hold in the source tree: tools
# include only public headers, libcoli knows nothing of the engine, coli-convert nothing of it.
. "$(dirname "$0")/lib.sh"

# includes FILES...: every quoted #include of the files, as "file: header".
includes() { grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$@" | sed 's/:.*include[[:space:]]*"\([^"]*\)".*/: \1/'; }

tool_sources() { ls "$TOP"/run/*.[ch] "$TOP"/plan/*.[ch] "$TOP"/profile/*.[ch] "$TOP"/convert/*.[ch] \
	"$TOP"/tests/synth/*.[ch] "$TOP"/tests/bench/*.c 2>/dev/null; }

test_expect_success 'tools include no header from an engine subfolder or another tool' '
	includes $(tool_sources) >inc &&
	test -s inc &&
	! grep -E ": (\.\./|nn/|kernels/|store/|tok/|sample/|run/|convert/|plan/|profile/)" inc
'

test_expect_success 'the check above catches a tool including an engine internal' '
	printf "#include \"store/stream.h\"\n" >bad.c &&
	includes bad.c >inc &&
	grep -E ": (\.\./|nn/|kernels/|store/|tok/|sample/)" inc
'

test_expect_success 'public engine headers include no engine internal' '
	includes "$TOP"/engine/*.h >inc &&
	test -s inc &&
	! grep -E ": (nn|kernels|store|tok|sample)/" inc
'

test_expect_success 'libcoli (formats/) includes nothing of the engine' '
	for h in "$TOP"/engine/*.h; do basename "$h"; done >public &&
	includes "$TOP"/formats/*.[ch] | sed "s/.*: //" | sort -u >inc &&
	! grep -xFf public inc
'

test_expect_success 'the libraries include nothing of tool/ (what only tools print)' '
	for h in "$TOP"/tool/*.h; do basename "$h"; done >tool &&
	test -s tool &&
	includes "$TOP"/formats/*.[ch] "$TOP"/engine/*.h "$TOP"/engine/*/*.[ch] | sed "s/.*: //" | sort -u >inc &&
	! grep -xFf tool inc
'
test_expect_success 'coli-convert and coli-synth include nothing of the engine (they link libcoli only)' '
	for h in "$TOP"/engine/*.h; do basename "$h"; done >public &&
	includes "$TOP"/convert/*.[ch] "$TOP"/tests/synth/*.[ch] | sed "s/.*: //" | sort -u >inc &&
	! grep -xFf public inc
'

test_expect_success 'the libraries never print, never read the environment, never exit or raise' '
	grep -nE "\\b(getenv|secure_getenv|printf|fprintf|fputc|putchar|puts|fputs|fwrite|perror|exit|abort|raise)[[:space:]]*\\(|\\b(stderr|stdout)\\b" \
		"$TOP"/formats/*.[ch] "$TOP"/engine/*.h "$TOP"/engine/*/*.[ch] >hits || true &&
	! grep -v "^[^:]*:[0-9]*:[[:space:]]*\\(/\\*\\| \\*\\)" hits
'

test_expect_success 'the libraries export only coli_ names (internal ones are local: make localises them)' '
	for a in "$TOP"/build/libcoli.a "$TOP"/build/libcoli-engine.a; do
		test -f "$a" || exit 1
		nm -g --defined-only "$a" | awk "NF == 3 { print \$3 }" >"syms.$(basename "$a")" &&
		test -s "syms.$(basename "$a")" &&
		! grep -v "^coli_" "syms.$(basename "$a")" || { echo "$a exports the names above" >&2; exit 1; }
	done
'

test_done
