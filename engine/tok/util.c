/* tok/util.c: growable buffers, UTF-8 decoding, Unicode classes and the byte-level alphabet. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok/internal.h"

void *tok_alloc(size_t n, size_t size, const char *what, coli_err *e)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		coli_errf(e, COLI_ENOMEM, "%s: cannot allocate %zu bytes", what, n * size);
	return p;
}

/* Grows *p to hold at least need elements of size bytes. */
static int grow(void **p, size_t *cap, size_t need, size_t size, coli_err *e)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 16;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * size);
	if (!q)
		return coli_errf(e, COLI_ENOMEM, "tokenizer: cannot allocate %zu bytes", c * size);
	*p = q;
	*cap = c;
	return 0;
}

int tok_buf_put(tok_buf *b, const void *s, size_t n, coli_err *e)
{
	if (grow((void **)&b->p, &b->cap, b->n + n + 1, 1, e))
		return -1;
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return 0;
}

int tok_ids_push(tok_ids *v, int32_t id, coli_err *e)
{
	if (v->n == v->cap && grow((void **)&v->p, &v->cap, v->n + 1, sizeof(*v->p), e))
		return -1;
	v->p[v->n++] = id;
	return 0;
}

int tok_ids_put(tok_ids *v, const int32_t *ids, size_t n, coli_err *e)
{
	if (grow((void **)&v->p, &v->cap, v->n + n, sizeof(*v->p), e))
		return -1;
	if (n)
		memcpy(v->p + v->n, ids, n * sizeof(*ids));
	v->n += n;
	return 0;
}

int tok_spans_push(tok_spans *v, size_t off, size_t len, coli_err *e)
{
	if (v->n == v->cap && grow((void **)&v->p, &v->cap, v->n + 1, sizeof(*v->p), e))
		return -1;
	v->p[v->n].off = off;
	v->p[v->n].len = len;
	v->n++;
	return 0;
}

/* Length of the valid UTF-8 sequence at s (Unicode table 3-7), 0 if invalid or cut short. */
static int utf8_valid_len(const uint8_t *s, size_t n)
{
	uint8_t b = s[0];
	if (b < 0x80)
		return 1;
	int len;
	uint8_t lo = 0x80, hi = 0xBF;
	if (b >= 0xC2 && b <= 0xDF)
		len = 2;
	else if (b >= 0xE0 && b <= 0xEF) {
		len = 3;
		if (b == 0xE0)
			lo = 0xA0;
		if (b == 0xED)
			hi = 0x9F;
	} else if (b >= 0xF0 && b <= 0xF4) {
		len = 4;
		if (b == 0xF0)
			lo = 0x90;
		if (b == 0xF4)
			hi = 0x8F;
	} else
		return 0;
	if (n < (size_t)len || s[1] < lo || s[1] > hi)
		return 0;
	for (int i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return len;
}

size_t tok_utf8_invalid(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		int l = utf8_valid_len(s + i, n - i);
		if (!l)
			return i;
		i += (size_t)l;
	}
	return n;
}

int tok_utf8_next(const uint8_t *s, size_t n, int32_t *cp)
{
	int l = utf8_valid_len(s, n);
	if (l <= 1) {
		*cp = s[0];
		return 1;
	}
	int32_t c = s[0] & (0x7F >> l);
	for (int i = 1; i < l; i++)
		c = (c << 6) | (s[i] & 0x3F);
	*cp = c;
	return l;
}

int32_t tok_utf8_prev(const uint8_t *s, size_t n)
{
	size_t i = n - 1;
	while (i > 0 && n - i < 4 && (s[i] & 0xC0) == 0x80)
		i--;
	int32_t cp;
	tok_utf8_next(s + i, n - i, &cp);
	return cp;
}

int tok_utf8_put(uint8_t out[4], int32_t cp)
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xC0 | (cp >> 6));
		out[1] = (uint8_t)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xE0 | (cp >> 12));
		out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (uint8_t)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (uint8_t)(0xF0 | (cp >> 18));
	out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (uint8_t)(0x80 | (cp & 0x3F));
	return 4;
}

int tok_is_white_space(int32_t cp)
{
	return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
	       cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
	       cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Rust regex's \w is Alphabetic + M + Nd + Pc + Join_Control; letters and Nl stand in for
 * Alphabetic (its few other members are circled letters and such). */
int tok_is_word(int32_t cp)
{
	if (cp == 0x200C || cp == 0x200D)
		return 1;
	switch (utf8proc_category(cp)) {
	case UTF8PROC_CATEGORY_LU:
	case UTF8PROC_CATEGORY_LL:
	case UTF8PROC_CATEGORY_LT:
	case UTF8PROC_CATEGORY_LM:
	case UTF8PROC_CATEGORY_LO:
	case UTF8PROC_CATEGORY_MN:
	case UTF8PROC_CATEGORY_MC:
	case UTF8PROC_CATEGORY_ME:
	case UTF8PROC_CATEGORY_ND:
	case UTF8PROC_CATEGORY_NL:
	case UTF8PROC_CATEGORY_PC:
		return 1;
	default:
		return 0;
	}
}

int32_t tok_bl_cp[256];
static int16_t bl_byte[512]; /* inverse of tok_bl_cp; every alphabet code point is < 324 */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
 * take code points 256, 257, ... in byte order. */
static void bl_init_once(void)
{
	int32_t next = 256;
	for (int b = 0; b < 256; b++) {
		int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
		tok_bl_cp[b] = printable ? b : next++;
	}
	for (int i = 0; i < 512; i++)
		bl_byte[i] = -1;
	for (int b = 0; b < 256; b++)
		bl_byte[tok_bl_cp[b]] = (int16_t)b;
}

void tok_bl_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, bl_init_once);
}

int tok_bl_byte(int32_t cp)
{
	return cp >= 0 && cp < 512 ? bl_byte[cp] : -1;
}
