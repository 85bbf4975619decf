#!/usr/bin/env bash
# tsan.sh: make tsan's run: every unit test, then the CLI tests that stream, on the binaries of a
# ThreadSanitizer build (make tsan: build/tsan/bin). Each test's race reports go to a folder of
# their own; a test that made any fails (its first report shown). Ends with "N passed, N failed".
# Usage: tests/tsan.sh BINDIR [TEST...]   (TEST: a unit test's name or a CLI script's, e.g.
# test_store_stress t0520-run-stream; none: all of them)
set -u
cd "$(dirname "$0")/.."
bindir=$(cd "$1" && pwd) || exit 2
shift
# The CLI tests whose coli-run streams experts (I/O threads, io_uring, mirrors, faults, traces).
CLI="t0520-run-stream t0527-run-stream-gets t0540-run-pins t0550-run-ram t0560-run-mirror t0580-run-trace
     t0590-run-json t0650-run-eio t0655-run-loop"
reports=$(mktemp -d "${TMPDIR:-/tmp}/coli-tsan.XXXXXX")
log=$reports/log
trap 'rm -rf "$reports"' EXIT
export TSAN_OPTIONS="halt_on_error=0:exitcode=66:second_deadlock_stack=1:history_size=4"

wanted() { # wanted NAME: whether NAME is to run
	[ -z "$sel" ] && return 0
	case " $sel " in *" $1 "*) return 0 ;; esac
	return 1
}

# races NAME: the reports written while NAME ran: one FAIL line and the first report, or nothing.
races() {
	local files
	files=$(ls "$reports"/run/tsan.* 2>/dev/null)
	[ -z "$files" ] && return 0
	echo "FAIL $1: ThreadSanitizer: $(cat $files | grep -c '^WARNING: ThreadSanitizer') report(s)" | tee -a "$log"
	cat $files | sed -n '/^WARNING/,/^SUMMARY/p' | head -n 60 | sed 's/^/    | /'
	rm -f $files
}

sel="$*"
mkdir -p "$reports/run"
export TSAN_OPTIONS="$TSAN_OPTIONS:log_path=$reports/run/tsan"
# Unit tests that replace malloc themselves (counting or failing allocations) bypass the
# sanitizer's allocator, which ThreadSanitizer cannot run beside: not run here.
OWN_MALLOC="test_alloc test_allocfail"
for t in "$bindir"/tests/test_*; do
	name=$(basename "$t")
	[ -x "$t" ] && wanted "$name" || continue
	case " $OWN_MALLOC " in *" $name "*) echo "SKIP $name: it replaces malloc (not under ThreadSanitizer)"; continue ;; esac
	echo "== $t"
	timeout 2400 "$t" | tee -a "$log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" -gt 1 ] && [ "$rc" -ne 66 ]; then echo "FAIL $name: exited $rc" | tee -a "$log"; fi
	races "$name"
done
for name in $CLI; do
	t=tests/cli/$name.sh
	[ -f "$t" ] && wanted "$name" || continue
	echo "== $t"
	BIN=$bindir timeout 2400 bash "$t" | tee -a "$log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" -gt 1 ]; then echo "FAIL $name: exited $rc" | tee -a "$log"; fi
	races "$name"
done
passed=$(grep -c '^PASS ' "$log")
failed=$(grep -c '^FAIL ' "$log")
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
