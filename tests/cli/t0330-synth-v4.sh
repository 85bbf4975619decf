#!/usr/bin/env bash
# t0330-synth-v4.sh: coli-synth --family deepseek_v4 writes DeepSeek V4's released layout (the
# tensor names, dtypes and shapes of the deepseek_v4 fixtures: FP4 experts + UE8M0 scales, FP8
# + UE8M0 .scale, F32 mHC/sinks/biases, I64 tid2eid; bf16 without --fp8), today's coli-convert
# takes it, and the converted model runs: finite logits through many layers.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
# The fixtures' widths (tests/fixtures/hf/deepseek_v4-tiny/README.md).
FIXSHAPE="--no-tokenizer --vocab 320 --layers 5 --hidden 64 --heads 4 --head-dim 32 --rope-dim 8 --q-lora 32"
FIXSHAPE="$FIXSHAPE --o-groups 2 --o-lora 16 --window 8 --index-heads 8 --index-head-dim 16 --index-topk 8"
FIXSHAPE="$FIXSHAPE --experts 10 --top-k 4 --expert-ffn 64 --hca-ratio 16 -q"

# tensors DIR: "name dtype shape" of every tensor of the checkpoint, sorted.
tensors() {
	python3 - "$1" <<'EOF'
import json, struct, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/*.safetensors")):
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        h = json.loads(fh.read(n))
    for k, v in h.items():
        if k != "__metadata__":
            print(k, v["dtype"], v["shape"])
EOF
}

# keys DIR: the config.json keys and the values that do not depend on the widths.
keys() { python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(sorted(c), c["scoring_func"], c["topk_method"], c["compress_ratios"], c.get("quantization_config"), c.get("expert_dtype"))' "$1/config.json"; }

for v in "deepseek_v4-fp4-tiny --fp8" "deepseek_v4-tiny"; do
	set -- $v
	test_expect_success "--family deepseek_v4 ${2:-} at the fixture's widths: the tensor set of $1, every name, dtype and shape" "
		coli-synth --family deepseek_v4 --out ck $FIXSHAPE ${2:-} &&
		tensors ck | sort >got && tensors '$FIX/$1/checkpoint' | sort >want &&
		diff want got &&
		keys ck | sed 's/, .torch_dtype.//; s/.transformers_version., //' >kgot &&
		keys '$FIX/$1/checkpoint' | sed 's/, .torch_dtype.//; s/.transformers_version., //' >kwant &&
		diff kwant kgot
	"
done

test_expect_success 'the FP4 experts hold e2m1 codes whose UE8M0 scales fit each block of 32 (largest |value| 3..6 x scale)' '
	coli-synth --family deepseek_v4 --out ck $FIXSHAPE --fp8 &&
	python3 - ck <<-EOF
	import json, struct, sys
	f = sys.argv[1] + "/model.safetensors"
	b = open(f, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
	def raw(k): o = h[k]["data_offsets"]; return d[o[0]:o[1]]
	w = raw("layers.3.ffn.experts.7.w2.weight"); s = raw("layers.3.ffn.experts.7.w2.scale")
	cols = h["layers.3.ffn.experts.7.w2.weight"]["shape"][1] * 2
	top = []
	for r in range(h["layers.3.ffn.experts.7.w2.weight"]["shape"][0]):
	    for blk in range(cols // 32):
	        codes = [(w[(r * cols + blk * 32 + j) // 2] >> (4 * (j % 2))) & 7 for j in range(32)]
	        top.append(max(codes))
	assert set(top) <= {5, 6, 7} and 7 in set(top), set(top)  # the block max: 3, 4 or 6 (amax / scale in (3, 6])
	assert all(100 < x < 140 for x in s), sorted(set(s))
	EOF
'

test_expect_success 'both layouts convert with today coli-convert and run; 43 layers keep the logits finite and spread' '
	coli-synth --family deepseek_v4 --out ck16 --no-tokenizer --vocab 512 --layers 4 --window 8 -q &&
	coli-convert -q ck16 m16.coli &&
	coli-run -m m16.coli --prompt-ids "5 6 7 8 9 10 11 12 13 14 15 16" -n 8 --print-ids >ids16 &&
	test $(wc -w <ids16) -ge 8 &&
	coli-synth --family deepseek_v4 --out ck --fp8 --no-tokenizer --vocab 512 --layers 43 --window 8 --experts 16 \
		--hidden 128 --heads 8 -q &&
	coli-convert -q ck m.coli --expert-bits 16 --mtp-bits 16 &&
	coli-run -m m.coli --prompt-ids "$(seq -s " " 5 60)" -n 6 --print-ids --dump-logits lg >ids &&
	test $(wc -w <ids) -ge 6 &&
	python3 - lg <<-EOF
	import math, struct, sys
	d = open(sys.argv[1], "rb").read(); v = struct.unpack("<%df" % (len(d) // 4), d); V = 512
	for p in range(len(v) // V):
	    r = v[p * V:(p + 1) * V]; m = sum(r) / V; sd = math.sqrt(sum((x - m) ** 2 for x in r) / V)
	    assert all(math.isfinite(x) for x in r) and 1 < sd < 20, (p, sd)
	EOF
'

test_expect_success 'the preset v4flash has V4 Flash widths; --dry-run prints its config without writing' '
	coli-synth --family deepseek_v4 --preset v4flash --no-tokenizer --out ck --dry-run >out &&
	test ! -e ck/config.json &&
	grep -F "\"hidden_size\": 4096" out && grep -F "\"num_hidden_layers\": 43" out &&
	grep -F "\"o_lora_rank\": 1024" out && grep -F "\"index_topk\": 512" out && grep -F "\"n_routed_experts\": 256" out &&
	grep -F "\"num_experts_per_tok\": 6" out && grep -F "\"sliding_window\": 128" out && grep -F "\"num_hash_layers\": 3" out
'

test_expect_success 'bad deepseek_v4 options are usage errors naming the option' '
	expect_exit 2 coli-synth --family deepseek_v4 --out x --no-tokenizer --kv-heads 2 &&
	err_has "--kv-heads does not apply to family" &&
	expect_exit 2 coli-synth --family deepseek_v4 --out x --no-tokenizer --hca-ratio 48 &&
	err_has "--hca-ratio: " "does not divide --head-dim" &&
	expect_exit 2 coli-synth --family deepseek_v4 --out x --no-tokenizer --measure 16 &&
	err_has "--measure: " "deepseek_v4" &&
	expect_exit 2 coli-synth --family qwen3_moe --out x --no-tokenizer --window 8 &&
	err_has "--window does not apply to family" &&
	expect_exit 2 coli-synth --family qwen3_moe --out x --no-tokenizer --preset v4flash &&
	err_has "--preset v4flash does not apply"
'

test_expect_success '--measure-only refuses a deepseek_v4 checkpoint, pointing at coli-run --usage' '
	expect_exit 2 coli-synth --measure-only "$FIX/deepseek_v4-tiny/checkpoint" &&
	err_has "deepseek_v4" "coli-run --usage"
'

test_done
