#!/usr/bin/env bash
# t0740-plan-v4.sh: coli-plan on a deepseek_v4 container: its hash layers are read ahead exactly
# (per-layer read_ahead "exact", the others "none": the engine predicts no layer of the family,
# so prefetch is off with that reason), and the attention it predicts grows with the context as
# the compressed attention's cost model (engine/nn/attn_cost.c) says: the window's keys, the
# compressed rows (CSA: at most index_topk of them) and the indexer's scan of every CSA row.
. "$(dirname "$0")/lib.sh"

M=$SCRATCH/m.coli
j() { tr -d "\n" <"$1" | coli-json "${@:2}"; }

test_expect_success "setup: a deepseek_v4 model (window, window, CSA, HCA; 3 hash layers), this machine's probe" '
	coli-synth -q --family deepseek_v4 --out "$SCRATCH/ck" --layers 4 --experts 32 --top-k 4 --hidden 128 --heads 4 \
		--head-dim 128 --expert-ffn 256 --index-topk 16 --mtp 0 --no-tokenizer --vocab 1024 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" -o "$SCRATCH/probe.json"
'

test_expect_success "streamed: layers 0-2 read ahead exactly, layer 3 not; prefetch off, saying why" '
	coli-plan "$M" --probe "$SCRATCH/probe.json" --ram 0.075 --explain -o p.json >out &&
	test "$(j p.json layers.0.read_ahead layers.1.read_ahead layers.2.read_ahead layers.3.read_ahead | tr "\n" " ")" = \
		"exact exact exact none " &&
	test "$(j p.json knobs.prefetch)" = off &&
	grep -q "^prefetch off: deepseek_v4: the engine predicts no next layer for the family; its 3 hash layer(s)" out
'

test_expect_success "the predicted attention grows from --ctx 2048 to 65536 by what attn_cost counts at 1024 and 32768" '
	coli-plan -q "$M" --probe "$SCRATCH/probe.json" --ram 4 --ctx 2048 -o a.json &&
	coli-plan -q "$M" --probe "$SCRATCH/probe.json" --ram 4 --ctx 65536 -o b.json &&
	a=$(j a.json predicted.warm.attention_s) && b=$(j b.json predicted.warm.attention_s) &&
	python3 - "$SCRATCH/probe.json" "$a" "$b" "$(j b.json knobs.threads)" <<-EOF
	import json, sys
	pr = json.load(open(sys.argv[1])); a, b = float(sys.argv[2]), float(sys.argv[3])
	H, hd, W, topk, ih, ihd, ratios, threads = 4, 128, 128, 16, 4, 32, [0, 0, 4, 128], int(sys.argv[4])
	def core(pos):
	    keys = scanned = 0
	    for r in ratios:
	        rows = (pos + 1) // r if r else 0
	        keys += min(pos + 1, W) + (min(rows, topk) if r == 4 else rows)
	        scanned += rows if r == 4 else 0
	    rate = pr["attn_fma_per_s"]
	    t = keys * H * 2 * hd / rate + scanned * ih * ihd / (rate * threads)
	    mem = 4 * (keys * hd + scanned * ihd) / pr["mem_bps_all" if threads > 1 else "mem_bps_1"]
	    return max(t, mem)
	want = core(32768) - core(1024)
	assert want > 0 and abs((b - a) - want) <= 0.02 * want, (b - a, want)
	EOF
'

test_done
