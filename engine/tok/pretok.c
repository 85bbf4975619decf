/* tok/pretok.c: normalizer (utf8proc) and pre-tokenizer (Split steps, then ByteLevel). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok/internal.h"

static int all_ascii(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((uint8_t)s[i] >= 0x80)
			return 0;
	return 1;
}

/* Applies the normalizer steps; ASCII text is left alone (it is invariant under all four
 * normalization forms). *out points into t->norm_buf or at s. */
int tok_normalize(coli_tok *t, const char *s, size_t n, const char **out, size_t *out_n,
		  coli_err *e)
{
	*out = s;
	*out_n = n;
	if (!t->n_norm || all_ascii(s, n))
		return 0;
	for (int i = 0; i < t->n_norm; i++) {
		utf8proc_uint8_t *dst = NULL;
		utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)*out,
						  (utf8proc_ssize_t)*out_n, &dst,
						  (utf8proc_option_t)t->norm[i]);
		if (r < 0)
			return coli_errf(e, r == UTF8PROC_ERROR_NOMEM ? COLI_ENOMEM : COLI_EDATA,
					 "tokenizer: normalizer: %s", utf8proc_errmsg(r));
		t->norm_buf.n = 0;
		int rc = tok_buf_put(&t->norm_buf, dst, (size_t)r, e);
		free(dst);
		if (rc)
			return -1;
		*out = t->norm_buf.p;
		*out_n = t->norm_buf.n;
	}
	return 0;
}

/* The regex's matches and the gaps between them, covering s[0..n) (HF Pattern::find_matches),
 * with is-match flipped when invert. */
static int find_matches(tok_split *sp, const char *s, size_t n, tok_piece **ps, size_t *np,
			size_t *cap, coli_err *e)
{
	size_t pos = 0, prev = 0, ms, me;
	int rc;
	*np = 0;
	for (;;) {
		rc = tok_regex_next(&sp->re, s, n, &pos, &ms, &me, e);
		if (rc < 0)
			return -1;
		if (*np + 2 > *cap) {
			size_t c = *cap ? *cap * 2 : 64;
			tok_piece *q = realloc(*ps, c * sizeof(*q));
			if (!q)
				return coli_errf(e, COLI_ENOMEM, "tokenizer: cannot allocate %zu bytes",
						 c * sizeof(*q));
			*ps = q;
			*cap = c;
		}
		if (!rc)
			break;
		if (ms > prev)
			(*ps)[(*np)++] = (tok_piece){prev, ms, sp->invert};
		(*ps)[(*np)++] = (tok_piece){ms, me, !sp->invert};
		prev = me;
	}
	if (prev < n || n == 0)
		(*ps)[(*np)++] = (tok_piece){prev, n, sp->invert};
	return 0;
}

/* Rewrites the pieces per the behavior (HF NormalizedString::split); match then means
 * "remove". */
static size_t apply_behavior(tok_piece *p, size_t np, int behavior)
{
	size_t k = 0;
	int prev_match = 0;
	switch (behavior) {
	case TOK_REMOVED:
		return np;
	case TOK_ISOLATED:
		for (size_t i = 0; i < np; i++)
			p[i].match = 0;
		return np;
	case TOK_CONTIGUOUS:
		for (size_t i = 0; i < np; i++) {
			int m = p[i].match;
			if (m == prev_match && k)
				p[k - 1].b = p[i].b;
			else
				p[k++] = (tok_piece){p[i].a, p[i].b, 0};
			prev_match = m;
		}
		return k;
	case TOK_MERGED_PREV:
		for (size_t i = 0; i < np; i++) {
			int m = p[i].match;
			if (m && !prev_match && k)
				p[k - 1].b = p[i].b;
			else
				p[k++] = (tok_piece){p[i].a, p[i].b, 0};
			prev_match = m;
		}
		return k;
	default: /* TOK_MERGED_NEXT: the same, walking backwards */
		k = np;
		for (size_t i = np; i-- > 0;) {
			int m = p[i].match;
			if (m && !prev_match && k < np)
				p[k].a = p[i].a;
			else
				p[--k] = (tok_piece){p[i].a, p[i].b, 0};
			prev_match = m;
		}
		memmove(p, p + k, (np - k) * sizeof(*p));
		return np - k;
	}
}

int tok_split_apply(coli_tok *t, tok_split *sp, const char *s, size_t n, size_t base,
		    tok_spans *out, coli_err *e)
{
	size_t np;
	if (find_matches(sp, s, n, &t->pieces, &np, &t->pieces_cap, e))
		return -1;
	tok_piece *ps = t->pieces;
	np = apply_behavior(ps, np, sp->behavior);
	for (size_t i = 0; i < np; i++)
		if (!ps[i].match && ps[i].b > ps[i].a &&
		    tok_spans_push(out, base + ps[i].a, ps[i].b - ps[i].a, e))
			return -1;
	return 0;
}

/* ByteLevel step on one piece: optional prefix space, optional GPT-2 split, then BPE. */
static int byte_level(coli_tok *t, const char *s, size_t n, tok_ids *out, coli_err *e)
{
	if (t->bl_prefix_space && s[0] != ' ') {
		t->prefixed.n = 0;
		if (tok_buf_put(&t->prefixed, " ", 1, e) || tok_buf_put(&t->prefixed, s, n, e))
			return -1;
		s = t->prefixed.p;
		n = t->prefixed.n;
	}
	if (!t->bl_use_regex)
		return tok_bpe_word(t, (const uint8_t *)s, n, out, e);
	size_t pos = 0, prev = 0, ms, me;
	int rc;
	while ((rc = tok_regex_next(&t->bl_regex, s, n, &pos, &ms, &me, e)) > 0) {
		if (ms > prev && tok_bpe_word(t, (const uint8_t *)s + prev, ms - prev, out, e))
			return -1;
		if (me > ms && tok_bpe_word(t, (const uint8_t *)s + ms, me - ms, out, e))
			return -1;
		prev = me;
	}
	if (rc < 0)
		return -1;
	if (prev < n && tok_bpe_word(t, (const uint8_t *)s + prev, n - prev, out, e))
		return -1;
	return 0;
}

int tok_pretok_encode(coli_tok *t, const char *s, size_t n, tok_ids *out, coli_err *e)
{
	if (!n)
		return 0;
	tok_spans *a = &t->sp_a, *b = &t->sp_b;
	a->n = 0;
	if (tok_spans_push(a, 0, n, e))
		return -1;
	for (int k = 0; k < t->n_splits; k++) {
		b->n = 0;
		for (size_t i = 0; i < a->n; i++)
			if (tok_split_apply(t, &t->splits[k], s + a->p[i].off, a->p[i].len,
					    a->p[i].off, b, e))
				return -1;
		tok_spans *tmp = a;
		a = b;
		b = tmp;
	}
	for (size_t i = 0; i < a->n; i++)
		if (byte_level(t, s + a->p[i].off, a->p[i].len, out, e))
			return -1;
	return 0;
}
