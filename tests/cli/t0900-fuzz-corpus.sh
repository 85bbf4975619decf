#!/usr/bin/env bash
# t0900-fuzz-corpus.sh: every fuzz target's plain driver (bin/fuzz/fuzz_NAME) over its corpus
# tests/fuzz/corpus/NAME (docs/robustness.md): no crash, no abort, every input read. Known
# crashes sit in corpus/NAME/crashes/, which the driver does not enter.
. "$(dirname "$0")/lib.sh"

for src in "$TOP"/tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	name=${name#fuzz_}
	log=$SCRATCH/$name.log
	rc=0
	"$BIN/fuzz/fuzz_$name" "$TOP/tests/fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
	if [ $rc -eq 0 ] && grep -q "^PASS fuzz $name: " "$log"; then
		grep "^PASS fuzz $name: " "$log"
	else
		echo "FAIL fuzz $name: exited $rc"
		sed 's/^/    | /' "$log" | tail -n 30
		t_failed=1
	fi
done
test_done
