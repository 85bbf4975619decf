#!/usr/bin/env bash
# qwen35.sh: `make bench-qwen35`: prefill of a 512-token prompt and decode speed of a
# Qwen3.6-35B-A3B-shaped model with every weight in RAM, coli beside llama.cpp (node-llama-cpp
# 3.21.1's prebuilt CPU binaries, architecture qwen35moe, the GGUF mmap'd).
# The model: coli-synth --preset qwen3.6 (Qwen3.6-35B-A3B's real widths: hidden 2048, the Gated
# DeltaNet with 16 key and 32 value heads of 128 and a 4-tap conv, gated full attention with 16
# query and 2 KV heads of 256, 256 experts top-8 of FFN 512 and a shared expert of 512, vocab
# 248320) with 8 layers instead of 40 (full_attention_interval 4: 6 Gated DeltaNet, 2 full
# attention) and no MTP layer; coli's container converted with the defaults (int4 experts, int4
# dense matrices), llama.cpp's GGUF written by coli-synth --gguf from the same seed (Q4_0
# matrices, as bench-llama's warm model): about 4 GiB each, all in RAM.
# First, a gate: llama.cpp must run coli-synth's qwen35moe GGUF as coli runs the checkpoint.
# A model of the same heads (hidden 256, 4 layers, 16 experts, a vocabulary the tokenizer fills,
# as coli never chooses an id without a token and llama.cpp does) on exact weights (F32 GGUF,
# 16-bit container): tests/gguf/agree.sh, 32 greedy ids; the script stops when they differ.
# Per repetition, alternating (warm_pair, lib.sh): the memory read bandwidth (coli-membench),
# decode of 64 tokens after a 4-token prompt, prefill of a 512-token prompt.
# Environment: COLI_BENCH_DIR (default build/bench), COLI_BENCH_REPS (default 5),
# COLI_BENCH_THREADS (default 2), COLI_BENCH_QWEN35_SHAPE (coli-synth arguments of the model),
# NODE_LLAMA_DIR (build/llama). Results (markdown) on stdout, progress on stderr.
set -eu
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
dir=${COLI_BENCH_DIR:-build/bench}
reps=${COLI_BENCH_REPS:-5}
threads=${COLI_BENCH_THREADS:-2}
shape=${COLI_BENCH_QWEN35_SHAPE:---family qwen3_5_moe --preset qwen3.6 --layers 8 --mtp 0 --no-vision --measure 64 --seed 11}
gate_shape="--family qwen3_5_moe --preset qwen3.6 --layers 4 --hidden 256 --experts 16 --vocab 151669 --mtp 0 --no-vision --measure 0 --seed 11"
export NODE_LLAMA_DIR=${NODE_LLAMA_DIR:-$PWD/build/llama}
need_llama qwen35.sh
driver=tests/bench/llama/driver.mjs
ntok=64
short="1 2 3 4"
long=$(seq 1000 1511 | tr '\n' ' ')
cmds=()
record() { cmds+=("$*"); }
mkdir -p "$dir"

# The gate: exact weights, the same greedy ids in both engines.
gmodel=$(model_of qwen35-gate "$gate_shape" "--dense-bits 16 --expert-bits 16")
ggate=$(gguf_of qwen35-gate "$gate_shape" f32 f32)
gate=$(tests/gguf/agree.sh "$gmodel" "$ggate" "$(seq 1000 1031 | tr '\n' ' ')" 32 "$threads") ||
	{ say "qwen35.sh: llama.cpp does not run the GGUF as coli runs the checkpoint: $gate"; exit 1; }
say "$gate"
record "coli-synth $gate_shape --out SRC; coli-convert --dense-bits 16 --expert-bits 16 SRC $gmodel"
record "coli-synth $gate_shape --gguf-experts f32 --gguf-dense f32 --measure 0 --gguf $ggate"
record "tests/gguf/agree.sh $gmodel $ggate \"\$(seq 1000 1031)\" 32 $threads"

model=$(model_of qwen35-q4 "$shape")
gguf=$(gguf_of qwen35-q4 "$shape" q4_0)
sync # a conversion's writeback would fall on the first measurements

# The container, the GGUF and 2 GiB of working memory must fit in RAM.
gib=$(bytes_of "$model" | awk '{printf "%.2f", $1 / 2^30}')
ggib=$(stat -c %s "$gguf" | awk '{printf "%.2f", $1 / 2^30}')
avail=$(awk '$1 == "MemAvailable:" {printf "%.1f", $2 / 2^20}' /proc/meminfo)
awk -v g="$gib" -v l="$ggib" -v a="$avail" 'BEGIN {exit !(g + l + 2 < a)}' ||
	{ say "qwen35.sh: the model ($gib GiB) and its GGUF ($ggib GiB) need more than the $avail GiB of RAM available"; exit 1; }
record "coli-membench 2048 $threads"
record "coli-run -m $model --threads $threads --prompt-ids \"$short\" -n $((ntok + 1)) --ignore-eos --print-ids --json"
record "NODE_LLAMA_DIR=$NODE_LLAMA_DIR node $driver --model $gguf --threads $threads --prompt-ids \"$short\" -n $((ntok + 1))"
record "coli-run -m $model --threads $threads --prompt-ids \"\$(seq 1000 1511)\" -n 1 --print-ids --json"
record "NODE_LLAMA_DIR=$NODE_LLAMA_DIR node $driver --model $gguf --threads $threads --prompt-ids \"\$(seq 1000 1511)\" -n 1"

say "qwen35.sh: $model ($gib GiB), $gguf ($ggib GiB), $reps repetitions, $threads threads"
load_before=$(cut -d" " -f1 /proc/loadavg)
runs=$(for i in $(seq "$reps"); do say "repetition $i/$reps"; warm_pair "$model" "$gguf" qwen35; done)
echo "### Qwen3.6-35B-A3B-shaped, all in RAM: qwen3_5_moe 8 layers (6 Gated DeltaNet + 2 full attention) x 256 experts (coli int4 $gib GiB, GGUF Q4_0 $ggib GiB), $threads threads"
echo
echo "| measure | coli | llama.cpp | coli / llama.cpp |"
echo "|---|---:|---:|---:|"
echo "| decode tok/s ($ntok tokens after 4) | $(mmm 2) | $(mmm 3) | $(ratio 2 3) |"
echo "| prefill tok/s (512 tokens) | $(mmm 4) | $(mmm 5) | $(ratio 4 5) |"
echo "| peak RSS MiB (decode run) | $(mmm 6) | $(mmm 7) | $(ratio 6 7) |"
echo
echo "Memory read bandwidth (coli-membench, $threads threads): $(mmm 1) GB/s; coli's weights per decode token $(mmm 9) MiB, at its speed $(mmm 8) GB/s ($(ratio 8 1) of the bandwidth); coli's peak RSS in the prefill run $(mmm 10) MiB."
echo "$(engine_line "$dir/qwen35-l.out")"
echo "Gate (exact weights, the same heads at hidden 256): $gate"
agreement "$gguf" "$dir/qwen35-c.out" "$threads"
echo
echo "Medians over $reps repetitions (min-max), coli and llama.cpp alternating; ratios are medians of the per-repetition ratios. Model: coli-synth $shape. Load average $load_before before, $(cut -d" " -f1 /proc/loadavg) after. CPU: $(cpu_desc), $(nproc) cores. Commit $(commit), $(date -u +%Y-%m-%d). Commands:"
echo
echo '```'
printf '%s\n' "${cmds[@]}"
echo '```'
