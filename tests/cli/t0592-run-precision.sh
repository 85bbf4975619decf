#!/usr/bin/env bash
# t0592-run-precision.sh: coli-run --precision q8: 8-bit activations for the int4/int8 products, said
# in the closing line and --json; the same bits with every kernel variant; refused where no weight
# has int4/int8 codes; exact stays the default.
. "$(dirname "$0")/lib.sh"

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/q4.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"
j() { coli-json "$@" <json; }

test_expect_success "convert the fixture at 4 and at 16 bits" '
	coli-convert -q "$F/checkpoint" "$M" &&
	coli-convert -q --expert-bits 16 --dense-bits 16 --mtp-bits 16 "$F/checkpoint" "$SCRATCH/bf16.coli"
'
test_expect_success "exact is the default: --precision exact gives its bits, and says so" '
	coli-run -m "$M" --prompt-ids "$P" --teacher-force --dump-logits a.f32 --json >out && tail -n 1 out >json &&
	test "$(j kernels.precision)" = exact && test_must_fail j kernels.q8_isa &&
	coli-run -m "$M" --prompt-ids "$P" --teacher-force --precision exact --dump-logits b.f32 -q &&
	cmp a.f32 b.f32
'
test_expect_success "--precision q8: its variant and share of the weights in --json and the closing line" '
	coli-run -m "$M" --prompt-ids "$P" --teacher-force --precision q8 --dump-logits q.f32 --json >out &&
	tail -n 1 out >json && test "$(j kernels.precision)" = q8 &&
	case "$(j kernels.q8_isa)" in scalar|avx2|avx512|avx512vnni|amx) ;; *) exit 1 ;; esac &&
	awk "BEGIN { s = $(j kernels.q8_weight_share); exit !(s > 0.5 && s < 1) }" &&
	! cmp -s a.f32 q.f32 &&
	coli-run -m "$M" --prompt-ids "$P" --teacher-force --precision q8 2>err &&
	grep -q "kernels x[0-9]*, precision q8 ($(j kernels.q8_isa) products, [0-9]*% of the weight bytes)" err
'
# The q8 products give the same bits in every variant (test_kernels); the float32 rest of the
# forward pass (routers, attention) differs by summation order, so the logits agree to 1e-4.
test_expect_success "--precision q8 with every kernel variant this CPU runs: its q8 products, logits within 1e-4" '
	coli-run -m "$M" --prompt-ids "$P" --teacher-force --precision q8 --dump-logits q.f32 -q &&
	for isa in scalar avx2 avx512 amx; do
		COLI_ISA=$isa coli-run -m "$M" --prompt-ids "$P" --teacher-force --precision q8 --dump-logits "q-$isa.f32" \
			--json >"out-$isa" 2>"err-$isa" || { grep -q "this CPU lacks it" "err-$isa" && continue; exit 1; }
		case "$isa/$(tail -n 1 "out-$isa" | coli-json kernels.q8_isa)" in
		scalar/scalar | avx2/avx2 | avx512/avx512 | avx512/avx512vnni | amx/amx) ;; *) exit 1 ;; esac &&
		python3 -c "
import struct, sys
a, b = (open(f, \"rb\").read() for f in sys.argv[1:])
x, y = (struct.unpack(\"<%df\" % (len(a) // 4), d) for d in (a, b))
sys.exit(len(a) != len(b) or max(abs(u - v) for u, v in zip(x, y)) > 1e-4)" q.f32 "q-$isa.f32" || exit 1
	done
'
test_expect_success "--precision q8 where no weight is int4/int8: refused, naming the bits" '
	expect_exit 2 coli-run -m "$SCRATCH/bf16.coli" --prompt-ids "$P" --teacher-force --precision q8 &&
	err_has "coli-run: --precision q8: $SCRATCH/bf16.coli: no weight is stored as int4 or int8 codes (experts 16 bits, dense 16 bits): its products stay float32; convert with --expert-bits 4 or 8"
'
test_expect_success "--precision bogus: a usage error" '
	expect_exit 2 coli-run -m "$M" --prompt-ids "$P" --precision fp16 &&
	err_has "fp16"
'

test_done
