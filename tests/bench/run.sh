#!/usr/bin/env bash
# run.sh: `make bench-run`: warm decode with every expert in RAM, as a fraction of the memory
# read bandwidth measured in the same run, and prefill speed on a 512-token prompt.
#   ratio = (weight bytes read per decode token x decode tokens/s) / memory read bandwidth
# The model: a synthetic qwen3_moe of 12 layers x 128 experts, top-8, hidden 2048, expert FFN
# 768, int4 (about 4.3 GiB): the width of the in-RAM llama.cpp figure in docs/benchmarks.md.
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 3).
# Results (a markdown table) on stdout, progress on stderr.
set -eu
cd "$(dirname "$0")/../.."
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-3}
mkdir -p "$dir"
. tests/bench/lib.sh
model=$(model_of run-q4 "$run_q4_shape")
threads=$(nproc)
prompt=$(seq 1000 1511 | tr '\n' ' ')

# One repetition: bandwidth, then decode 64 tokens, then a 512-token prefill.
one_rep() {
	local bw dec pre
	bw=$(bin/coli-membench 2048 "$threads" | tail -1 | sed 's/.*read_gbs=//')
	dec=$(coli_json_run "$dir/run-ids.txt" bin/coli-run -m "$model" --prompt-ids "1 2 3 4" -n 65 --ignore-eos --print-ids --json)
	pre=$(coli_json_run "$dir/run-ids.txt" bin/coli-run -m "$model" --prompt-ids "$prompt" -n 1 --print-ids --json)
	echo "$bw $(tok_s "$dec") $(jfmt "$dec" decode.weights_mib_per_token %.1f) $(jfmt "$dec" decode.weights_gb_per_s %.1f)" \
		"$(jfmt "$pre" prompt.tokens_per_s %.1f) $(rss_of "$dec")"
}

runs=$(for i in $(seq "$reps"); do say "repetition $i/$reps"; one_rep; done)
med() { echo "$runs" | awk -v c="$1" '{print $c}' | median; }
echo "| model | GiB | decode tok/s | MiB weights/token | weight GB/s | memory GB/s ($threads threads) | ratio | prefill tok/s (512) | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
gib=$(cat "$model"/*.bin | wc -c | awk '{printf "%.2f", $1/2^30}')
ratios=$(echo "$runs" | awk '{print $4 / $1}' | median)
printf '| qwen3_moe 12x128 int4 | %s | %.1f | %.0f | %.1f | %.1f | %.2f | %.1f | %s |\n' "$gib" "$(med 2)" "$(med 3)" \
	"$(med 4)" "$(med 1)" "$ratios" "$(med 5)" "$(echo "$runs" | awk '{print $6}' | sort -n | tail -1)"
echo
echo "Medians of $reps runs, warm (model in the page cache, every expert in RAM); memory bandwidth: coli-membench 2048 MiB at $threads threads before each run. Decode: 64 tokens after a 4-token prompt. Commit $(commit), $(date -u +%Y-%m-%d), $(nproc) cores."
