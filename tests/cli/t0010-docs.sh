#!/usr/bin/env bash
# t0010-docs.sh: each tool's docs/ page is in step with its --help.
. "$(dirname "$0")/lib.sh"

for tool in coli-convert coli-run coli-synth; do
	test_expect_success "$tool: every option of --help is documented in docs/$tool.md" '
		$tool --help >help &&
		grep -o -- "--[a-z][a-z0-9-]*" help | sort -u >opts &&
		test -s opts &&
		while read -r opt; do
			grep -qF -- "$opt" "$TOP/docs/$tool.md" || { echo "missing: $opt" >&2; exit 1; }
		done <opts
	'
done

for tool in coli-diskbench coli-membench coli-fmapeak coli-crcbench coli-json coli-tracestat; do
	test_expect_success "$tool: --help exits 0 and docs/tools.md carries it verbatim" '
		$tool --help >help &&
		while IFS= read -r line; do
			grep -qxF -- "$line" "$TOP/docs/tools.md" || { echo "not in docs: $line" >&2; exit 1; }
		done <help
	'
done

# Subcommands: "TOOL SUB" with its --help verbatim in docs/TOOL.md.
for sub in "coli-plan" "coli-plan probe" "coli-plan mirror stage" "coli-plan mirror verify" \
	"coli-profile" "coli-profile report" "coli-profile replay" "coli-profile datapoint" "coli-profile compare"; do
	test_expect_success "$sub: --help exits 0 and docs/${sub%% *}.md carries it verbatim" '
		$sub --help >help &&
		while IFS= read -r line; do
			grep -qxF -- "$line" "$TOP/docs/${sub%% *}.md" || { echo "not in docs: $line" >&2; exit 1; }
		done <help
	'
done

for tool in coli-convert coli-run; do
	test_expect_success "$tool: docs/$tool.md carries the --help options block verbatim" '
		$tool --help | grep "^  -" >block &&
		while IFS= read -r line; do
			grep -qxF -- "$line" "$TOP/docs/$tool.md" || { echo "not in docs: $line" >&2; exit 1; }
		done <block
	'
done

for tool in coli-convert coli-run coli-synth coli-diskbench coli-membench coli-fmapeak coli-crcbench coli-json coli-tracestat \
	"coli-plan" "coli-plan probe" "coli-plan mirror stage" "coli-plan mirror verify" \
	"coli-profile" "coli-profile report" "coli-profile replay" "coli-profile datapoint" "coli-profile compare"; do
	test_expect_success "$tool: no line of --help is wider than 100 columns" '
		$tool --help >help &&
		test -s help &&
		awk "length(\$0) > 100 { print FILENAME \":\" NR \": \" length(\$0) \" columns\"; bad = 1 }
		     END { exit bad }" help >&2
	'
done

test_done
