#!/usr/bin/env bash
# t0815-profile-replay-dumps.sh: coli-profile replay on routing dumps (coli-run --teacher-force
# --dump-routing): the multi-run study on hand-made runs whose hit rates are worked out by hand
# (usage carried from run to run, decayed), the collapse table, a real dump of coli-run, bad input.
. "$(dirname "$0")/lib.sh"

# i32 X...: the ids as int32 little-endian (each 0..255).
i32() { for x in "$@"; do printf "\\$(printf %03o "$x")\\000\\000\\000"; done; }
# cell SIZE COLUMN: a cell of the study's first table in out (column 1: the first after the size).
row() { grep "^| $1 | [0-9.]*%" out | head -n 1; }
cell() { row "$1" | awk -F' *[|] *' -v c="$2" '{ print $(c + 2) }'; }

# One layer of 4 experts, top-1, 2 slots. Run 1: 0 1 0 1 (usage after it: 0 and 1 twice each).
# Run 2: 0 2 0 1 2 0, counted alone (--from 2, the default):
#   LRU    0m 2m 0h 1m(evicts 2) 2m(evicts 0) 0m                             1 of 6
#   SLRU   0's hit protects it: 1 evicts 2, 2 evicts 1, 0 hits                 2 of 6
#   ARC    0h puts 0 in T2; 1 sends 2 (T1) to B1; 2 hits B1: p 1, 0 of T2 to B2;
#          0 hits B2: p 0, 1 of T1 to B1: only 0's second use hits              1 of 6
#   LFU    counts 0:2 1:2 start: 1 evicts 2 (count 1), 2 evicts 1 (3 < 4)       2 of 6
#   LFU warm   preloaded 0 and 1: 0h 2m(evicts 1) 0h 1m 2m 0h                   3 of 6
#   pins 1 + 1 LRU slot   0 pinned (tie: the lower id): every 0 hits           3 of 6
#   Belady warm   preloaded 0 and 2 (used first): only 1 and the last 0 miss    4 of 6
test_expect_success "setup: hand-made runs" '
	i32 0 1 0 1 >"$SCRATCH/a1.i32" && i32 0 2 0 1 2 0 >"$SCRATCH/a2.i32" &&
	i32 0 0 0 0 >"$SCRATCH/b1.i32" && i32 1 1 1 1 >"$SCRATCH/b2.i32" && i32 1 2 1 2 >"$SCRATCH/b3.i32" &&
	test "$(wc -c <"$SCRATCH/a2.i32")" = 24
'

test_expect_success "the study: run 2 at 2 slots, usage learned from run 1 (worked out by hand)" '
	coli-profile replay --layers 1 --experts 4 --top-k 1 --slots 2 "$SCRATCH/a1.i32" "$SCRATCH/a2.i32" >out &&
	grep -qF "Hit rate, runs 2..2 of 2" out &&
	grep -qF "| slots N | LRU | SLRU | ARC | LFU | LFU warm | pins k + LRU | pins N/2 + LRU | pins N-k + LRU | Belady |" out &&
	test "$(row 2)" = "| 2 | 16.7% | 33.3% | 16.7% | 33.3% | 50.0% | 50.0% | 50.0% | 50.0% | 66.7% |"
'

# Run 1 alone (--from 1 --per-run): no usage yet, so no pins, one LRU slot thrashes 0 1 0 1;
# Belady preloads 0 and 1 and hits all 4; the others hit the second 0 and 1.
test_expect_success "--from 1 --per-run: every run, the first with nothing learned" '
	coli-profile replay --layers 1 --experts 4 --top-k 1 --slots 2 --from 1 --per-run \
		"$SCRATCH/a1.i32" "$SCRATCH/a2.i32" >out &&
	grep -qF "Hit rate, runs 1..2 of 2" out && grep -qF "Per run, 2 slots per layer:" out &&
	sed -n "/^Per run/,\$p" out >per &&
	test "$(grep "^| 1 |" per)" = "| 1 | 50.0% | 50.0% | 50.0% | 50.0% | 50.0% | 0.0% | 0.0% | 0.0% | 100.0% |" &&
	test "$(grep "^| 2 |" per)" = "| 2 | 16.7% | 33.3% | 16.7% | 33.3% | 50.0% | 50.0% | 50.0% | 50.0% | 66.7% |"
'

# Runs 0 0 0 0, 1 1 1 1, then 1 2 1 2: before run 3 the counts are 0: 4 x 0.9 = 3.6, 1: 4, so 1
# is pinned (without the decay a tie, and the lower id 0 would be): 1 hits, 2 hits its slot
# after its first use: 3 of 4. A size below top_k runs nothing: "-".
test_expect_success "usage decays by COLI_USAGE_DECAY from run to run (it chooses run 3's pin)" '
	coli-profile replay --layers 1 --experts 4 --top-k 1 --slots 2 --from 3 \
		"$SCRATCH/b1.i32" "$SCRATCH/b2.i32" "$SCRATCH/b3.i32" >out &&
	test "$(cell 2 6)" = "75.0%" && test "$(cell 2 1)" = "50.0%"
'

# The collapse check of the b runs: 0 0 0 0: 1 expert, each position repeating the previous, the
# top 10% (1 expert) all of it; 1 2 1 2: 2 experts, no repeat, the top one half.
test_expect_success "the collapse table, and llama.sh's sed extraction of it" '
	coli-profile replay --layers 1 --experts 4 --top-k 1 --slots 1 --from 1 "$SCRATCH/b1.i32" "$SCRATCH/b3.i32" |
		sed -n "/^| run | trace/,/^\$/p" >t &&
	test "$(sed -n 1p t)" = "| run | trace | positions | distinct experts/layer (mean, min) | prev-token overlap | top-10% share |" &&
	test "$(sed -n 3p t)" = "| 1 | $SCRATCH/b1.i32 | 4 | 1.0, 1 of 4 | 1.000 | 1.000 |" &&
	test "$(sed -n 4p t)" = "| 2 | $SCRATCH/b3.i32 | 4 | 2.0, 2 of 4 | 0.000 | 0.500 |" &&
	test "$(wc -l <t)" = 5
'

test_expect_success "a real dump of coli-run --teacher-force --dump-routing: default sizes top_k x 1, 2, 4, 8" '
	coli-convert -q "$FIX/qwen3_moe-tiny/checkpoint" m.coli &&
	coli-run -q -m m.coli --prompt-ids "1 2 3 4 5 6 7 8" --teacher-force --dump-routing r.i32 >/dev/null &&
	cfg="$FIX/qwen3_moe-tiny/checkpoint/config.json" &&
	k=$(grep -o "\"num_experts_per_tok\": *[0-9]*" "$cfg" | sed "s/.*: *//") &&
	e=$(grep -o "\"num_experts\": *[0-9]*" "$cfg" | sed "s/.*: *//") &&
	l=$(grep -o "\"num_hidden_layers\": *[0-9]*" "$cfg" | sed "s/.*: *//") &&
	coli-profile replay --layers "$l" --experts "$e" --top-k "$k" r.i32 >out &&
	grep -q "^| 1 | r.i32 | 8 |" out && test "$(grep -c "^| [0-9]* | [0-9.]*% |" out)" -ge 3 &&
	grep -q "^| $k |" out
'

test_expect_success "bad dumps: truncated, sizes not matching --layers, --experts, --top-k (exit 1, naming the file)" '
	head -c 10 "$SCRATCH/a2.i32" >cut.i32 &&
	expect_exit 1 coli-profile replay --layers 1 --experts 4 --top-k 1 cut.i32 &&
	err_has "cut.i32: size 10 is not a positive multiple of layers x top_k x 4" &&
	expect_exit 1 coli-profile replay --layers 5 --experts 4 --top-k 1 "$SCRATCH/a2.i32" &&
	err_has "a2.i32: size 24" "--layers 5 --top-k 1" &&
	expect_exit 1 coli-profile replay --layers 1 --experts 2 --top-k 1 "$SCRATCH/a2.i32" &&
	err_has "a2.i32: expert [layer 0][position 1][0]: 2 out of range 0..1 (--experts 2)" &&
	expect_exit 1 coli-profile replay --layers 1 --experts 4 --top-k 2 "$SCRATCH/b1.i32" &&
	err_has "b1.i32: expert [layer 0][position 0][1]: 0 chosen twice" &&
	: >empty.i32 && expect_exit 1 coli-profile replay --layers 1 --experts 4 --top-k 1 empty.i32 &&
	err_has "empty.i32: size 0" &&
	expect_exit 1 coli-profile replay --layers 1 --experts 4 --top-k 1 missing.i32 && err_has "missing.i32"
'

test_expect_success "usage errors on dumps exit 2" '
	A="$SCRATCH/a1.i32" &&
	expect_exit 2 coli-profile replay --layers 1 --experts 4 "$A" && err_has "--layers, --experts and --top-k together" &&
	expect_exit 2 coli-profile replay --layers 1 --experts 4 --top-k 5 "$A" && err_has "--top-k 5 exceeds --experts 4" &&
	expect_exit 2 coli-profile replay --layers 1 --experts 4 --top-k 2 --slots 1 "$A" && err_has "--slots: '"'"'1'"'"'" &&
	expect_exit 2 coli-profile replay --layers 1 --experts 4 --top-k 1 --slots 1.5 "$A" && err_has "whole number" &&
	expect_exit 2 coli-profile replay --layers 1 --experts 4 --top-k 1 --from 2 "$A" && err_has "--from 2: exceeds the 1 files" &&
	expect_exit 2 coli-profile replay --layers 1 --experts 4 --top-k 1 --budget 100 "$A" && err_has "--budget: not with routing dumps" &&
	expect_exit 2 coli-profile replay --layers 1 --experts 4 --top-k 1 --json "$A" && err_has "--json: not with routing dumps" &&
	expect_exit 2 coli-profile replay --layers 1 --experts 4 --top-k 1 && err_has "no ROUTING.i32 given" &&
	expect_exit 2 coli-profile replay --per-run "$TOP/tests/data/traces/qwen3-30b-a3b.route.csv" && err_has "--per-run: routing dumps only"
'

test_done
