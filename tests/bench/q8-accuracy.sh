#!/bin/bash
# q8-accuracy.sh: what coli-run --precision q8 costs against exact, on every fixture under
# tests/fixtures/hf converted with its experts and dense matrices at 4 and at 8 bits, and on
# qwen3_moe-tiny with outlier channels 2^10 and 2^13 times the others in its hidden states
# (q8acc.py outliers): teacher-forced over a 128-token prompt, the two runs' logits and routing
# compared (q8acc.py compare). Prints the markdown tables of docs/coli-run.md ("Precision q8"):
# q8 against exact, then, for scale, exact at 4 bits against exact at 8 bits (what the weights'
# own quantization moves).
#   tests/bench/q8-accuracy.sh [OUT_DIR]     (default build/bench/q8acc; BIN: bin)
set -e
dir=${1:-build/bench/q8acc}
bin=${BIN:-bin}
py=tests/bench/q8acc.py
mkdir -p "$dir"

# A config.json key's integer value (at the top, or in text_config as qwen3_5_moe has it).
key() { python3 -c 'import json,sys; c = json.load(open(sys.argv[1])); print(c.get(sys.argv[2]) or c["text_config"][sys.argv[2]])' "$1" "$2"; }

# 128 ids in [3, vocab): a fixed linear congruential sequence.
prompt() { awk -v v="$1" 'BEGIN { x = 12345; for (i = 0; i < 128; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%d ", 3 + x % (v - 3) } }'; }

# One row: checkpoint $1, label $2, bits $3.
row() {
	local ck=$1 name=$2 bits=$3 out="$dir/$2-$3"
	local vocab k ids
	vocab=$(key "$ck/config.json" vocab_size) k=$(key "$ck/config.json" num_experts_per_tok) ids=$(prompt "$vocab")
	rm -rf "$out.coli"
	if ! "$bin/coli-convert" -q --expert-bits "$bits" --dense-bits "$bits" "$ck" "$out.coli" 2>"$out.err"; then
		# FP4 experts convert only at 16 bits (never requantized): the dense part at $bits then
		rm -rf "$out.coli"
		"$bin/coli-convert" -q --expert-bits 16 --mtp-bits 16 --dense-bits "$bits" "$ck" "$out.coli" 2>"$out.err" || {
			echo "| $name | $bits | refused by coli-convert: $(head -c 160 "$out.err" | tr '\n|' '  ') | | | | | |"
			return
		}
		bits="$bits (experts 16)"
	fi
	for p in exact q8; do
		"$bin/coli-run" -m "$out.coli" --threads 1 --prompt-ids "$ids" --teacher-force --precision $p \
			--dump-logits "$out.$p.logits" --dump-routing "$out.$p.routing" --json >"$out.$p.json"
	done
	python3 "$py" compare "$out.exact.logits" "$out.q8.logits" "$out.exact.routing" "$out.q8.routing" "$vocab" "$k" |
		python3 -c '
import json, sys
r, share = json.load(sys.stdin), json.load(open(sys.argv[3]))["kernels"]["q8_weight_share"]
per = " ".join("%.2f" % s for s in r["routing_same_per_layer"])
print("| %s | %s | %.0f%% | %d | %.3f | %.2e | %.2e | %s | %.3f |" % (sys.argv[1], sys.argv[2], 100 * share,
      r["positions"], r["top1"], r["kl_mean"], r["kl_max"], per, r["routing_overlap"]))' "$name" "$bits" "$out.q8.json"
}

echo "| model | bits | q8 share of weight bytes | positions | top-1 agreement | KL mean (nats) | KL max | routing set equal, per MoE layer | routing overlap |"
echo "|---|---:|---:|---:|---:|---:|---:|---|---:|"
for ck in tests/fixtures/hf/*/checkpoint; do
	name=$(basename "$(dirname "$ck")")
	for bits in 4 8; do
		row "$ck" "$name" "$bits"
	done
	names="$names $name"
done
src=tests/fixtures/hf/qwen3_moe-tiny/checkpoint
for f in 1024 8192; do
	rm -rf "$dir/outliers-$f.ckpt"
	python3 "$py" outliers "$src" "$dir/outliers-$f.ckpt" "$f" 5,17,40
	for bits in 4 8; do
		row "$dir/outliers-$f.ckpt" "qwen3_moe-tiny, outliers x$f" "$bits"
	done
done

echo
echo "| model | exact 4-bit against exact 8-bit: top-1 agreement | KL mean | KL max | routing overlap |"
echo "|---|---:|---:|---:|---:|"
for name in $names; do
	a="$dir/$name-4" b="$dir/$name-8" ck=tests/fixtures/hf/$name/checkpoint
	[ -f "$a.exact.logits" ] && [ -f "$b.exact.logits" ] || continue
	python3 "$py" compare "$a.exact.logits" "$b.exact.logits" "$a.exact.routing" "$b.exact.routing" \
		"$(key "$ck/config.json" vocab_size)" "$(key "$ck/config.json" num_experts_per_tok)" |
		python3 -c '
import json, sys
r = json.load(sys.stdin)
print("| %s | %.3f | %.2e | %.2e | %.3f |" % (sys.argv[1], r["top1"], r["kl_mean"], r["kl_max"], r["routing_overlap"]))' "$name"
done
