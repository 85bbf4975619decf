#!/bin/bash
# kernels.sh: two builds' kernels side by side (tests/bench/kernbench.c), alternating in one run:
# per variant and case the median over ROUNDS of each build's median call (one thread: its CPU
# time, kernbench.c), and their ratio (B / A; above 1: B is faster). Under the benchmark lock:
#   flock /tmp/coli-bench.lock tests/bench/kernels.sh A_KERNBENCH B_KERNBENCH [ROUNDS]
# A build of another commit: its libraries with this kernbench.c, e.g.
#   cc -O2 -std=c11 -D_GNU_SOURCE -Iformats -Iengine tests/bench/kernbench.c \
#      OLD/build/libcoli-engine.a OLD/build/libcoli.a -o /tmp/kernbench-old -pthread \
#      -ljansson -lz -lm -lpcre2-8 -lutf8proc -luring -larchive
# Cases: q4 (decode's experts), q8, bf16 and fp8; matrix-vector and 4 tokens from cache, the GEMM
# at 29 tokens (a 512-token prefill's batch per expert; first on a 768x2048 expert matrix, the
# gate and up of bench-llama's model) and 64; one thread.
set -e
dir=build/bench
. tests/bench/lib.sh
[ $# -ge 2 ] || { say "usage: tests/bench/kernels.sh A_KERNBENCH B_KERNBENCH [ROUNDS]"; exit 2; }
a=$1 b=$2 rounds=${3:-5}
cases="q4 768 2048 29 21
q4 2048 4096 0 41
q4 2048 4096 4 21
q4 2048 4096 29 7
q4 2048 4096 64 5
q8 2048 4096 0 41
q8 2048 4096 29 7
bf16 1024 4096 0 41
bf16 1024 4096 29 7
fp8 1024 4096 0 41
fp8 1024 4096 64 5"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
isas=""
for isa in avx2 avx512 amx; do
	"$a" $isa q4 16 64 0 1 >/dev/null 2>&1 && isas="$isas $isa"
done
for r in $(seq 1 "$rounds"); do
	for isa in $isas; do
		i=0
		while read -r enc rows cols n reps; do
			i=$((i + 1))
			"$a" $isa $enc $rows $cols $n $reps | awk '{print $1}' >>"$tmp/$isa.$i.a"
			"$b" $isa $enc $rows $cols $n $reps | awk '{print $1}' >>"$tmp/$isa.$i.b"
		done <<<"$cases"
	done
	say "round $r of $rounds done"
done
echo "CPU: $(cpu_desc); $rounds rounds, alternating; medians (min-max)"
echo
echo "| variant | encoding | rows x cols | product | A | B | B / A |"
echo "|---|---|---|---|---:|---:|---:|"
for isa in $isas; do
	i=0
	while read -r enc rows cols n reps; do
		i=$((i + 1))
		unit=GFLOP/s what="$n tokens"
		[ "$n" = 0 ] && unit=GB/s what="matvec"
		ma=$(median <"$tmp/$isa.$i.a") mb=$(median <"$tmp/$isa.$i.b")
		ra=$(sort -g "$tmp/$isa.$i.a" | sed -n '1p;$p' | paste -sd-) rb=$(sort -g "$tmp/$isa.$i.b" | sed -n '1p;$p' | paste -sd-)
		echo "| $isa | $enc | ${rows}x$cols | $what ($unit) | $ma ($ra) | $mb ($rb) | $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.2f", b / a}') |"
	done <<<"$cases"
done
