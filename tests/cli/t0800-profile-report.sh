#!/usr/bin/env bash
# t0800-profile-report.sh: coli-profile report on a streamed run's trace with its probe and plan:
# the attribution's parts sum to each phase's wall, the tokens agree with coli-run --json, the
# plots are valid PNG and SVG, report.html has every image inlined; without gnuplot the text
# report still appears; truncated and foreign traces are refused naming what is wrong.
# The budget, 0.1161 GiB: 0.1 beside the tables of the model's Qwen3 tokenizer (16.5 MiB), which
# the budget counts.
. "$(dirname "$0")/lib.sh"

M=$SCRATCH/m.coli
P="1 2 3 4 5 6 7 8"
T=$SCRATCH/run.coli_trace

test_expect_success "setup: a 4 x 64 experts model, a probe, a plan, a streamed run traced" '
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck" --layers 4 --experts 64 --top-k 4 --hidden 128 \
		--expert-ffn 256 --measure 0 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" -o "$SCRATCH/probe.json" &&
	coli-plan -q "$M" --probe "$SCRATCH/probe.json" --ram 0.1161 --ctx 1024 -o "$SCRATCH/plan.json" &&
	coli-run -m "$M" --plan "$SCRATCH/plan.json" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --json \
		--trace "$T" >"$SCRATCH/run.json" 2>/dev/null &&
	test -s "$T"
'

test_expect_success "--json: the parts sum to the wall of each phase, tokens as coli-run counted them" '
	coli-profile report -q --json "$T" -o $SCRATCH/rep --probe "$SCRATCH/probe.json" --plan "$SCRATCH/plan.json" >j &&
	for ph in prefill decode; do
		wall=$(coli-json phases.$ph.wall_s <j) &&
		sum=$(for k in io_wait experts attention router other between_calls untraced; do coli-json phases.$ph.parts_s.$k <j; done |
			awk "{ s += \$1 } END { printf \"%.12f\", s }") &&
		awk "BEGIN { d = $sum - $wall; if (d < 0) d = -d; exit !(d <= 0.01 * $wall && $wall > 0) }" ||
			{ echo "$ph: parts $sum, wall $wall" >&2; exit 1; }
	done &&
	test "$(coli-json phases.decode.tokens <j)" = "$(tail -n 1 "$SCRATCH/run.json" | coli-json decode.tokens)" &&
	test "$(coli-json phases.prefill.tokens <j)" = 8 &&
	test "$(coli-json verdict.phase <j)" = decode &&
	coli-json verdict.text <j | grep -q "a disk 2x faster would give about" &&
	awk "BEGIN { exit !($(coli-json worst_span_error <j) <= 0.01) }" &&
	test "$(coli-json disks.0.probe_mb_per_s <j | cut -d. -f1)" -gt 0
'

test_expect_success "the report: markdown with the table, the verdict, disks against the probe, the plan" '
	coli-profile report "$T" -o $SCRATCH/rep --probe "$SCRATCH/probe.json" --plan "$SCRATCH/plan.json" >out &&
	grep -q "^| \*\*wall\*\* |" out && grep -q "^## Verdict" out && grep -q "Report: $SCRATCH/rep/report.html" out &&
	grep -q "^| I/O wait |" $SCRATCH/rep/report.md && grep -q "^## Disks" $SCRATCH/rep/report.md &&
	grep -q "^| plan, warm |" $SCRATCH/rep/report.md && grep -q "^| measured |" $SCRATCH/rep/report.md &&
	grep -q "Probe: the best O_DIRECT" $SCRATCH/rep/report.md
'

test_expect_success "the plots: PNG and SVG of each, valid and titled" '
	for p in attribution hitrate heatmap tokens disks predicted; do
		test "$(head -c 8 $SCRATCH/rep/$p.png | od -An -tx1 | tr -d " \n")" = 89504e470d0a1a0a &&
		test "$(wc -c <$SCRATCH/rep/$p.png)" -gt 2000 &&
		head -c 200 $SCRATCH/rep/$p.svg | grep -q "<?xml" && grep -q "<svg" $SCRATCH/rep/$p.svg && tail -c 20 $SCRATCH/rep/$p.svg | grep -q "</svg>" &&
		grep -q "<title>" $SCRATCH/rep/$p.svg || { echo "bad plot $p" >&2; exit 1; }
		if command -v python3 >/dev/null; then
			python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" $SCRATCH/rep/$p.svg || exit 1
		fi
	done &&
	test ! -e $SCRATCH/rep/attribution.png.tmp
'

test_expect_success "report.html: self-contained, every image a data: URI" '
	test "$(grep -o "<img " $SCRATCH/rep/report.html | wc -l)" = 6 &&
	test "$(grep -o "src=\"data:image/png;base64," $SCRATCH/rep/report.html | wc -l)" = 6 &&
	! grep -q "src=\"[a-z]*\.png\"" $SCRATCH/rep/report.html &&
	grep -q "<table>" $SCRATCH/rep/report.html && grep -q "</html>" $SCRATCH/rep/report.html
'

test_expect_success "without gnuplot: a clear message, the text report still written (exit 0)" '
	mkdir nogp && ln -s "$(command -v coli-profile)" nogp/coli-profile &&
	PATH=$PWD/nogp expect_exit 0 "$BIN/coli-profile" report -q "$T" -o rep2 &&
	err_has "gnuplot is not on PATH" &&
	grep -q "^| \*\*wall\*\* |" rep2/report.md && grep -q "No plots: gnuplot is not on PATH" rep2/report.md &&
	test -s rep2/report.html && test ! -e rep2/attribution.png
'

test_expect_success "a truncated trace is refused as truncated (exit 1), no report" '
	head -c $(($(wc -c <"$T") - 40)) "$T" >cut.coli_trace &&
	expect_exit 1 coli-profile report -q cut.coli_trace -o rep3 &&
	err_has "cut.coli_trace" "truncated" && test ! -e rep3/report.md
'

test_expect_success "a foreign file is refused naming it (exit 1)" '
	expect_exit 1 coli-profile report -q "$SCRATCH/plan.json" -o rep4 && err_has "plan.json" "not a coli trace" &&
	printf "\037\213junk" >junk.tar.gz &&
	expect_exit 1 coli-profile report -q junk.tar.gz -o rep4 && err_has "junk.tar.gz" "a bundle is a .tar.gz" &&
	expect_exit 1 coli-profile report -q nothing.coli_trace && err_has "nothing.coli_trace"
'

test_expect_success "usage errors exit 2" '
	expect_exit 2 coli-profile report && err_has "no TRACE or BUNDLE given" &&
	expect_exit 2 coli-profile report a b && expect_exit 2 coli-profile report --frob x &&
	expect_exit 2 coli-profile frob && err_has "unknown subcommand"
'

test_done
