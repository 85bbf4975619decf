#!/usr/bin/env bash
# t0160-deepseek-v4.sh: DeepSeek V4 (deepseek_v4) as far as this version goes: the bf16
# fixture converts from DeepSeek's own tensor names (the hash tables, mHC, compressors and
# indexer included) and verifies; the FP4 fixture (as V4 Flash ships) converts at --expert-bits
# 16 (its FP4 experts kept exactly as bf16, its FP8 matrices' UE8M0 scales read) and is refused
# at 4 or 8 bits before any file is made (that would requantize them); coli-run gives the
# reference's greedy ids on both, the same wherever the experts live; a session resumed
# mid-window gives one run's ids; drafting (--draft 1..3, auto; the MTP layer's drafts and the
# oracle's, accepted and rejected, in RAM and streamed) gives the ids and logits of --draft 0, and
# a session saved after drafting holds the state of a run without (docs/deepseek_v4.md).
. "$(dirname "$0")/lib.sh"
SQ="'"

F=$FIX/deepseek_v4-tiny
M=$SCRATCH/v4.coli

test_expect_success "deepseek_v4: the bf16 fixture converts (MTP layer included) and verifies" '
	coli-convert -q "$F/checkpoint" "$M" &&
	coli-convert --verify "$M" >verify &&
	grep -q "ok: 164 tensors, 60 expert records" verify &&
	coli-convert --info "$M" >info &&
	grep -q "family      deepseek_v4" info &&
	grep -q "layers      5 (0 dense, 5 MoE) + 1 MTP" info
'
test_expect_success "deepseek_v4: the FP4 fixture at 4 or 8 expert bits is refused (a requantization), nothing made" '
	expect_exit 2 coli-convert "$FIX/deepseek_v4-fp4-tiny/checkpoint" fp4.coli &&
	err_has "--expert-bits 4:" "holds FP4 experts (config.json: expert_dtype: fp4), which 4 bits would requantize" &&
	test ! -e fp4.coli &&
	expect_exit 2 coli-convert --expert-bits 16 "$FIX/deepseek_v4-fp4-tiny/checkpoint" fp4.coli &&
	err_has "--mtp-bits 8:" "--mtp-bits 16 keeps their values exactly" &&
	test ! -e fp4.coli
'
test_expect_success "deepseek_v4: the FP4 fixture converts at 16 expert and MTP bits and verifies" '
	coli-convert -q --expert-bits 16 --mtp-bits 16 "$FIX/deepseek_v4-fp4-tiny/checkpoint" fp4.coli &&
	coli-convert --verify fp4.coli >verify &&
	grep -q "ok: 164 tensors, 60 expert records" verify &&
	coli-convert --info fp4.coli >info &&
	grep -q "record      24576 bytes (gate bf16 \[64, 64\], up bf16, down bf16 \[64, 64\])" info
'
P="$(ids_of "$F/prompt_ids.i32.bin")"
test_expect_success "deepseek_v4: 32 greedy ids equal the reference's, bf16 and FP4 fixtures (16 bits)" '
	for f in deepseek_v4-tiny deepseek_v4-fp4-tiny; do
		coli-convert -q --expert-bits 16 --dense-bits 16 --mtp-bits 16 "$FIX/$f/checkpoint" "$SCRATCH/$f.coli" &&
		coli-run -q -m "$SCRATCH/$f.coli" --prompt-ids "$(ids_of "$FIX/$f/prompt_ids.i32.bin")" -n 32 --ignore-eos \
			--print-ids >got &&
		ids_of "$FIX/$f/greedy_tokens.i32.bin" >want &&
		test "$(cat got)" = "$(cat want)" || exit 1
	done
'
test_expect_success "deepseek_v4: ids and step logits the same in RAM, streamed (1 and 8 slots), mmap" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --dump-logits ram.bin >ram &&
	test "$(wc -w <ram)" = 24 &&
	for o in "--cache-slots 4" "--cache-slots 8 --prefetch on" "--io mmap" "--stream"; do
		coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --dump-logits s.bin $o >s &&
		cmp ram s && cmp ram.bin s.bin || exit 1
	done
'
test_expect_success "deepseek_v4: a session saved after 12 ids (mid-window) and resumed for 12 more equals one run of 24" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >one &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 12 --ignore-eos --print-ids --session s.coli_kv >a &&
	coli-run -q -m "$M" -n 12 --ignore-eos --print-ids --session s.coli_kv >b &&
	test "$(cat a) $(cat b)" = "$(cat one)" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 5 --ignore-eos --print-ids --session t.coli_kv >c &&
	coli-run -q -m "$M" -n 7 --ignore-eos --print-ids --session t.coli_kv >d &&
	coli-run -q -m "$M" -n 12 --ignore-eos --print-ids --session t.coli_kv >f &&
	test "$(cat c) $(cat d) $(cat f)" = "$(cat one)"
'
# Drafting: the fixtures' MTP layer is random (its greedy drafts are all rejected), so the oracle
# (the --draft 0 ids, each kept with probability 0.5) makes rounds accept 0 to K drafts (K up to
# 4: a verify of 5 writes a CSA window's slot twice); 40 ids after the 64-id prompt cross CSA (4)
# and HCA (16) windows' ends and wrap the 8-key window.
j() { tail -n 1 out | coli-json "$@"; }
test_expect_success "deepseek_v4: --draft 1, 2, 3 and auto give the ids and step logits of --draft 0, both fixtures" '
	for f in deepseek_v4-tiny deepseek_v4-fp4-tiny; do
		Pf="$(ids_of "$FIX/$f/prompt_ids.i32.bin")" &&
		coli-run -q -m "$SCRATCH/$f.coli" --prompt-ids "$Pf" -n 40 --ignore-eos --print-ids --dump-logits d0.bin >d0 &&
		for k in 1 2 3 auto; do
			coli-run -q -m "$SCRATCH/$f.coli" --prompt-ids "$Pf" -n 40 --ignore-eos --print-ids --draft $k \
				--dump-logits dk.bin --json >out &&
			head -n 1 out | cmp - d0 && cmp d0.bin dk.bin && test "$(j draft.verifies)" -gt 0 || exit 1
		done &&
		cp d0 "$SCRATCH/$f.ids" || exit 1
	done
'
test_expect_success "deepseek_v4: drafts accepted and rejected (the oracle at 0.5): the ids and logits of --draft 0, in RAM and streamed" '
	for f in deepseek_v4-tiny deepseek_v4-fp4-tiny; do
		Pf="$(ids_of "$FIX/$f/prompt_ids.i32.bin")" &&
		coli-run -q -m "$SCRATCH/$f.coli" --prompt-ids "$Pf" -n 40 --ignore-eos --dump-logits d0.bin >/dev/null &&
		for o in "" "--cache-slots 4" "--cache-slots 8 --prefetch on"; do
			for k in 1 2 3 4; do
				coli-run -q -m "$SCRATCH/$f.coli" --prompt-ids "$Pf" -n 40 --ignore-eos --print-ids --draft $k $o \
					--draft-oracle "$SCRATCH/$f.ids" --draft-oracle-rate 0.5 --dump-logits dk.bin --json >out &&
				head -n 1 out | cmp - "$SCRATCH/$f.ids" && cmp d0.bin dk.bin &&
				a=$(j draft.acceptance) && awk "BEGIN { exit !($a > 0 && $a < 1) }" || exit 1
			done
		done
	done
'
test_expect_success "deepseek_v4: the MTP layer drafts: sampling with a seed reproducible, drafts accepted and rejected" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 40 --ignore-eos --print-ids --temp 1.5 --seed 7 --draft 2 --json >out &&
	head -n 1 out >a && test "$(wc -w <a)" = 40 && a=$(j draft.acceptance) &&
	awk "BEGIN { exit !($a > 0 && $a < 1) }" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 40 --ignore-eos --print-ids --temp 1.5 --seed 7 --draft 2 \
		--cache-slots 4 >b && cmp a b
'
test_expect_success "deepseek_v4: a session saved after drafting resumes exactly (its state file the --draft 0 run${SQ}s)" '
	Q="$(echo $P | cut -d" " -f1-5)" && R="--draft-oracle $SCRATCH/deepseek_v4-tiny.ids --draft-oracle-rate 0.5" &&
	for k in 0 1 3; do
		o= && test $k = 0 || o="--draft $k $R" &&
		rm -f d$k.kv &&
		coli-run -q -m "$M" --prompt-ids "$P" -n 13 --ignore-eos --print-ids --session d$k.kv $o >a$k &&
		coli-run -q -m "$M" --prompt-ids "$Q" -n 14 --ignore-eos --print-ids --session d$k.kv --draft $k >b$k || exit 1
	done &&
	cmp a0 a1 && cmp a0 a3 && cmp b0 b1 && cmp b0 b3 && cmp d0.kv d1.kv && cmp d0.kv d3.kv
'
# The end-of-sequence id made the 9th .. 14th id: generation stops inside a round of verified
# drafts (the oracle: all accepted), the positions after it rolled back (a compressed row they
# completed unmade); the session file equals --draft 0's and goes on the same.
test_expect_success "deepseek_v4: a stop inside a verified round: the state rolled back, the session goes on the same" '
	cp -r "$F/checkpoint" eos.ck && chmod -R u+w eos.ck &&
	for i in 9 10 11 12 13 14; do
		eos=$(cut -d" " -f$i $SCRATCH/deepseek_v4-tiny.ids) &&
		printf "{\"eos_token_id\": %s}\n" "$eos" >eos.ck/generation_config.json &&
		rm -rf eos.coli && coli-convert -q --expert-bits 16 --dense-bits 16 --mtp-bits 16 eos.ck eos.coli &&
		o0="--draft 0" && o3="--draft 3 --draft-oracle $SCRATCH/deepseek_v4-tiny.ids" || exit 1
		for k in 0 3; do
			eval o=\$o$k && rm -f s$k.kv &&
			coli-run -q -m eos.coli --prompt-ids "$P" -n 24 --print-ids --session s$k.kv $o >a$k &&
			cp s$k.kv stop$k.kv &&
			coli-run -q -m eos.coli --prompt-ids "1 2 3" -n 12 --ignore-eos --print-ids --session s$k.kv \
				--draft $k >b$k || exit 1
		done &&
		test "$(wc -w <a3)" -le $i && cmp a0 a3 && cmp stop0.kv stop3.kv && cmp b0 b3 && cmp s0.kv s3.kv || exit 1
	done
'
test_expect_success "deepseek_v4: --draft auto decides (on while drafts pay), with the ids of --draft 0" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >plain &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --draft auto --json >out &&
	head -n 1 out | cmp - plain && test "$(j draft.mode)" = auto && j draft.why | grep -q "^auto: " &&
	test "$(j draft.verifies)" -gt 0
'
test_expect_success "deepseek_v4: the trace gives the compressors and indexer (sparse_selection) and mHC (hyper_connections) their spans" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --trace t.coli_trace >/dev/null &&
	coli-profile report -q --json t.coli_trace -o rep >jr &&
	python3 -c "import json,sys; d=json.load(open(\"jr\"))[\"phases\"]; \
sys.exit(0 if all(d[p][\"parts_s\"][k] > 0 for p in (\"prefill\", \"decode\") \
for k in (\"sparse_selection\", \"hyper_connections\", \"attention\", \"experts\")) else 1)" &&
	grep -q "^| hyper-connections |" rep/report.md
'
test_done
