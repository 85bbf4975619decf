#!/usr/bin/env bash
# t0635-run-gdn.sh: Qwen3.5/3.6's hybrid stack (qwen3_5_moe: Gated DeltaNet layers with a
# fixed-size recurrent state beside gated attention) from the command line, on the fixture in its
# released layout: the vision tower left out in one line, transformers' greedy ids, the same ids
# and logits wherever the experts live, a session saved after the prompt and after generated
# tokens then resumed (the conv and recurrent states restored exactly), and --draft 1..3 and auto
# giving --draft 0's ids, drafts rejected by force included (the recurrent state rolled back).
. "$(dirname "$0")/lib.sh"

F=$FIX/qwen3_5_moe-tiny
M=$SCRATCH/q35.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"

test_expect_success "qwen3_5_moe: the released layout converts, the vision tower left out in one line" '
	coli-convert -q "$F/checkpoint" "$M" 2>err &&
	grep -q "21 tensors of the vision tower (model.visual.\*) left out" err &&
	test "$(wc -l <err)" = 1
'
test_expect_success "qwen3_5_moe: 32 greedy ids at 16 bits equal the reference's" '
	coli-convert -q --expert-bits 16 --dense-bits 16 --mtp-bits 16 "$F/checkpoint" m16.coli 2>/dev/null &&
	coli-run -q -m m16.coli --prompt-ids "$P" -n 32 --ignore-eos --print-ids >got &&
	test "$(cat got)" = "$(ids_of "$F/greedy_tokens.i32.bin")"
'
test_expect_success "qwen3_5_moe: ids and step logits the same in RAM, streamed (1 and 8 slots, prefetch on) and mmap" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --dump-logits ram.bin >ram &&
	test "$(wc -w <ram)" = 24 &&
	for o in "--cache-slots 1" "--cache-slots 8 --prefetch on" "--io mmap"; do
		coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --dump-logits s.bin $o >s &&
		cmp ram s && cmp ram.bin s.bin || exit 1
	done
'
test_expect_success "qwen3_5_moe: sessions saved after the prompt and after 12 ids, resumed, equal one run" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >one &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 12 --ignore-eos --print-ids --session s.coli_kv >a &&
	coli-run -q -m "$M" -n 12 --ignore-eos --print-ids --session s.coli_kv >b &&
	test "$(cat a) $(cat b)" = "$(cat one)" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 1 --ignore-eos --print-ids --session p.coli_kv >a1 &&
	coli-run -q -m "$M" -n 23 --ignore-eos --print-ids --session p.coli_kv >b1 &&
	test "$(cat a1) $(cat b1)" = "$(cat one)"
'
test_expect_success "qwen3_5_moe: --draft 1, 2, 3 and auto, and forced rejections, give the ids and logits of --draft 0" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --dump-logits d0.bin >d0 &&
	for k in 1 2 3 auto; do
		coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --draft $k --dump-logits dk.bin >dk &&
		cmp d0 dk && cmp d0.bin dk.bin || exit 1
	done &&
	for r in 0 0.5; do
		coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --draft 3 --draft-oracle d0 \
			--draft-oracle-rate $r --dump-logits dk.bin >dk &&
		cmp d0 dk && cmp d0.bin dk.bin || exit 1
	done
'
test_expect_success "qwen3_5_moe: a session resumed mid-speculation gives the ids of --draft 0" '
	Q="$(echo $P | cut -d" " -f1-8)" &&
	for k in 0 3; do
		rm -f d$k.kv &&
		coli-run -q -m "$M" --prompt-ids "$P" -n 10 --ignore-eos --print-ids --session d$k.kv --draft $k >a$k &&
		coli-run -q -m "$M" --prompt-ids "$Q" -n 10 --ignore-eos --print-ids --session d$k.kv --draft $k >b$k || exit 1
	done &&
	cmp a0 a3 && cmp b0 b3 && cmp d0.kv d3.kv
'
test_expect_success "qwen3_5_moe: the trace gives the Gated DeltaNet layers their own span (the report's linear_attention)" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --trace t.coli_trace >/dev/null &&
	coli-profile report -q --json t.coli_trace -o rep >j &&
	python3 -c "import json,sys; d=json.load(open(\"j\"))[\"phases\"]; \
sys.exit(0 if all(d[p][\"parts_s\"][\"linear_attention\"] > 0 and d[p][\"parts_s\"][\"attention\"] > 0 for p in (\"prefill\", \"decode\")) else 1)"
'
test_done
