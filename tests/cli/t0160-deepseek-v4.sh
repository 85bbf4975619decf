#!/usr/bin/env bash
# t0160-deepseek-v4.sh: DeepSeek V4 (deepseek_v4) as far as this version goes: the bf16
# fixture converts from DeepSeek's own tensor names (the hash tables, mHC, compressors and
# indexer included) and verifies; the FP4 fixture (as V4 Flash ships) converts by default with
# its FP4 experts kept as shipped (fp4 records, 4.25 bits a weight, MTP layer's included), or
# widened exactly to bf16 at --expert-bits 16 --mtp-bits 16, and is refused at an explicit 4 or
# 8 (a requantization) before any file is made; --verify catches a changed byte of an fp4 record
# (codes or scales); coli-run gives the reference's greedy ids on both fixtures and both FP4
# containers, the same wherever the experts live and whichever kernel variant runs; a session
# resumed mid-window gives one run's ids; drafting (--draft 1..3, auto; the MTP layer's drafts and
# the oracle's, accepted and rejected, in RAM and streamed) gives the ids and logits of --draft 0,
# and a session saved after drafting holds the state of a run without; the trace's spans
# (docs/deepseek_v4.md).
. "$(dirname "$0")/lib.sh"
SQ="'"

# isa_runs ISA: whether this CPU runs kernel variant ISA (kernels.c: avx2 needs AVX2, FMA and
# F16C, avx512 also AVX-512 F, BW and VL).
isa_runs() {
	has() { grep -qw "$1" /proc/cpuinfo; }
	case $1 in
	scalar) true ;;
	avx2) has avx2 && has fma && has f16c ;;
	avx512) has avx2 && has fma && has f16c && has avx512f && has avx512bw && has avx512vl ;;
	amx) isa_runs avx512 && has avx512_vnni && has avx512_bf16 && has amx_tile && has amx_bf16 && has amx_int8 ;;
	esac
}

F=$FIX/deepseek_v4-tiny
M=$SCRATCH/v4.coli

# converted SRC OUT [OPTIONS]: converts, verifies (164 tensors, 60 expert records) and leaves
# --info's text in ./info.
converted() {
	coli-convert -q ${3:-} "$1" "$2" &&
	coli-convert --verify "$2" >verify &&
	grep -q "ok: 164 tensors, 60 expert records" verify &&
	coli-convert --info "$2" >info
}

test_expect_success "deepseek_v4: the bf16 fixture converts (MTP layer included) and verifies" '
	converted "$F/checkpoint" "$M" &&
	grep -q "family      deepseek_v4" info &&
	grep -q "layers      5 (0 dense, 5 MoE) + 1 MTP" info
'
test_expect_success "deepseek_v4: the FP4 fixture at an explicit 4 or 8 expert or MTP bits is refused (a requantization), nothing made" '
	for o in "--expert-bits 4" "--expert-bits 8" "--mtp-bits 8" "--expert-bits 16 --mtp-bits 4"; do
		expect_exit 2 coli-convert $o "$FIX/deepseek_v4-fp4-tiny/checkpoint" fp4.coli &&
		err_has "holds FP4 experts (config.json: expert_dtype: fp4), which gs64 int" \
			"would requantize; without --" "bits they are kept as shipped (fp4, 4.25 bits a weight)" &&
		test ! -e fp4.coli || exit 1
	done &&
	err_has "--mtp-bits 4: "
'
test_expect_success "deepseek_v4: the FP4 fixture converts by default with its experts kept as fp4 (MTP too) and verifies" '
	converted "$FIX/deepseek_v4-fp4-tiny/checkpoint" "$SCRATCH/fp4.coli" &&
	grep -q "bits        expert 4, dense 4, mtp 8" info &&
	grep -q "record      8192 bytes (gate fp4 \[64, 64\], up fp4, down fp4 \[64, 64\]; parts 6528 bytes, 4.25 bits a weight)" info &&
	grep -q "experts     400.00 KiB in 5 MoE layers x 10 records + 80.00 KiB MTP records" info
'
test_expect_success "deepseek_v4: --verify names the fp4 record whose code or scale byte changed (exit 1)" '
	for at in $((4096 + 100)) $((4096 + 2048 + 2)) $((28672 + 2176 + 2048 + 7)); do
		cp -R "$SCRATCH/fp4.coli" bad.coli &&
		v=$(od -A n -t u1 -j $at -N 1 bad.coli/experts.bin | tr -d " ") &&
		printf "\\x$(printf %02x $((v ^ 1)))" | dd of=bad.coli/experts.bin bs=1 seek=$at conv=notrunc status=none &&
		expect_exit 1 coli-convert --verify bad.coli &&
		case $at in
		4196|6146) err_has "expert record [layer 0][expert 0] at offset 4096 (8192 bytes): crc32" ;;
		*) err_has "expert record [layer 0][expert 3] at offset 28672 (8192 bytes): crc32" ;;
		esac || exit 1
		rm -rf bad.coli
	done
'
test_expect_success "deepseek_v4: coli-plan predicts fp4 records at the probe's FP4 kernel speed (int4's for a probe without it)" '
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1 --disk "$SCRATCH" -o measured.json &&
	grep -q "\"fp4_bps_all\": [1-9]" measured.json &&
	jq ".int4_bps_1 = 1e10 | .int4_bps_all = 1e10 | .fp4_bps_1 = 2e9 | .fp4_bps_all = 2e9" measured.json >probe.json &&
	jq "del(.fp4_bps_1, .fp4_bps_all, .fp4_prefill_bps_all)" probe.json >old.json &&
	coli-plan -q "$SCRATCH/fp4.coli" --probe probe.json -o plan.json &&
	coli-plan -q "$SCRATCH/fp4.coli" --probe old.json -o old-plan.json &&
	test "$(jq ".predicted.warm.experts_s" plan.json)" = 9.8304e-05 &&
	test "$(jq ".predicted.warm.experts_s" old-plan.json)" = 1.96608e-05
'
test_expect_success "deepseek_v4: the FP4 fixture converts at 16 expert and MTP bits (bf16, exactly) and verifies" '
	converted "$FIX/deepseek_v4-fp4-tiny/checkpoint" fp4-16.coli "--expert-bits 16 --mtp-bits 16" &&
	grep -q "record      24576 bytes (gate bf16 \[64, 64\], up bf16, down bf16 \[64, 64\]" info
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
G=$FIX/deepseek_v4-fp4-tiny
test_expect_success "deepseek_v4: fp4 experts: 32 greedy ids equal the reference's with every kernel variant, in RAM and streamed" '
	coli-convert -q --dense-bits 16 --mtp-bits 16 "$G/checkpoint" fp4-d16.coli &&
	ids_of "$G/greedy_tokens.i32.bin" >want &&
	for isa in scalar avx2 avx512 amx; do
		isa_runs $isa || continue
		for o in "" "--cache-slots 4" "--cache-slots 2 --prefetch on" "--stream"; do
			COLI_ISA=$isa coli-run -q -m fp4-d16.coli --prompt-ids "$(ids_of "$G/prompt_ids.i32.bin")" -n 32 \
				--ignore-eos --print-ids $o >got &&
			test "$(cat got)" = "$(cat want)" || { echo "$isa $o: $(cat got)"; exit 1; }
		done
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
