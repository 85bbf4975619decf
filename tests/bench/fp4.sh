#!/bin/bash
# fp4.sh: FP4 (fp4: e2m1 + UE8M0 per 32) against int4 gs64 (q4), the same build's kernels
# alternating in one run (tests/bench/kernbench.c): per variant the matrix-vector product's weight
# GB/s with the matrix in cache (2048 x 4096, an expert's) and from RAM (32768 x 4096, 68 MiB),
# and the GEMM's GFLOP/s at 29 tokens; medians (min-max) over ROUNDS, one thread, and the ratio
# fp4 / q4 (the two encodings take the same 4.25 bits a weight, so GB/s compares per weight).
#   flock /tmp/coli-bench.lock tests/bench/fp4.sh [ROUNDS]
set -e
dir=build/bench
. tests/bench/lib.sh
k=bin/coli-kernbench rounds=${1:-7}
cases="2048 4096 0 41
32768 4096 0 9
2048 4096 29 7"
isas=$(kern_isas "$k") tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$rounds"); do
	for isa in $isas; do
		i=0
		while read -r rows cols n reps; do
			i=$((i + 1))
			for enc in q4 fp4; do
				"$k" $isa $enc $rows $cols $n $reps | awk '{print $1}' >>"$tmp/$isa.$i.$enc"
			done
		done <<<"$cases"
	done
	say "round $r of $rounds done"
done
echo "CPU: $(cpu_desc); commit $(commit); $rounds rounds, alternating; medians (min-max)"
echo
echo "| variant | rows x cols | product | q4 | fp4 | fp4 / q4 |"
echo "|---|---|---|---:|---:|---:|"
for isa in $isas; do
	i=0
	while read -r rows cols n reps; do
		i=$((i + 1))
		what="matvec (GB/s)"
		[ "$n" = 0 ] || what="$n tokens (GFLOP/s)"
		ma=$(median <"$tmp/$isa.$i.q4") mb=$(median <"$tmp/$isa.$i.fp4")
		ra=$(sort -g "$tmp/$isa.$i.q4" | sed -n '1p;$p' | paste -sd-) rb=$(sort -g "$tmp/$isa.$i.fp4" | sed -n '1p;$p' | paste -sd-)
		echo "| $isa | ${rows}x$cols | $what | $ma ($ra) | $mb ($rb) | $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.2f", b / a}') |"
	done <<<"$cases"
done
