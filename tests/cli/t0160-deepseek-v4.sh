#!/usr/bin/env bash
# t0160-deepseek-v4.sh: DeepSeek V4 (deepseek_v4) as far as this version goes: the bf16
# fixture converts from DeepSeek's own tensor names (the hash tables, mHC, compressors and
# indexer included) and verifies; the FP4 fixture (as V4 Flash ships) converts at --expert-bits
# 16 (its FP4 experts kept exactly as bf16, its FP8 matrices' UE8M0 scales read) and is refused
# at 4 or 8 bits before any file is made (that would requantize them); coli-run gives the
# reference's greedy ids on both, the same wherever the experts live; a session resumed
# mid-window gives one run's ids; --draft K is refused by name until the family's state is rolled
# back (docs/deepseek_v4.md).
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
		coli-convert -q --expert-bits 16 --dense-bits 16 --mtp-bits 16 "$FIX/$f/checkpoint" $f.coli &&
		coli-run -q -m $f.coli --prompt-ids "$(ids_of "$FIX/$f/prompt_ids.i32.bin")" -n 32 --ignore-eos \
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
test_expect_success "deepseek_v4: --draft K refused by name (its state is not rolled back yet); auto runs plainly" '
	expect_exit 2 coli-run -m "$M" --prompt-ids "$P" -n 2 --draft 1 &&
	err_has "--draft: " "deepseek_v4${SQ}s state (its window and compressor windows) is not rolled back" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >plain &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --draft auto >auto &&
	cmp plain auto
'
test_done
