#!/usr/bin/env bash
# t0840-profile-defects.sh: issue 23's coli-profile defects, each against the run that shows it:
# the report's tokens/s is coli-run's (the time between forward calls traced), a bundle's headline
# and its own report agree; the "more cache" replay is of the run's own policy (its hit rate at
# the run's cache is the run's, exactly, without prediction); a failing datapoint run shows
# coli-run's own messages; the knobs column names the options after --; a plan of another
# container is refused; and the cosmetic ones (messages, quoting, plots, null probe, RAM verdict).
. "$(dirname "$0")/lib.sh"

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/m.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"
# near A B: the two figures agree to 1e-6 (relative): the same run's records, not a timing
near() { awk "BEGIN { d = $1 - $2; if (d < 0) d = -d; exit !(d <= 1e-6 * $2 && $2 > 0) }" ||
	{ echo "near: $1 and $2 differ" >&2; return 1; }; }

test_expect_success "setup: the fixture converted, a synthetic model, a probe and a plan of the other" '
	coli-convert -q "$F/checkpoint" "$M" &&
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck" --layers 2 --experts 16 --top-k 2 --hidden 64 \
		--expert-ffn 64 --measure 0 --no-tokenizer &&
	coli-convert -q "$SCRATCH/ck" "$SCRATCH/other.coli" &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" -o "$SCRATCH/probe.json" &&
	coli-plan -q "$SCRATCH/other.coli" --probe "$SCRATCH/probe.json" --ram 0.1 --ctx 256 -o "$SCRATCH/other-plan.json"
'

test_expect_success "defect 6: the report's tokens/s and wall are coli-run's --json figures, between calls a part" '
	coli-run -m "$M" --prompt-ids "$P" -n 40 --ignore-eos --json --trace t.coli_trace --cache-slots 8 >run 2>/dev/null &&
	tail -n 1 run >run.json &&
	coli-profile report -q --json t.coli_trace -o rep >j &&
	near "$(coli-json phases.decode.tokens_per_s <j)" "$(coli-json decode.tokens_per_s <run.json)" &&
	near "$(coli-json phases.decode.wall_s <j)" "$(coli-json decode.seconds <run.json)" &&
	near "$(coli-json phases.prefill.tokens_per_s <j)" "$(coli-json prompt.tokens_per_s <run.json)" &&
	near "$(coli-json verdict.tokens_per_s <j)" "$(coli-json decode.tokens_per_s <run.json)" &&
	test "$(coli-json phases.decode.tokens <j)" = "$(coli-json decode.tokens <run.json)" &&
	awk "BEGIN { exit !($(coli-json phases.decode.parts_s.between_calls <j) > 0) }" &&
	test "$(coli-json trace_version <j)" = 3 &&
	grep -q "^| between calls |" rep/report.md && ! grep -q "version 1 trace" rep/report.md
'

test_expect_success "defect 6: the same in RAM and with prediction" '
	for opts in "" "--cache-slots 8 --prefetch on"; do
		coli-run -m "$M" --prompt-ids "$P" -n 30 --ignore-eos --json --trace p.coli_trace $opts >run 2>/dev/null &&
		tail -n 1 run >run.json && coli-profile report -q --json p.coli_trace -o rep >j &&
		near "$(coli-json phases.decode.tokens_per_s <j)" "$(coli-json decode.tokens_per_s <run.json)" || exit 1
	done
'

test_expect_success "defect 6: with drafts (--draft 2: calls of drafts and verifies), the tokens coli-run counted" '
	coli-convert -q "$FIX/deepseek_v3-tiny/checkpoint" ds.coli &&
	coli-run -m ds.coli --prompt-ids "1 2 3 4" -n 30 --ignore-eos --print-ids --json --draft 2 --trace dr.coli_trace \
		>run 2>/dev/null && tail -n 1 run >run.json && coli-profile report -q --json dr.coli_trace -o rep >j &&
	test "$(coli-json phases.decode.tokens <j)" = "$(coli-json decode.tokens <run.json)" &&
	test "$(coli-json phases.decode.calls <j)" -gt "$(coli-json decode.tokens <run.json)" &&
	near "$(coli-json phases.decode.tokens_per_s <j)" "$(coli-json decode.tokens_per_s <run.json)"
'

test_expect_success "defect 6: a bundle's headline and its own report agree" '
	coli-profile datapoint -q "$M" -n 12 --prompts 3 --prompt-len 8 --no-drop-caches -o dp.tar.gz -- --cache-slots 8 >row &&
	tar xzf dp.tar.gz manifest.json && tr -d "\n" <manifest.json >man.json &&
	coli-profile report -q --json dp.tar.gz -o rep >j &&
	near "$(coli-json phases.decode.tokens_per_s <j)" "$(coli-json headline.tokens_per_s <man.json)"
'

test_expect_success "defect 14: the replay is the run's policy; without prediction its hit rate at the run's cache is the run's" '
	for pol in lfu lru; do
		coli-run -q -m "$M" --prompt-ids "$P" -n 60 --ignore-eos --print-ids --trace $pol.coli_trace --cache-slots 8 \
			--cache-policy $pol --prefetch off >/dev/null &&
		coli-profile report -q --json $pol.coli_trace -o rep >j &&
		test "$(coli-json verdict.more_cache.policy verdict.more_cache.policy_from verdict.more_cache.slots <j | tr "\n" " ")" = \
			"$pol the trace'"'"'s metadata 8 " &&
		test "$(coli-json verdict.more_cache.replayed_hit_rate <j)" = "$(coli-json verdict.hit_rate <j)" &&
		coli-json verdict.text <j | grep -q "replayed through the run'"'"'s own cache, $(echo $pol | tr a-z A-Z) per layer" ||
			{ echo "policy $pol" >&2; exit 1; }
	done
'

test_expect_success "defect 14: pins from a usage file kept in the replay (LRU, no prediction: the run's hit rate)" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 30 --ignore-eos --print-ids --usage u.coli_usage >/dev/null &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 60 --ignore-eos --print-ids --trace d.coli_trace --cache-slots 8 \
		--usage u.coli_usage --pins 3 --cache-policy lru --prefetch off >/dev/null &&
	coli-profile report -q --json d.coli_trace -o rep >j &&
	test "$(coli-json verdict.more_cache.pins verdict.more_cache.policy <j | tr "\n" " ")" = "3 lru " &&
	test "$(coli-json verdict.more_cache.replayed_hit_rate <j)" = "$(coli-json verdict.hit_rate <j)"
'

test_expect_success "defect 9: a failing run shows coli-run's own messages, never a deleted staging file" '
	expect_exit 1 coli-profile datapoint "$SCRATCH/none.coli" -n 2 --no-drop-caches -o bad.tar.gz &&
	err_has "coli-run: $SCRATCH/none.coli" "cold run:" "exited 1" && ! grep -q "staging" err &&
	expect_exit 1 coli-profile datapoint -q "$M" -n 2 --no-drop-caches -o bad.tar.gz -- --cache-slots 0 &&
	err_has "coli-run: --cache-slots" && ! grep -q "staging" err && ! grep -q "^  -h, --help" err &&
	test ! -e bad.tar.gz && test -z "$(ls -d bad.tar.gz.* 2>/dev/null)"
'

test_expect_success "defect 10: the knobs column names the options after -- (defaults only without any)" '
	coli-profile datapoint -q "$M" -n 2 --prompts 1 --prompt-len 4 --no-drop-caches -o a.tar.gz -- --cache-slots 8 \
		--cache-policy lru >row &&
	grep -q "| --cache-slots 8 --cache-policy lru |" row && ! grep -q defaults row &&
	coli-profile datapoint -q "$M" -n 2 --prompts 1 --prompt-len 4 --no-drop-caches -o b.tar.gz >row &&
	grep -q "| defaults |" row
'

test_expect_success "defect 11: report --plan of another container is refused naming the identities (exit 1)" '
	coli-run -q -m "$M" --prompt-ids "1 2" -n 3 --print-ids --trace s.coli_trace >/dev/null &&
	expect_exit 1 coli-profile report -q s.coli_trace --plan "$SCRATCH/other-plan.json" -o r &&
	err_has "other-plan.json: container.identity: the plan is for container" "s.coli_trace ran container" &&
	test ! -e r/report.md
'

test_expect_success "cosmetic: cannot open says why; unknown subcommand named; a non-gzip .tar.gz is not bad magic" '
	expect_exit 1 coli-profile report -q nothing.coli_trace && err_has "nothing.coli_trace: cannot open: No such file" &&
	expect_exit 2 coli-profile frob && err_has "unknown subcommand '"'"'frob'"'"'" &&
	echo "not a bundle" >x.tar.gz && expect_exit 1 coli-profile report -q x.tar.gz &&
	err_has "x.tar.gz: not gzip data" && ! grep -q "bad magic" err
'

test_expect_success "cosmetic: datapoint progress, each run on stderr; commands.sh names the bundle's members" '
	coli-profile datapoint "$M" -n 2 --prompts 1 --prompt-len 4 --no-drop-caches -o c.tar.gz 2>err >row &&
	err_has "run 1 of 3 (cold)..." "run 3 of 3 (rotate-1)..." "tokens/s" "bundle c.tar.gz" &&
	tar xzf c.tar.gz -O commands.sh >cmds && grep -q "'"'"'--trace'"'"' '"'"'traces/cold.coli_trace'"'"'" cmds &&
	grep -q ">'"'"'runs/cold.json'"'"' 2>'"'"'runs/cold.stderr'"'"'" cmds && ! grep -q staging cmds
'

test_expect_success "cosmetic: the report's Command: line keeps the quoting" '
	coli-run -q -m "$M" --prompt-ids "1 2" -n 3 --print-ids --trace q.coli_trace >/dev/null &&
	coli-profile report -q q.coli_trace -o rq && grep -q -- "--prompt-ids '"'"'1 2'"'"' -n 3" rq/report.md
'

test_expect_success "cosmetic: no probe is null in --json; a RAM run offers no faster disk" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 8 --ignore-eos --print-ids --trace ram.coli_trace >/dev/null &&
	coli-profile report -q --json ram.coli_trace -o rr >j &&
	test "$(coli-json disks.0.probe_mb_per_s <j)" = null &&
	! coli-json verdict.text <j | grep -q "disk 2x" && coli-json verdict.text <j | grep -q "No I/O wait"
'

test_expect_success "cosmetic: replay.png, one colour per policy; predicted.png, warm and cold plan, not clipped" '
	command -v gnuplot >/dev/null || { echo "no gnuplot: skipped" >&2; exit 0; }
	coli-run -q -m "$M" --prompt-ids "$P" -n 20 --ignore-eos --print-ids --cache-slots 8 --trace r.coli_trace >/dev/null &&
	coli-profile replay r.coli_trace -o rp >/dev/null &&
	test "$(grep -o "lc rgb \"#[0-9a-f]*\"" rp/replay.gp | sort | uniq -c | wc -l)" = 16 &&
	test "$(grep -o "lc rgb \"#[0-9a-f]*\"" rp/replay.gp | wc -l)" = 32 &&
	coli-run -q -m "$SCRATCH/other.coli" --plan "$SCRATCH/other-plan.json" --prompt-ids "1 2 3" -n 6 --ignore-eos \
		--print-ids --trace o.coli_trace >/dev/null &&
	coli-profile report -q o.coli_trace --plan "$SCRATCH/other-plan.json" -o ro &&
	test "$(wc -l <ro/predicted.dat)" = 4 && test "$(sed "s/^\"[^\"]*\"//" ro/predicted.dat | awk "{ print NF }" | sort -u)" = 3 &&
	grep -q "title \"plan, cold\"" ro/plots.gp &&
	top=$(sed -n "/predicted.png/,/unset output/p" ro/plots.gp | sed -n "s/^set yrange \[0:\(.*\)\]/\1/p") &&
	max=$(sed "s/^\"[^\"]*\"//" ro/predicted.dat | awk "{ for (i = 1; i <= NF; i++) if (\$i > m) m = \$i } END { print m }") &&
	awk "BEGIN { exit !($top > $max) }"
'

test_done
