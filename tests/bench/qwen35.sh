#!/usr/bin/env bash
# qwen35.sh: `make bench-qwen35`: prefill of a 512-token prompt and decode speed of a
# Qwen3.6-35B-A3B-shaped model with every weight in RAM.
# The model: coli-synth --preset qwen3.6 (Qwen3.6-35B-A3B's real widths: hidden 2048, the Gated
# DeltaNet with 16 key and 32 value heads of 128 and a 4-tap conv, gated full attention with 16
# query and 2 KV heads of 256, 256 experts top-8 of FFN 512 and a shared expert of 512, vocab
# 248320) with 8 layers instead of 40 (full_attention_interval 4: 6 Gated DeltaNet, 2 full
# attention) and no MTP layer, converted with the defaults (int4 experts, int4 dense matrices):
# about 4 GiB, all in RAM. Per repetition: the memory read bandwidth (coli-membench), decode of
# 64 tokens after a 4-token prompt, prefill of a 512-token prompt (coli-run --json).
# llama.cpp: node-llama-cpp 3.21.1's llama.cpp knows this architecture (qwen35moe), but
# coli-synth writes GGUF only for qwen3_moe; there is no llama.cpp column (docs/benchmarks.md).
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 5),
# COLI_BENCH_THREADS (default 2), COLI_BENCH_QWEN35_SHAPE (coli-synth arguments of the model).
# Results (a markdown table) on stdout, progress on stderr.
set -eu
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-5}
threads=${COLI_BENCH_THREADS:-2}
shape=${COLI_BENCH_QWEN35_SHAPE:---family qwen3_5_moe --preset qwen3.6 --layers 8 --mtp 0 --no-vision --measure 64 --seed 11}
mkdir -p "$dir"
model=$(model_of qwen35-q4 "$shape")
sync # a conversion's writeback would fall on the first measurements

# The container and 2 GiB of working memory must fit in RAM.
gib=$(bytes_of "$model" | awk '{printf "%.2f", $1 / 2^30}')
avail=$(awk '$1 == "MemAvailable:" {printf "%.1f", $2 / 2^20}' /proc/meminfo)
awk -v g="$gib" -v a="$avail" 'BEGIN {exit !(g + 2 < a)}' ||
	{ say "qwen35.sh: the model ($gib GiB) needs more than the $avail GiB of RAM available"; exit 1; }
prompt=$(seq 1000 1511 | tr '\n' ' ')
dec_cmd=(bin/coli-run -m "$model" --threads "$threads" --prompt-ids "1 2 3 4" -n 65 --ignore-eos --print-ids --json)
pre_cmd=(bin/coli-run -m "$model" --threads "$threads" --prompt-ids "<512 ids: 1000..1511>" -n 1 --print-ids --json)

# One repetition: bandwidth, decode, prefill; prints "membw dec_tok_s mib_tok weight_gbs prefill_tok_s rss".
one_rep() {
	local bw dec pre
	bw=$(bin/coli-membench 2048 "$threads" | tail -1 | sed 's/.*read_gbs=//')
	dec=$(coli_json_run "$dir/qwen35-ids.txt" "${dec_cmd[@]}")
	pre=$(coli_json_run "$dir/qwen35-ids.txt" bin/coli-run -m "$model" --threads "$threads" --prompt-ids "$prompt" -n 1 --print-ids --json)
	echo "$bw $(tok_s "$dec") $(jfmt "$dec" decode.weights_mib_per_token %.1f) $(jfmt "$dec" decode.weights_gb_per_s %.1f)" \
		"$(jfmt "$pre" prompt.tokens_per_s %.1f) $(rss_of "$dec") $(rss_of "$pre")"
}

say "qwen35.sh: $model ($gib GiB), $reps repetitions, $threads threads"
load_before=$(cut -d" " -f1 /proc/loadavg)
runs=$(for i in $(seq "$reps"); do say "repetition $i/$reps"; r=$(one_rep); say "  $r"; echo "$r"; done)
col() { echo "$runs" | awk -v c="$1" '{print $c}'; }
med() { col "$1" | median; }
range() { col "$1" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }
echo "| model | GiB | decode tok/s | (min-max) | MiB weights/token | weight GB/s | memory GB/s ($threads threads) | prefill tok/s (512) | (min-max) | peak RSS MiB decode / prefill |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '| qwen3_5_moe 8 layers (6 GDN + 2 full) x 256 experts, int4 | %s | %.2f | %s | %.0f | %.1f | %.1f | %.1f | %s | %s / %s |\n' "$gib" \
	"$(med 2)" "$(range 2)" "$(med 3)" "$(med 4)" "$(med 1)" "$(med 5)" "$(range 5)" \
	"$(col 6 | sort -n | tail -1)" "$(col 7 | sort -n | tail -1)"
echo
echo "Medians of $reps repetitions, warm (every weight in RAM). Decode: \`${dec_cmd[*]}\`; prefill:" \
	"\`${pre_cmd[*]}\`; memory bandwidth: \`bin/coli-membench 2048 $threads\` before each repetition." \
	"Model: coli-synth $shape, converted with the defaults ($gib GiB). Load average $load_before before," \
	"$(cut -d" " -f1 /proc/loadavg) after. Commit $(commit), $(date -u +%Y-%m-%d), $(nproc) cores, $(cpu_desc)."
