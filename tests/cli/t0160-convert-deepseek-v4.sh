#!/usr/bin/env bash
# t0160-convert-deepseek-v4.sh: DeepSeek V4 (deepseek_v4) as far as this version goes: the bf16
# fixture converts from DeepSeek's own tensor names (the hash tables, mHC, compressors and
# indexer included) and verifies; the FP4 fixture (as V4 Flash ships) converts at --expert-bits
# 16 (its FP4 experts kept exactly as bf16, its FP8 matrices' UE8M0 scales read) and is refused
# at 4 or 8 bits before any file is made (that would requantize them); coli-run refuses the
# family by name, exit status 1, nothing run (docs/deepseek_v4.md).
. "$(dirname "$0")/lib.sh"

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
test_expect_success "deepseek_v4: coli-run refuses the family in RAM and streamed, before any token" '
	expect_exit 1 coli-run -m "$M" --prompt-ids "1 2 3" -n 2 &&
	err_has "deepseek_v4: this version of coli converts and verifies the family but cannot run it yet" &&
	expect_exit 1 coli-run -m "$M" --prompt-ids "1 2 3" -n 2 --stream --ram 1 &&
	err_has "deepseek_v4: this version of coli converts and verifies the family but cannot run it yet"
'
test_done
