#!/bin/bash
# roofline.sh: each kernel against the limit it can reach on this machine, in one run: the
# matrix-vector products (decode) of matrices far larger than the caches in weight GB/s against
# the memory read bandwidth of one thread (coli-membench --cpu-time), and the batched products (prefill, 64
# tokens, the matrix in cache) in GFLOP/s against one thread's multiply-add peak at the
# variant's width (coli-fmapeak). One thread, timed by its CPU time; medians of ROUNDS rounds,
# each taking every variant and case in turn. Under the benchmark lock:
#   flock /tmp/coli-bench.lock tests/bench/roofline.sh [ROUNDS]      (make bench-kernels)
# Prints a markdown table (docs/benchmarks.md, "Kernels against the machine's limits").
set -e
dir=build/bench
. tests/bench/lib.sh
rounds=${1:-5}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { say "usage: tests/bench/roofline.sh [ROUNDS]"; exit 2; }
# precision encoding rows cols tokens reps: tokens 0 is the matrix-vector product; precision q8
# (the opt-in 8-bit activations, q4 and q8 weights) set against the same limits
cases="exact q4 32768 8192 0 5
exact q8 16384 8192 0 5
exact fp4 32768 8192 0 5
exact bf16 16384 8192 0 5
exact fp8 16384 8192 0 5
q8 q4 32768 8192 0 5
q8 q8 16384 8192 0 5
exact q4 2048 4096 64 5
exact q8 2048 4096 64 5
exact fp4 2048 4096 64 5
exact bf16 1024 4096 64 5
exact fp8 1024 4096 64 5
q8 q4 2048 4096 64 5
q8 q8 2048 4096 64 5"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
isas=""
for isa in scalar avx2 avx512 amx; do
	bin/coli-fmapeak "$isa" >/dev/null 2>&1 && isas="$isas $isa"
done
say "roofline: variants$isas, $rounds rounds"
for r in $(seq 1 "$rounds"); do
	bin/coli-membench --cpu-time 512 | sed -n "s/^threads=1 read_gbs=//p" >>"$tmp/mem"
	for isa in $isas; do
		bin/coli-fmapeak "$isa" | awk '{print $1}' >>"$tmp/peak.$isa"
		# amx's q8 GEMM runs on its int8 tiles
		[ "$isa" = amx ] && bin/coli-fmapeak amx-int8 | awk '{print $1}' >>"$tmp/peak8.$isa"
		i=0
		while read -r prec enc rows cols n reps; do
			i=$((i + 1))
			# the scalar variant's large products take seconds each: fewer calls
			[ "$isa" = scalar ] && reps=3
			bin/coli-kernbench --precision "$prec" "$isa" "$enc" "$rows" "$cols" "$n" "$reps" 2>/dev/null |
				awk '{print $1}' >>"$tmp/$isa.$i"
		done <<<"$cases"
	done
done
mem=$(median <"$tmp/mem")
echo "CPU: $(cpu_desc); commit $(commit); $rounds rounds; one thread's memory read bandwidth $mem GB/s"
echo
echo "| variant | precision | encoding | rows x cols | product | measured | limit | of the limit |"
echo "|---|---|---|---|---|---:|---:|---:|"
for isa in $isas; do
	peak=$(median <"$tmp/peak.$isa")
	i=0
	while read -r prec enc rows cols n reps; do
		i=$((i + 1))
		v=$(median <"$tmp/$isa.$i")
		if [ "$n" = 0 ]; then
			what="matvec, out of cache (weight GB/s)" lim=$mem unit="GB/s read"
		elif [ "$isa" = amx ] && [ "$prec" = q8 ]; then
			what="$n tokens, in cache (GFLOP/s)" lim=$(median <"$tmp/peak8.$isa") unit="GOP/s int8 tiles"
		elif [ "$isa" = amx ] && [ "$enc" != f16 ] && [ "$enc" != f32 ]; then
			what="$n tokens, in cache (GFLOP/s)" lim=$peak unit="GFLOP/s bf16 tiles / 3"
		else
			what="$n tokens, in cache (GFLOP/s)" lim=$peak unit="GFLOP/s FMA"
		fi
		awk -v isa="$isa" -v pr="$prec" -v e="$enc" -v sh="${rows}x$cols" -v w="$what" -v v="$v" -v l="$lim" -v u="$unit" \
			'BEGIN { printf "| %s | %s | %s | %s | %s | %.2f | %.1f %s | %.2f |\n", isa, pr, e, sh, w, v, l, u, v / l }'
	done <<<"$cases"
done
