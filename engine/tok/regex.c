/* tok/regex.c: tokenizer.json regexes (Oniguruma syntax, as HF compiles them) run on PCRE2.
 *
 * PCRE2 with UTF + UCP agrees with Oniguruma on \p{..}, (?i:..), lookarounds and \d. These
 * differ and are rewritten: \s / \S (Oniguruma: Unicode White_Space, which includes U+0085),
 * \w / \W (Oniguruma: letters, marks, Nd, Nl, Pc, joiners), \h / \H (Oniguruma: hex digit),
 * \uHHHH (Oniguruma only). ^ and $ are line anchors in Oniguruma's Ruby syntax: MULTILINE.
 * Class intersection [A&&B] (Kimi's pattern has [\p{L}&&[^\p{Han}]]) becomes lookaheads;
 * other nested classes are rejected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/internal.h"

#define WORD_BODY "\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{200C}\\x{200D}"
#define HEX_BODY "0-9A-Fa-f"

typedef struct out_t {
	char *p;
	size_t n, cap;
	int oom;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (o->n + n + 1 > o->cap) {
		size_t c = o->cap ? o->cap * 2 : 256;
		while (c < o->n + n + 1)
			c *= 2;
		char *q = realloc(o->p, c);
		if (!q) {
			o->oom = 1;
			return;
		}
		o->p = q;
		o->cap = c;
	}
	memcpy(o->p + o->n, s, n);
	o->n += n;
	o->p[o->n] = '\0';
}

static void puts_(out_t *o, const char *s)
{
	put(o, s, strlen(s));
}

/* Length of the UTF-8 character starting with byte b (1 for stray bytes). */
static size_t char_len(uint8_t b)
{
	return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

/* One escape at pat[i] == '\\'; returns the bytes consumed or 0 with why set. */
static size_t escape(out_t *o, const char *pat, size_t n, size_t i, int in_class, char *why,
		     size_t why_n)
{
	if (i + 1 >= n) {
		snprintf(why, why_n, "pattern ends with a backslash");
		return 0;
	}
	char c = pat[i + 1];
	const char *neg_in_class = NULL;
	switch (c) {
	case 's':
		puts_(o, "\\p{White_Space}");
		return 2;
	case 'S':
		puts_(o, "\\P{White_Space}");
		return 2;
	case 'w':
		puts_(o, in_class ? WORD_BODY : "[" WORD_BODY "]");
		return 2;
	case 'h':
		puts_(o, in_class ? HEX_BODY : "[" HEX_BODY "]");
		return 2;
	case 'W':
		neg_in_class = "[^" WORD_BODY "]";
		break;
	case 'H':
		neg_in_class = "[^" HEX_BODY "]";
		break;
	case 'u':
		if (i + 6 <= n && strspn(pat + i + 2, "0123456789abcdefABCDEF") >= 4) {
			puts_(o, "\\x{");
			put(o, pat + i + 2, 4);
			puts_(o, "}");
			return 6;
		}
		snprintf(why, why_n, "\\u at offset %zu is not followed by 4 hex digits", i);
		return 0;
	default:
		put(o, pat + i, 1 + char_len((uint8_t)c));
		return 1 + char_len((uint8_t)c);
	}
	if (in_class) {
		snprintf(why, why_n, "\\%c inside a character class (offset %zu) is unsupported",
			 c, i);
		return 0;
	}
	puts_(o, neg_in_class);
	return 2;
}

/* Index just past the ']' closing the class that opens at pat[i], 0 if unterminated.
 * Knows escapes, POSIX brackets, a literal leading ']' and Oniguruma's nested classes. */
static size_t class_end(const char *pat, size_t n, size_t i)
{
	int depth = 0;
	size_t j = i;
	while (j < n) {
		char c = pat[j];
		if (c == '\\' && j + 1 < n) {
			j += 1 + char_len((uint8_t)pat[j + 1]);
		} else if (c == '[' && depth > 0 && j + 1 < n && pat[j + 1] == ':') {
			const char *end = strstr(pat + j, ":]");
			if (!end || (size_t)(end - pat) >= n)
				return 0;
			j = (size_t)(end - pat) + 2;
		} else if (c == '[') {
			depth++;
			j++;
			if (j < n && pat[j] == '^')
				j++;
			if (j < n && pat[j] == ']')
				j++; /* a leading ']' is literal */
		} else if (c == ']') {
			j++;
			if (--depth == 0)
				return j;
		} else
			j += char_len((uint8_t)c);
	}
	return 0;
}

/* Items of a class pat[a..b) (no brackets around, no nesting) copied with escapes rewritten. */
static int class_items(out_t *o, const char *pat, size_t a, size_t b, char *why, size_t why_n)
{
	size_t i = a;
	while (i < b) {
		size_t used;
		if (pat[i] == '\\') {
			if (!(used = escape(o, pat, b, i, 1, why, why_n)))
				return -1;
		} else if (pat[i] == '[' && i + 1 < b && pat[i + 1] == ':') {
			used = (size_t)(strstr(pat + i, ":]") - (pat + i)) + 2;
			put(o, pat + i, used);
		} else if (pat[i] == '[' || (pat[i] == '&' && i + 1 < b && pat[i + 1] == '&')) {
			snprintf(why, why_n, "nested character class at offset %zu is unsupported", i);
			return -1;
		} else {
			used = char_len((uint8_t)pat[i]);
			put(o, pat + i, used);
		}
		i += used;
	}
	return 0;
}

/* A class without nesting, pat[a..b) including its brackets. */
static int simple_class(out_t *o, const char *pat, size_t a, size_t b, char *why, size_t why_n)
{
	size_t k = a + 1 + (pat[a + 1] == '^');
	put(o, pat + a, k - a);
	if (pat[k] == ']') /* a leading ']' is literal */
		put(o, pat + k++, 1);
	if (class_items(o, pat, k, b - 1, why, why_n))
		return -1;
	put(o, "]", 1);
	return 0;
}

/* Oniguruma's [A&&B&&...] (each operand plain items or one nested class, as in Kimi's
 * [\p{L}&&[^\p{Han}]]) becomes (?:(?=B)...A): the lookaheads test, A consumes. */
static int intersection(out_t *o, const char *pat, size_t a, size_t b, char *why, size_t why_n)
{
	size_t ops[16][2], nops = 0, k = a + 1, start = k;
	if (pat[k] == '^') {
		snprintf(why, why_n, "negated class intersection at offset %zu is unsupported", a);
		return -1;
	}
	while (k < b - 1) {
		size_t e = pat[k] == '[' && pat[k + 1] != ':' ? class_end(pat, b - 1, k) : 0;
		if (pat[k] == '&' && pat[k + 1] == '&') {
			if (nops == 15)
				break;
			ops[nops][0] = start, ops[nops++][1] = k;
			start = k += 2;
		} else
			k = e ? e : k + (pat[k] == '\\' ? 1 + char_len((uint8_t)pat[k + 1])
						  : char_len((uint8_t)pat[k]));
	}
	ops[nops][0] = start, ops[nops++][1] = b - 1;
	put(o, "(?:", 3);
	for (size_t i = nops; i-- > 0;) {
		size_t s = ops[i][0], t = ops[i][1];
		int nested = s < t && pat[s] == '[' && class_end(pat, t, s) == t;
		if (i > 0)
			put(o, "(?=", 3);
		if (nested ? simple_class(o, pat, s, t, why, why_n)
			   : (put(o, "[", 1), class_items(o, pat, s, t, why, why_n)))
			return -1;
		if (!nested)
			put(o, "]", 1);
		if (i > 0)
			put(o, ")", 1);
	}
	put(o, ")", 1);
	return 0;
}

int tok_regex_translate(const char *pat, size_t n, char **out, size_t *out_n, char *why,
			size_t why_n)
{
	out_t o = {0};
	size_t i = 0;
	while (i < n) {
		size_t used, end;
		if (pat[i] == '\\') {
			if (!(used = escape(&o, pat, n, i, 0, why, why_n)))
				goto fail;
		} else if (pat[i] == '[') {
			if (!(end = class_end(pat, n, i))) {
				snprintf(why, why_n, "unterminated character class at offset %zu", i);
				goto fail;
			}
			int rc = memmem(pat + i, end - i, "&&", 2)
					 ? intersection(&o, pat, i, end, why, why_n)
					 : simple_class(&o, pat, i, end, why, why_n);
			if (rc)
				goto fail;
			used = end - i;
		} else {
			used = char_len((uint8_t)pat[i]);
			if (i + used > n)
				used = n - i;
			put(&o, pat + i, used);
		}
		i += used;
	}
	put(&o, "", 0);
	if (o.oom) {
		snprintf(why, why_n, "out of memory");
		goto fail;
	}
	*out = o.p;
	*out_n = o.n;
	return 0;
fail:
	free(o.p);
	return -1;
}

int tok_regex_compile(tok_regex *r, const char *pat, size_t n, int literal, const char *path,
		      const char *field, coli_err *e)
{
	char why[160] = "";
	char *tr = NULL;
	size_t tr_n = n;
	memset(r, 0, sizeof(*r));
	if (!literal && tok_regex_translate(pat, n, &tr, &tr_n, why, sizeof(why)))
		return coli_errf(e, COLI_EDATA, "%s: %s: %s", path, field, why);
	uint32_t opt = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : PCRE2_MULTILINE);
	int ec;
	PCRE2_SIZE eo;
	r->code = pcre2_compile((PCRE2_SPTR)(literal ? pat : tr), tr_n, opt, &ec, &eo, NULL);
	free(tr);
	if (!r->code) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(ec, msg, sizeof(msg));
		return coli_errf(e, COLI_EDATA, "%s: %s: does not compile: %s", path, field,
				 (char *)msg);
	}
	pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
	r->md = pcre2_match_data_create_from_pattern(r->code, NULL);
	if (!r->md) {
		tok_regex_release(r);
		return coli_errf(e, COLI_ENOMEM, "%s: %s: cannot allocate match data", path, field);
	}
	return 0;
}

size_t tok_regex_bytes(const tok_regex *r)
{
	size_t code = 0, jit = 0;
	if (!r->code)
		return 0;
	pcre2_pattern_info(r->code, PCRE2_INFO_SIZE, &code);
	pcre2_pattern_info(r->code, PCRE2_INFO_JITSIZE, &jit);
	return code + jit + pcre2_get_match_data_size(r->md);
}

void tok_regex_release(tok_regex *r)
{
	pcre2_match_data_free(r->md);
	pcre2_code_free(r->code);
	memset(r, 0, sizeof(*r));
}

int tok_regex_next(tok_regex *r, const char *s, size_t n, size_t *pos, size_t *mstart,
		   size_t *mend, coli_err *e)
{
	if (*pos > n)
		return 0;
	int rc = pcre2_match(r->code, (PCRE2_SPTR)s, n, *pos, PCRE2_NO_UTF_CHECK, r->md, NULL);
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc < 0) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(rc, msg, sizeof(msg));
		return coli_errf(e, COLI_EDATA, "tokenizer: regex match failed at byte %zu: %s",
				 *pos, (char *)msg);
	}
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(r->md);
	*mstart = ov[0];
	*mend = ov[1];
	/* an empty match moves the search on by one character */
	*pos = ov[1] > ov[0] ? ov[1] : ov[1] < n ? ov[1] + char_len((uint8_t)s[ov[1]]) : n + 1;
	return 1;
}
