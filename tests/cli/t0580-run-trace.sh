#!/usr/bin/env bash
# t0580-run-trace.sh: coli-run --trace FILE: a .coli_trace whose spans tile every forward call
# (their sum within 1% of the call, no gap), one outcome per expert got, the streamed bytes and
# the store's counters in agreement with --json; no file when the run fails.
. "$(dirname "$0")/lib.sh"

F=$FIX/qwen3_moe-tiny
M=$SCRATCH/qwen3_moe.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"
# qwen3_moe-tiny: 4 layers, all MoE
get() { coli-json "$@" <stat; }

test_expect_success "convert the fixture" '
	coli-convert -q "$F/checkpoint" "$M" && cp -r "$M" "$SCRATCH/m1.coli"
'
test_expect_success "in RAM: one prefill and 15 decode calls, spans tile each call, a pin per routed expert" '
	coli-run -q -m "$M" --prompt-ids "$P" -n 16 --ignore-eos --print-ids --trace t.coli_trace >ids &&
	test -s t.coli_trace && test ! -e t.coli_trace.tmp &&
	coli-tracestat t.coli_trace >stat &&
	test "$(get prefill_calls decode_calls span_gaps | tr "\n" " ")" = "1 15 0 " &&
	awk "BEGIN { exit !($(get worst_sum_error) <= 0.01) }" &&
	test "$(get outcomes.hit outcomes.miss reads | tr "\n" " ")" = "0 0 0 " &&
	test "$(get outcomes.pin)" -ge $((15 * 4 * $(get top_k))) &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 16 --ignore-eos --print-ids >plain &&
	cmp ids plain
'
test_expect_success "streamed (prefill only): the reads and outcomes of the trace equal the counters of the store" '
	coli-run -m "$M" --prompt-ids "$P" --teacher-force --cache-slots 8 --prefetch off --json \
		--trace s.coli_trace >json &&
	coli-tracestat s.coli_trace >stat &&
	hits=$(coli-json stream.hits <json) && misses=$(coli-json stream.misses <json) &&
	mib=$(coli-json stream.disks.0.mib_read <json) &&
	test "$(($(get outcomes.hit) + $(get outcomes.pin)))" = "$hits" &&
	test "$(($(get outcomes.miss) + $(get outcomes.prefetched)))" = "$misses" &&
	test "$(get outcomes.prefetched)" -gt 0 &&
	awk "BEGIN { exit !($(get read_bytes) == $mib * 1048576) }" &&
	test "$(coli-json trace <json)" = s.coli_trace
'
test_expect_success "streamed decode with prediction and a mirror: I/O wait spans, predicted outcomes, two copies" '
	coli-run -q -m "$M" --mirror "$SCRATCH/m1.coli" --prompt-ids "$P" -n 16 --ignore-eos --print-ids \
		--cache-slots 8 --trace p.coli_trace >ids &&
	coli-run -q -m "$M" --prompt-ids "$P" -n 16 --ignore-eos --print-ids >plain &&
	cmp ids plain &&
	coli-tracestat p.coli_trace >stat &&
	test "$(get copies span_gaps | tr "\n" " ")" = "2 0 " &&
	awk "BEGIN { exit !($(get worst_sum_error) <= 0.01 && $(get span_seconds.io_wait) > 0) }" &&
	test "$(($(get outcomes.predicted) + $(get outcomes.predict_wasted)))" -gt 0 &&
	test "$(get reads_failed)" = 0
'
test_expect_success "the trace metadata holds the command line as given (before the option parse reorders it)" '
	coli-run -q -m "$M" --prompt-ids "1 2" -n 2 --print-ids --trace a.coli_trace >/dev/null &&
	grep -a -q "\"argv\":\[\"[^\"]*coli-run\",\"-q\",\"-m\",\"$M\",\"--prompt-ids\",\"1 2\",\"-n\",\"2\"" a.coli_trace
'
test_expect_success "a run that fails leaves no trace and no temporary" '
	expect_exit 2 coli-run -q -m "$M" --prompt-ids "$P" -n 5000 --ctx 30 --trace f.coli_trace &&
	test ! -e f.coli_trace && test ! -e f.coli_trace.tmp
'
test_expect_success "a trace in a folder that does not exist: exit 1 naming it" '
	expect_exit 1 coli-run -q -m "$M" --prompt-ids "1 2" -n 2 --trace nowhere/t.coli_trace &&
	err_has "nowhere/t.coli_trace"
'
test_expect_success "a damaged trace is refused by the reader, naming the file" '
	coli-run -q -m "$M" --prompt-ids "1 2" -n 4 --trace d.coli_trace --print-ids >/dev/null &&
	size=$(wc -c <d.coli_trace) && printf "\377\377\377\377" | dd of=d.coli_trace bs=1 seek=$((size / 2 + 64)) conv=notrunc 2>/dev/null &&
	test_must_fail coli-tracestat d.coli_trace 2>err && grep -q "d.coli_trace" err
'

test_done
