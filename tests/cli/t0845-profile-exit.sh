#!/usr/bin/env bash
# t0845-profile-exit.sh: docs/coli-profile.md's exit-status table, each documented status run for
# each subcommand: 0 success; 1 bad data or I/O (a trace, bundle, probe or plan that does not read,
# a plan of another container, a file that cannot be opened, a run or command that fails); 2 usage.
# 130 and 143 (a datapoint ended by SIGINT or SIGTERM): t0850-profile-signals.sh.
. "$(dirname "$0")/lib.sh"

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/m.coli
T=$SCRATCH/t.coli_trace
OK='echo "{\"decode\":{\"tokens_per_s\":5}}"'

test_expect_success "setup: the fixture converted, a run traced" '
	coli-convert -q "$F/checkpoint" "$M" &&
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 6 --ignore-eos --print-ids --cache-slots 8 --trace "$T" >/dev/null
'

test_expect_success "0: success, every subcommand (and --help)" '
	expect_exit 0 coli-profile --help && expect_exit 0 coli-profile report --help &&
	expect_exit 0 coli-profile report -q "$T" -o rep && test -s rep/report.md &&
	expect_exit 0 coli-profile replay --slots 4,8 "$T" &&
	expect_exit 0 coli-profile datapoint -q "$M" -n 2 --prompts 1 --prompt-len 4 --no-drop-caches -o dp.tar.gz &&
	expect_exit 0 coli-profile report -q dp.tar.gz -o rep2 &&
	expect_exit 0 coli-profile compare -q -r 1 "$OK" "$OK"
'

test_expect_success "1: bad data (a truncated trace, a foreign file, a damaged bundle, a plan that does not read)" '
	head -c 300 "$T" >cut.coli_trace && expect_exit 1 coli-profile report -q cut.coli_trace -o r && err_has "truncated" &&
	echo "a,b" >x.csv && expect_exit 1 coli-profile replay x.csv && err_has "x.csv" &&
	echo junk >x.tar.gz && expect_exit 1 coli-profile report -q x.tar.gz -o r && err_has "not gzip data" &&
	printf "{\"format\": \"coli-plan\"}" >plan.json && expect_exit 1 coli-profile report -q "$T" --plan plan.json -o r &&
	err_has "plan.json"
'

test_expect_success "1: I/O (a file that cannot be opened), a run or a command that fails" '
	expect_exit 1 coli-profile report -q none.coli_trace && err_has "none.coli_trace: cannot open" &&
	expect_exit 1 coli-profile replay none.coli_trace && err_has "none.coli_trace: cannot open" &&
	expect_exit 1 coli-profile datapoint -q "$SCRATCH/none.coli" -n 2 --no-drop-caches -o bad.tar.gz &&
	err_has "cold run" && test ! -e bad.tar.gz &&
	expect_exit 1 coli-profile compare -q -r 1 "$OK" false && err_has "B"
'

test_expect_success "2: usage, every subcommand" '
	expect_exit 2 coli-profile && err_has "no subcommand given" &&
	expect_exit 2 coli-profile frob && err_has "unknown subcommand" &&
	expect_exit 2 coli-profile report && err_has "no TRACE or BUNDLE given" &&
	expect_exit 2 coli-profile report "$T" --frob && expect_exit 2 coli-profile replay &&
	expect_exit 2 coli-profile replay --slots x "$T" &&
	expect_exit 2 coli-profile datapoint && err_has "no MODEL.coli given" &&
	expect_exit 2 coli-profile datapoint "$M" -n 0 &&
	expect_exit 2 coli-profile compare "$OK" && expect_exit 2 coli-profile compare -r 0 "$OK" "$OK"
'

test_done
