#!/usr/bin/env python3
"""q8acc.py: what coli-run --precision q8 costs against exact (tests/bench/q8-accuracy.sh).

  q8acc.py compare EXACT_LOGITS Q8_LOGITS EXACT_ROUTING Q8_ROUTING VOCAB TOP_K
      one markdown table row's figures from two teacher-forced runs' dumps (docs/coli-run.md's
      formats: float32 [positions][vocab], int32 [moe layers][positions][top_k]): top-1 agreement,
      KL(exact || q8) mean and max over positions (nats), the share of positions whose routing
      set is the same per MoE layer, and the mean overlap |A & B| / top_k.
  q8acc.py outliers SRC DST FACTOR CHANNELS
      a copy of the Hugging Face checkpoint SRC (bf16 safetensors, qwen3_moe names) whose hidden
      states carry outlier channels: each RMSNorm weight feeding a matrix (input_layernorm,
      post_attention_layernorm) times FACTOR (a power of two) at CHANNELS (comma-separated), the
      columns of the matrices it feeds (q/k/v_proj, the router, every expert's gate/up_proj)
      divided by FACTOR there. Exact in bf16: the model computes the same function, but the
      activations going into those matrices are FACTOR times larger at CHANNELS, as real models'
      outlier channels are (with small weights beside them).
Standard library only.
"""
import json
import math
import os
import shutil
import struct
import sys


def floats(path):
    with open(path, "rb") as f:
        d = f.read()
    return struct.unpack("<%df" % (len(d) // 4), d)


def ints(path):
    with open(path, "rb") as f:
        d = f.read()
    return struct.unpack("<%di" % (len(d) // 4), d)


def log_softmax(row):
    m = max(row)
    s = math.log(sum(math.exp(v - m) for v in row)) + m
    return [v - s for v in row]


def compare(le, lq, re_, rq, vocab, k):
    a, b = floats(le), floats(lq)
    if len(a) != len(b) or len(a) % vocab:
        sys.exit("q8acc.py: %s and %s: %d and %d floats, not positions x %d" % (le, lq, len(a), len(b), vocab))
    pos = len(a) // vocab
    top1 = 0
    kls = []
    for p in range(pos):
        x, y = a[p * vocab:(p + 1) * vocab], b[p * vocab:(p + 1) * vocab]
        top1 += x.index(max(x)) == y.index(max(y))
        lx, ly = log_softmax(x), log_softmax(y)
        kls.append(max(0.0, sum(math.exp(u) * (u - v) for u, v in zip(lx, ly))))
    ra, rb = ints(re_), ints(rq)
    layers = len(ra) // (pos * k) if pos else 0
    if len(ra) != len(rb) or len(ra) != layers * pos * k:
        sys.exit("q8acc.py: %s and %s: %d and %d ids, not layers x %d x %d" % (re_, rq, len(ra), len(rb), pos, k))
    same, overlap = [], 0
    for l in range(layers):
        eq = 0
        for p in range(pos):
            o = (l * pos + p) * k
            s, t = set(ra[o:o + k]), set(rb[o:o + k])
            eq += s == t
            overlap += len(s & t) / k
        same.append(eq / pos)
    print(json.dumps({"positions": pos, "top1": top1 / pos, "kl_mean": sum(kls) / pos, "kl_max": max(kls),
                      "routing_same_per_layer": same, "routing_overlap": overlap / (layers * pos) if layers else 1.0}))


def bf16_scale(buf, off, factor):
    """The bf16 at buf[off:off+2] times factor (a power of two: exact unless it leaves the range)."""
    (h,) = struct.unpack_from("<H", buf, off)
    (f,) = struct.unpack("<f", struct.pack("<I", h << 16))
    (u,) = struct.unpack("<I", struct.pack("<f", f * factor))
    if u & 0xFFFF:
        sys.exit("q8acc.py: factor %g does not scale a bf16 exactly" % factor)
    struct.pack_into("<H", buf, off, u >> 16)


def feeds(name):
    """For a norm weight, the suffixes of the matrices whose columns it feeds (qwen3_moe)."""
    if name.endswith("input_layernorm.weight"):
        return ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight")
    if name.endswith("post_attention_layernorm.weight"):
        return ("mlp.gate.weight", "gate_proj.weight", "up_proj.weight")
    return None


def outliers(src, dst, factor, channels):
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if not f.endswith(".safetensors"):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    shards = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
    for f in shards:
        with open(os.path.join(src, f), "rb") as fh:
            d = bytearray(fh.read())
        (n,) = struct.unpack_from("<Q", d, 0)
        head = json.loads(d[8:8 + n])
        for name, t in head.items():
            if name == "__metadata__":
                continue
            if t["dtype"] != "BF16":
                sys.exit("q8acc.py: %s: %s is %s, expected BF16" % (f, name, t["dtype"]))
            base = 8 + n + t["data_offsets"][0]
            layer = name.split(".")[2] if name.startswith("model.layers.") else None
            if feeds(name):
                for c in channels:
                    bf16_scale(d, base + 2 * c, factor)
                continue
            for norm in ("input_layernorm.weight", "post_attention_layernorm.weight"):
                if layer is not None and any(name.endswith(s) for s in feeds(norm)) and \
                        (norm.startswith("input") == (".self_attn." in name)):
                    rows, cols = t["shape"]
                    for r in range(rows):
                        for c in channels:
                            bf16_scale(d, base + 2 * (r * cols + c), 1.0 / factor)
        with open(os.path.join(dst, f), "wb") as fh:
            fh.write(d)


def main():
    if len(sys.argv) == 8 and sys.argv[1] == "compare":
        compare(*sys.argv[2:6], int(sys.argv[6]), int(sys.argv[7]))
    elif len(sys.argv) == 6 and sys.argv[1] == "outliers":
        outliers(sys.argv[2], sys.argv[3], float(sys.argv[4]), [int(c) for c in sys.argv[5].split(",")])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
