#!/usr/bin/env bash
# t0590-run-json.sh: coli-run --json: one JSON object, the last line of stdout, with every figure
# of the closing lines (the text lines are printed from the same numbers), instead of them.
. "$(dirname "$0")/lib.sh"

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/qwen3_moe.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"
j() { coli-json "$@" <json; }

test_expect_success "convert the fixture" '
	coli-convert -q "$F/checkpoint" "$M" && cp -r "$M" "$SCRATCH/m1.coli"
'
test_expect_success "in RAM: the ids, then one JSON line; no closing lines on stderr" '
	coli-run -m "$M" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --json >out 2>err &&
	test "$(wc -l <out)" = 2 && tail -n 1 out >json && head -n 1 out >ids &&
	! grep -q "^coli-run: prompt" err &&
	test "$(j prompt.tokens decode.tokens store | tr "\n" " ")" = "24 7 ram " &&
	test "$(j ids | tr -d "[]" | tr "," " ")" = "$(cat ids)" &&
	test "$(j kernels.threads)" -ge 1 && test -n "$(j kernels.isa)" &&
	awk "BEGIN { exit !($(j decode.tokens_per_s) > 0 && $(j peak_rss_mib) > 0) }" &&
	test_must_fail j stream
'
test_expect_success "-q --json still prints the object" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 2 --ignore-eos --print-ids --json >out &&
	test "$(tail -n 1 out | coli-json decode.tokens)" = 1
'
test_expect_success "streamed with a mirror and --ram: the figures of the text lines, from the same run" '
	coli-run -m "$M" --mirror "$SCRATCH/m1.coli" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --ram 0.5 \
		--json >out 2>err && tail -n 1 out >json &&
	test "$(j store stream.disks.1.dir | tr "\n" " ")" = "stream $SCRATCH/m1.coli " &&
	h=$(j stream.hits) && x=$(j stream.misses) &&
	awk "BEGIN { r = $(j stream.hit_rate); exit !(r * ($h + $x) > $h - 0.5 && r * ($h + $x) < $h + 0.5) }" &&
	test "$(j ram_budget.gib)" = 0.5 && test "$(j ram_budget.slots_per_layer)" -ge 4 &&
	awk "BEGIN { exit !($(j stream.prefetch.recall) >= 0 && $(j stream.prefetch.recall) <= 1) }" &&
	coli-run -m "$M" --mirror "$SCRATCH/m1.coli" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --ram 0.5 \
		>/dev/null 2>text &&
	grep -q "ram budget 0.50 GiB: .* slots [0-9.]* ($(j ram_budget.slots_per_layer)/layer)" text
'
test_expect_success "the text lines and the JSON agree: one run, read back both ways" '
	coli-run -m "$M" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --stream --cache-slots 4 --prefetch off \
		--json >out 2>/dev/null && tail -n 1 out >json &&
	misses=$(j stream.misses) &&
	coli-run -m "$M" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --stream --cache-slots 4 --prefetch off \
		>/dev/null 2>text &&
	grep -q "stream: hit rate [0-9.]*%, $misses misses" text
'

test_done
