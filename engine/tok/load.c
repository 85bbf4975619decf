/* tok/load.c: reads tokenizer.json and validates every field the tokenizer uses.
 *
 * Supported: model BPE (vocab, merges as "a b" strings or ["a", "b"] pairs, unk_token,
 * fuse_unk, ignore_merges; dropout null, byte_fallback false, no subword prefix / suffix);
 * normalizer null, NFC, NFD, NFKC, NFKD or a Sequence of them; pre_tokenizer ByteLevel, or a
 * Sequence of Split (Regex or String pattern, any behavior, invert) and Digits steps ending
 * with ByteLevel; decoder ByteLevel (alone or in a Sequence); added_tokens with all flags.
 * post_processor, truncation and padding are not read. Errors name the field:
 * "<file>: pre_tokenizer.pretokenizers[1].type: "Whitespace" unsupported (...)". */
#include <errno.h>
#include <jansson.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok/internal.h"

/* GPT-2's pattern, used by ByteLevel when use_regex is true. */
static const char GPT2_PATTERN[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* "<file>: <field>: <problem>" */
static int bad(const coli_tok *t, coli_err *e, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int bad(const coli_tok *t, coli_err *e, const char *field, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return coli_errf(e, COLI_EDATA, "%s: %s: %s", t->path, field, msg);
}

/* Short printable form of a JSON value for messages. */
static const char *show(json_t *v, char *buf, size_t n);

/* "<field>: missing (expected <what>)" or "<field>: <value> is not <what>". */
static int not_a(const coli_tok *t, coli_err *e, const char *field, json_t *v, const char *what)
{
	char b[96];
	if (!v)
		return bad(t, e, field, "missing (expected %s)", what);
	return bad(t, e, field, "%s is not %s", show(v, b, sizeof(b)), what);
}

/* Short printable form of a JSON value for messages. */
static const char *show(json_t *v, char *buf, size_t n)
{
	if (!v)
		snprintf(buf, n, "missing");
	else if (json_is_string(v))
		snprintf(buf, n, "\"%.60s\"", json_string_value(v));
	else {
		char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		snprintf(buf, n, "%.60s", s ? s : "?");
		free(s);
	}
	return buf;
}

/* Optional boolean: absent or null gives def. */
static int get_bool(const coli_tok *t, json_t *o, const char *key, int def, const char *at,
		    int *out, coli_err *e)
{
	json_t *v = json_object_get(o, key);
	*out = def;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v)) {
		char f[160];
		snprintf(f, sizeof(f), "%s.%s", at, key);
		return not_a(t, e, f, v, "a boolean");
	}
	*out = json_is_true(v);
	return 0;
}

/* The "type" string of a component, NULL with an error if absent. */
static const char *type_of(const coli_tok *t, json_t *o, const char *at, coli_err *e)
{
	char f[160];
	json_t *v = json_is_object(o) ? json_object_get(o, "type") : NULL;
	snprintf(f, sizeof(f), "%s.type", at);
	if (!json_is_object(o))
		return not_a(t, e, at, o, "an object"), NULL;
	if (!json_is_string(v))
		return not_a(t, e, f, v, "a string"), NULL;
	return json_string_value(v);
}

static int unsupported(const coli_tok *t, coli_err *e, const char *at, const char *type,
		       const char *supported)
{
	char f[160];
	snprintf(f, sizeof(f), "%s.type", at);
	return bad(t, e, f, "\"%s\" unsupported (supported: %s)", type, supported);
}

/* ---- model ---- */

/* An option that must be absent, null, false, 0 or "" (features this tokenizer lacks). */
static int must_be_off(const coli_tok *t, json_t *m, const char *key, coli_err *e)
{
	json_t *v = json_object_get(m, key);
	int off = !v || json_is_null(v) || json_is_false(v) ||
		  (json_is_number(v) && json_number_value(v) == 0) ||
		  (json_is_string(v) && !json_string_length(v));
	if (off)
		return 0;
	char f[80], b[80];
	snprintf(f, sizeof(f), "model.%s", key);
	return bad(t, e, f, "%s unsupported (only null)", show(v, b, sizeof(b)));
}

static int load_vocab(coli_tok *t, json_t *vocab, coli_err *e)
{
	char f[160], b[80];
	if (!json_is_object(vocab))
		return not_a(t, e, "model.vocab", vocab, "an object");
	if (tok_strmap_init(&t->vocab, json_object_size(vocab), e))
		return -1;
	const char *key;
	size_t klen;
	json_t *v;
	json_object_keylen_foreach(vocab, key, klen, v)
	{
		json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
		if (id < 0 || id >= TOK_MAX_ID) {
			snprintf(f, sizeof(f), "model.vocab[\"%.60s\"]", key);
			return bad(t, e, f, "%s is not an id in [0, %d)", show(v, b, sizeof(b)),
				   TOK_MAX_ID);
		}
		int added;
		if (tok_strmap_put(&t->vocab, key, klen, (int32_t)id, &added, e) < 0)
			return -1;
		if (id >= t->n_ids)
			t->n_ids = (int32_t)id + 1;
	}
	return 0;
}

/* One merge as its two token strings. */
static int merge_parts(const coli_tok *t, json_t *m, size_t i, const char **a, size_t *an,
		       const char **b, size_t *bn, coli_err *e)
{
	char f[64], s[80];
	snprintf(f, sizeof(f), "model.merges[%zu]", i);
	if (json_is_string(m)) {
		const char *p = json_string_value(m), *sp = memchr(p, ' ', json_string_length(m));
		size_t n = json_string_length(m);
		if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - p)))
			return bad(t, e, f, "%s is not two tokens separated by one space",
				   show(m, s, sizeof(s)));
		*a = p, *an = (size_t)(sp - p), *b = sp + 1, *bn = n - *an - 1;
		return 0;
	}
	if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
	    json_is_string(json_array_get(m, 1))) {
		*a = json_string_value(json_array_get(m, 0));
		*an = json_string_length(json_array_get(m, 0));
		*b = json_string_value(json_array_get(m, 1));
		*bn = json_string_length(json_array_get(m, 1));
		return 0;
	}
	return bad(t, e, f, "%s is neither \"a b\" nor [\"a\", \"b\"]", show(m, s, sizeof(s)));
}

static int load_merges(coli_tok *t, json_t *merges, coli_err *e)
{
	char f[64];
	if (!json_is_array(merges))
		return not_a(t, e, "model.merges", merges, "an array");
	size_t n = json_array_size(merges);
	if (tok_merges_init(&t->merges, n, e))
		return -1;
	tok_buf cat = {0};
	for (size_t i = 0; i < n; i++) {
		const char *a = NULL, *b = NULL;
		size_t an = 0, bn = 0;
		if (merge_parts(t, json_array_get(merges, i), i, &a, &an, &b, &bn, e))
			goto fail;
		int32_t ia = tok_strmap_find(&t->vocab, a, an), ib = tok_strmap_find(&t->vocab, b, bn);
		cat.n = 0;
		if (tok_buf_put(&cat, a, an, e) || tok_buf_put(&cat, b, bn, e))
			goto fail;
		int32_t im = tok_strmap_find(&t->vocab, cat.p, cat.n);
		snprintf(f, sizeof(f), "model.merges[%zu]", i);
		if (ia < 0 || ib < 0 || im < 0) {
			bad(t, e, f, "token \"%.*s\" is not in model.vocab",
			    (int)(ia < 0 ? an : ib < 0 ? bn : cat.n),
			    ia < 0 ? a : ib < 0 ? b : cat.p);
			goto fail;
		}
		tok_merges_set(&t->merges, t->vocab.val[ia], t->vocab.val[ib], (int32_t)i,
			       t->vocab.val[im]);
	}
	free(cat.p);
	return 0;
fail:
	free(cat.p);
	return -1;
}

static int load_model(coli_tok *t, json_t *root, coli_err *e)
{
	char b[80];
	json_t *m = json_object_get(root, "model");
	if (!json_is_object(m))
		return not_a(t, e, "model", m, "an object");
	json_t *type = json_object_get(m, "type");
	if (type && !(json_is_string(type) && !strcmp(json_string_value(type), "BPE")))
		return bad(t, e, "model.type", "%s unsupported (supported: BPE)",
			   show(type, b, sizeof(b)));
	if (must_be_off(t, m, "dropout", e) || must_be_off(t, m, "byte_fallback", e) ||
	    must_be_off(t, m, "continuing_subword_prefix", e) ||
	    must_be_off(t, m, "end_of_word_suffix", e) ||
	    get_bool(t, m, "fuse_unk", 0, "model", &t->fuse_unk, e) ||
	    get_bool(t, m, "ignore_merges", 0, "model", &t->ignore_merges, e))
		return -1;
	if (load_vocab(t, json_object_get(m, "vocab"), e) ||
	    load_merges(t, json_object_get(m, "merges"), e))
		return -1;
	json_t *unk = json_object_get(m, "unk_token");
	t->unk_id = -1;
	if (unk && !json_is_null(unk)) {
		int32_t i = json_is_string(unk) ? tok_strmap_find(&t->vocab, json_string_value(unk),
								  json_string_length(unk))
						: -1;
		if (i < 0)
			return bad(t, e, "model.unk_token", "%s is not in model.vocab",
				   show(unk, b, sizeof(b)));
		t->unk_id = t->vocab.val[i];
	}
	return 0;
}

/* ---- added tokens ---- */

static int load_added_one(coli_tok *t, json_t *o, int i, coli_err *e)
{
	char at[48], f[64], b[80];
	tok_added *a = &t->added[i];
	snprintf(at, sizeof(at), "added_tokens[%d]", i);
	if (!json_is_object(o))
		return not_a(t, e, at, o, "an object");
	json_t *id = json_object_get(o, "id"), *c = json_object_get(o, "content");
	json_int_t v = json_is_integer(id) ? json_integer_value(id) : -1;
	snprintf(f, sizeof(f), "%s.id", at);
	if (v < 0 || v >= TOK_MAX_ID)
		return bad(t, e, f, "%s is not an id in [0, %d)", show(id, b, sizeof(b)), TOK_MAX_ID);
	snprintf(f, sizeof(f), "%s.content", at);
	if (!json_is_string(c) || !json_string_length(c))
		return bad(t, e, f, "%s is not a non-empty string", show(c, b, sizeof(b)));
	int special, normalized, lstrip, rstrip, single_word;
	if (get_bool(t, o, "special", 0, at, &special, e) ||
	    get_bool(t, o, "normalized", !special, at, &normalized, e) ||
	    get_bool(t, o, "lstrip", 0, at, &lstrip, e) ||
	    get_bool(t, o, "rstrip", 0, at, &rstrip, e) ||
	    get_bool(t, o, "single_word", 0, at, &single_word, e))
		return -1;
	a->id = (int32_t)v;
	a->len = json_string_length(c);
	a->content = tok_alloc(a->len + 1, 1, t->path, e);
	if (!a->content)
		return -1;
	memcpy(a->content, json_string_value(c), a->len);
	a->special = (uint8_t)special;
	a->normalized = (uint8_t)normalized;
	a->lstrip = (uint8_t)lstrip;
	a->rstrip = (uint8_t)rstrip;
	a->single_word = (uint8_t)single_word;
	if (a->id >= t->n_ids)
		t->n_ids = a->id + 1;
	return 0;
}

static int load_added(coli_tok *t, json_t *root, coli_err *e)
{
	json_t *arr = json_object_get(root, "added_tokens");
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return not_a(t, e, "added_tokens", arr, "an array");
	if (json_array_size(arr) > TOK_MAX_ID)
		return bad(t, e, "added_tokens", "%zu entries exceed %d", json_array_size(arr),
			   TOK_MAX_ID);
	t->added = tok_alloc(json_array_size(arr), sizeof(*t->added), t->path, e);
	if (!t->added)
		return -1;
	t->n_added = (int)json_array_size(arr); /* once t->added holds them (coli_tok_free) */
	for (int i = 0; i < t->n_added; i++)
		if (load_added_one(t, json_array_get(arr, (size_t)i), i, e))
			return -1;
	return 0;
}

/* ---- normalizer ---- */

static int load_normalizer(coli_tok *t, json_t *n, const char *at, int depth, coli_err *e)
{
	static const struct {
		const char *name;
		int opt;
	} forms[] = {
		{"NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE},
		{"NFD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE},
		{"NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
		{"NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT},
	};
	char f[160];
	if (!n || json_is_null(n))
		return 0;
	const char *type = type_of(t, n, at, e);
	if (!type)
		return -1;
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		if (strcmp(type, forms[i].name))
			continue;
		if (t->n_norm == TOK_MAX_NORM)
			return bad(t, e, at, "more than %d normalizers", TOK_MAX_NORM);
		t->norm[t->n_norm++] = forms[i].opt;
		return 0;
	}
	if (strcmp(type, "Sequence") || depth > 4)
		return unsupported(t, e, at, type, "NFC, NFD, NFKC, NFKD, Sequence");
	json_t *list = json_object_get(n, "normalizers");
	snprintf(f, sizeof(f), "%s.normalizers", at);
	if (!json_is_array(list))
		return not_a(t, e, f, list, "an array");
	for (size_t i = 0; i < json_array_size(list); i++) {
		snprintf(f, sizeof(f), "%s.normalizers[%zu]", at, i);
		if (load_normalizer(t, json_array_get(list, i), f, depth + 1, e))
			return -1;
	}
	return 0;
}

/* ---- pre-tokenizer ---- */

static int add_split(coli_tok *t, const char *pat, size_t n, int literal, int behavior,
		     int invert, const char *at, const char *field, coli_err *e)
{
	tok_split *s = realloc(t->splits, (size_t)(t->n_splits + 1) * sizeof(*s));
	if (!s)
		return coli_errf(e, COLI_ENOMEM, "%s: cannot allocate the pre-tokenizer", t->path);
	t->splits = s;
	s = &t->splits[t->n_splits];
	char f[160];
	snprintf(f, sizeof(f), "%s.%s", at, field);
	if (tok_regex_compile(&s->re, pat, n, literal, t->path, f, e))
		return -1;
	s->behavior = behavior;
	s->invert = invert;
	t->n_splits++;
	return 0;
}

static int load_split(coli_tok *t, json_t *o, const char *at, coli_err *e)
{
	static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
					    "MergedWithNext", "Contiguous"};
	char f[160], b[80];
	json_t *beh = json_object_get(o, "behavior"), *pat = json_object_get(o, "pattern");
	int behavior = -1, invert;
	for (int i = 0; i < 5 && json_is_string(beh); i++)
		if (!strcmp(json_string_value(beh), names[i]))
			behavior = i;
	snprintf(f, sizeof(f), "%s.behavior", at);
	if (behavior < 0)
		return bad(t, e, f, "%s unsupported (supported: Removed, Isolated, "
			   "MergedWithPrevious, MergedWithNext, Contiguous)", show(beh, b, sizeof(b)));
	if (get_bool(t, o, "invert", 0, at, &invert, e))
		return -1;
	json_t *re = json_object_get(pat, "Regex"), *str = json_object_get(pat, "String");
	snprintf(f, sizeof(f), "%s.pattern", at);
	if (!json_is_object(pat) || !(json_is_string(re) || json_is_string(str)))
		return bad(t, e, f, "%s has neither a \"Regex\" nor a \"String\"",
			   show(pat, b, sizeof(b)));
	json_t *p = json_is_string(re) ? re : str;
	return add_split(t, json_string_value(p), json_string_length(p), p == str, behavior,
			 invert, at, p == str ? "pattern.String" : "pattern.Regex", e);
}

static int load_byte_level(coli_tok *t, json_t *o, const char *at, coli_err *e)
{
	if (get_bool(t, o, "add_prefix_space", 1, at, &t->bl_prefix_space, e) ||
	    get_bool(t, o, "use_regex", 1, at, &t->bl_use_regex, e))
		return -1;
	if (t->bl_use_regex)
		return tok_regex_compile(&t->bl_regex, GPT2_PATTERN, strlen(GPT2_PATTERN), 0,
					 t->path, "ByteLevel regex", e);
	return 0;
}

/* One step; *seen_bl tells that ByteLevel (which must come last) was met. */
static int load_pretok(coli_tok *t, json_t *o, const char *at, int depth, int *seen_bl,
		       coli_err *e)
{
	char f[160];
	const char *type = type_of(t, o, at, e);
	if (!type)
		return -1;
	if (*seen_bl)
		return bad(t, e, at, "\"%s\" after ByteLevel is unsupported (ByteLevel must be the "
			   "last pre-tokenizer)", type);
	if (!strcmp(type, "ByteLevel")) {
		*seen_bl = 1;
		return load_byte_level(t, o, at, e);
	}
	if (!strcmp(type, "Split"))
		return load_split(t, o, at, e);
	if (!strcmp(type, "Digits")) {
		int individual;
		if (get_bool(t, o, "individual_digits", 0, at, &individual, e))
			return -1;
		const char *pat = individual ? "\\p{N}" : "\\p{N}+";
		return add_split(t, pat, strlen(pat), 0, TOK_ISOLATED, 0, at, "Digits", e);
	}
	if (strcmp(type, "Sequence") || depth > 4)
		return unsupported(t, e, at, type, "ByteLevel, Split, Digits, Sequence");
	json_t *list = json_object_get(o, "pretokenizers");
	snprintf(f, sizeof(f), "%s.pretokenizers", at);
	if (!json_is_array(list))
		return not_a(t, e, f, list, "an array");
	for (size_t i = 0; i < json_array_size(list); i++) {
		snprintf(f, sizeof(f), "%s.pretokenizers[%zu]", at, i);
		if (load_pretok(t, json_array_get(list, i), f, depth + 1, seen_bl, e))
			return -1;
	}
	return 0;
}

static int load_pre_tokenizer(coli_tok *t, json_t *root, coli_err *e)
{
	json_t *p = json_object_get(root, "pre_tokenizer");
	int seen_bl = 0;
	if (!p || json_is_null(p))
		return bad(t, e, "pre_tokenizer", "missing: only byte-level BPE is supported (a "
			   "ByteLevel pre-tokenizer is required)");
	if (load_pretok(t, p, "pre_tokenizer", 0, &seen_bl, e))
		return -1;
	if (!seen_bl)
		return bad(t, e, "pre_tokenizer", "no ByteLevel step: only byte-level BPE is "
			   "supported");
	return 0;
}

static int load_decoder(coli_tok *t, json_t *root, coli_err *e)
{
	char f[64];
	json_t *d = json_object_get(root, "decoder");
	if (!d || json_is_null(d))
		return bad(t, e, "decoder", "missing: a ByteLevel decoder is required");
	const char *type = type_of(t, d, "decoder", e);
	if (!type)
		return -1;
	if (!strcmp(type, "ByteLevel"))
		return 0;
	json_t *list = json_object_get(d, "decoders");
	if (strcmp(type, "Sequence") || !json_is_array(list) || !json_array_size(list))
		return unsupported(t, e, "decoder", type, "ByteLevel, Sequence of ByteLevel");
	for (size_t i = 0; i < json_array_size(list); i++) {
		snprintf(f, sizeof(f), "decoder.decoders[%zu]", i);
		if (!(type = type_of(t, json_array_get(list, i), f, e)))
			return -1;
		if (strcmp(type, "ByteLevel"))
			return unsupported(t, e, f, type, "ByteLevel");
	}
	return 0;
}

/* ---- derived tables ---- */

/* What each added token is searched as: normalized tokens through the normalizer. */
static int added_match_strings(coli_tok *t, coli_err *e)
{
	for (int i = 0; i < t->n_added; i++) {
		tok_added *a = &t->added[i];
		const char *s = a->content;
		size_t n = a->len;
		if (a->normalized && tok_normalize(t, a->content, a->len, &s, &n, e))
			return -1;
		a->match = tok_alloc(n + 1, 1, t->path, e);
		if (!a->match)
			return -1;
		memcpy(a->match, s, n);
		a->match_len = n;
	}
	return tok_trie_build(&t->trie_raw, t->added, t->n_added, 0, e) ||
	       tok_trie_build(&t->trie_norm, t->added, t->n_added, 1, e);
}

static int id_tables(coli_tok *t, coli_err *e)
{
	t->vocab_entry = tok_alloc((size_t)t->n_ids, sizeof(int32_t), t->path, e);
	t->added_of_id = tok_alloc((size_t)t->n_ids, sizeof(int32_t), t->path, e);
	if (!t->vocab_entry || !t->added_of_id)
		return -1;
	for (int32_t i = 0; i < t->n_ids; i++)
		t->vocab_entry[i] = t->added_of_id[i] = -1;
	for (uint32_t i = 0; i < t->vocab.count; i++) {
		int32_t id = t->vocab.val[i], prev = t->vocab_entry[id];
		if (prev >= 0)
			return bad(t, e, "model.vocab", "id %d is given to both \"%.60s\" and \"%.60s\"",
				   (int)id, t->vocab.keys + t->vocab.koff[prev],
				   t->vocab.keys + t->vocab.koff[i]);
		t->vocab_entry[id] = (int32_t)i;
	}
	for (int i = 0; i < t->n_added; i++)
		t->added_of_id[t->added[i].id] = i;
	for (int b = 0; b < 256; b++) {
		uint8_t u[4];
		int32_t k = tok_strmap_find(&t->vocab, (const char *)u,
					    (size_t)tok_utf8_put(u, tok_bl_cp[b]));
		t->byte_id[b] = k < 0 ? -1 : t->vocab.val[k];
	}
	return 0;
}

/* The tree's memory back to the system. Freed, its small chunks (60 MiB for Qwen3's 151k entries)
 * stay in the heap, resident, beside the tables: the run's budget counts the tables only. */
static void trim_heap(void)
{
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

int tok_load_json(coli_tok *t, coli_err *e)
{
	json_error_t je;
	FILE *f = fopen(t->path, "rb");
	if (!f)
		return coli_errf(e, COLI_EIO, "%s: cannot open: %s", t->path, strerror(errno));
	json_t *root = json_loadf(f, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
	fclose(f);
	if (!root)
		return coli_errf(e, COLI_EDATA, "%s: line %d column %d: bad JSON: %s", t->path,
				 je.line, je.column, je.text);
	int rc = -1;
	tok_bl_init();
	if (!json_is_object(root))
		bad(t, e, "(top level)", "not a JSON object");
	else if (!load_model(t, root, e) && !load_added(t, root, e) &&
		 !load_normalizer(t, json_object_get(root, "normalizer"), "normalizer", 0, e) &&
		 !load_pre_tokenizer(t, root, e) && !load_decoder(t, root, e) &&
		 !id_tables(t, e) && !added_match_strings(t, e))
		rc = tok_decode_build(t, e);
	json_decref(root);
	trim_heap();
	return rc;
}
