#!/usr/bin/env bash
# t0741-plan-checkpoint.sh: coli-plan CKPT_DIR plans the container coli-convert would write from a
# Hugging Face checkpoint, from its safetensors' headers or from config.json alone: the container
# it describes is byte for byte the one coli-convert writes (identity, each file's size), with
# every --expert-bits/--dense-bits/--mtp-bits; coli-run --plan runs that container with the plan
# and refuses another; bad inputs exit as docs/coli-plan.md says. The checkpoint is
# tests/fixtures/hf/deepseek_v4-fp4-tiny (stored as V4 Flash ships: FP4 experts, FP8 matrices),
# and deepseek_v3-fp8-tiny for DeepSeek-V3's fp8 release; V4 Flash's own config.json is
# tests/data/configs/deepseek_v4-flash.
. "$(dirname "$0")/lib.sh"

FX=$TOP/tests/fixtures/hf
C=$FX/deepseek_v4-fp4-tiny/checkpoint
PR=$SCRATCH/probe.json
j() { tr -d "\n" <"$1" | coli-json "$2"; }
size() { stat -c %s "$1"; }

# same_container PLAN COLI: the plan's described container is COLI: identity and file sizes.
same_container() {
	test "$(j "$1" container.identity)" = "$(coli-convert --info "$2" | awk '/^identity/ { print $2 }')" &&
	for f in dense mtp experts; do
		test "$(j "$1" container.described.sections.$f)" = "$(size "$2/$f.bin")" ||
			{ echo "$f.bin: described $(j "$1" container.described.sections.$f), written $(size "$2/$f.bin")" >&2; return 1; }
	done
}

test_expect_success "setup: this machine's probe, the checkpoint's config.json alone in a folder" '
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" -o "$PR" &&
	mkdir "$SCRATCH/cfg" && cp "$C/config.json" "$SCRATCH/cfg/"
'

for bits in "" "--expert-bits 16" "--dense-bits 8 --mtp-bits 16" "--expert-bits 16 --dense-bits 16 --mtp-bits 16"; do
	test_expect_success "deepseek_v4 FP4 ${bits:-(the defaults)}: described from the safetensors and from config.json alone, the container coli-convert writes" '
		coli-convert -q $bits "$C" m.coli &&
		coli-plan -q "$C" $bits --probe "$PR" --ram 1 -o a.json && same_container a.json m.coli &&
		test "$(j a.json container.described.dtypes)" = safetensors &&
		coli-plan -q "$SCRATCH/cfg" $bits --probe "$PR" --on "$SCRATCH" --ram 1 -o b.json && same_container b.json m.coli &&
		test "$(j b.json container.described.dtypes)" = release
	'
done

test_expect_success "deepseek_v3 fp8: config.json alone at 16 bits keeps the release's dtypes (fp8 matrices, bf16 embeddings)" '
	mkdir v3 && cp "$FX/deepseek_v3-fp8-tiny/checkpoint/config.json" v3/ &&
	coli-convert -q --expert-bits 16 --dense-bits 16 --mtp-bits 16 "$FX/deepseek_v3-fp8-tiny/checkpoint" v3.coli &&
	coli-plan -q v3 --expert-bits 16 --dense-bits 16 --mtp-bits 16 --probe "$PR" --ram 1 -o v3.json &&
	same_container v3.json v3.coli && coli-convert --info v3.coli | grep -q fp8
'

test_expect_success "the summary: the container described, which dtypes, where it would be read from" '
	coli-plan "$SCRATCH/cfg" --probe "$PR" --on "$SCRATCH" --ram 1 -o p.json >out &&
	grep -q "^container not converted: what coli-convert $SCRATCH/cfg OUT.coli --expert-bits 4 --dense-bits 4 --mtp-bits 8 would write (config.json alone: the release.s dtypes (bfloat16, F8_E4M3 matrices with block scales, FP4 routed experts))" out &&
	grep -q "^  experts.bin 0.00 GiB: 5 layers x 10 records of 8192 bytes (fp4 gate, up, down), 1 MTP layer x 10 records of 8192 bytes (fp4 gate, up, down)$" out &&
	test "$(j p.json container.path)" = "$SCRATCH" && test "$(j p.json machine.disks.0.dir)" = "$SCRATCH" &&
	test "$(j p.json container.described.checkpoint)" = "$SCRATCH/cfg" &&
	test "$(j p.json container.described.bits.mtp)" = 8
'

test_expect_success "V4 Flash config.json: 43 + 1 MTP layers x 256 records of 13369344 bytes (FP4 kept), the dense part q4" '
	coli-plan "$TOP/tests/data/configs/deepseek_v4-flash" --probe "$PR" --on "$SCRATCH" --ram 28 -o f.json >out &&
	grep -q "43 layers x 256 records of 13369344 bytes (fp4 gate, up, down), 1 MTP layer x 256 records of 13369344 bytes" out &&
	test "$(j f.json container.described.sections.experts)" = $((4096 + 44 * 256 * 13369344)) &&
	test "$(j f.json knobs.cache-slots | tr , "\n" | wc -l)" = 44
'

test_expect_success "coli-run --plan: the described container runs with the plan; another one (--dense-bits 8) is refused, named" '
	coli-convert -q "$C" m4.coli && coli-convert -q --dense-bits 8 "$C" m8.coli &&
	coli-plan -q "$C" --probe "$PR" --on "$SCRATCH" --ram 1 -o d.json &&
	coli-run -q -m m4.coli --prompt-ids "1 2 3" -n 3 --print-ids >ram &&
	coli-run -m m4.coli --plan d.json --prompt-ids "1 2 3" -n 3 --print-ids >ids 2>err && cmp ram ids &&
	expect_exit 1 coli-run -m m8.coli --plan d.json --prompt-ids "1 2 3" -n 3 &&
	err_has "d.json: container.identity: the plan is for container $(j d.json container.identity | cut -c1-16)..., the one coli-convert writes from $C with bits expert 4, dense 4, mtp 8 (container.described); m8.coli is" \
		"(bits expert 4, dense 8, mtp 8): another container"
'

test_expect_success "exit 1: a folder that is neither a container nor a checkpoint; config.json refused (an unknown key that changes the computation), named" '
	mkdir nocfg && cp "$C"/*.safetensors* nocfg/ &&
	expect_exit 1 coli-plan nocfg --probe "$PR" --ram 1 &&
	err_has "nocfg: neither a coli container (manifest.coli) nor a Hugging Face checkpoint (config.json)" &&
	mkdir bad && sed "s/\"heavily_compressed_attention\": 16/\"heavily_compressed_attention\": 16, \"sparse\": 2/" \
		"$C/config.json" >bad/config.json && grep -q sparse bad/config.json &&
	expect_exit 1 coli-plan bad --probe "$PR" --ram 1 &&
	err_has "bad/config.json: compress_rates.sparse: unsupported key" &&
	expect_exit 1 coli-plan "$SCRATCH/cfg" --probe "$PR" --ram 1 --on "$SCRATCH" --dense-bits 8 --usage nothere.u &&
	err_has "nothere.u"
'

test_expect_success "exit 2: a bad option value, --on not a folder, FP4 experts requantized, options for a container, a mirror of a checkpoint" '
	expect_exit 2 coli-plan "$C" --probe "$PR" --expert-bits 5 && err_has "--expert-bits" &&
	expect_exit 2 coli-plan "$C" --probe "$PR" --on "$SCRATCH/nothere" &&
	err_has "--on $SCRATCH/nothere: no such folder" &&
	expect_exit 2 coli-plan "$C" --probe "$PR" --on "$SCRATCH/probe.json" && err_has "not a folder" &&
	expect_exit 2 coli-plan "$C" --probe "$PR" --expert-bits 4 &&
	err_has "--expert-bits 4: $C holds FP4 experts (config.json: expert_dtype: fp4), which gs64 int4 would requantize" &&
	expect_exit 2 coli-plan m4.coli --probe "$PR" --dense-bits 8 &&
	err_has "--dense-bits 8: for a checkpoint folder (the encodings coli-convert would choose); m4.coli is a container" &&
	expect_exit 2 coli-plan m4.coli --probe "$PR" --on "$SCRATCH" && err_has "--on $SCRATCH: for a checkpoint folder" &&
	expect_exit 2 coli-plan "$C" --probe "$PR" --mirror m8.coli && err_has "--mirror m8.coli: a copy of a container"
'

test_done
