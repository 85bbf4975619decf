#!/usr/bin/env bash
# t0810-profile-replay.sh: coli-profile replay: hand-computed LRU, LFU and MIN hit rates on a small
# route trace; the published replay table of the real Qwen3-30B-A3B trace (tests/data/traces/README.md)
# reproduced to 0.05 points in every deterministic column; a .coli_trace replayed (all experts
# cached: LRU equals MIN, only first uses miss); bad input refused.
. "$(dirname "$0")/lib.sh"

R=$TOP/tests/data/traces/qwen3-30b-a3b.route.csv
# the JSON array wrapped in an object for coli-json: hit 0.policy
hit() { sed 's/^/{"r":/; s/$/}/' j | coli-json "r.$1"; }

# One layer of 4 experts, top-1: the prompt routes 0, decode 1 2 0 1 3 0.
# 2 slots: LRU and LFU miss all 6; MIN keeps 0 for its reuses: 2 of 6. 3 slots: LRU hits 0, 1, 0.
test_expect_success "setup: a hand-made route trace" '
	{ echo "# route_trace v1"; echo "# model=hand.gguf arch=qwen3moe n_layer=1 n_expert=4 n_expert_used=1";
	  echo "# layer=0 expert_bytes=1048576 dense_bytes=0";
	  echo "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes"; echo "0,0,0,0,0,0,1.0,0,1048576";
	  s=1; for x in 1 2 0 1 3 0; do echo "0,1,$s,0,0,$x,1.0,0,1048576"; s=$((s + 1)); done; } >"$SCRATCH/hand.csv"
'

test_expect_success "hand-computed: LRU 0/6 and MIN 2/6 at 2 slots, LRU 3/6 at 3" '
	coli-profile replay --json --slots 2,3 --policy lru,lfu,min "$SCRATCH/hand.csv" >j &&
	test "$(hit 0.policy) $(hit 0.slots)" = "min 2.0" &&
	awk "BEGIN { exit !($(hit 0.hit_pct) > 33.33 && $(hit 0.hit_pct) < 33.34) }" &&
	test "$(hit 1.policy) $(hit 1.hit_pct)" = "lru 0.0" && test "$(hit 2.policy) $(hit 2.hit_pct)" = "lfu 0.0" &&
	test "$(hit 4.policy) $(hit 4.slots) $(hit 4.hit_pct)" = "lru 3.0 50.0"
'

test_expect_success "hand-computed: MiB budgets (1 MiB experts) equal the slot counts" '
	coli-profile replay --json --budget 2,3 --policy lru,min "$SCRATCH/hand.csv" >j &&
	test "$(hit 0.budget_mib) $(hit 1.hit_pct) $(hit 2.hit_pct)" = "2.0 0.0 50.0" &&
	awk "BEGIN { exit !($(hit 0.hit_pct) > 33.33 && $(hit 0.hit_pct) < 33.34) }"
'

test_expect_success "the published table of the real trace: MIN, LRU, LFU global and per layer, 1000-4000 MiB" '
	coli-profile replay --json --policy min,lru,lfu,layer-lru,layer-lfu "$R" >j &&
	i=0 &&
	for want in 62.7 37.7 40.2 42.3 45.1 79.4 56.5 58.6 59.4 63.3 87.8 70.6 71.3 71.1 74.2 92.7 80.3 80.8 79.7 81.7; do
		got=$(hit $i.hit_pct) &&
		awk "BEGIN { d = $got - $want; exit !(d <= 0.05 && d >= -0.05) }" ||
			{ echo "row $i ($(hit $i.policy) at $(hit $i.budget_mib) MiB): $got, published $want" >&2; exit 1; }
		i=$((i + 1))
	done
'

test_expect_success "the coli column is coli-run's default (per-layer LFU without usage), budget by budget" '
	coli-profile replay --json --budget 500,1000,2000,4000 --policy layer-lfu,coli "$R" >j &&
	for i in 0 2 4 6; do
		test "$(hit $i.policy) $(hit $((i + 1)).policy)" = "layer-lfu coli" &&
		test "$(hit $i.hit_pct)" = "$(hit $((i + 1)).hit_pct)" || exit 1
	done &&
	awk "BEGIN { exit !($(hit 3.hit_pct) > 45.05 && $(hit 3.hit_pct) < 45.15) }"
'

test_expect_success "the markdown table: every policy, a row per budget" '
	coli-profile replay "$R" >out &&
	grep -q "^| budget MiB | min | lru | lfu | layer-lru | layer-lfu | slru |" out &&
	test "$(grep -c "^| [1-4]000 |" out)" = 4
'

test_expect_success "-o DIR: the plot of hit rate against capacity, PNG and SVG" '
	coli-profile replay -o plot --budget 1000,2000 --policy min,lru "$R" >out &&
	test "$(head -c 8 plot/replay.png | od -An -tx1 | tr -d " \n")" = 89504e470d0a1a0a &&
	grep -q "<svg" plot/replay.svg && tail -c 20 plot/replay.svg | grep -q "</svg>" &&
	test "$(wc -l <plot/replay.dat)" = 2 && grep -q "^| 2000 |" out
'

test_expect_success "a .coli_trace: its routed experts replayed at slot counts" '
	coli-convert -q "$FIX/qwen3_moe-tiny/checkpoint" m.coli &&
	coli-run -q -m m.coli --prompt-ids "1 2 3 4" -n 12 --ignore-eos --cache-slots 8 --trace t.coli_trace >/dev/null &&
	coli-profile replay --json --policy lru,min t.coli_trace >j &&
	test "$(hit 0.slots)" = 4.0 && test "$(hit 7.slots)" = 32.0 &&
	awk "BEGIN { exit !($(hit 6.hit_pct) == $(hit 7.hit_pct) && $(hit 1.hit_pct) < $(hit 0.hit_pct)) }" &&
	expect_exit 2 coli-profile replay --budget 100 t.coli_trace && err_has "--expert-mib" &&
	coli-profile replay --json --budget 1 --expert-mib 0.125 --policy layer-lru t.coli_trace >j &&
	test "$(hit 0.budget_mib)" = 1.0
'

test_expect_success "bad input: a cut route trace, a foreign file, a trace without decode (exit 1)" '
	head -c 300000 "$R" >cut.csv &&
	expect_exit 1 coli-profile replay cut.csv && err_has "cut.csv" &&
	echo "hello" >foreign.csv && expect_exit 1 coli-profile replay foreign.csv && err_has "foreign.csv" &&
	head -n 5 "$SCRATCH/hand.csv" >prompt.csv && expect_exit 1 coli-profile replay prompt.csv &&
	err_has "no decode step"
'

test_expect_success "usage errors exit 2" '
	expect_exit 2 coli-profile replay --policy frob "$R" && err_has "--policy: '"'"'frob'"'"' is not a policy" &&
	expect_exit 2 coli-profile replay --budget 0 "$R" && err_has "--budget: '"'"'0'"'"'" &&
	expect_exit 2 coli-profile replay --slots 9 "$SCRATCH/hand.csv" && err_has "--slots" &&
	expect_exit 2 coli-profile replay --slots 2 --budget 2 "$SCRATCH/hand.csv" && err_has "exclude each other" &&
	expect_exit 2 coli-profile replay
'

test_done
