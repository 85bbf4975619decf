#!/usr/bin/env bash
# t0570-run-limits.sh: shapes beyond the sizes the forward pass once had fixed arrays for (top_k
# above 32 and 64, more than 1024 expert groups) run exactly: each greedy decode token (the
# one-token path) is the argmax of the teacher-forced logits (the batched path) at its position,
# in RAM and streamed. The configs are coli-synth's with the field raised in config.json.
. "$(dirname "$0")/lib.sh"

V=512
# argmaxes FILE: the argmax of each row of V float32 logits, one line of ids.
argmaxes() {
	od -An -v -t f4 -w$((V * 4)) "$1" |
		awk '{ b = 1; for (i = 2; i <= NF; i++) if ($i + 0 > $b + 0) b = i; printf "%s%d", (NR > 1 ? " " : ""), b - 1 }'
}

# decode_matches_teacher MODEL: 6 greedy tokens after a 3-token prompt equal the teacher-forced
# argmaxes at positions 2..7, in RAM and at top_k cache slots.
decode_matches_teacher() {
	coli-run -q -m "$1" --prompt-ids "7 8 9" -n 6 --print-ids --ignore-eos >gen &&
	test "$(wc -w <gen)" = 6 &&
	coli-run -q -m "$1" --prompt-ids "7 8 9 $(cut -d" " -f1-5 gen)" --teacher-force --dump-logits tf.bin &&
	test "$(argmaxes tf.bin | cut -d" " -f3-)" = "$(cat gen)" &&
	coli-run -q -m "$1" --prompt-ids "7 8 9" -n 6 --print-ids --ignore-eos --stream --cache-slots 1 >s &&
	cmp gen s
}

synth() { # NAME FAMILY FIELD VALUE SYNTH-OPTIONS...
	local name=$1 fam=$2 field=$3 value=$4
	shift 4
	coli-synth -q --family "$fam" --out "$SCRATCH/$name" --layers 2 --no-tokenizer --vocab $V --measure 0 \
		--zipf 0 --hidden 32 --expert-ffn 16 --heads 2 --head-dim 16 "$@" &&
	sed -i "s/\"$field\": [0-9]*/\"$field\": $value/" "$SCRATCH/$name/config.json" &&
	grep -q "\"$field\": $value" "$SCRATCH/$name/config.json" &&
	coli-convert -q "$SCRATCH/$name" "$SCRATCH/$name.coli"
}

test_expect_success 'top_k 40 (above 32: one token'"'"'s products once overflowed a dispatch)' '
	synth k40 qwen3_moe num_experts_per_tok 40 --experts 64 --top-k 8 &&
	decode_matches_teacher "$SCRATCH/k40.coli"
'
test_expect_success 'top_k 72 (above 64: decode once skipped the routed experts)' '
	synth k72 qwen3_moe num_experts_per_tok 72 --experts 160 --top-k 8 &&
	decode_matches_teacher "$SCRATCH/k72.coli"
'
test_expect_success 'n_group 1040 (above 1024: the group scores once overflowed a stack array)' '
	synth g1040 deepseek_v3 n_group 1040 --experts 2080 --top-k 8 --dense-layers 1 --mtp 0 --predict 0.05 &&
	decode_matches_teacher "$SCRATCH/g1040.coli"
'

test_done
