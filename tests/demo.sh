#!/usr/bin/env bash
# demo.sh: `make demo`: a synthetic MoE checkpoint -> coli-convert -> coli-run (streamed, learned, traced).
# Everything goes to build/demo/ (rerunning starts over).
set -eu
cd "$(dirname "$0")/.."
out=build/demo
rm -rf "$out"
mkdir -p "$out"
step() { printf '\n== %s\n$ %s\n' "$1" "$2"; eval "$2"; }

step "1. a synthetic qwen3_moe checkpoint (real tokenizer, skewed routing)" \
  "bin/coli-synth --family qwen3_moe --out $out/hf --layers 8 --experts 64 --top-k 4 --hidden 512 --expert-ffn 512 --zipf 1.0 --predict 0.8 --seed 1"
step "2. convert it (int4 experts, int4 dense, int8 MTP)" \
  "bin/coli-convert $out/hf $out/model.coli"
step "3. what the container holds" \
  "bin/coli-convert --info $out/model.coli"
step "4. re-read and check every byte" \
  "bin/coli-convert --verify $out/model.coli"
step "5. run it: the tokenizer, the forward pass, 24 tokens (random weights: expect gibberish)" \
  "bin/coli-run -m $out/model.coli --prompt 'The capital of France is' -n 24 --ignore-eos"
step "6. the same, resumable: a session saved after 12 tokens and continued for 12 more" \
  "bin/coli-run -q -m $out/model.coli --prompt 'The capital of France is' -n 12 --ignore-eos --session $out/chat.coli_kv && bin/coli-run -m $out/model.coli -n 12 --ignore-eos --session $out/chat.coli_kv"
step "7. streamed from disk under a RAM budget smaller than the model (0.25 GiB): the same tokens" \
  "bin/coli-run -m $out/model.coli --prompt 'The capital of France is' -n 24 --ignore-eos --ram 0.25 --usage $out/usage.coli_usage"
step "8. again, pinning the experts that run used most (learned in $out/usage.coli_usage)" \
  "bin/coli-run -m $out/model.coli --prompt 'The capital of France is' -n 24 --ignore-eos --ram 0.25 --usage $out/usage.coli_usage"
step "9. traced, with the figures as JSON: where each token's time went, what every read did" \
  "bin/coli-run -q -m $out/model.coli --prompt 'The capital of France is' -n 24 --ignore-eos --ram 0.25 --usage $out/usage.coli_usage --json --trace $out/run.coli_trace | tail -n 1 && bin/coli-tracestat $out/run.coli_trace"
printf '\nDemo done. Container: %s/model.coli, trace: %s/run.coli_trace (docs/coli-convert.md, docs/coli-run.md, formats/container.md, formats/trace.md).\n' "$out" "$out"
