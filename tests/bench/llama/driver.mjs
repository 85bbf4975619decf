// driver.mjs: llama.cpp (through node-llama-cpp) on one GGUF, CPU only, the model mmap'd:
// times the prefill of a prompt of token ids and the greedy decode of N tokens, as coli-run does.
//
//   node driver.mjs --model FILE --prompt-ids "1 2 3" [-n N] [--threads T] [--agree "IDS" --agree-from P]
//
// -n N: tokens generated (default 65): the first comes from the prefill, the other N-1 each from
// one decode step (coli-run -n N: the same count). --agree IDS (a prompt followed by coli's
// continuation from position P on, P the prompt's length): llama.cpp's greedy choice after each
// position of IDS, teacher-forced in one batch, and the share of the positions P-1 on (those
// whose next id coli chose) where it equals that next id.
// Prints one JSON line: the llama.cpp release and build, the CPU variant (the libggml-cpu-*.so
// mapped into the process), times, rates, peak RSS, the generated ids. node-llama-cpp is taken
// from NODE_LLAMA_DIR (the folder make bench-llama installs it in).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

function args(argv) {
	const o = { n: 65, threads: 2 };
	for (let i = 0; i < argv.length; i++) {
		const a = argv[i], v = argv[i + 1];
		if (a === "--model") o.model = v, i++;
		else if (a === "--prompt-ids") o.prompt = v.trim().split(/\s+/).map(Number), i++;
		else if (a === "-n") o.n = Number(v), i++;
		else if (a === "--threads") o.threads = Number(v), i++;
		else if (a === "--agree") o.agree = v.trim().split(/\s+/).map(Number), i++;
		else if (a === "--agree-from") o.agreeFrom = Number(v), i++;
		else throw new Error(`unknown argument '${a}'`);
	}
	if (!o.model || !o.prompt || !(o.n >= 1) || !(o.threads >= 1)) throw new Error("usage: driver.mjs --model FILE --prompt-ids IDS [-n N] [--threads T] [--agree IDS]");
	return o;
}

// The CPU variant llama.cpp loaded: which libggml-cpu-*.so is mapped.
function cpuVariant() {
	const m = fs.readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-([\w-]+)\.so/);
	return m ? m[1] : "unknown";
}

async function load(o) {
	const dir = process.env.NODE_LLAMA_DIR ?? path.resolve("build/llama");
	const lib = await import(pathToFileURL(path.join(dir, "node_modules/node-llama-cpp/dist/index.js")).href);
	const llama = await lib.getLlama({ gpu: false, build: "never", maxThreads: o.threads, logLevel: lib.LlamaLogLevel.error });
	const t0 = performance.now();
	const model = await llama.loadModel({ modelPath: o.model, gpuLayers: 0, useMmap: true });
	const n = Math.max(o.prompt.length + o.n, o.agree?.length ?? 0) + 8, batch = Math.max(512, o.prompt.length, o.agree?.length ?? 0);
	const context = await model.createContext({ contextSize: n, batchSize: batch, threads: { ideal: o.threads, min: o.threads }, sequences: 1 });
	return { lib, llama, model, context, load_s: (performance.now() - t0) / 1e3 };
}

// Prefill (until the first token) and decode (the n-1 tokens after it), greedy.
async function generate(seq, o) {
	const ids = [];
	let t0 = performance.now(), first = 0;
	for await (const tok of seq.evaluate(o.prompt, { temperature: 0 })) {
		ids.push(tok);
		if (ids.length === 1) first = performance.now();
		if (ids.length >= o.n) break;
	}
	const end = performance.now();
	return { ids, prefill_s: (first - t0) / 1e3, decode_s: (end - first) / 1e3 };
}

async function agreement(context, ids, from) {
	const seq = context.getSequence();
	const out = await seq.controlledEvaluate(ids.map((t) => [t, { generateNext: { token: true } }]));
	let same = 0, n = 0;
	for (let i = Math.max(0, from - 1); i + 1 < ids.length; i++, n++) if (out[i]?.next?.token === ids[i + 1]) same++;
	seq.dispose();
	return { positions: n, same, share: n ? same / n : 0 };
}

async function main() {
	const o = args(process.argv.slice(2));
	const { llama, model, context, load_s } = await load(o);
	const seq = context.getSequence();
	const g = await generate(seq, o);
	seq.dispose();
	const agree = o.agree ? await agreement(context, o.agree, o.agreeFrom ?? 1) : undefined;
	const rel = llama.llamaCppRelease;
	console.log(JSON.stringify({
		engine: "llama.cpp", node_llama_cpp: "3.21.1", llama_cpp: `${rel.repo} ${rel.release}`, build: llama.buildType,
		cpu_variant: cpuVariant(), system_info: llama.systemInfo, threads: o.threads, mmap: model.useMmap, load_s,
		prompt: { tokens: o.prompt.length, seconds: g.prefill_s, tokens_per_s: o.prompt.length / g.prefill_s },
		decode: { tokens: g.ids.length - 1, seconds: g.decode_s, tokens_per_s: (g.ids.length - 1) / g.decode_s },
		peak_rss_mib: process.resourceUsage().maxRSS / 1024, agree, ids: g.ids,
	}));
	await context.dispose();
	await model.dispose();
}

main().catch((err) => { console.error(`driver.mjs: ${err.message}`); process.exit(1); });
