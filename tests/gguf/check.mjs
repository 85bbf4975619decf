// check.mjs: checks a GGUF file written by coli-synth --gguf, independently of the C writer.
//
//   node tests/gguf/check.mjs FILE [--ckpt DIR] [--rows N]
//
// Parses the header, every key-value and tensor info, and checks: magic and version 3, the data
// section and every tensor offset at general.alignment, tensors in order without overlap, each
// tensor's byte size from its type and shape, the file ending at the last tensor (plus padding),
// token arrays as long as token_embd's rows. With --ckpt DIR (the HF checkpoint coli-synth wrote
// in the same run): the first N rows (default 8) of every tensor and of every expert of a stacked
// tensor against the safetensors values: F32 tensors equal, Q4_0 within its scale d of the value,
// Q4_1 within 0.55 d (+ f16 rounding of the minimum); and the token strings equal tokenizer.json's.
// --ckpt is for qwen3moe only (a qwen35moe GGUF holds reordered and transformed values:
// tests/gguf/agree.sh checks it against coli instead).
// Prints one JSON line (architecture, counts, types, the largest errors); exit status 1 and a
// message on the first failure.
import fs from "node:fs";
import path from "node:path";

const TYPES = { 0: ["F32", 1, 4], 1: ["F16", 1, 2], 2: ["Q4_0", 32, 18], 3: ["Q4_1", 32, 20], 8: ["Q8_0", 32, 34] };
function fail(msg) { console.error(`check.mjs: ${msg}`); process.exit(1); }

class Reader {
	constructor(buf) { this.b = buf; this.o = 0; }
	need(n) { if (this.o + n > this.b.length) fail(`truncated at byte ${this.o} (need ${n} more)`); }
	u8() { this.need(1); return this.b.readUInt8(this.o++); }
	u32() { this.need(4); const v = this.b.readUInt32LE(this.o); this.o += 4; return v; }
	i32() { this.need(4); const v = this.b.readInt32LE(this.o); this.o += 4; return v; }
	f32() { this.need(4); const v = this.b.readFloatLE(this.o); this.o += 4; return v; }
	u64() { this.need(8); const v = this.b.readBigUInt64LE(this.o); this.o += 8; return Number(v); }
	str() { const n = this.u64(); this.need(n); const s = this.b.toString("utf8", this.o, this.o + n); this.o += n; return s; }
	value(t) {
		switch (t) {
		case 0: return this.u8();
		case 4: return this.u32();
		case 5: return this.i32();
		case 6: return this.f32();
		case 7: return this.u8() !== 0;
		case 8: return this.str();
		case 10: return this.u64();
		case 9: { const et = this.u32(), n = this.u64(), a = new Array(n); for (let i = 0; i < n; i++) a[i] = this.value(et); return a; }
		default: fail(`value type ${t} at byte ${this.o} not handled`);
		}
	}
}

// The header of a GGUF file: { kv, tensors, dataOff, alignment }.
export function parseGguf(file) {
	const fd = fs.openSync(file, "r"), size = fs.fstatSync(fd).size;
	let buf = Buffer.alloc(Math.min(size, 64 << 20));
	fs.readSync(fd, buf, 0, buf.length, 0);
	if (buf.toString("latin1", 0, 4) !== "GGUF") fail(`${file}: magic is not GGUF`);
	const r = new Reader(buf);
	r.o = 4;
	const version = r.u32(), nt = r.u64(), nkv = r.u64(), kv = {};
	if (version !== 3) fail(`${file}: version ${version}, expected 3`);
	for (let i = 0; i < nkv; i++) { const k = r.str(); kv[k] = r.value(r.u32()); }
	const tensors = [];
	for (let i = 0; i < nt; i++) {
		const name = r.str(), nd = r.u32(), ne = [];
		for (let d = 0; d < nd; d++) ne.push(r.u64());
		tensors.push({ name, ne, type: r.u32(), offset: r.u64() });
	}
	const alignment = kv["general.alignment"] ?? 32, dataOff = Math.ceil(r.o / alignment) * alignment;
	fs.closeSync(fd);
	return { file, size, version, kv, tensors, alignment, dataOff };
}

function checkLayout(g) {
	let end = 0;
	for (const t of g.tensors) {
		const ty = TYPES[t.type];
		if (!ty) fail(`${t.name}: type ${t.type} unknown`);
		if (t.ne[0] % ty[1]) fail(`${t.name}: ne[0] ${t.ne[0]} not a multiple of the ${ty[0]} block ${ty[1]}`);
		t.rowBytes = t.ne[0] / ty[1] * ty[2];
		t.bytes = t.rowBytes * t.ne.slice(1).reduce((a, b) => a * b, 1);
		if (t.offset % g.alignment) fail(`${t.name}: offset ${t.offset} not a multiple of ${g.alignment}`);
		if (t.offset < end) fail(`${t.name}: offset ${t.offset} overlaps the previous tensor (ending at ${end})`);
		end = t.offset + t.bytes;
	}
	const want = g.dataOff + end;
	if (g.size < want || g.size > want + g.alignment) fail(`${g.file}: size ${g.size}, tensors end at ${want}`);
	const arch = g.kv["general.architecture"], emb = g.tensors.find((t) => t.name === "token_embd.weight");
	if (!arch || !emb) fail(`${g.file}: no general.architecture or token_embd.weight`);
	for (const k of ["tokenizer.ggml.tokens", "tokenizer.ggml.token_type"])
		if (!g.kv[k] || g.kv[k].length !== emb.ne[1]) fail(`${k}: ${g.kv[k]?.length} entries, token_embd has ${emb.ne[1]} rows`);
}

// ---- values against the checkpoint ----

function bf16(u) { const b = Buffer.alloc(4); b.writeUInt32LE((u << 16) >>> 0); return b.readFloatLE(0); }
function f16(h) {
	const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023;
	return e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
}

function openCkpt(dir) {
	const idx = path.join(dir, "model.safetensors.index.json");
	const shards = fs.existsSync(idx) ? [...new Set(Object.values(JSON.parse(fs.readFileSync(idx)).weight_map))] : ["model.safetensors"];
	const map = {};
	for (const s of shards) {
		const fd = fs.openSync(path.join(dir, s), "r"), hb = Buffer.alloc(8);
		fs.readSync(fd, hb, 0, 8, 0);
		const n = Number(hb.readBigUInt64LE(0)), jb = Buffer.alloc(n);
		fs.readSync(fd, jb, 0, n, 8);
		for (const [k, v] of Object.entries(JSON.parse(jb))) if (k !== "__metadata__") map[k] = { fd, base: 8 + n, ...v };
	}
	return map;
}

function readAt(fd, off, n) { const b = Buffer.alloc(n); fs.readSync(fd, b, 0, n, off); return b; }

// Row r of an HF tensor as floats (BF16 or F32).
function hfRow(t, r) {
	const cols = t.shape[t.shape.length - 1], es = t.dtype === "F32" ? 4 : 2;
	const b = readAt(t.fd, t.base + t.data_offsets[0] + r * cols * es, cols * es), out = new Float64Array(cols);
	for (let i = 0; i < cols; i++) out[i] = es === 4 ? b.readFloatLE(4 * i) : bf16(b.readUInt16LE(2 * i));
	if (t.dtype !== "F32" && t.dtype !== "BF16") fail(`${t.dtype} checkpoint tensors not handled`);
	return out;
}

// Worst error of a GGUF row against values x, as a multiple of its bound; 0 for exact F32.
function rowError(type, b, x) {
	let worst = 0;
	if (type === 0) { for (let i = 0; i < x.length; i++) if (b.readFloatLE(4 * i) !== Math.fround(x[i])) return Infinity; return 0; }
	const bs = type === 2 ? 18 : 20;
	for (let k = 0; k < x.length / 32; k++) {
		const o = k * bs, d = f16(b.readUInt16LE(o)), m = type === 3 ? f16(b.readUInt16LE(o + 2)) : 0, q0 = o + bs - 16;
		const bound = type === 2 ? Math.abs(d) * 1.01 + 1e-12 : Math.abs(d) * 0.55 + Math.abs(m) * 2 ** -10 + 1e-12;
		for (let j = 0; j < 32; j++) {
			const q = j < 16 ? b[q0 + j] & 15 : b[q0 + j - 16] >> 4, v = type === 2 ? (q - 8) * d : q * d + m;
			worst = Math.max(worst, Math.abs(v - x[32 * k + j]) / bound);
		}
	}
	return worst;
}

function partName(g, t, p) {
	const hf = HF(t.name);
	if (!hf) fail(`${t.name}: no HF name known`);
	return typeof hf === "function" ? hf(p) : hf;
}
function HF(name) {
	const fixed = { "token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight" };
	if (fixed[name]) return fixed[name];
	const m = name.match(/^blk\.(\d+)\.(\w+)\.weight$/);
	const per = { attn_norm: "input_layernorm", attn_q: "self_attn.q_proj", attn_k: "self_attn.k_proj", attn_v: "self_attn.v_proj",
		attn_output: "self_attn.o_proj", attn_q_norm: "self_attn.q_norm", attn_k_norm: "self_attn.k_norm",
		ffn_norm: "post_attention_layernorm", ffn_gate_inp: "mlp.gate" };
	if (!m) return null;
	if (per[m[2]]) return `model.layers.${m[1]}.${per[m[2]]}.weight`;
	const ex = m[2].match(/^ffn_(gate|up|down)_exps$/);
	return ex ? (p) => `model.layers.${m[1]}.mlp.experts.${p}.${ex[1]}_proj.weight` : null;
}

function checkValues(g, dir, nrows) {
	const ck = openCkpt(dir), fd = fs.openSync(g.file, "r"), worst = {};
	for (const t of g.tensors) {
		const parts = t.ne.length === 3 ? t.ne[2] : 1, rows = t.ne.length > 1 ? t.ne[1] : 1;
		for (let p = 0; p < parts; p++) {
			const name = partName(g, t, p), h = ck[name];
			if (!h) fail(`${t.name}: checkpoint has no ${name}`);
			const hr = h.shape.length > 1 ? h.shape[0] : 1;
			if (h.shape[h.shape.length - 1] !== t.ne[0] || hr !== rows)
				fail(`${t.name}: ne [${t.ne}], checkpoint ${name} has shape [${h.shape}]`);
			for (let r = 0; r < Math.min(rows, nrows); r++) {
				const b = readAt(fd, g.dataOff + t.offset + (p * rows + r) * t.rowBytes, t.rowBytes);
				const err = rowError(t.type, b, hfRow(h, r)), ty = TYPES[t.type][0];
				if (err > 1) fail(`${t.name} part ${p} row ${r}: ${ty} value off by ${err.toFixed(3)} x its bound against ${name}`);
				worst[ty] = Math.max(worst[ty] ?? 0, err);
			}
		}
	}
	const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"))), toks = g.kv["tokenizer.ggml.tokens"];
	for (const [s, id] of Object.entries(tj.model.vocab)) if (toks[id] !== s) fail(`token ${id}: '${toks[id]}', tokenizer.json '${s}'`);
	for (const a of tj.added_tokens) if (toks[a.id] !== a.content) fail(`added token ${a.id}: '${toks[a.id]}', tokenizer.json '${a.content}'`);
	return worst;
}

function main(argv) {
	const file = argv[0], ck = argv.indexOf("--ckpt"), nr = argv.indexOf("--rows");
	if (!file || file.startsWith("-")) { console.error("usage: node check.mjs FILE [--ckpt DIR] [--rows N]"); process.exit(2); }
	const g = parseGguf(file);
	checkLayout(g);
	const types = {};
	for (const t of g.tensors) types[TYPES[t.type][0]] = (types[TYPES[t.type][0]] ?? 0) + 1;
	const out = { file, architecture: g.kv["general.architecture"], tensors: g.tensors.length, kv: Object.keys(g.kv).length,
		tokens: g.kv["tokenizer.ggml.tokens"].length, merges: g.kv["tokenizer.ggml.merges"]?.length ?? 0, types,
		data_offset: g.dataOff, bytes: g.size };
	if (ck >= 0 && out.architecture !== "qwen3moe")
		fail(`--ckpt: ${out.architecture}: values not compared (its conversion reorders and transforms them; tests/gguf/agree.sh checks that llama.cpp computes coli's function)`);
	if (ck >= 0) out.worst_error_of_bound = checkValues(g, argv[ck + 1], nr >= 0 ? Number(argv[nr + 1]) : 8);
	console.log(JSON.stringify(out));
}

if (import.meta.url === `file://${process.argv[1]}`) main(process.argv.slice(2));
