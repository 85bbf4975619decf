#!/usr/bin/env bash
# run.sh: runs every unit test binary and CLI test script, prints their PASS/FAIL/SKIP lines
# and ends with one line "N passed, N failed, N skipped" (a SKIP: a check this machine cannot
# run, said with why: a CPU variant it lacks, no FUSE, not root). Exit status 1 if anything failed.
# Usage: tests/run.sh [WRAPPER]   (WRAPPER, e.g. valgrind, prefixes unit-test binaries)
set -u
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
crashed=0
for t in bin/tests/test_* build/san/ut/test_*; do # build/san: under UBSan (make san-unit)
	[ -x "$t" ] || continue
	echo "== $t"
	timeout 1200 ${1:-} "$t" | tee -a "$log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" -gt 1 ]; then echo "FAIL $t: exited $rc" | tee -a "$log"; fi
done
for t in tests/cli/t[0-9]*.sh; do
	[ -f "$t" ] || continue
	echo "== $t"
	timeout 1200 bash "$t" | tee -a "$log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" -gt 1 ]; then echo "FAIL $t: exited $rc" | tee -a "$log"; fi
done
passed=$(grep -c '^PASS ' "$log")
failed=$(grep -c '^FAIL ' "$log")
skipped=$(grep -c '^SKIP ' "$log")
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
