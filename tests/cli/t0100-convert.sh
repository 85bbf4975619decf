#!/usr/bin/env bash
# t0100-convert.sh: coli-convert converts every fixture, and refuses every bad input cleanly
# (exit 1 for bad data, 2 for bad usage) with a message naming the file and the field, leaving
# nothing that looks finished (no manifest.coli) in the output folder.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
SQ="'"
Q=qwen3_moe-tiny
S1=model-00001-of-00002.safetensors
S2=model-00002-of-00002.safetensors
FIXTURES="deepseek_v3-fp8-tiny deepseek_v3-tiny glm4_moe-tiny mixtral-tiny olmoe-tiny qwen3_moe-tiny"

# ---- helpers --------------------------------------------------------------------------------

# src NAME: a writable copy of fixture NAME's checkpoint in ./src.
src() {
	cp -R "$FIX/$1/checkpoint" src && chmod -R u+w src
}

. "$(dirname "$0")/safetensors.sh"

# ---- conversion -----------------------------------------------------------------------------

tensors_of() {
	case $1 in
	deepseek_v3*) echo "77 tensors, 64 expert records" ;;
	glm4_moe-tiny) echo "87 tensors, 64 expert records" ;;
	mixtral-tiny) echo "31 tensors, 32 expert records" ;;
	olmoe-tiny) echo "39 tensors, 64 expert records" ;;
	qwen3_moe-tiny) echo "39 tensors, 128 expert records" ;;
	esac
}

# Later fields (e.g. peak RSS) may follow GiB/s; "(resumed)" ends a resumed run's line.
SUMMARY='^out\.coli: [0-9]+ tensors, [0-9]+ expert records, [0-9]+\.[0-9]{3} GiB in, [0-9]+\.[0-9]{3} GiB out, [0-9]+\.[0-9]{2} bits/weight, [0-9]+\.[0-9] s, [0-9]+\.[0-9]{2} GiB/s(, [^,]+)*$'

for f in $FIXTURES; do
	family=${f%-tiny}
	family=${family%-fp8}
	test_expect_success "converts $f, summary on stdout, --verify and --info" '
		coli-convert "$FIX/$f/checkpoint" out.coli >out 2>err &&
		test ! -s err &&
		test $(wc -l <out) -eq 1 &&
		grep -E "$SUMMARY" out &&
		grep -F "out.coli: $(tensors_of $f), " out &&
		ls out.coli >files &&
		ls "$FIX/$f/checkpoint" | grep -E "^(config|generation_config)\.json$" >expect &&
		printf "%s\n" dense.bin experts.bin manifest.coli mtp.bin >>expect &&
		sort -o expect expect &&
		cmp expect files &&
		coli-convert --verify out.coli >out 2>err &&
		test ! -s err &&
		grep -E "^out\.coli: ok: $(tensors_of $f), [0-9]+ carried files, [0-9.]+ (B|KiB|MiB|GiB|TiB) verified$" out &&
		coli-convert --info out.coli >info &&
		grep -E "^family +$family$" info &&
		grep -E "^layers +[0-9]+ \([0-9]+ dense, [0-9]+ MoE\) \+ [0-9]+ MTP$" info &&
		grep -E "^bits +expert 4, dense 4, mtp 8 " info &&
		grep -E "^record +[0-9]+ bytes \(gate q4 \[[0-9]+, [0-9]+\], up q4, down q4 \[[0-9]+, [0-9]+\]; parts [0-9]+ bytes, 4\.[0-9]+ bits a weight\), 4096-aligned$" info
	'
done

test_expect_success '--info: layer counts of deepseek_v3 and qwen3_moe' '
	coli-convert -q "$FIX/deepseek_v3-tiny/checkpoint" d.coli &&
	coli-convert -q "$FIX/$Q/checkpoint" q.coli &&
	coli-convert --info d.coli >d &&
	coli-convert --info q.coli >q &&
	grep -E "^layers +4 \(1 dense, 3 MoE\) \+ 1 MTP$" d &&
	grep -E "^layers +4 \(0 dense, 4 MoE\) \+ 0 MTP$" q
'

test_expect_success '-q prints nothing, for convert and --verify' '
	coli-convert -q "$FIX/$Q/checkpoint" out.coli >out 2>err &&
	test ! -s out && test ! -s err &&
	coli-convert --quiet --verify out.coli >out 2>err &&
	test ! -s out && test ! -s err
'

test_expect_success '--expert-bits/--dense-bits/--mtp-bits: each width converts and verifies' '
	for b in "8 16 4" "16 8 16" "4 16 8"; do
		set -- $b &&
		rm -rf out.coli &&
		coli-convert -q --expert-bits $1 --dense-bits $2 --mtp-bits $3 \
			"$FIX/deepseek_v3-fp8-tiny/checkpoint" out.coli &&
		coli-convert -q --verify out.coli &&
		coli-convert --info out.coli >info &&
		grep -E "^bits +expert $1, dense $2, mtp $3 " info || return 1
	done
'

test_expect_success 'output does not depend on --threads' '
	coli-convert -q --threads 1 "$FIX/glm4_moe-tiny/checkpoint" a.coli &&
	coli-convert -q --threads 7 "$FIX/glm4_moe-tiny/checkpoint" b.coli &&
	for f in a.coli/*; do cmp "$f" "b.coli/${f#a.coli/}" || return 1; done &&
	test "$(ls a.coli)" = "$(ls b.coli)"
'

test_expect_success 'a single-file checkpoint (model.safetensors) converts like the sharded one' '
	src $Q &&
	mkdir one &&
	cp src/config.json one/ &&
	o=0 &&
	for s in $S1 $S2; do
		st_header src/$s | grep -o "\"[^\"]*\":{[^}]*}" | grep -v "^\"__metadata__\"" |
			sed -E "s/\[([0-9]+),([0-9]+)\]}\$/ \1 \2/" |
			awk -v o=$o "{ printf \",%s[%d,%d]}\", \$1, \$2 + o, \$3 + o }" >>entries &&
		o=$((o + $(stat -c %s src/$s) - 8 - $(st_hlen src/$s))) || return 1
	done &&
	printf "{%s}" "$(tail -c +2 entries)" >header &&
	{
		le64 $(stat -c %s header) && cat header &&
		for s in $S1 $S2; do tail -c +$((9 + $(st_hlen src/$s))) src/$s || return 1; done
	} >one/model.safetensors &&
	test $(grep -o "data_offsets" header | wc -l) -eq 423 &&
	coli-convert -q src a.coli &&
	coli-convert -q one b.coli &&
	for f in dense.bin mtp.bin experts.bin; do cmp a.coli/$f b.coli/$f || return 1; done
'

# ---- bad safetensors files ------------------------------------------------------------------

test_expect_success 'truncated shard: names the shard, the tensor and data_offsets' '
	src $Q &&
	truncate -s -1000 src/$S2 &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S2: tensor " "data_offsets: end " "exceeds data size" &&
	test ! -s out && no_manifest out.coli
'

test_expect_success 'header length past the end of the file' '
	src $Q &&
	truncate -s 100 src/$S1 &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S1: header length $(st_hlen src/$S1) exceeds the 92 bytes after the 8-byte length prefix (file size 100)" &&
	no_manifest out.coli
'

test_expect_success 'header length over the 100 MiB bound' '
	src $Q &&
	le64 $((200 << 20)) | dd of=src/$S1 conv=notrunc status=none &&
	test $(st_hlen src/$S1) -eq $((200 << 20)) &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S1: header length 209715200 exceeds bound 104857600" &&
	no_manifest out.coli
'

test_expect_success 'header length 0' '
	src $Q &&
	poke src/$S2 0 "\x00\x00\x00\x00\x00\x00\x00\x00" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S2: header length 0" &&
	no_manifest out.coli
'

test_expect_success 'file shorter than the length prefix' '
	src $Q &&
	truncate -s 5 src/$S2 &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S2: file size 5 is smaller than the 8-byte header length" &&
	no_manifest out.coli
'

test_expect_success 'malformed header JSON' '
	src $Q &&
	poke src/$S1 8 "!" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S1: header: invalid JSON at line 1 column 1" &&
	no_manifest out.coli
'

test_expect_success 'header JSON is not an object' '
	src $Q &&
	st_write src/$S1 "[1,2,3]" 0 &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S1: header: JSON is not an object" &&
	no_manifest out.coli
'

test_expect_success 'unknown dtype (F64) names the shard, the tensor and dtype' '
	src $Q &&
	T=model.layers.0.input_layernorm.weight &&
	st_patch src/$S1 "\"$T\":{\"dtype\":\"BF16\"," "\"$T\":{\"dtype\":\"F64\" ," &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S1: tensor ${SQ}$T${SQ}: dtype ${SQ}F64${SQ} unknown" &&
	no_manifest out.coli
'

test_expect_success 'I32 weight: the model check names the tensor and the dtype' '
	src glm4_moe-tiny &&
	T=model.layers.1.mlp.gate.e_score_correction_bias &&
	shard=$(grep -F "\"$T\"" src/model.safetensors.index.json | sed "s/.*: \"\(.*\)\".*/\1/") &&
	st_patch src/$shard "\"$T\":{\"dtype\":\"F32\"" "\"$T\":{\"dtype\":\"I32\"" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src: $T: dtype I32 not allowed (expected BF16, F16 or F32)" &&
	no_manifest out.coli
'

test_expect_success 'fp8: a scale_inv that is not F32' '
	src deepseek_v3-fp8-tiny &&
	T=model.layers.0.mlp.down_proj.weight_scale_inv &&
	st_patch src/$S1 "\"$T\":{\"dtype\":\"F32\"" "\"$T\":{\"dtype\":\"I32\"" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src: $T: dtype I32 expected F32" &&
	no_manifest out.coli
'

test_expect_success 'shape and data_offsets disagree' '
	src $Q &&
	T=model.layers.0.mlp.experts.0.down_proj.weight &&
	st_patch src/$S1 "\"$T\":{\"dtype\":\"BF16\",\"shape\":[64,64]" "\"$T\":{\"dtype\":\"BF16\",\"shape\":[64,32]" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S1: tensor ${SQ}$T${SQ}: shape [64, 32] x BF16 is 4096 bytes but data_offsets span 8192" &&
	no_manifest out.coli
'

test_expect_success 'overlapping data_offsets' '
	src $Q &&
	st_patch src/$S1 "\"data_offsets\":[65664,73856]" "\"data_offsets\":[65600,73792]" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S1: tensor " "overlap tensor " &&
	no_manifest out.coli
'

test_expect_success 'an unexpected field in a tensor entry' '
	src $Q &&
	T=model.layers.0.input_layernorm.weight &&
	st_patch src/$S1 "\"$T\":{\"dtype\"" "\"$T\":{\"dtypf\"" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S1: tensor ${SQ}$T${SQ}: unexpected field ${SQ}dtypf${SQ}" &&
	no_manifest out.coli
'

test_expect_success 'a tensor name twice in one header' '
	src $Q &&
	st_patch src/$S1 "\"model.layers.0.mlp.experts.1.down_proj.weight\"" "\"model.layers.0.mlp.experts.0.down_proj.weight\"" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S1: header: duplicate tensor name or field" &&
	no_manifest out.coli
'

test_expect_success 'a tensor in two shards' '
	src $Q &&
	st_patch src/$S2 "\"model.layers.2.mlp.experts.5.up_proj.weight\"" "\"model.layers.1.mlp.experts.5.up_proj.weight\"" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "tensor ${SQ}model.layers.1.mlp.experts.5.up_proj.weight${SQ} is in both shard ${SQ}$S1${SQ} and shard ${SQ}$S2${SQ}" &&
	no_manifest out.coli
'

# ---- index and tensor set -------------------------------------------------------------------

test_expect_success 'index: a shard tensor missing from weight_map is named' '
	src $Q &&
	T=model.layers.1.mlp.experts.3.up_proj.weight &&
	sed -i "/\"${T//./\\.}\"/d" src/model.safetensors.index.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/model.safetensors.index.json: tensor ${SQ}$T${SQ} of shard ${SQ}$S1${SQ} is not in weight_map" &&
	no_manifest out.coli
'

test_expect_success 'index: an entry for a tensor no shard holds' '
	src $Q &&
	sed -i "s/\"weight_map\": {/&\n    \"model.bogus.weight\": \"$S1\",/" src/model.safetensors.index.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/model.safetensors.index.json: tensor ${SQ}model.bogus.weight${SQ} not found in shard ${SQ}$S1${SQ}" &&
	no_manifest out.coli
'

test_expect_success 'index: a tensor filed under the wrong shard' '
	src $Q &&
	T=model.layers.0.mlp.experts.7.gate_proj.weight &&
	sed -i "/\"${T//./\\.}\"/s/$S1/$S2/" src/model.safetensors.index.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "tensor ${SQ}$T${SQ} not found in shard ${SQ}$S2${SQ} (it is in ${SQ}$S1${SQ})" &&
	no_manifest out.coli
'

test_expect_success 'index: a shard name that climbs out of the folder' '
	src $Q &&
	sed -i "/\"lm_head\.weight\"/s|\"$S2\"|\"../$S2\"|" src/model.safetensors.index.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "weight_map[${SQ}lm_head.weight${SQ}]: shard ${SQ}../$S2${SQ} is not a plain file name" &&
	no_manifest out.coli
'

test_expect_success 'index: invalid JSON names the index and the line' '
	src $Q &&
	sed -i "5s/: /; /" src/model.safetensors.index.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/model.safetensors.index.json: line 5 column" &&
	no_manifest out.coli
'

test_expect_success 'a shard the index names is not there' '
	src $Q &&
	rm src/$S2 &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/$S2: No such file or directory" &&
	no_manifest out.coli
'

test_expect_success 'missing tensor: renamed in shard and index, the expected name is reported' '
	src $Q &&
	T=model.layers.1.self_attn.o_proj.weight &&
	st_patch src/$S1 "\"$T\"" "\"${T%t}X\"" &&
	sed -i "s/\"${T//./\\.}\"/\"${T%t}X\"/" src/model.safetensors.index.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src: $T: missing (and 1 more)" &&
	no_manifest out.coli
'

test_expect_success 'extra tensor: an added shard with a tensor no model has' '
	src $Q &&
	st_write src/extra.safetensors "{\"model.extra.weight\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}" 4 &&
	sed -i "s/\"weight_map\": {/&\n    \"model.extra.weight\": \"extra.safetensors\",/" src/model.safetensors.index.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src: model.extra.weight: unexpected tensor" &&
	no_manifest out.coli
'

test_expect_success 'fp8: a weight without its scale_inv' '
	src deepseek_v3-fp8-tiny &&
	T=model.layers.0.mlp.down_proj.weight_scale_inv &&
	st_patch src/$S1 "\"$T\"" "\"${T%v}X\"" &&
	sed -i "s/\"${T//./\\.}\"/\"${T%v}X\"/" src/model.safetensors.index.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src: $T: missing (F8_E4M3 weight model.layers.0.mlp.down_proj.weight needs it)" &&
	no_manifest out.coli
'

test_expect_success 'MTP all or nothing: one MTP tensor missing' '
	src deepseek_v3-tiny &&
	T=model.layers.4.enorm.weight &&
	shard=$(grep -F "\"$T\"" src/model.safetensors.index.json | sed "s/.*: \"\(.*\)\".*/\1/") &&
	st_patch src/$shard "\"$T\"" "\"${T%t}X\"" &&
	sed -i "s/\"${T//./\\.}\"/\"${T%t}X\"/" src/model.safetensors.index.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src: $T: missing (MTP layers are all or nothing: " &&
	no_manifest out.coli
'

# ---- config.json ----------------------------------------------------------------------------

test_expect_success 'shape mismatch: moe_intermediate_size changed in config.json' '
	src $Q &&
	sed -i "s/\"moe_intermediate_size\": 64/\"moe_intermediate_size\": 48/" src/config.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src: model.layers.0.mlp.experts.0.gate_proj.weight: shape [64, 64] expected [48, 64]" &&
	no_manifest out.coli
'

test_expect_success 'shape mismatch: hidden_size changed in config.json' '
	src $Q &&
	sed -i "s/\"hidden_size\": 64/\"hidden_size\": 96/" src/config.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src: model.embed_tokens.weight: shape [512, 64] expected [512, 96]" &&
	no_manifest out.coli
'

test_expect_success 'unsupported family lists the supported ones' '
	src $Q &&
	sed -i "s/\"model_type\": \"qwen3_moe\"/\"model_type\": \"llama\"/" src/config.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/config.json: model_type ${SQ}llama${SQ} unsupported (supported: deepseek_v3, glm4_moe, qwen3_moe, olmoe, mixtral, glm_moe_dsa, qwen3_5_moe, deepseek_v4)" &&
	no_manifest out.coli
'

test_expect_success 'config.json without model_type' '
	src $Q &&
	sed -i "/\"model_type\"/d" src/config.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/config.json: model_type: missing" &&
	no_manifest out.coli
'

test_expect_success 'config.json that is not JSON' '
	src $Q &&
	sed -i "3s/\$/ oops/" src/config.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/config.json: " "line 3" &&
	no_manifest out.coli
'

test_expect_success 'missing config.json' '
	src $Q &&
	rm src/config.json &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "src/config.json: No such file or directory" &&
	test ! -e out.coli
'

test_expect_success 'SRC_DIR without a checkpoint' '
	mkdir empty &&
	expect_exit 1 coli-convert empty out.coli &&
	err_has "empty: no model.safetensors.index.json or model.safetensors found" &&
	test ! -e out.coli
'

# ---- non-finite weights ---------------------------------------------------------------------

test_expect_success 'NaN in a routed expert: refused naming shard, tensor, row and column' '
	src $Q &&
	T=model.layers.0.mlp.experts.0.gate_proj.weight &&
	poke src/$S1 $(st_elem src/$S1 $T $((3 * 64 + 5)) 2) "\xc0\x7f" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "$S1: tensor ${SQ}$T${SQ}: row 3 column 5: value nan is not finite (--allow-nonfinite keeps it)" &&
	no_manifest out.coli
'

test_expect_success 'NaN accepted with --allow-nonfinite, and recorded in the provenance' '
	src $Q &&
	T=model.layers.0.mlp.experts.0.gate_proj.weight &&
	poke src/$S1 $(st_elem src/$S1 $T $((3 * 64 + 5)) 2) "\xc0\x7f" &&
	coli-convert -q --allow-nonfinite src out.coli &&
	coli-convert -q --verify out.coli &&
	coli-convert --info out.coli >info &&
	grep -F "\"allow_nonfinite\":true" info
'

test_expect_success '+Inf in a dense matrix, quantized and kept at 16 bits' '
	src $Q &&
	T=model.layers.2.self_attn.q_proj.weight &&
	poke src/$S2 $(st_elem src/$S2 $T $((10 * 64 + 7)) 2) "\x80\x7f" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "$S2: tensor ${SQ}$T${SQ}: row 10 column 7: value inf is not finite" &&
	no_manifest out.coli &&
	expect_exit 1 coli-convert --dense-bits 16 src out16.coli &&
	err_has "$S2: tensor ${SQ}$T${SQ}: row 10 column 7: value inf is not finite" &&
	no_manifest out16.coli &&
	coli-convert -q --allow-nonfinite --dense-bits 16 src ok.coli &&
	coli-convert -q --verify ok.coli
'

test_expect_success '-Inf in a norm weight (an f32 tensor)' '
	src $Q &&
	T=model.norm.weight &&
	shard=$(grep -F "\"$T\"" src/model.safetensors.index.json | sed "s/.*: \"\(.*\)\".*/\1/") &&
	poke src/$shard $(st_elem src/$shard $T 17 2) "\x80\xff" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "$shard: tensor ${SQ}$T${SQ}: row 0 column 17: value -inf is not finite" &&
	no_manifest out.coli
'

test_expect_success 'fp8: NaN code in an expert, quantized and kept as fp8' '
	src deepseek_v3-fp8-tiny &&
	T=model.layers.1.mlp.experts.2.down_proj.weight &&
	shard=$(grep -F "\"$T\"" src/model.safetensors.index.json | sed "s/.*: \"\(.*\)\".*/\1/") &&
	poke src/$shard $(st_elem src/$shard $T $((9 * 64 + 33)) 1) "\x7f" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "$shard: tensor ${SQ}$T${SQ}: row 9 column 33: value nan is not finite" &&
	no_manifest out.coli &&
	expect_exit 1 coli-convert --expert-bits 16 src out16.coli &&
	err_has "$shard: tensor ${SQ}$T${SQ}: row 9 column 33: value nan is not finite" &&
	no_manifest out16.coli &&
	coli-convert -q --allow-nonfinite --expert-bits 16 src ok.coli &&
	coli-convert -q --verify ok.coli
'

test_expect_success 'fp8: an infinite scale_inv is refused' '
	src deepseek_v3-fp8-tiny &&
	T=model.layers.0.self_attn.o_proj.weight &&
	poke src/$S1 $(st_elem src/$S1 ${T}_scale_inv 3 4) "\x00\x00\x80\x7f" &&
	expect_exit 1 coli-convert src out.coli &&
	err_has "$S1: tensor ${SQ}${T}_scale_inv${SQ}: element 3 (scale block row 1 column 1): value inf is not finite" &&
	no_manifest out.coli &&
	expect_exit 1 coli-convert --dense-bits 16 src out16.coli &&
	err_has "$S1: tensor ${SQ}${T}_scale_inv${SQ}: element 3 (scale block row 1 column 1): value inf is not finite" &&
	no_manifest out16.coli
'

# ---- options --------------------------------------------------------------------------------

# usage_error NEEDLE ARGS...: exit 2, NEEDLE and the usage text on stderr, no output folder.
usage_error() {
	needle=$1
	shift
	expect_exit 2 coli-convert "$@" &&
	err_has "$needle" "usage: coli-convert" &&
	test ! -s out &&
	test ! -e out.coli
}

test_expect_success 'bad options exit 2 naming the option' '
	usage_error "coli-convert: --expert-bits: ${SQ}5${SQ} is not 4, 8 or 16" --expert-bits 5 "$FIX/$Q/checkpoint" out.coli &&
	usage_error "coli-convert: --dense-bits: ${SQ}2${SQ} is not 4, 8 or 16" --dense-bits 2 "$FIX/$Q/checkpoint" out.coli &&
	usage_error "coli-convert: --mtp-bits: ${SQ}8x${SQ} is not 4, 8 or 16" --mtp-bits 8x "$FIX/$Q/checkpoint" out.coli &&
	usage_error "coli-convert: --threads: ${SQ}0${SQ} is not a count in 1..1024" --threads 0 "$FIX/$Q/checkpoint" out.coli &&
	usage_error "coli-convert: --threads: ${SQ}-3${SQ} is not a count in 1..1024" --threads -3 "$FIX/$Q/checkpoint" out.coli &&
	usage_error "coli-convert: --threads: ${SQ}two${SQ} is not a count in 1..1024" --threads two "$FIX/$Q/checkpoint" out.coli &&
	usage_error "coli-convert: --threads: ${SQ}1025${SQ} is not a count in 1..1024" --threads 1025 "$FIX/$Q/checkpoint" out.coli &&
	usage_error "--frobnicate" --frobnicate "$FIX/$Q/checkpoint" out.coli &&
	usage_error "coli-convert: unknown option" -x "$FIX/$Q/checkpoint" out.coli &&
	usage_error "expert-bits" "$FIX/$Q/checkpoint" out.coli --expert-bits
'

test_expect_success 'missing or extra arguments exit 2' '
	usage_error "coli-convert: expected SRC_DIR and OUT.coli" &&
	usage_error "coli-convert: expected SRC_DIR and OUT.coli" "$FIX/$Q/checkpoint" &&
	usage_error "coli-convert: expected SRC_DIR and OUT.coli" "$FIX/$Q/checkpoint" out.coli extra &&
	usage_error "coli-convert: expected one container folder" --verify &&
	usage_error "coli-convert: expected one container folder" --info a b
'

test_expect_success '--help prints the usage on stdout, exit 0' '
	coli-convert --help >out 2>err &&
	test ! -s err &&
	grep -F "usage: coli-convert [options] SRC_DIR OUT.coli" out &&
	grep -F -- "--allow-nonfinite" out
'

# ---- the output folder ----------------------------------------------------------------------

test_expect_success 'a finished container is refused without --force, untouched' '
	coli-convert -q "$FIX/$Q/checkpoint" out.coli &&
	cp -R out.coli keep &&
	expect_exit 2 coli-convert "$FIX/$Q/checkpoint" out.coli &&
	err_has "out.coli: a finished container is here; use --force to overwrite it" &&
	test ! -s out &&
	expect_exit 2 coli-convert --expert-bits 8 "$FIX/olmoe-tiny/checkpoint" out.coli &&
	err_has "use --force" &&
	for f in keep/*; do cmp "$f" "out.coli/${f#keep/}" || return 1; done &&
	test "$(ls keep)" = "$(ls out.coli)"
'

test_expect_success '--force rebuilds a finished container identically' '
	coli-convert -q "$FIX/$Q/checkpoint" out.coli &&
	cp -R out.coli keep &&
	coli-convert -q --force "$FIX/$Q/checkpoint" out.coli &&
	for f in keep/*; do cmp "$f" "out.coli/${f#keep/}" || return 1; done &&
	test "$(ls keep)" = "$(ls out.coli)"
'

test_expect_success '--force over a container of another model leaves only the new one' '
	coli-convert -q "$FIX/deepseek_v3-tiny/checkpoint" out.coli &&
	coli-convert -q "$FIX/mixtral-tiny/checkpoint" ref.coli &&
	coli-convert -q --force "$FIX/mixtral-tiny/checkpoint" out.coli &&
	test "$(ls ref.coli)" = "$(ls out.coli)" &&
	for f in ref.coli/*; do cmp "$f" "out.coli/${f#ref.coli/}" || return 1; done &&
	coli-convert -q --verify out.coli
'

test_expect_success 'a folder holding a foreign file is refused, even with --force' '
	mkdir out.coli &&
	echo precious >out.coli/notes.txt &&
	expect_exit 2 coli-convert "$FIX/$Q/checkpoint" out.coli &&
	err_has "out.coli: folder holds ${SQ}notes.txt${SQ}, which is not part of a coli container" &&
	expect_exit 2 coli-convert --force "$FIX/$Q/checkpoint" out.coli &&
	err_has "${SQ}notes.txt${SQ}" &&
	test "$(cat out.coli/notes.txt)" = precious &&
	test "$(ls out.coli)" = notes.txt
'

test_expect_success 'a finished container with a foreign file: --force refused, both survive' '
	coli-convert -q "$FIX/$Q/checkpoint" out.coli &&
	echo precious >out.coli/README &&
	expect_exit 2 coli-convert --force "$FIX/$Q/checkpoint" out.coli &&
	err_has "${SQ}README${SQ}" &&
	test "$(cat out.coli/README)" = precious &&
	rm out.coli/README &&
	coli-convert -q --verify out.coli
'

test_expect_success 'OUT that is a regular file is refused and left alone' '
	echo data >out.coli &&
	expect_exit 2 coli-convert "$FIX/$Q/checkpoint" out.coli &&
	err_has "out.coli: exists and is not a folder" &&
	expect_exit 2 coli-convert --force "$FIX/$Q/checkpoint" out.coli &&
	test "$(cat out.coli)" = data
'

test_expect_success 'OUT inside a folder that does not exist' '
	expect_exit 1 coli-convert "$FIX/$Q/checkpoint" no/such/out.coli &&
	err_has "no/such/out.coli: No such file or directory" &&
	test ! -e no
'

test_expect_success 'converting into the source folder is refused, the source untouched' '
	src $Q &&
	ls -l src >before &&
	expect_exit 2 coli-convert src src &&
	err_has "src: folder holds " "not part of a coli container" &&
	ls -l src >after &&
	cmp before after
'

test_expect_success 'an existing empty folder is used' '
	mkdir out.coli &&
	coli-convert -q "$FIX/$Q/checkpoint" out.coli &&
	coli-convert -q --verify out.coli
'

# ---- disk full ------------------------------------------------------------------------------

# Needs root and tmpfs; the mount is undone by the test's own EXIT trap, even on failure.
if [ "$(id -u)" -eq 0 ] && mkdir -p "$SCRATCH/probe" && mount -t tmpfs -o size=64k tmpfs "$SCRATCH/probe" 2>/dev/null; then
	umount "$SCRATCH/probe"
	trap 'umount "$SCRATCH"/*/mnt 2>/dev/null; rm -rf "$SCRATCH"' EXIT

	test_expect_success 'disk full: space for the sections is missing' '
		mkdir mnt &&
		mount -t tmpfs -o size=1m tmpfs mnt &&
		trap "umount \"$PWD/mnt\"" EXIT &&
		expect_exit 1 coli-convert "$FIX/$Q/checkpoint" mnt/out.coli &&
		err_has "mnt/out.coli/" "disk full" &&
		test ! -s out &&
		no_manifest mnt/out.coli
	'

	test_expect_success 'disk full: sections fit, the small files do not' '
		mkdir mnt &&
		coli-convert -q "$FIX/$Q/checkpoint" ref.coli &&
		sections=$(cat ref.coli/dense.bin ref.coli/mtp.bin ref.coli/experts.bin | wc -c) &&
		mount -t tmpfs -o size=$sections tmpfs mnt &&
		trap "umount \"$PWD/mnt\"" EXIT &&
		expect_exit 1 coli-convert "$FIX/$Q/checkpoint" mnt/out.coli &&
		err_has "mnt/out.coli/" "disk full" &&
		no_manifest mnt/out.coli
	'
else
	echo "SKIP disk full (needs root and mount -t tmpfs)"
fi

test_done
