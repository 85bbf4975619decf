#!/usr/bin/env bash
# t0325-synth-gguf-qwen35.sh: coli-synth --gguf of a qwen3_5_moe writes llama.cpp's "qwen35moe"
# GGUF (tests/gguf/check.mjs parses it), and llama.cpp (node-llama-cpp 3.21.1, make llama-deps)
# runs it as the same model as coli: on exact weights (F32 GGUF, 16-bit container) the same
# greedy ids and, teacher-forced, the same choice at every position (tests/gguf/agree.sh), with
# value heads grouped differently from key heads and two full-attention layers; a vocabulary the
# tokenizer fills (coli never chooses an id without a token, llama.cpp's sampler does). Refused: what
# llama.cpp's qwen35moe cannot hold. The llama.cpp part is skipped, saying so, without
# node-llama-cpp in build/llama.
. "$(dirname "$0")/lib.sh"
SHAPE="--family qwen3_5_moe --layers 6 --full-attn-interval 3 --experts 8 --top-k 2 --vocab 151669 --mtp 0 --measure 0 -q"
CHECK="node $TOP/tests/gguf/check.mjs"
LLAMA=${NODE_LLAMA_DIR:-$TOP/build/llama}

# types JSON NAME: how many tensors of ggml type NAME the check counted.
types() { sed "s/.*\"types\":{\([^}]*\)}.*/\1/" "$1" | tr , "\n" | sed -n "s/\"$2\":\([0-9]*\)/\1/p"; }

test_expect_success 'the GGUF: qwen35moe, matrices Q4_0, the small tensors F32; deterministic' '
	coli-synth $SHAPE --gguf a.gguf --threads 2 &&
	coli-synth $SHAPE --gguf b.gguf --threads 1 &&
	cmp a.gguf b.gguf &&
	$CHECK a.gguf >c.json &&
	grep -q "\"architecture\":\"qwen35moe\"" c.json && grep -q "\"tensors\":111," c.json &&
	test "$(types c.json Q4_0)" = 58 && test "$(types c.json F32)" = 53 &&
	coli-synth $SHAPE --gguf f.gguf --gguf-dense f32 --gguf-experts f32 &&
	$CHECK f.gguf >c.json && test "$(types c.json F32)" = 111 &&
	test_must_fail $CHECK a.gguf --ckpt . 2>err && grep -q "agree.sh" err
'

test_expect_success 'refused: an MTP layer, key and value head dims that differ' '
	expect_exit 2 coli-synth $SHAPE --mtp 1 --gguf x.gguf && err_has "--gguf" "MTP" &&
	expect_exit 2 coli-synth $SHAPE --linear-key-dim 32 --gguf x.gguf && err_has "--gguf" "key head dim 32" &&
	! test -e x.gguf
'

if [ -e "$LLAMA/node_modules/node-llama-cpp/package.json" ]; then
	test_expect_success 'llama.cpp runs the GGUF as coli runs the checkpoint: the same greedy ids' '
		coli-synth $SHAPE --out ck --gguf f.gguf --gguf-dense f32 --gguf-experts f32 &&
		coli-convert -q --dense-bits 16 --expert-bits 16 ck m.coli &&
		NODE_LLAMA_DIR=$LLAMA $TOP/tests/gguf/agree.sh m.coli f.gguf "$(seq 101 120 | tr "\n" " ")" 16 >out &&
		grep -q "the same 16 greedy ids" out
	'
	test_expect_success 'the check fails on a GGUF of another model (another seed)' '
		coli-synth $SHAPE --out ck --seed 1 &&
		coli-convert -q --dense-bits 16 --expert-bits 16 ck m.coli &&
		coli-synth $SHAPE --gguf f.gguf --seed 2 --gguf-dense f32 --gguf-experts f32 &&
		expect_exit 1 env NODE_LLAMA_DIR=$LLAMA $TOP/tests/gguf/agree.sh m.coli f.gguf "1 2 3 4" 8 &&
		grep -q "greedy ids differ" out
	'
else
	echo "SKIP $(basename "$0"): llama.cpp part: node-llama-cpp is not installed in $LLAMA (make llama-deps)"
fi

test_done
