#!/usr/bin/env bash
# t0820-profile-datapoint.sh: coli-profile datapoint on the tiny qwen3_moe fixture (4 tokens a run):
# the bundle (manifest first, every file listed, the headline the median of the rotating runs, the
# report inside), the benchmarks row; coli-profile report reads the bundle without extracting it; a
# changed, foreign or missing member and a cut bundle are refused naming what is wrong.
. "$(dirname "$0")/lib.sh"

M=$SCRATCH/m.coli
B=$SCRATCH/dp.tar.gz
member() { tar xzf "$B" -O "$1"; }

test_expect_success "setup: the fixture converted" '
	coli-convert -q "$FIX/qwen3_moe-tiny/checkpoint" "$M"
'

test_expect_success "datapoint: a bundle and one benchmarks row, no staging folder left" '
	coli-profile datapoint -q "$M" -n 4 --prompts 3 --prompt-len 8 --no-drop-caches -o "$B" -- --cache-slots 8 >"$SCRATCH/row" &&
	R=$SCRATCH/row && test "$(wc -l <"$R")" = 1 && test "$(tr -cd "|" <"$R" | wc -c)" = 13 && grep -q "(median of 3)" "$R" &&
	test -s "$B" && test -z "$(ls -d "$B".staging.* 2>/dev/null)" && test ! -e "$B.tmp"
'

test_expect_success "the bundle: manifest.json first, every member listed with its size" '
	tar tzf "$B" >list && test "$(head -n 1 list)" = manifest.json &&
	for f in commands.sh env.json row.md traces/cold.coli_trace traces/warm.coli_trace traces/rotate-3.coli_trace \
		runs/rotate-2.json report/report.md report/report.html; do grep -qx "$f" list || { echo "no $f" >&2; exit 1; }; done &&
	member manifest.json | tr -d "\n" >man.json &&
	test "$(coli-json format version runs.4.name <man.json | tr "\n" " ")" = "coli-bundle 1 rotate-3 " &&
	test "$(($(wc -l <list) - 1))" = "$(grep -o "\"sha256\"" man.json | wc -l)" &&
	test "$(member row.md)" = "$(cat "$SCRATCH/row")" &&
	test "$(member commands.sh | grep -c -- "'"'"'--trace'"'"'")" = 5
'

test_expect_success "the headline is the median of the rotating runs" '
	member manifest.json | tr -d "\n" >man.json &&
	for r in 1 2 3; do member runs/rotate-$r.json | tail -n 1 | coli-json decode.tokens_per_s; done | sort -g >ts &&
	awk "BEGIN { exit !($(coli-json headline.tokens_per_s <man.json) == $(sed -n 2p ts)) }"
'

test_expect_success "report BUNDLE: read in memory, the headline trace, the datapoint table" '
	coli-profile report -q "$B" -o rep &&
	grep -q "^## Datapoint" rep/report.md && grep -q "dp.tar.gz:traces/rotate-" rep/report.md &&
	grep -q "^| rotate-3 | rotate |" rep/report.md && grep -q "^Machine: " rep/report.md &&
	coli-profile report -q --json "$B" -o rep >j && test "$(coli-json phases.decode.tokens <j)" = 3 &&
	test ! -e traces
'

# x/: the bundle extracted; pack NAME FILE...: a .tar.gz of those members of x/, in that order.
pack() { out=$1; shift; tar czf "$out" -C x "$@"; }

test_expect_success "a changed member is refused (sha256), naming it" '
	mkdir x && tar xzf "$B" -C x && echo "{}" >x/runs/cold.json &&
	pack t.tar.gz $(tar tzf "$B") &&
	expect_exit 1 coli-profile report -q t.tar.gz -o r && err_has "t.tar.gz: member '"'"'runs/cold.json'"'"'"
'

test_expect_success "a foreign member, a missing member, no manifest first: refused" '
	mkdir x && tar xzf "$B" -C x && echo hi >x/extra.txt &&
	pack f.tar.gz $(tar tzf "$B") extra.txt &&
	expect_exit 1 coli-profile report -q f.tar.gz -o r && err_has "'"'"'extra.txt'"'"' is not in the manifest" &&
	pack m.tar.gz $(tar tzf "$B" | grep -v "^row.md$") &&
	expect_exit 1 coli-profile report -q m.tar.gz -o r && err_has "'"'"'row.md'"'"' is in the manifest but not in the archive" &&
	pack n.tar.gz $(tar tzf "$B" | sed 1d) manifest.json &&
	expect_exit 1 coli-profile report -q n.tar.gz -o r && err_has "expected '"'"'manifest.json'"'"'"
'

test_expect_success "a cut bundle is refused" '
	head -c $(($(wc -c <"$B") * 2 / 3)) "$B" >cut.tar.gz &&
	expect_exit 1 coli-profile report -q cut.tar.gz -o r && err_has "cut.tar.gz"
'

test_expect_success "a run that fails: exit 1 naming it, no bundle, no staging folder" '
	expect_exit 1 coli-profile datapoint -q "$SCRATCH/none.coli" -n 2 --no-drop-caches -o bad.tar.gz &&
	err_has "cold run" && test ! -e bad.tar.gz && test -z "$(ls -d bad.tar.gz.* 2>/dev/null)" &&
	expect_exit 2 coli-profile datapoint && err_has "no MODEL.coli given"
'

test_done
