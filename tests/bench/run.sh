#!/usr/bin/env bash
# run.sh: `make bench-run`: warm decode with every expert in RAM, as a fraction of the memory
# read bandwidth measured in the same run, and prefill speed on a 512-token prompt.
#   ratio = (weight bytes read per decode token x decode tokens/s) / memory read bandwidth
# The model: a synthetic qwen3_moe of 12 layers x 128 experts, top-8, hidden 2048, expert FFN
# 768, int4 (about 4.3 GiB): the width of the in-RAM llama.cpp figure in docs/benchmarks.md.
# llama.cpp beside it when node-llama-cpp is installed in NODE_LLAMA_DIR (make bench-run installs
# it, as bench-llama does): the same weights as a Q4_0 GGUF (coli-synth --gguf), the same prompts
# and threads, run right after coli in each repetition; bench-llama has the full comparison.
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 3), NODE_LLAMA_DIR
# (default build/llama).
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

driver=tests/bench/llama/driver.mjs
gguf=
export NODE_LLAMA_DIR=${NODE_LLAMA_DIR:-$PWD/build/llama}
if [ -e "$NODE_LLAMA_DIR/node_modules/node-llama-cpp/package.json" ]; then
	gguf=$(gguf_of run-q4 "$run_q4_shape" q4_0)
else
	say "run.sh: node-llama-cpp is not installed in NODE_LLAMA_DIR (make bench-run installs it): no llama.cpp columns"
fi
# llama.cpp's tokens/s of one run (decode, or prompt for a prefill), or "-" without it.
llama_tps() {
	local j
	[ -n "$gguf" ] || { echo -; return; }
	j=$(node "$driver" --model "$gguf" --threads "$threads" --prompt-ids "$1" -n "$2" 2>"$dir/run-llama.err" | tail -n 1)
	[ -n "$j" ] || { say "run.sh: llama.cpp failed: $(cat "$dir/run-llama.err")"; exit 1; }
	jfmt "$j" "$3" %.2f
}

# One repetition: bandwidth, then decode 64 tokens, then a 512-token prefill (llama.cpp after
# each, when present).
one_rep() {
	local bw dec pre ld lp
	bw=$(bin/coli-membench 2048 "$threads" | tail -1 | sed 's/.*read_gbs=//')
	dec=$(coli_json_run "$dir/run-ids.txt" bin/coli-run -m "$model" --threads "$threads" --prompt-ids "1 2 3 4" -n 65 --ignore-eos --print-ids --json)
	ld=$(llama_tps "1 2 3 4" 65 decode.tokens_per_s)
	pre=$(coli_json_run "$dir/run-ids.txt" bin/coli-run -m "$model" --threads "$threads" --prompt-ids "$prompt" -n 1 --print-ids --json)
	lp=$(llama_tps "$prompt" 1 prompt.tokens_per_s)
	echo "$bw $(tok_s "$dec") $(jfmt "$dec" decode.weights_mib_per_token %.1f) $(jfmt "$dec" decode.weights_gb_per_s %.1f)" \
		"$(jfmt "$pre" prompt.tokens_per_s %.1f) $(rss_of "$dec") $ld $lp"
}

runs=$(for i in $(seq "$reps"); do say "repetition $i/$reps"; one_rep; done)
med() { echo "$runs" | awk -v c="$1" '{print $c}' | median; }
# rat A B: the median of the per-repetition ratios of columns A and B ("-" without llama.cpp).
rat() { echo "$runs" | awk -v a="$1" -v b="$2" '$b != "-" && $b > 0 {printf "%.2f\n", $a / $b}' | median; }
echo "| model | GiB | decode tok/s | MiB weights/token | weight GB/s | memory GB/s ($threads threads) | ratio | prefill tok/s (512) | peak RSS MiB | llama.cpp decode tok/s | coli / llama.cpp | llama.cpp prefill tok/s | coli / llama.cpp |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
gib=$(cat "$model"/*.bin | wc -c | awk '{printf "%.2f", $1/2^30}')
ratios=$(echo "$runs" | awk '{print $4 / $1}' | median)
printf '| qwen3_moe 12x128 int4 | %s | %.1f | %.0f | %.1f | %.1f | %.2f | %.1f | %s | %s | %s | %s | %s |\n' "$gib" "$(med 2)" "$(med 3)" \
	"$(med 4)" "$(med 1)" "$ratios" "$(med 5)" "$(echo "$runs" | awk '{print $6}' | sort -n | tail -1)" \
	"$(med 7)" "$(rat 2 7)" "$(med 8)" "$(rat 5 8)"
echo
echo "Medians of $reps runs, warm (model in the page cache, every expert in RAM); memory bandwidth: coli-membench 2048 MiB at $threads threads before each run. Decode: 64 tokens after a 4-token prompt, --threads $threads. llama.cpp: node $driver --model ${gguf:-(none)} --threads $threads, the same prompts, right after coli in each repetition (ratios: medians of the per-repetition ratios). Commit $(commit), $(date -u +%Y-%m-%d), $(nproc) cores, $(cpu_desc)."
