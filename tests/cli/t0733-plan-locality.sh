#!/usr/bin/env bash
# t0733-plan-locality.sh: coli-plan without usage predicts from its locality model of real
# routing (plan/locality.c): on a model of the real Qwen3-30B-A3B trace's shape (128 experts,
# top-6, 6 layers), its predicted hit rate at caches of 12, 24 and 38 experts per layer is, for a
# layer after the first five, within 6 points of the cache simulator's replay of that trace
# (tests/data/traces, coli-profile replay) with the policy the plan chose, and for the first layer
# (the ramp: less local) within 10 points of the replay of the trace's first layer; --routing with
# a trace of another shape (one layer of the real trace) refits the model: the near-uniform layer
# 0 predicts fewer hits than the defaults, the most local layer 30 more, each within 10 points of
# its own replay. A .coli_trace of this model's run is replayed as a route trace is; a file that
# is neither is refused, naming it.
. "$(dirname "$0")/lib.sh"

M=$SCRATCH/m.coli
TRACE=$TOP/tests/data/traces/qwen3-30b-a3b.route.csv
j() { tr -d "\n" <"$1" | coli-json "$2"; }

test_expect_success "setup: a qwen3_moe model of 6 x 128 experts, top-6; this machine's probe" '
	coli-synth -q --family qwen3_moe --no-tokenizer --out "$SCRATCH/ck" --layers 6 --experts 128 --top-k 6 \
		--hidden 64 --expert-ffn 64 --heads 4 --kv-heads 2 --head-dim 16 --measure 0 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" -o "$SCRATCH/probe.json" &&
	coli-plan -q "$M" --probe "$SCRATCH/probe.json" --ram 4 -o "$SCRATCH/all.json"
'

# ram_for SLOTS: the --ram (GiB) that leaves SLOTS records per layer beyond the fixed part.
ram_for() {
	local fixed rec
	fixed=$(awk -v d="$(j "$SCRATCH/all.json" budget.dense)" -v k="$(j "$SCRATCH/all.json" budget.kv)" \
		-v b="$(j "$SCRATCH/all.json" budget.buffers)" "BEGIN {print d + k + b}")
	rec=$(( $(stat -c %s "$M/experts.bin") / (6 * 128) ))
	awk -v f="$fixed" -v r="$rec" -v s="$1" "BEGIN {printf \"%.9f\", (f + 6 * s * r + 4096) / 2^30}"
}

# check PLAN LAYER ROUTE BOUND: the plan's hit rate of LAYER within BOUND points of ROUTE replayed
# at that layer's cache with the plan's policy; prints both.
check() {
	local c pol hit rep
	c=$(j "$1" "layers.$2.cache") pol=$(j "$1" knobs.cache-policy) hit=$(j "$1" "layers.$2.hit_rate")
	shift
	rep=$(coli-profile replay "$2" --slots "$c" --policy "layer-$pol" --json | sed "s/^\[//; s/\]\$//" | coli-json hit_pct)
	echo "cache $c $pol: predicted $hit, replay $rep%"
	awk -v h="$hit" -v r="$rep" -v b="$3" "BEGIN {d = h * 100 - r; exit !(d < b && d > -b)}"
}

# One layer of the real trace as a trace of its own (n_layer=1, the layer renumbered 0).
ONE_LAYER='/^# model=/ {sub(/n_layer=[0-9]+/, "n_layer=1"); print; next}
/^# layer=/ {if ($0 ~ "^# layer=" L " ") {sub("layer=" L " ", "layer=0 "); print}; next}
/^#/ || /^turn/ {print; next}
$4 == L {$4 = 0; print}'
one_layer() { awk -F, -v OFS=, -v L="$1" "$ONE_LAYER" "$TRACE"; }

for slots in 12 24 38; do
	test_expect_success "no usage, $slots experts a layer: the prediction within 6 points of the real routing's replay" '
		coli-plan "$M" --probe "$SCRATCH/probe.json" --ram "$(ram_for '"$slots"')" --explain -o p.json >out &&
		grep -q "^routing-model locality: no usage: each layer routed by the locality model, fitted on a real Qwen3" out &&
		grep -q "drawn from the locality model: no usage given" out &&
		one_layer 0 >l0.csv && check p.json 5 "$TRACE" 6 && check p.json 0 l0.csv 10
	'
done

test_expect_success "--routing of another shape refits the model: fewer hits on layer 0, more on layer 30" '
	one_layer 0 >l0.csv && one_layer 30 >l30.csv &&
	test "$(grep -c "^0," l0.csv)" = $((156 * 6)) && test "$(grep -c "^0," l30.csv)" = $((156 * 6)) &&
	ram=$(ram_for 24) &&
	coli-plan -q "$M" --probe "$SCRATCH/probe.json" --ram "$ram" -o d.json &&
	coli-plan "$M" --probe "$SCRATCH/probe.json" --ram "$ram" --routing l0.csv --explain -o p0.json >out0 &&
	coli-plan "$M" --probe "$SCRATCH/probe.json" --ram "$ram" --routing l30.csv --explain -o p30.json >out30 &&
	grep -q "^routing-model locality: .*fitted on --routing l0.csv (1 layers x 128 experts, top-6)" out0 &&
	grep -q "^routing-model locality: .*fitted on --routing l30.csv" out30 &&
	h0=$(j p0.json layers.5.hit_rate) hd=$(j d.json layers.5.hit_rate) h30=$(j p30.json layers.5.hit_rate) &&
	echo "layer 0 $h0, defaults $hd, layer 30 $h30" &&
	awk -v a="$h0" -v b="$hd" -v c="$h30" "BEGIN {exit !(a < b - 0.05 && c > b + 0.05)}" &&
	check p0.json 5 l0.csv 10 && check p30.json 5 l30.csv 10
'

test_expect_success "--routing takes a .coli_trace: this model's run, its routing replayed" '
	coli-run -q -m "$M" --stream --cache-slots 12 --prompt-ids "1 2 3 4 5 6 7 8" -n 40 --ignore-eos \
		--trace run.coli_trace >/dev/null &&
	coli-plan "$M" --probe "$SCRATCH/probe.json" --ram "$(ram_for 12)" --routing run.coli_trace --explain -o p.json >out &&
	grep -q "^cache-slots [0-9.]*: .*(the simulator on routing replayed from --routing)" out &&
	! grep -q "^routing-model" out &&
	echo "not a trace" >bad.coli_trace && printf "\211COLITR\n" >cut.coli_trace &&
	expect_exit 1 coli-plan "$M" --probe "$SCRATCH/probe.json" --ram 1 --routing bad.coli_trace &&
	grep -q "bad.coli_trace" err &&
	expect_exit 1 coli-plan "$M" --probe "$SCRATCH/probe.json" --ram 1 --routing cut.coli_trace &&
	grep -q "cut.coli_trace" err
'

exit $t_failed
