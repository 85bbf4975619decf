#!/usr/bin/env bash
# demo.sh: `make demo`: a synthetic MoE checkpoint -> coli-convert -> coli-run (streamed, learned) ->
# coli-plan (probe, plan) -> coli-run --plan (traced) -> coli-profile report.
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
step "9. probe this machine: CPU, RAM, the engine's kernels, the disk under $out (shortened: ~5 s)" \
  "bin/coli-plan probe --disk $out --disk-mib 128 --seconds 0.2 -o $out/probe.json"
step "10. plan a run in 0.25 GiB from the probe and the usage learned above, each decision explained" \
  "bin/coli-plan $out/model.coli --probe $out/probe.json --usage $out/usage.coli_usage --ram 0.25 --ctx 512 -o $out/plan.json --explain"
step "11. run the plan, traced, the figures as JSON: predicted against measured, where each token's time went" \
  "bin/coli-run -q -m $out/model.coli --plan $out/plan.json --prompt 'The capital of France is' -n 24 --ignore-eos --json --trace $out/run.coli_trace | tail -n 1 && bin/coli-tracestat $out/run.coli_trace"
step "12. where the time went: the attribution, the verdict and the plots of that run" \
  "bin/coli-profile report $out/run.coli_trace --probe $out/probe.json --plan $out/plan.json -o $out/report"
printf '\nDemo done. The report: %s/report/report.html (and report.md beside it). Container: %s/model.coli, plan: %s/plan.json, trace: %s/run.coli_trace (docs/coli-convert.md, docs/coli-plan.md, docs/coli-run.md, docs/coli-profile.md).\n' "$out" "$out" "$out" "$out"
