#!/usr/bin/env bash
# t0320-synth-gguf.sh: coli-synth --gguf writes a valid llama.cpp GGUF of the checkpoint's own
# weights (tests/gguf/check.mjs parses it independently and compares values with the safetensors
# written in the same run), deterministic whatever the thread count, Q4_1 experts on request, and
# refuses what it cannot write.
. "$(dirname "$0")/lib.sh"
SHAPE="--family qwen3_moe --layers 2 --experts 8 --top-k 2 --measure 0 -q"
CHECK="node $TOP/tests/gguf/check.mjs"

# types JSON NAME: how many tensors of ggml type NAME the check counted.
types() { sed "s/.*\"types\":{\([^}]*\)}.*/\1/" "$1" | tr , "\n" | sed -n "s/\"$2\":\([0-9]*\)/\1/p"; }

test_expect_success 'the GGUF holds the checkpoint values (Q4_0, routers and norms F32) and its tokenizer' '
	coli-synth $SHAPE --out ck --gguf m.gguf --threads 2 &&
	$CHECK m.gguf --ckpt ck --rows 16 >c.json &&
	grep -q "\"architecture\":\"qwen3moe\"" c.json &&
	grep -q "\"tensors\":27," c.json && grep -q "\"tokens\":151680," c.json &&
	grep -q "\"merges\":151387," c.json &&
	test "$(types c.json Q4_0)" = 16 && test "$(types c.json F32)" = 11 &&
	! ls | grep -q tmp
'

test_expect_success 'the same bytes with one thread and without --out' '
	coli-synth $SHAPE --out ck --gguf a.gguf --threads 2 &&
	coli-synth $SHAPE --gguf b.gguf --threads 1 &&
	cmp a.gguf b.gguf &&
	coli-synth $SHAPE --gguf c.gguf --seed 3 &&
	! cmp -s a.gguf c.gguf
'

test_expect_success '--gguf-experts q4_1: the routed experts Q4_1, the rest unchanged' '
	coli-synth $SHAPE --out ck --gguf q.gguf --gguf-experts q4_1 &&
	$CHECK q.gguf --ckpt ck >c.json &&
	test "$(types c.json Q4_1)" = 6 && test "$(types c.json Q4_0)" = 10
'

test_expect_success 'rows that are not a multiple of 32 values stay F32' '
	coli-synth $SHAPE --out ck --gguf f.gguf --expert-ffn 72 &&
	$CHECK f.gguf --ckpt ck >c.json &&
	test "$(types c.json F32)" = 13
'

test_expect_success 'the check fails on a damaged file' '
	coli-synth $SHAPE --gguf m.gguf &&
	head -c 100000 m.gguf >cut.gguf &&
	test_must_fail $CHECK cut.gguf &&
	printf "GGUF\004" | dd of=m.gguf bs=1 conv=notrunc 2>/dev/null &&
	test_must_fail $CHECK m.gguf
'

test_expect_success 'refused: another family, no tokenizer, an unknown type, with --measure-only' '
	expect_exit 2 coli-synth --family olmoe --layers 2 --measure 0 --gguf x.gguf && err_has "--gguf" "olmoe" &&
	expect_exit 2 coli-synth $SHAPE --no-tokenizer --gguf x.gguf && err_has "tokenizer" &&
	expect_exit 2 coli-synth $SHAPE --gguf x.gguf --gguf-experts q8_0 && err_has "--gguf-experts" &&
	expect_exit 2 coli-synth --measure-only . --gguf x.gguf && err_has "--gguf" &&
	! test -e x.gguf
'

test_expect_success 'a write that fails leaves no file behind (exit 1)' '
	expect_exit 1 coli-synth $SHAPE --gguf nodir/x.gguf && err_has "nodir/x.gguf.tmp" &&
	! test -e nodir
'

test_done
