/* tok/decode.c: ids -> UTF-8 text (HF ByteLevel decoder), whole or streamed token by token.
 *
 * Each id decodes to bytes: an added token to its content verbatim; a vocabulary token whose
 * characters are all in the byte-level alphabet to those bytes; any other token to its own
 * UTF-8 (as HF's decoder does). The byte stream is then made valid UTF-8: each maximal
 * invalid subsequence becomes U+FFFD (from_utf8_lossy). A byte run is cut at every added
 * token, as HF decodes the text between added tokens separately. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/internal.h"

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Bytes token string s decodes to, appended to b. */
static int decode_token(const char *s, size_t n, int verbatim, tok_buf *b, coli_err *e)
{
	size_t start = b->n;
	for (size_t i = 0; !verbatim && i < n;) {
		int32_t cp;
		i += (size_t)tok_utf8_next((const uint8_t *)s + i, n - i, &cp);
		int byte = tok_bl_byte(cp);
		if (byte < 0) {
			b->n = start;
			verbatim = 1;
			break;
		}
		uint8_t u = (uint8_t)byte;
		if (tok_buf_put(b, &u, 1, e))
			return -1;
	}
	return verbatim ? tok_buf_put(b, s, n, e) : 0;
}

int tok_decode_build(coli_tok *t, coli_err *e)
{
	tok_buf b = {0};
	t->dec_off = tok_alloc((size_t)t->n_ids + 1, sizeof(*t->dec_off), t->path, e);
	if (!t->dec_off)
		return -1;
	for (int32_t id = 0; id < t->n_ids; id++) {
		t->dec_off[id] = (uint32_t)b.n;
		int32_t k = t->added_of_id[id], v = t->vocab_entry[id];
		int rc = 0;
		if (k >= 0)
			rc = decode_token(t->added[k].content, t->added[k].len, 1, &b, e);
		else if (v >= 0)
			rc = decode_token(t->vocab.keys + t->vocab.koff[v], t->vocab.klen[v], 0, &b, e);
		if (rc || b.n > UINT32_MAX) {
			free(b.p);
			return rc ? -1 : coli_errf(e, COLI_EDATA, "%s: decoded tokens exceed 4 GiB", t->path);
		}
	}
	t->dec_off[t->n_ids] = (uint32_t)b.n;
	t->dec = b.p ? b.p : tok_alloc(1, 1, t->path, e);
	t->dec_cap = b.p ? b.cap : 1;
	return t->dec ? 0 : -1;
}

struct coli_detok {
	const coli_tok *t;
	int skip_special;
	uint8_t pend[4]; /* held-back start of an incomplete character */
	int npend;
	tok_buf out;
};

int coli_detok_new(coli_detok **out, const coli_tok *t, int skip_special, coli_err *e)
{
	coli_detok *d = tok_alloc(1, sizeof(*d), "tokenizer: decoder", e);
	if (!d)
		return -1;
	d->t = t;
	d->skip_special = skip_special;
	if (tok_buf_put(&d->out, REPLACEMENT, sizeof(REPLACEMENT), e)) { /* room for flush */
		free(d);
		return -1;
	}
	d->out.n = 0;
	*out = d;
	return 0;
}

void coli_detok_free(coli_detok *d)
{
	if (!d)
		return;
	free(d->out.p);
	free(d);
}

enum { STEP_CHAR, STEP_BAD, STEP_SHORT };

/* Classifies s[0..n): a whole valid character (STEP_CHAR), an invalid maximal subpart
 * (STEP_BAD), or a valid but incomplete start of a character (STEP_SHORT); *len bytes. */
static int utf8_step(const uint8_t *s, size_t n, size_t *len)
{
	uint8_t b = s[0];
	size_t need;
	uint8_t lo = 0x80, hi = 0xBF;
	if (b < 0x80) {
		*len = 1;
		return STEP_CHAR;
	}
	if (b >= 0xC2 && b <= 0xDF)
		need = 2;
	else if (b >= 0xE0 && b <= 0xEF) {
		need = 3;
		lo = b == 0xE0 ? 0xA0 : 0x80;
		hi = b == 0xED ? 0x9F : 0xBF;
	} else if (b >= 0xF0 && b <= 0xF4) {
		need = 4;
		lo = b == 0xF0 ? 0x90 : 0x80;
		hi = b == 0xF4 ? 0x8F : 0xBF;
	} else {
		*len = 1;
		return STEP_BAD;
	}
	for (size_t i = 1; i < need; i++) {
		if (i >= n) {
			*len = i;
			return STEP_SHORT;
		}
		uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
		if (s[i] < l || s[i] > h) {
			*len = i;
			return STEP_BAD;
		}
	}
	*len = need;
	return STEP_CHAR;
}

/* Appends bytes to the stream: complete characters go out, invalid runs as U+FFFD, an
 * incomplete tail is held back. */
static int feed_bytes(coli_detok *d, const uint8_t *s, size_t n, coli_err *e)
{
	while (n) {
		uint8_t tmp[8];
		const uint8_t *p = s;
		size_t avail = n, len, from_s;
		if (d->npend) { /* complete the held-back character first */
			size_t k = n < 4 ? n : 4;
			memcpy(tmp, d->pend, (size_t)d->npend);
			memcpy(tmp + d->npend, s, k);
			p = tmp;
			avail = (size_t)d->npend + k;
		}
		int kind = utf8_step(p, avail, &len);
		if (kind == STEP_SHORT) {
			memcpy(d->pend, p, len);
			from_s = len - (size_t)d->npend;
			d->npend = (int)len;
		} else {
			int rc = kind == STEP_CHAR ? tok_buf_put(&d->out, p, len, e)
						   : tok_buf_put(&d->out, REPLACEMENT, 3, e);
			if (rc)
				return -1;
			from_s = len - (size_t)d->npend;
			d->npend = 0;
		}
		s += from_s;
		n -= from_s;
	}
	return 0;
}

int coli_detok_feed(coli_detok *d, int32_t id, const char **text, size_t *len, coli_err *e)
{
	const coli_tok *t = d->t;
	d->out.n = 0;
	d->out.p[0] = '\0';
	*text = d->out.p;
	*len = 0;
	if (id < 0)
		return coli_errf(e, COLI_EUSAGE, "id %d: not a token id", (int)id);
	if (id >= t->n_ids || (t->vocab_entry[id] < 0 && t->added_of_id[id] < 0))
		return 0; /* a padded vocabulary's id: no text */
	int32_t k = t->added_of_id[id];
	if (k >= 0 && t->added[k].special && d->skip_special)
		return 0;
	if (k >= 0 && d->npend) {
		d->npend = 0;
		if (tok_buf_put(&d->out, REPLACEMENT, 3, e))
			return -1;
	}
	const uint8_t *s = (const uint8_t *)t->dec + t->dec_off[id];
	size_t n = t->dec_off[id + 1] - t->dec_off[id];
	if (k >= 0 ? tok_buf_put(&d->out, s, n, e) : feed_bytes(d, s, n, e))
		return -1;
	*text = d->out.p;
	*len = d->out.n;
	return 0;
}

void coli_detok_flush(coli_detok *d, const char **text, size_t *len)
{
	d->out.n = 0;
	if (d->npend) { /* the buffer always has room for one U+FFFD */
		memcpy(d->out.p, REPLACEMENT, 3);
		d->out.n = 3;
		d->npend = 0;
	}
	d->out.p[d->out.n] = '\0';
	*text = d->out.p;
	*len = d->out.n;
}

int coli_tok_decode(const coli_tok *t, const int32_t *ids, int n, int skip_special, char **out,
		    size_t *len, coli_err *e)
{
	coli_detok *d;
	tok_buf b = {0};
	const char *s;
	size_t k;
	if (coli_detok_new(&d, t, skip_special, e))
		return -1;
	for (int i = 0; i < n; i++) {
		if (coli_detok_feed(d, ids[i], &s, &k, e) || tok_buf_put(&b, s, k, e)) {
			char where[32];
			snprintf(where, sizeof(where), "ids[%d]", i);
			coli_err_prefix(e, where);
			goto fail;
		}
	}
	coli_detok_flush(d, &s, &k);
	if (tok_buf_put(&b, s, k, e))
		goto fail;
	coli_detok_free(d);
	*out = b.p;
	*len = b.n;
	return 0;
fail:
	coli_detok_free(d);
	free(b.p);
	return -1;
}
