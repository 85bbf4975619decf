/* tokenizer.c: the tokenizer's public API: load, encode pipeline, lookups. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "tok/internal.h"

int coli_tok_load(coli_tok **out, const char *path, coli_err *e)
{
	*out = NULL;
	coli_tok *t = tok_alloc(1, sizeof(*t), path, e);
	if (!t)
		return -1;
	t->path = strdup(path);
	if (!t->path) {
		free(t);
		return coli_errf(e, COLI_ENOMEM, "%s: cannot allocate the path", path);
	}
	if (tok_load_json(t, e)) {
		coli_tok_free(t);
		return -1;
	}
	*out = t;
	return 0;
}

int coli_tok_load_dir(coli_tok **out, const char *dir, coli_err *e)
{
	char *path = coli_path_join(dir, "tokenizer.json");
	*out = NULL;
	if (!path)
		return coli_errf(e, COLI_ENOMEM, "%s: cannot allocate the path of tokenizer.json", dir);
	int rc = access(path, F_OK) == 0 ? coli_tok_load(out, path, e) : 0;
	free(path);
	return rc;
}

size_t coli_tok_bytes(const coli_tok *t)
{
	size_t b = sizeof(*t) + strlen(t->path) + 1 + tok_strmap_bytes(&t->vocab) + tok_merges_bytes(&t->merges);
	b += 2 * (size_t)t->n_ids * sizeof(int32_t) + ((size_t)t->n_ids + 1) * sizeof(*t->dec_off) + t->dec_cap;
	b += (size_t)t->n_splits * sizeof(*t->splits) + tok_regex_bytes(&t->bl_regex);
	for (int i = 0; i < t->n_splits; i++)
		b += tok_regex_bytes(&t->splits[i].re);
	b += (size_t)t->n_added * sizeof(*t->added) + tok_trie_bytes(&t->trie_raw) + tok_trie_bytes(&t->trie_norm);
	for (int i = 0; i < t->n_added; i++)
		b += t->added[i].len + 1 + t->added[i].match_len + 1;
	return b;
}

void coli_tok_free(coli_tok *t)
{
	if (!t)
		return;
	tok_strmap_release(&t->vocab);
	free(t->vocab_entry);
	tok_merges_release(&t->merges);
	for (int i = 0; i < t->n_splits; i++)
		tok_regex_release(&t->splits[i].re);
	free(t->splits);
	tok_regex_release(&t->bl_regex);
	for (int i = 0; i < t->n_added; i++) {
		free(t->added[i].content);
		free(t->added[i].match);
	}
	free(t->added);
	free(t->added_of_id);
	tok_trie_release(&t->trie_raw);
	tok_trie_release(&t->trie_norm);
	free(t->dec);
	free(t->dec_off);
	tok_bpe_release(t);
	free(t->sp_a.p);
	free(t->sp_b.p);
	free(t->pieces);
	free(t->prefixed.p);
	free(t->norm_buf.p);
	free(t->sec_b.p);
	free(t->path);
	free(t);
}

/* A text section left by the raw added-token pass: normalize, cut out normalized added
 * tokens, pre-tokenize and BPE the rest. */
static int encode_text(coli_tok *t, const char *s, size_t n, int parse_special, tok_ids *out,
		       coli_err *e)
{
	const char *ns;
	size_t nn;
	if (tok_normalize(t, s, n, &ns, &nn, e))
		return -1;
	if (t->trie_norm.n[0].child < 0) /* no normalized added tokens */
		return tok_pretok_encode(t, ns, nn, out, e);
	tok_sections *sec = &t->sec_b; /* ns stays valid: only tok_normalize writes norm_buf */
	sec->n = 0;
	int rc = tok_added_split(t, &t->trie_norm, ns, nn, parse_special, sec, e);
	for (size_t i = 0; !rc && i < sec->n; i++) {
		tok_section x = sec->p[i];
		rc = x.added >= 0 ? tok_ids_push(out, t->added[x.added].id, e)
				  : tok_pretok_encode(t, ns + x.off, x.len, out, e);
	}
	return rc;
}

int coli_tok_encode(coli_tok *t, const char *s, size_t n, int parse_special, int32_t **ids,
		    int *n_ids, coli_err *e)
{
	*ids = NULL;
	*n_ids = 0;
	size_t bad = tok_utf8_invalid((const uint8_t *)s, n);
	if (bad < n)
		return coli_errf(e, COLI_EDATA, "input: invalid UTF-8 at byte offset %zu (0x%02x)",
				 bad, (uint8_t)s[bad]);
	tok_sections sec = {0};
	tok_ids out = {0};
	int rc = tok_added_split(t, &t->trie_raw, s, n, parse_special, &sec, e);
	for (size_t i = 0; !rc && i < sec.n; i++) {
		tok_section x = sec.p[i];
		rc = x.added >= 0 ? tok_ids_push(&out, t->added[x.added].id, e)
				  : encode_text(t, s + x.off, x.len, parse_special, &out, e);
	}
	free(sec.p);
	if (!rc && out.n > (size_t)INT32_MAX)
		rc = coli_errf(e, COLI_EDATA, "input: more than %d tokens", INT32_MAX);
	if (rc) {
		free(out.p);
		return -1;
	}
	*ids = out.p;
	*n_ids = (int)out.n;
	return 0;
}

size_t coli_tok_utf8_invalid(const char *s, size_t n)
{
	return tok_utf8_invalid((const uint8_t *)s, n);
}

int coli_tok_vocab_size(const coli_tok *t)
{
	return t->n_ids;
}

int coli_tok_id(const coli_tok *t, const char *token)
{
	size_t n = strlen(token);
	for (int i = t->n_added - 1; i >= 0; i--)
		if (t->added[i].len == n && !memcmp(t->added[i].content, token, n))
			return t->added[i].id;
	int32_t k = tok_strmap_find(&t->vocab, token, n);
	return k < 0 ? -1 : t->vocab.val[k];
}

const char *coli_tok_token(const coli_tok *t, int32_t id)
{
	if (id < 0 || id >= t->n_ids)
		return NULL;
	if (t->added_of_id[id] >= 0)
		return t->added[t->added_of_id[id]].content;
	int32_t k = t->vocab_entry[id];
	return k < 0 ? NULL : t->vocab.keys + t->vocab.koff[k];
}

int coli_tok_is_special(const coli_tok *t, int32_t id)
{
	return id >= 0 && id < t->n_ids && t->added_of_id[id] >= 0 &&
	       t->added[t->added_of_id[id]].special;
}
