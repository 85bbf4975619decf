#!/usr/bin/env bash
# convert.sh: `make bench-convert`: coli-convert throughput against the disk-bound limit
# measured in the same run, and peak RSS, on multi-GB synthetic checkpoints (bf16 and fp8).
#   limit = source bytes / O_DIRECT read bandwidth + container bytes / O_DIRECT write bandwidth
#   ratio = limit / conversion seconds   (1.0 = the disk is the only limit)
# Environment: COLI_BENCH_DIR (default build/bench, must be on the disk to measure),
# COLI_BENCH_REPS (default 3), COLI_BENCH_ARGS (coli-synth shape; default below).
# Results (a markdown table) on stdout, progress on stderr. Needs root for drop_caches.
set -eu
cd "$(dirname "$0")/../.."
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-3}
shape=${COLI_BENCH_ARGS:---family deepseek_v3 --preset bench --layers 4 --experts 16 --measure 0}
mkdir -p "$dir"
. tests/bench/lib.sh

# The checkpoint of one storage format, regenerated only when the arguments change.
source_of() {
	local fmt=$1 src=$dir/src-$1 args="$shape --seed 7 $([ "$1" = fp8 ] && echo --fp8)"
	if [ "$(cat "$src/.bench-args" 2>/dev/null)" != "$args" ]; then
		rm -rf "$src"
		say "generating $fmt checkpoint: coli-synth $args"
		bin/coli-synth $args --out "$src" -q >&2
		echo "$args" > "$src/.bench-args"
	fi
	echo "$src"
}

# One repetition: disk limits, then a cold conversion; prints "secs rss_mib ratio read write".
one_rep() {
	local src=$1 out=$dir/out.coli disk r w line secs rss in outb
	disk=$(bin/coli-diskbench "$dir" 4096 16 4)
	r=${disk#*read_mbs=}; w=${disk#write_mbs=}; w=${w%% *}
	drop
	line=$(bin/coli-convert --force "$src" "$out")
	secs=$(echo "$line" | sed -n 's/.* \([0-9.]*\) s, .*/\1/p')
	rss=$(echo "$line" | sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p')
	in=$(cat "$src"/*.safetensors | wc -c)
	outb=$(cat "$out"/*.bin | wc -c)
	awk -v s="$secs" -v m="$rss" -v i="$in" -v o="$outb" -v r="$r" -v w="$w" \
		'BEGIN {printf "%s %s %.3f %s %s %.3f %.3f\n", s, m, (i/1e6/r + o/1e6/w)/s, r, w, i/1e9, o/1e9}'
}

echo "| source | GB in | GB out | seconds | GB/s in | disk read MB/s | disk write MB/s | ratio to disk limit | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for fmt in bf16 fp8; do
	src=$(source_of $fmt)
	runs=$(for i in $(seq "$reps"); do say "$fmt: repetition $i/$reps"; one_rep "$src"; done)
	med() { echo "$runs" | awk -v c="$1" '{print $c}' | median; }
	gbin=$(med 6); gbout=$(med 7); secs=$(med 1)
	printf '| %s | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f | %.2f | %s |\n' "$fmt" "$gbin" "$gbout" "$secs" \
		"$(awk -v a="$gbin" -v b="$secs" 'BEGIN {print a/b}')" "$(med 4)" "$(med 5)" "$(med 3)" \
		"$(echo "$runs" | awk '{print $2}' | sort -n | tail -1)"
done
rm -rf "$dir/out.coli"
echo
echo "Medians of $reps cold runs (page cache dropped); disk bandwidth: coli-diskbench $dir 4096 MiB, 16 MiB blocks, queue depth 4, measured before each run; peak RSS is the largest. Shape: coli-synth $shape. Commit $(commit), $(date -u +%Y-%m-%d), $(nproc) cores, $(cpu_desc)."
