// corpus.js: writes a deterministic (seeded) corpus of varied strings, one JSON string per line,
// for comparing coli's tokenizer with @lenml/tokenizers.
// Usage: node corpus.js OUT.jsonl TOKENIZER.json... (added tokens are taken from each file)
//
// Left out on purpose, where Hugging Face's regex engine (Oniguruma) and JavaScript's differ,
// so that the reference cannot be right: U+0085 and U+FEFF (White_Space in Oniguruma and in
// coli, \s in JavaScript only for U+FEFF), and U+017F after an apostrophe ((?i:'s) matches
// "'ſ" in Oniguruma). Random code points come from blocks assigned long ago, so that the
// Unicode versions of PCRE2, utf8proc and node's ICU agree on them.
"use strict";
const fs = require("fs");

const [out, ...tokenizerFiles] = process.argv.slice(2);
if (!out || tokenizerFiles.length === 0) {
  console.error("usage: node corpus.js OUT.jsonl TOKENIZER.json...");
  process.exit(2);
}

// mulberry32: small seeded PRNG, so the corpus is the same on every run
let seed = 0xc011c0de;
function rand() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (n) => Math.floor(rand() * n);
const pick = (a) => a[int(a.length)];

const english = [
  "The quick brown fox jumps over the lazy dog.", "Hello world", "hello, World!",
  "Tokenizers split text into pieces.", "It was the best of times, it was the worst of times",
  "e-mail me at someone@example.com or visit https://example.org/path?q=1&r=2#frag",
  "Mr. O'Neil's café served crème brûlée.", "  leading spaces", "trailing spaces   ",
  "CamelCaseIdentifiersAndSNAKE_CASE_ONES", "ALL CAPS SENTENCE HERE", "a b c d e f g",
];
const contractions = [
  "don't", "DON'T", "Don'T", "it's", "IT'S", "It'S", "we're", "WE'RE", "they've", "THEY'VE",
  "I'm", "I'M", "you'll", "YOU'LL", "he'd", "HE'D", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d",
  "rock'n'roll", "'quoted'", "''", "o'clock", "y'all'd've",
];
const languages = [
  "你好，世界！今天天气很好。", "中文分词测试：我们在北京大学学习自然语言处理。",
  "日本語のテキストです。カタカナとひらがなと漢字。", "東京は日本の首都です",
  "한국어 문장입니다. 안녕하세요!", "서울특별시", "مرحبا بالعالم، هذا نص عربي.",
  "اللغة العربية ١٢٣٤٥", "Привет, мир! Это русский текст.", "ЁЖИК в тумане",
  "नमस्ते दुनिया, यह हिंदी है।", "संस्कृतम् १२३", "Γειά σου Κόσμε", "שלום עולם",
  "สวัสดีชาวโลก", "Xin chào thế giới, Tiếng Việt", "Ελληνικά και Русский και 中文",
  "Ünïcödé àççéñts ôñ lëttérs", "Straße, Æsir, Œuvre, ﬁne ligature",
  "ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ　１２３", "½ ¼ ¾ ² ³ ™ ® ©",
];
const nfdPairs = ["café", "Åström", "niño", "Tiếng Việt", "résumé", "ǅemal", "안녕", "é́", "ḱṷ"];
const emoji = [
  "😀", "🤗", "🔥🔥🔥", "👍🏽", "👨‍👩‍👧‍👦", "👩🏾‍💻", "🏳️‍🌈", "🇺🇸", "🇯🇵🇫🇷🇩🇪", "❤️", "#️⃣", "1️⃣",
  "🧑‍🤝‍🧑", "😀😃😄😁", "☕ ☀ ✔ ✨", "🏴‍☠️", "🫠",
];
const code = [
  "#include <stdio.h>\n\nint main(void)\n{\n\tprintf(\"hello\\n\");\n\treturn 0;\n}\n",
  "static int add(int a, int b) { return a + b; } // sum\n/* block\n * comment */",
  "def f(x):\n    if x > 0:\n        return x * 2\n    return -x\n\nprint(f(21))\n",
  "class Foo:\n\tdef __init__(self):\n\t\tself.x = [1, 2, 3]\n",
  "{\n  \"name\": \"coli\",\n  \"version\": 1.5,\n  \"tags\": [\"a\", \"b\"],\n  \"ok\": true\n}",
  "for (i = 0; i < n; i++) {\n\t\tsum += a[i] * b[i];\n\t}",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
  "<div class=\"x\"><span>text</span></div>", "x = y ** 2 // 3 % 4 != 5 && z || !w",
  "if err != nil {\n\treturn fmt.Errorf(\"failed: %w\", err)\n}",
  "    indented four\n        indented eight\n\t\ttabs two",
  "$ ls -la | grep '^d' > out.txt 2>&1", "a_b__c___d", "0x1F 0b1010 0o777 1_000_000",
];
const whitespace = [
  "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\r", " ", "  ", "   ", "\t", "\t\t", " \t \t",
  "  \n  ", "\n \n", " \r\n ", "\u00a0", "\u3000", "\u2003\u2009", "\u2028", "\v\f", "        ",
];
const numbers = [
  "0", "7", "42", "123", "1234", "12345678901234567890", "3.14159", "2.71828182845904523536",
  "1,000,000", "-42", "+17", "1e-9", "6.022e23", "99.9%", "$19.99", "€5,00", "１２３４",
  "٣٤٥", "१२३", "Ⅻ", "2024-01-15", "12:34:56", "v1.2.3", "3/4", "10^6",
];
const punctuation = [
  "...", "!!!", "?!", "—", "–", "«guillemets»", "「括弧」", "【重要】", "(){}[]<>",
  "@#$%^&*", "''\"\"``", ";;", "::", "->", "=>", "!==", "…", "¿Qué?", "¡Hola!", "・", "、。",
  "\\", "/", "|", "~", "_", "--", "***",
];

// Each file's added tokens, special or not.
const added = [];
for (const f of tokenizerFiles) {
  for (const t of JSON.parse(fs.readFileSync(f, "utf8")).added_tokens || []) {
    if (!added.includes(t.content)) added.push(t.content);
  }
}
// DeepSeek has 800 place-holder tokens: keep the named ones more likely.
const namedAdded = added.filter((s) => !/place▁holder/.test(s));

const ranges = [
  [0x20, 0x7e], [0xa1, 0xff], [0x100, 0x17e], [0x180, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff],
  [0x531, 0x556], [0x5d0, 0x5ea], [0x621, 0x64a], [0x660, 0x669], [0x900, 0x97f],
  [0xe01, 0xe3a], [0x1100, 0x1112], [0x1161, 0x1175], [0x11a8, 0x11c2], [0x2000, 0x200a],
  [0x2010, 0x2027], [0x2030, 0x205e], [0x2190, 0x21ff], [0x2200, 0x22ff], [0x2500, 0x257f],
  [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xe000, 0xe0ff],
  [0xff01, 0xff5e], [0x10000, 0x1005d], [0x13000, 0x1342e], [0x1d400, 0x1d6a5],
  [0x1f300, 0x1f64f], [0x20000, 0x2a6d6], [0xf0000, 0xf00ff], [0x100000, 0x1000ff],
  [0x300, 0x36f], [0x1, 0x8], [0xe, 0x1f],
];
function randomUnicode(len) {
  let s = "";
  while ([...s].length < len) {
    const [a, b] = pick(ranges);
    const cp = a + int(b - a + 1);
    s += String.fromCodePoint(cp);
  }
  return s;
}

function fragment() {
  switch (int(12)) {
    case 0: return pick(english);
    case 1: return pick(contractions);
    case 2: return pick(languages);
    case 3: { const w = pick(nfdPairs); return rand() < 0.5 ? w.normalize("NFD") : w.normalize("NFC"); }
    case 4: return pick(emoji);
    case 5: return pick(code);
    case 6: return pick(whitespace);
    case 7: return pick(numbers);
    case 8: return pick(punctuation);
    case 9: return rand() < 0.7 ? pick(namedAdded) : pick(added);
    case 10: return randomUnicode(1 + int(12));
    default: return String(int(1e9)) + (rand() < 0.5 ? "." + int(1e6) : "");
  }
}
const separators = ["", " ", " ", "\n", "\t", "\r\n", "  ", "\n\n", ", "];

const corpus = [];
// every pool entry alone, and in both normal forms
for (const pool of [english, contractions, languages, emoji, code, whitespace, numbers, punctuation])
  corpus.push(...pool);
for (const w of nfdPairs) corpus.push(w.normalize("NFC"), w.normalize("NFD"));
for (const s of namedAdded) corpus.push(s, "x" + s + "y", " " + s + " ", s + s);
corpus.push(
  "", "a", " ", "\u0000", "nul\u0000inside", "<|im_start|>system\nYou are helpful.<|im_end|>\n" +
    "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>",
  "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜></think>Hello<｜end▁of▁sentence｜>",
  "<|im_start|<|im_start|>>", "<<|endoftext|>|>", "<|endoftext", "|im_end|>",
);
// random mixtures
while (corpus.length < 1150) {
  const parts = [];
  const n = 1 + int(6);
  for (let i = 0; i < n; i++) parts.push(fragment());
  let s = "";
  for (const p of parts) s += (s ? pick(separators) : "") + p;
  corpus.push(s);
}
// random unicode strings of several planes
for (let i = 0; i < 80; i++) corpus.push(randomUnicode(1 + int(40)));
// a few long strings
corpus.push(" ".repeat(5000), "\n".repeat(3000), "9".repeat(4000), "ab".repeat(3000),
  "😀".repeat(500), Array.from({ length: 300 }, fragment).join(" "));
let b64 = "";
for (let i = 0; i < 4000; i++) b64 += "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[int(64)];
corpus.push(b64);

fs.writeFileSync(out, corpus.map((s) => JSON.stringify(s)).join("\n") + "\n");
console.error(`corpus.js: ${corpus.length} strings`);
