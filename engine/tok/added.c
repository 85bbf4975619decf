/* tok/added.c: finding added tokens in text (HF AddedVocabulary::find_matches).
 *
 * Matching is leftmost-longest over the token strings (HF uses Aho-Corasick with
 * LeftmostLongest), done here with a byte trie. A match that fails its single_word test, or a
 * special token when parse_special is 0, is skipped and the search goes on after it. lstrip /
 * rstrip widen a match over the white space before / after it. */
#include <stdlib.h>
#include <string.h>

#include "tok/internal.h"

static int32_t node_new(tok_trie *tr, uint8_t byte, coli_err *e)
{
	if (tr->count == tr->cap) {
		size_t c = tr->cap ? tr->cap * 2 : 64;
		tok_trie_node *q = realloc(tr->n, c * sizeof(*q));
		if (!q)
			return coli_errf(e, COLI_ENOMEM, "tokenizer: cannot allocate %zu bytes",
					 c * sizeof(*q));
		tr->n = q;
		tr->cap = c;
	}
	tr->n[tr->count] = (tok_trie_node){-1, -1, -1, byte};
	return (int32_t)tr->count++;
}

static int32_t child(const tok_trie *tr, int32_t node, uint8_t byte)
{
	for (int32_t c = tr->n[node].child; c >= 0; c = tr->n[c].sibling)
		if (tr->n[c].byte == byte)
			return c;
	return -1;
}

/* Adds a token; a later token with the same string replaces the earlier one. */
static int trie_add(tok_trie *tr, const char *s, size_t n, int32_t token, coli_err *e)
{
	int32_t node = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t b = (uint8_t)s[i];
		int32_t c = child(tr, node, b);
		if (c < 0) {
			if ((c = node_new(tr, b, e)) < 0)
				return -1;
			tr->n[c].sibling = tr->n[node].child;
			tr->n[node].child = c;
		}
		node = c;
	}
	tr->n[node].token = token;
	tr->first[(uint8_t)s[0] >> 3] |= (uint8_t)(1u << ((uint8_t)s[0] & 7));
	return 0;
}

int tok_trie_build(tok_trie *tr, const tok_added *added, int n_added, int normalized,
		   coli_err *e)
{
	memset(tr, 0, sizeof(*tr));
	if (node_new(tr, 0, e) < 0)
		return -1;
	for (int i = 0; i < n_added; i++)
		if (added[i].normalized == normalized && added[i].match_len &&
		    trie_add(tr, added[i].match, added[i].match_len, i, e))
			return -1;
	return 0;
}

size_t tok_trie_bytes(const tok_trie *tr)
{
	return tr->cap * sizeof(*tr->n);
}

void tok_trie_release(tok_trie *tr)
{
	free(tr->n);
	memset(tr, 0, sizeof(*tr));
}

/* Longest token starting at s[i], its end in *end; -1 if none. */
static int32_t longest_at(const tok_trie *tr, const char *s, size_t n, size_t i, size_t *end)
{
	int32_t node = 0, best = -1;
	for (size_t j = i; j < n; j++) {
		node = child(tr, node, (uint8_t)s[j]);
		if (node < 0)
			break;
		if (tr->n[node].token >= 0) {
			best = tr->n[node].token;
			*end = j + 1;
		}
	}
	return best;
}

static int push(tok_sections *out, size_t a, size_t b, int32_t added, coli_err *e)
{
	if (out->n == out->cap) {
		size_t c = out->cap ? out->cap * 2 : 16;
		tok_section *q = realloc(out->p, c * sizeof(*q));
		if (!q)
			return coli_errf(e, COLI_ENOMEM, "tokenizer: cannot allocate %zu bytes",
					 c * sizeof(*q));
		out->p = q;
		out->cap = c;
	}
	out->p[out->n++] = (tok_section){a, b - a, added};
	return 0;
}

/* HF's single_word: no word character right before or right after the match. */
static int single_word_ok(const char *s, size_t n, size_t a, size_t b)
{
	if (a > 0 && tok_is_word(tok_utf8_prev((const uint8_t *)s, a)))
		return 0;
	int32_t cp;
	if (b < n && (tok_utf8_next((const uint8_t *)s + b, n - b, &cp), tok_is_word(cp)))
		return 0;
	return 1;
}

/* lstrip: start moved back over white space, not before floor. */
static size_t strip_left(const char *s, size_t start, size_t floor)
{
	while (start > floor && tok_is_white_space(tok_utf8_prev((const uint8_t *)s, start))) {
		start--;
		while (start > floor && ((uint8_t)s[start] & 0xC0) == 0x80)
			start--;
	}
	return start;
}

/* rstrip: end moved on over white space. */
static size_t strip_right(const char *s, size_t n, size_t end)
{
	int32_t cp;
	int l;
	while (end < n && (l = tok_utf8_next((const uint8_t *)s + end, n - end, &cp)) &&
	       tok_is_white_space(cp))
		end += (size_t)l;
	return end;
}

int tok_added_split(const coli_tok *t, const tok_trie *tr, const char *s, size_t n,
		    int parse_special, tok_sections *out, coli_err *e)
{
	size_t done = 0, i = 0;
	while (i < n) {
		uint8_t b0 = (uint8_t)s[i];
		size_t end = 0;
		int32_t k = -1;
		if (tr->first[b0 >> 3] & (1u << (b0 & 7)))
			k = longest_at(tr, s, n, i, &end);
		if (k < 0) {
			i++;
			continue;
		}
		const tok_added *a = &t->added[k];
		size_t start = i;
		i = end;
		if ((a->special && !parse_special) ||
		    (a->single_word && !single_word_ok(s, n, start, end)))
			continue;
		if (a->lstrip)
			start = strip_left(s, start, done);
		if (a->rstrip)
			i = end = strip_right(s, n, end);
		if (start > done && push(out, done, start, -1, e))
			return -1;
		if (push(out, start, end, k, e))
			return -1;
		done = end;
	}
	if (done < n && push(out, done, n, -1, e))
		return -1;
	return 0;
}
