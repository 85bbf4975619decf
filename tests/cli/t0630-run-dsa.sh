#!/usr/bin/env bash
# t0630-run-dsa.sh: GLM-5.2's sparse attention (glm_moe_dsa) from the command line, on the
# fixture whose 64-token prompt runs past its index_topk 8: the greedy ids of transformers,
# the same ids and logits wherever the experts live (RAM, streamed at 1 and 8 slots with
# prefetch, mmap, a mirror), a session saved mid-generation and resumed giving the ids of one
# run (the indexer's keys are part of the saved state), and --draft giving --draft 0's ids.
. "$(dirname "$0")/lib.sh"

F=$FIX/glm_moe_dsa-tiny
M=$SCRATCH/glm.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"

test_expect_success "glm_moe_dsa: convert the fixture (MTP layer and its indexer included)" '
	coli-convert -q "$F/checkpoint" "$M" &&
	coli-convert --info "$M" >info &&
	grep -q glm_moe_dsa info
'
test_expect_success "glm_moe_dsa: 32 greedy ids at 16 bits equal the reference's" '
	coli-convert -q --expert-bits 16 --dense-bits 16 --mtp-bits 16 "$F/checkpoint" m16.coli &&
	coli-run -q -m m16.coli --prompt-ids "$P" -n 32 --ignore-eos --print-ids >got &&
	ids_of "$F/greedy_tokens.i32.bin" >want &&
	test "$(cat got)" = "$(cat want)"
'
test_expect_success "glm_moe_dsa: ids and step logits the same in RAM, streamed (1 and 8 slots, prefetch on), mmap and mirrored" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --dump-logits ram.bin >ram &&
	test "$(wc -w <ram)" = 24 &&
	for o in "--cache-slots 1" "--cache-slots 8 --prefetch on" "--io mmap" "--stream"; do
		coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --dump-logits s.bin $o >s &&
		cmp ram s && cmp ram.bin s.bin || exit 1
	done &&
	cp -r "$M" mirror.coli &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --dump-logits s.bin --mirror mirror.coli \
		--cache-slots 4 >s &&
	cmp ram s && cmp ram.bin s.bin
'
test_expect_success "glm_moe_dsa: a session saved after 12 ids and resumed for 12 more equals one run of 24" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >one &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 12 --ignore-eos --print-ids --session s.coli_kv >a &&
	coli-run -q -m "$M" -n 12 --ignore-eos --print-ids --session s.coli_kv >b &&
	test "$(cat a) $(cat b)" = "$(cat one)" &&
	rm -f s2.coli_kv &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 12 --ignore-eos --print-ids --session s2.coli_kv --cache-slots 2 >a2 &&
	coli-run -q -m "$M" -n 12 --ignore-eos --print-ids --session s2.coli_kv --cache-slots 2 >b2 &&
	cmp a a2 && cmp b b2 && cmp s.coli_kv s2.coli_kv
'
test_expect_success "glm_moe_dsa: --draft 1, 2, 3 and auto give the ids and step logits of --draft 0, in RAM and streamed" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --dump-logits d0.bin >d0 &&
	for k in 1 2 3 auto; do
		coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --draft $k --dump-logits dk.bin >dk &&
		cmp d0 dk && cmp d0.bin dk.bin &&
		coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --draft $k --cache-slots 4 >dk &&
		cmp d0 dk || exit 1
	done
'
test_expect_success "glm_moe_dsa: a session resumed with --draft 2 gives the ids of --draft 0" '
	Q="$(echo $P | cut -d" " -f1-8)" &&
	for k in 0 2; do
		rm -f d$k.kv &&
		coli-run -q -m "$M" --prompt-ids "$P" -n 10 --ignore-eos --print-ids --session d$k.kv --draft $k >a$k &&
		coli-run -q -m "$M" --prompt-ids "$Q" -n 10 --ignore-eos --print-ids --session d$k.kv --draft $k >b$k || exit 1
	done &&
	cmp a0 a2 && cmp b0 b2 && cmp d0.kv d2.kv
'
test_expect_success "glm_moe_dsa: the trace gives the lightning indexer its own span (the report's sparse_selection)" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --trace t.coli_trace >/dev/null &&
	coli-profile report -q --json t.coli_trace -o rep >j &&
	python3 -c "import json,sys; d=json.load(open(\"j\"))[\"phases\"]; \
sys.exit(0 if all(d[p][\"parts_s\"][\"sparse_selection\"] > 0 and d[p][\"parts_s\"][\"attention\"] > 0 and \
d[p][\"parts_s\"][\"hyper_connections\"] == 0 for p in (\"prefill\", \"decode\")) else 1)" &&
	grep -q "^| sparse selection |" rep/report.md
'
test_done
