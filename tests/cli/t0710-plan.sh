#!/usr/bin/env bash
# t0710-plan.sh: coli-plan MODEL.coli (budget split, per-layer cache and pins, knobs, --explain)
# and coli-run --plan (executes it with the RAM tokens, reports predicted against measured,
# refuses another container's or machine's plan, a knob out of range, an unknown knob, a
# planned option given again). The plan's knob list is checked against coli-run's options.
# Budgets of 0.1161 GiB: 0.1 beside the tables of the models' Qwen3 tokenizer (16.5 MiB), which
# the budget counts.
. "$(dirname "$0")/lib.sh"

M=$SCRATCH/m.coli
P="1 2 3 4 5 6 7 8"
PL=$SCRATCH/plan.json
j() { tr -d "\n" <"${J:-$PL}" | coli-json "$@"; }

test_expect_success "setup: a qwen3_moe model of 4 x 64 experts, its usage, this machine's probe" '
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck" --layers 4 --experts 64 --top-k 4 --hidden 128 \
		--expert-ffn 256 --measure 0 &&
	coli-convert -q "$SCRATCH/ck" "$M" &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 48 --ignore-eos --print-ids --stream --usage "$SCRATCH/u" >/dev/null &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1,4 --disk "$SCRATCH" -o "$SCRATCH/probe.json"
'

test_expect_success "every knob a plan can set is an option of coli-run" '
	sed -n "/coli_plan_knobs\[\] = {/,/};/p" "$TOP/formats/plan.c" | grep -o "\"[a-z-]*\"" | tr -d "\"" >knobs &&
	test "$(wc -l <knobs)" -ge 9 &&
	coli-run --help >help &&
	while read -r k; do grep -q -- "--$k " help || { echo "coli-run has no --$k" >&2; exit 1; }; done <knobs
'

test_expect_success "a budget the experts fit in: no streaming, threads and ctx only" '
	coli-plan -q "$M" --probe "$SCRATCH/probe.json" --ram 4 &&
	J=plan.json && test "$(j knobs.threads)" -ge 1 && test "$(j knobs.ctx)" = 4096 &&
	test "$(j knobs.ram 2>/dev/null)" = "" &&
	test "$(j predicted.hit_rate)" = 1.0 && test "$(j container.path)" = "$M" &&
	test "$(j machine.disks.0.dir)" = "$M"
'

test_expect_success "a tight budget: per-layer caches within it, pins from the usage, --explain gives reasons" '
	coli-plan "$M" --probe "$SCRATCH/probe.json" --usage "$SCRATCH/u" --ram 0.1161 --ctx 1024 --explain -o "$PL" >out &&
	grep -q "^cache-slots [0-9.]*: " out && grep -q "^pins [0-9]*: " out && grep -q "^prefetch o[nf]*: predicted" out &&
	grep -q "^warm [0-9.]* tok/s: disk" out &&
	awk "BEGIN { exit !($(j knobs.ram) == 0.1161) }" && test "$(j knobs.usage)" = "$SCRATCH/u" &&
	n=$(j knobs.cache-slots | tr , "\n" | wc -l) && test $n = 1 -o $n = 4 &&
	for l in 0 1 2 3; do
		c=$(j layers.$l.cache) && p=$(j layers.$l.pins) && test $c -ge 4 && test $c -le 64 && test $((c - p)) -ge 4 || exit 1
	done &&
	awk "BEGIN { exit !($(j predicted.hit_rate) > 0 && $(j predicted.hit_rate) < 1) }"
'

test_expect_success "a plan without usage pins nothing and says why" '
	coli-plan "$M" --probe "$SCRATCH/probe.json" --ram 0.1161 --ctx 1024 --explain -o p0.json >out &&
	grep -q "^pins 0: no --usage" out && J=p0.json && test "$(j knobs.pins 2>/dev/null)" = ""
'

test_expect_success "coli-run --plan: the RAM tokens, the planned cache, predicted against measured" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 24 --ignore-eos --print-ids >ram &&
	cp "$SCRATCH/u" u0 &&
	coli-run -m "$M" --plan "$PL" --prompt-ids "$P" -n 24 --ignore-eos --print-ids --json >out 2>err &&
	cp u0 "$SCRATCH/u" &&
	head -1 out >ids && cmp ram ids &&
	tail -1 out >js &&
	test "$(coli-json store <js)" = stream &&
	awk "BEGIN { exit !($(coli-json ram_budget.gib <js) == 0.1161) }" &&
	test "$(coli-json plan.path <js)" = "$PL" &&
	awk "BEGIN { exit !($(coli-json plan.predicted.tokens_per_s <js) > 0 && $(coli-json plan.measured.hit_rate <js) > 0) }" &&
	coli-run -m "$M" --plan "$PL" --prompt-ids "$P" -n 4 --ignore-eos --print-ids >/dev/null 2>err &&
	cp u0 "$SCRATCH/u" &&
	grep -q "^coli-run: plan $PL: predicted [0-9.]* tok/s warm ([0-9.]* cold), hit rate [0-9.]*%; measured" err
'

test_expect_success "a container with an MTP layer: the plan sets --draft auto, and coli-run --plan runs it with the tokens of --draft 0" '
	coli-synth -q --family deepseek_v3 --out "$SCRATCH/ds" --layers 3 --experts 16 --top-k 2 --hidden 64 --mtp 1 \
		--measure 0 &&
	coli-convert -q "$SCRATCH/ds" ds.coli &&
	coli-plan "$(pwd)/ds.coli" --probe "$SCRATCH/probe.json" --explain -o d.json >out &&
	grep -q "^draft auto: 1 MTP layer(s)" out && J=d.json && test "$(j knobs.draft)" = auto &&
	coli-run -q -m ds.coli --prompt-ids "1 2 3" -n 12 --ignore-eos --print-ids --draft 0 >plain &&
	coli-run -q -m ds.coli --plan d.json --prompt-ids "1 2 3" -n 12 --ignore-eos --print-ids >planned &&
	cmp plain planned &&
	J="$PL" && test "$(j knobs.threads)" -ge 1 && test "$(j knobs.draft 2>/dev/null)" = ""
'

test_expect_success "coli-run --plan refuses a planned option given again (exit 2)" '
	expect_exit 2 coli-run -m "$M" --plan "$PL" --prompt-ids "$P" -n 2 --threads 1 &&
	err_has "coli-run: --threads: $PL sets it (knobs.threads); give one or the other"
'

test_expect_success "coli-run --plan refuses another container's plan (exit 1)" '
	coli-synth -q --family qwen3_moe --out "$SCRATCH/ck2" --layers 3 --experts 64 --top-k 4 --hidden 128 \
		--expert-ffn 256 --measure 0 &&
	coli-convert -q "$SCRATCH/ck2" "$SCRATCH/m2.coli" &&
	expect_exit 1 coli-run -m "$SCRATCH/m2.coli" --plan "$PL" --prompt-ids "$P" -n 2 &&
	err_has "$PL: container.identity: the plan is for container"
'

test_expect_success "coli-run --plan refuses another machine, an unknown knob, a knob out of range (exit 1)" '
	sed "s/\"cpu_model\": \"[^\"]*\"/\"cpu_model\": \"Other CPU\"/" "$PL" >other.json &&
	expect_exit 1 coli-run -m "$M" --plan other.json --prompt-ids "$P" -n 2 &&
	err_has "other.json: cpu_model '\''Other CPU'\'' is not this machine" &&
	sed "s/\"threads\":/\"frob\": 1, \"threads\":/" "$PL" >frob.json &&
	expect_exit 1 coli-run -m "$M" --plan frob.json --prompt-ids "$P" -n 2 && err_has "frob.json: knobs.frob: not an option" &&
	sed "s/\"threads\": [0-9]*/\"threads\": 0/" "$PL" >zero.json &&
	expect_exit 1 coli-run -m "$M" --plan zero.json --prompt-ids "$P" -n 2 && err_has "zero.json: knobs.threads: --threads: '\''0'\''" &&
	expect_exit 1 coli-run -m "$M" --plan missing.json --prompt-ids "$P" -n 2 && err_has "missing.json"
'

test_expect_success "coli-plan refusals: a budget below the minimum says how much (2), another container's usage (1), no probe (1), a folder not probed (1, as documented)" '
	expect_exit 2 coli-plan "$M" --probe "$SCRATCH/probe.json" --ram 0.01 && err_has "--ram 0.01: needs at least" &&
	coli-run -q -m "$SCRATCH/m2.coli" --prompt-ids "$P" -n 2 --usage u2 --stream --print-ids >/dev/null &&
	expect_exit 1 coli-plan "$M" --probe "$SCRATCH/probe.json" --usage u2 && err_has "u2" &&
	expect_exit 1 coli-plan "$M" --probe nothere.json && err_has "nothere.json" &&
	mkdir -p /dev/shm/coli-t0710 && cp -r "$M" /dev/shm/coli-t0710/ &&
	expect_exit 1 coli-plan "$M" --probe "$SCRATCH/probe.json" --mirror /dev/shm/coli-t0710/m.coli;
	rc=$?; rm -rf /dev/shm/coli-t0710; test $rc = 0 && err_has "which $SCRATCH/probe.json has not measured"
'

test_done
