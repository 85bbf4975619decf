# lib.sh: the shell-test harness (git's t/ style). Source it from tests/cli/tNNNN-*.sh.
# Each test runs in its own scratch folder; test_expect_success prints PASS/FAIL lines that
# tests/run.sh counts. Binaries are in $BIN (default: bin/ of the tree). COLI_TEST_KEEP=1 keeps
# the scratch folder (its path: the newest /tmp/coli-test.*) for a look after a failure.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$TOP/bin}
FIX=${COLI_FIXTURES:-$TOP/tests/fixtures/hf}
PATH=$BIN:$PATH
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/coli-test.XXXXXX")
trap '[ -n "${COLI_TEST_KEEP:-}" ] || rm -rf "$SCRATCH"' EXIT
t_failed=0

# test_expect_success NAME 'commands': runs the commands in a fresh subfolder of SCRATCH.
test_expect_success() {
	name=$1
	dir="$SCRATCH/$(printf '%s' "$name" | tr -c 'A-Za-z0-9_-' '_')"
	mkdir -p "$dir"
	if (cd "$dir" && set -e && eval "$2") >"$dir.log" 2>&1; then
		echo "PASS $name"
	else
		echo "FAIL $name"
		sed 's/^/    | /' "$dir.log" | tail -n 30
		t_failed=1
	fi
}

# test_must_fail CMD...: succeeds only if CMD exits 1 or 2 (a clean failure), not a crash.
test_must_fail() {
	"$@"
	rc=$?
	if [ $rc -eq 1 ] || [ $rc -eq 2 ]; then
		return 0
	fi
	echo "test_must_fail: '$*' exited $rc (expected 1 or 2)" >&2
	return 1
}

# expect_exit CODE CMD...: CMD must exit with exactly CODE; stdout in ./out, stderr in ./err.
expect_exit() {
	local want=$1 rc=0
	shift
	"$@" >out 2>err || rc=$?
	cat err >&2
	if [ "$rc" -ne "$want" ]; then
		echo "expect_exit: '$*' exited $rc, expected $want" >&2
		return 1
	fi
}

# err_has STRING...: every STRING occurs in ./err.
err_has() {
	for s in "$@"; do
		grep -qF -- "$s" err || { echo "err_has: '$s' not in stderr" >&2; return 1; }
	done
}

# no_manifest DIR: DIR holds nothing that looks like a finished container.
no_manifest() {
	if [ -e "$1/manifest.coli" ]; then
		echo "no_manifest: $1/manifest.coli exists" >&2
		return 1
	fi
}

# ids_of FILE: the int32 little-endian ids in FILE (a fixture's prompt_ids.i32.bin), space-separated.
ids_of() { od -An -t d4 -v "$1" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }

# asan_build: the binaries are built with AddressSanitizer (make asan).
asan_build() { ldd "$BIN/coli-run" 2>/dev/null | grep -q libasan; }

# limit_vm KIB: caps the address space (ulimit -v) for a test of memory exhaustion; under
# AddressSanitizer, whose shadow needs terabytes of address space, one allocation above KIB
# returns NULL instead (max_allocation_size_mb, allocator_may_return_null). Use it in a subshell.
limit_vm() {
	if asan_build; then
		export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=$(($1 / 1024))
	else
		ulimit -v "$1"
	fi
}

test_done() {
	exit $t_failed
}
