#!/usr/bin/env bash
# t0734-plan-precision.sh: coli-plan and --precision q8: predicted with the probe's q8 kernel
# figures, chosen only with --allow-q8 (knobs.precision, which coli-run --plan applies), else
# offered in a note; not offered when slower or not measured.
. "$(dirname "$0")/lib.sh"

M=$SCRATCH/m.coli
j() { tr -d "\n" <"$1" | coli-json "$2"; }

# q8 V1 VALL: probe.json with q8_int4_bps_1 and q8_int4_bps_all set to V1 and VALL GB/s, to stdout.
q8() { sed -E "s/(\"q8_int4_bps_1\": *)[0-9.e+-]+/\1$1e9/; s/(\"q8_int4_bps_all\": *)[0-9.e+-]+/\1$2e9/" "$SCRATCH/probe.json"; }

test_expect_success "setup: a qwen3_moe model, a probe with its q8 figures" '
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck" --layers 2 --experts 16 --top-k 2 --hidden 128 \
		--expert-ffn 128 --measure 0 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" -o "$SCRATCH/probe.json" &&
	tr -d "\n" <"$SCRATCH/probe.json" | coli-json q8_int4_bps_all >v && awk "{ exit !(\$1 > 0) }" v
'
test_expect_success "q8 faster, no --allow-q8: exact, and the note offers q8 with its speed-up" '
	q8 1000 1000 >p.json &&
	coli-plan "$M" --probe p.json --explain -o plan.json >out &&
	test_must_fail j plan.json knobs.precision &&
	grep -q "^precision exact: the default; --allow-q8 would take --precision q8: predicted [0-9.]* tok/s warm against [0-9.]* (x[0-9.]*), not exact" out
'
test_expect_success "--allow-q8: the plan takes q8, and coli-run --plan runs it" '
	q8 1000 1000 >p.json &&
	coli-plan "$M" --probe p.json --allow-q8 --explain -o plan.json >out &&
	test "$(j plan.json knobs.precision)" = q8 &&
	grep -q "^precision q8: --allow-q8: predicted [0-9.]* tok/s warm against [0-9.]* exact (x[0-9.]*)" out &&
	cp p.json "$SCRATCH/probe-q8.json" &&
	coli-run -m "$M" --plan plan.json --prompt-ids "1 2 3" -n 2 --ignore-eos --print-ids --json >run 2>err ||
		{ cat err; exit 1; }
	test "$(tail -n 1 run | coli-json kernels.precision)" = q8
'
test_expect_success "q8 slower: not taken, even with --allow-q8, and the note says why" '
	q8 0.001 0.001 >p.json &&
	coli-plan "$M" --probe p.json --allow-q8 --explain -o plan.json >out &&
	test_must_fail j plan.json knobs.precision &&
	grep -q "^precision exact: --precision q8 would not be faster" out
'
test_expect_success "a probe without q8 figures: exact, and the note says how to measure them" '
	grep -v "\"q8_int" "$SCRATCH/probe.json" >p.json &&
	coli-plan "$M" --probe p.json --allow-q8 --explain -o plan.json >out &&
	test_must_fail j plan.json knobs.precision &&
	grep -q "^precision exact: the probe has no q8 kernel figures" out
'

test_done
