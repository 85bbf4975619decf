// encode.js: the reference side of tests/cli/t0400-tokenizer.sh. Encodes each corpus string
// with @lenml/tokenizers (a JavaScript port of Hugging Face's tokenizers) and writes:
//   IDS.txt        one line per string: its ids separated by spaces (no special tokens added;
//                  special tokens written in the text are recognized, as HF does by default)
//   EXPECTED.jsonl one JSON string per line: what decode(encode(s)) must give back, i.e. s
//                  passed through the tokenizer.json's normalizer (NFC for Qwen3, none for
//                  DeepSeek V3), since normalization is part of encoding
// Usage: node encode.js TOKENIZER.json CORPUS.jsonl IDS.txt EXPECTED.jsonl
// tokenizer_config.json is read from beside TOKENIZER.json when present.
"use strict";
const fs = require("fs");
const path = require("path");
const { TokenizerLoader } = require("@lenml/tokenizers");

const [tokFile, corpusFile, idsFile, expectedFile] = process.argv.slice(2);
if (!expectedFile) {
  console.error("usage: node encode.js TOKENIZER.json CORPUS.jsonl IDS.txt EXPECTED.jsonl");
  process.exit(2);
}
const tokenizerJSON = JSON.parse(fs.readFileSync(tokFile, "utf8"));
const cfgFile = path.join(path.dirname(tokFile), "tokenizer_config.json");
const tokenizerConfig = fs.existsSync(cfgFile) ? JSON.parse(fs.readFileSync(cfgFile, "utf8")) : {};
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

// The normalization forms of the normalizer, in order (Sequence flattened).
function forms(n) {
  if (!n) return [];
  if (n.type === "Sequence") return n.normalizers.flatMap(forms);
  if (["NFC", "NFD", "NFKC", "NFKD"].includes(n.type)) return [n.type];
  throw new Error(`normalizer ${n.type} not handled by encode.js`);
}
const norm = forms(tokenizerJSON.normalizer);

const lines = fs.readFileSync(corpusFile, "utf8").split("\n").filter((l) => l.length);
const ids = [];
const expected = [];
for (const line of lines) {
  const s = JSON.parse(line);
  ids.push(tok.encode(s, { add_special_tokens: false }).join(" "));
  expected.push(JSON.stringify(norm.reduce((x, f) => x.normalize(f), s)));
}
fs.writeFileSync(idsFile, ids.join("\n") + "\n");
fs.writeFileSync(expectedFile, expected.join("\n") + "\n");
