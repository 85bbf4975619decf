#!/usr/bin/env bash
# dsa.sh: `make bench-dsa`: what DeepSeek Sparse Attention saves in decode. Beyond index_topk
# positions a glm_moe_dsa token costs the lightning indexer's scan over every earlier position
# plus attention over index_topk (2048) of them, instead of attention over every position on
# every layer. coli-dsabench measures decode tokens/s at contexts 1K, 8K and 32K with the
# indexer's selection (sparse) and with attention forced over every position (dense: the
# engine's dsa_dense, the indexer's keys still kept), the two modes alternating in one run:
#   ratio = sparse tokens/s / dense tokens/s (the median of each repetition's ratio).
# The state before the context is pseudo-random N(0,1) rows, not a prefill (a 32K prefill at
# these widths takes hours on two cores); the tracer splits each token's time into attention on
# the indexer's "full" layers, on its "shared" layers, and everything else.
# The model: GLM-5.2's widths (coli-synth --preset glm5.2: hidden 6144, 64 heads, q_lora 2048,
# kv_lora 512, nope 192, rope 64, v 256, indexer 32 heads x 128, index_topk 2048, vocab 154880)
# with 4 layers (1 dense + 3 MoE; the real schedule makes them full, full, full, shared) and 16
# experts top-8 of FFN 2048 (the experts' count does not change attention's cost), no MTP layer,
# converted with the defaults (int4 experts, int4 dense): 2.6 GiB, all in RAM.
# At 1K both modes run the same code (every position is within index_topk): their ratio shows
# the run's noise.
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 5),
# COLI_BENCH_CONTEXTS (default 1024,8192,32768), COLI_BENCH_STEPS (decode tokens per run, default
# 16), COLI_BENCH_THREADS (default 2), COLI_BENCH_DSA_SHAPE (coli-synth arguments of the model).
# Results (markdown tables) on stdout, progress on stderr.
set -eu
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-5}
contexts=${COLI_BENCH_CONTEXTS:-1024,8192,32768}
steps=${COLI_BENCH_STEPS:-16}
threads=${COLI_BENCH_THREADS:-2}
shape=${COLI_BENCH_DSA_SHAPE:---family glm_moe_dsa --preset glm5.2 --layers 4 --dense-layers 1 --experts 16 --top-k 8 --mtp 0 --measure 0 --seed 5}
mkdir -p "$dir"
model=$(model_of dsa-glm5 "$shape")
sync # a conversion's writeback would fall on the first measurements

# The container, the state at the longest context and 1 GiB of working memory must fit in RAM.
gib=$(bytes_of "$model" | awk '{printf "%.2f", $1 / 2^30}')
avail=$(awk '$1 == "MemAvailable:" {printf "%.1f", $2 / 2^20}' /proc/meminfo)
awk -v g="$gib" -v a="$avail" 'BEGIN {exit !(g + 2 < a)}' ||
	{ say "dsa.sh: the model ($gib GiB) and its state need more than the $avail GiB of RAM available"; exit 1; }

say "dsa.sh: $model ($gib GiB), contexts $contexts, $reps repetitions of $steps tokens, $threads threads"
cmd=(bin/coli-dsabench "$model" --contexts "$contexts" --steps "$steps" --reps "$reps" --threads "$threads")
# The 1-minute load average before and after: these machines are shared, and other work shows there.
load_before=$(cut -d" " -f1 /proc/loadavg)
"${cmd[@]}"
echo
echo "Command: \`${cmd[*]}\`; model: coli-synth $shape, converted with the defaults ($gib GiB). Load average" \
	"$load_before before, $(cut -d" " -f1 /proc/loadavg) after (the benchmark's own threads count). Commit $(commit)," \
	"$(date -u +%Y-%m-%d), $(nproc) cores, $(cpu_desc)."
