/* options.c: parsing argv against an option table, and the --help text of the same table. */
#include "options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsing --------------------------------------------------------------------------------- */

typedef struct parser {
	const coli_option *opts;
	int argc, i;               /* argv[i] is the argument being read */
	char **argv;
	coli_err *e;
} parser;

static int is_option(const coli_option *o)
{
	return o->kind > COLI_OPTION_TEXT;
}

/* Every kind after FLAG takes a value, but a callback only when it names one. */
static int takes_value(const coli_option *o)
{
	return o->kind > COLI_OPTION_FLAG && (o->kind != COLI_OPTION_CALLBACK || o->arg);
}

int coli_opts_int(const char *s, long long lo, long long hi, int *out, coli_err *e)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (*s && !*end && !errno && v >= lo && v <= hi) {
		*out = (int)v;
		return 0;
	}
	return coli_errf(e, COLI_EUSAGE, "'%s' is not %s in %lld..%lld", s, lo >= 0 ? "a count" : "an integer", lo, hi);
}

int coli_opts_int_list(const char *s, long long lo, long long hi, int **out, int *n, coli_err *e)
{
	int count = 1, k = 0, rc = 0;
	for (const char *c = s; *c; c++)
		count += *c == ',';
	int *v = calloc((size_t)count, sizeof(*v));
	char *copy = strdup(s), *save = NULL;
	if (!v || !copy) {
		free(v), free(copy);
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	}
	for (char *item, *c = copy; rc == 0 && (item = strtok_r(c, ",", &save)); c = NULL)
		rc = coli_opts_int(item, lo, hi, &v[k++], e);
	free(copy);
	if (rc == 0 && k != count)
		rc = coli_errf(e, COLI_EUSAGE, "'%s' has an empty item", s);
	if (rc < 0)
		return free(v), -1;
	*out = v, *n = count;
	return 0;
}

static int parse_int(const coli_option *o, const char *s, coli_err *e)
{
	return coli_opts_int(s, o->lo, o->hi, (int *)o->value, e);
}

static int parse_u64(const coli_option *o, const char *s, coli_err *e)
{
	char *end;
	int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	errno = 0;
	unsigned long long v = strtoull(s, &end, hex ? 16 : 10);
	if (*s && *s != '-' && *s != '+' && !*end && !errno && end != s + 2 * hex) {
		*(uint64_t *)o->value = v;
		return 0;
	}
	return coli_errf(e, COLI_EUSAGE, "'%s' is not an unsigned 64-bit integer", s);
}

/* A bound as people write it: 1048576, not 1.04858e+06. */
static void bound(char *buf, size_t cap, double v)
{
	if (v == (double)(long long)v)
		snprintf(buf, cap, "%lld", (long long)v);
	else
		snprintf(buf, cap, "%g", v);
}

static int parse_real(const coli_option *o, const char *s, coli_err *e)
{
	char *end, lo[32], hi[32];
	errno = 0;
	double v = strtod(s, &end);
	if (*s && !*end && !errno && (o->open_lo ? v > o->flo : v >= o->flo) && v <= o->fhi) {
		if (o->kind == COLI_OPTION_FLOAT)
			*(float *)o->value = (float)v;
		else
			*(double *)o->value = v;
		return 0;
	}
	bound(lo, sizeof(lo), o->flo);
	bound(hi, sizeof(hi), o->fhi);
	return coli_errf(e, COLI_EUSAGE, "'%s' is not a number in %c%s, %s]", s,
			 o->open_lo ? '(' : '[', lo, hi);
}

/* "on or off", "uring, threads or mmap". */
static void choice_list(const coli_choice *c, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = 0;
	for (int i = 0; c[i].word && n < cap; i++) {
		const char *sep = i == 0 ? "" : c[i + 1].word ? ", " : " or ";
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", sep, c[i].word);
	}
}

static int parse_choice(const coli_option *o, const char *s, coli_err *e)
{
	char list[256];
	for (const coli_choice *c = o->choices; c->word; c++)
		if (!strcmp(c->word, s)) {
			*(int *)o->value = c->value;
			return 0;
		}
	choice_list(o->choices, list, sizeof(list));
	return coli_errf(e, COLI_EUSAGE, "'%s' is not %s", s, list);
}

static int push_string(const coli_option *o, const char *s, coli_err *e)
{
	if (*o->count >= o->max_count)
		return coli_errf(e, COLI_EUSAGE, "'%s' is one too many (at most %d)", s, o->max_count);
	((const char **)o->value)[(*o->count)++] = s;
	return 0;
}

/* Stores the option's value; on failure e says what is wrong with s, without the name. */
static int store(const coli_option *o, const char *s, coli_err *e)
{
	switch (o->kind) {
	case COLI_OPTION_HELP: *(int *)o->value = 1; return 0;
	case COLI_OPTION_FLAG: *(int *)o->value = o->set; return 0;
	case COLI_OPTION_INT: return parse_int(o, s, e);
	case COLI_OPTION_U64: return parse_u64(o, s, e);
	case COLI_OPTION_DOUBLE:
	case COLI_OPTION_FLOAT: return parse_real(o, s, e);
	case COLI_OPTION_STRING: *(const char **)o->value = s; return 0;
	case COLI_OPTION_STRINGS: return push_string(o, s, e);
	case COLI_OPTION_CHOICE: return parse_choice(o, s, e);
	case COLI_OPTION_CALLBACK: return o->fn(o, s, e);
	default: return coli_errf(e, COLI_EUSAGE, "not an option");
	}
}

/* Applies option o named `name` with value s (NULL when it takes none). */
static int apply(parser *p, const coli_option *o, const char *name, const char *s)
{
	if (store(o, s, p->e) < 0) {
		coli_err_prefix(p->e, name);
		return -1;
	}
	if (o->implies)
		*o->implies = 1;
	return o->kind == COLI_OPTION_HELP;
}

/* The value of a long option: after '=', else the next argument. */
static const char *long_value(parser *p, const coli_option *o, const char *eq)
{
	if (eq)
		return eq + 1;
	if (p->i + 1 < p->argc)
		return p->argv[++p->i];
	coli_errf(p->e, COLI_EUSAGE, "--%s needs a value", o->long_name);
	return NULL;
}

/* "ambiguous option '--pr' (--prompt, --prompt-ids)". */
static void ambiguous(parser *p, const char *name, size_t len)
{
	char list[512];
	size_t n = 0;
	list[0] = 0;
	for (const coli_option *o = p->opts; o->kind && n < sizeof(list); o++)
		if (is_option(o) && o->long_name && !strncmp(o->long_name, name, len))
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s--%s", n ? ", " : "", o->long_name);
	coli_errf(p->e, COLI_EUSAGE, "ambiguous option '--%.*s' (%s)", (int)len, name, list);
}

/* The entry whose long name is name[0..len), or the only one it is a prefix of. */
static const coli_option *find_long(parser *p, const char *name, size_t len)
{
	const coli_option *hit = NULL;
	int n = 0;
	for (const coli_option *o = p->opts; o->kind; o++) {
		if (!is_option(o) || !o->long_name || strncmp(o->long_name, name, len))
			continue;
		if (!o->long_name[len])
			return o;
		hit = o, n++;
	}
	if (n == 1 && len)
		return hit;
	if (n > 1 && len)
		ambiguous(p, name, len);
	else
		coli_errf(p->e, COLI_EUSAGE, "unknown option '--%.*s'", (int)len, name);
	return NULL;
}

/* argv[i] is "--name" or "--name=value". */
static int take_long(parser *p)
{
	const char *name = p->argv[p->i] + 2, *eq = strchr(name, '=');
	const coli_option *o = find_long(p, name, eq ? (size_t)(eq - name) : strlen(name));
	char full[128];
	if (!o)
		return -1;
	if (!takes_value(o) && eq)
		return coli_errf(p->e, COLI_EUSAGE, "--%s takes no value", o->long_name);
	const char *s = takes_value(o) ? long_value(p, o, eq) : NULL;
	if (takes_value(o) && !s)
		return -1;
	snprintf(full, sizeof(full), "--%s", o->long_name);
	return apply(p, o, full, s);
}

static const coli_option *find_short(parser *p, char c)
{
	for (const coli_option *o = p->opts; o->kind; o++)
		if (is_option(o) && o->short_name == c)
			return o;
	coli_errf(p->e, COLI_EUSAGE, "unknown option '-%c'", c);
	return NULL;
}

/* argv[i] is "-x", "-xVALUE", "-x VALUE" or bundled flags "-qv". */
static int take_short(parser *p)
{
	const char *a = p->argv[p->i];
	for (int j = 1; a[j]; j++) {
		const coli_option *o = find_short(p, a[j]);
		char name[3] = {'-', a[j], 0};
		if (!o)
			return -1;
		if (!takes_value(o)) {
			int rc = apply(p, o, name, NULL);
			if (rc)
				return rc;
			continue;
		}
		if (!a[j + 1] && p->i + 1 >= p->argc)
			return coli_errf(p->e, COLI_EUSAGE, "%s needs a value", name);
		return apply(p, o, name, a[j + 1] ? a + j + 1 : p->argv[++p->i]);
	}
	return 0;
}

int coli_opts_parse(const coli_option *opts, int argc, char **argv, coli_err *e)
{
	parser p = {opts, argc, 1, argv, e};
	int n = 0, rc = 0, ended = 0;
	for (; p.i < argc && rc == 0; p.i++) {
		char *a = argv[p.i];
		if (ended || a[0] != '-' || !a[1])
			argv[n++] = a;
		else if (!strcmp(a, "--"))
			ended = 1;
		else
			rc = a[1] == '-' ? take_long(&p) : take_short(&p);
	}
	if (rc < 0)
		return -1;
	argv[n] = NULL;
	return n;
}

/* ---- --help ---------------------------------------------------------------------------------- */

/* Option names wider than this go on a line of their own, their help on the next. */
#define NAMES_MAX 24

/* "-m, --model PATH", "--prefetch on|off", "-n N". */
static void names(const coli_option *o, char *buf, size_t cap)
{
	char arg[128] = "";
	if (o->kind == COLI_OPTION_CHOICE && !o->arg)
		for (const coli_choice *c = o->choices; c->word; c++)
			snprintf(arg + strlen(arg), sizeof(arg) - strlen(arg), "%s%s",
				 c == o->choices ? " " : "|", c->word);
	else if (takes_value(o))
		snprintf(arg, sizeof(arg), " %s", o->arg ? o->arg : "VALUE");
	if (o->short_name && o->long_name)
		snprintf(buf, cap, "-%c, --%s%s", o->short_name, o->long_name, arg);
	else if (o->long_name)
		snprintf(buf, cap, "--%s%s", o->long_name, arg);
	else
		snprintf(buf, cap, "-%c%s", o->short_name, arg);
}

/* The help column: two spaces, the widest names that fit NAMES_MAX, two spaces. */
static int help_column(const coli_option *opts)
{
	size_t w = 0;
	char buf[256];
	for (const coli_option *o = opts; o->kind; o++) {
		if (!is_option(o) || !o->help)
			continue;
		names(o, buf, sizeof(buf));
		if (strlen(buf) <= NAMES_MAX && strlen(buf) > w)
			w = strlen(buf);
	}
	return 2 + (int)w + 2;
}

/* The --help text being built: a growing string (never printed here). */
typedef struct text {
	char *s;
	size_t len, cap;
	int failed; /* out of memory: the text is dropped */
} text;

/* Appends printf output to t; the characters appended. */
static int put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int put(text *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (t->failed || n < 0)
		return n < 0 ? 0 : n;
	if (t->len + (size_t)n + 1 > t->cap) {
		size_t cap = (t->len + (size_t)n + 1) * 2;
		char *s = realloc(t->s, cap);
		if (!s)
			return t->failed = 1, n;
		t->s = s, t->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
	return n;
}

/* Writes text from column col (already reached), breaking at spaces so that no line exceeds
 * COLI_HELP_WIDTH; continuation lines, and those after a '\n' in text, start at column indent. */
static void wrap(text *f, const char *s, int col, int indent)
{
	int fresh = 1; /* nothing written on this line yet */
	while (*s) {
		size_t n = strcspn(s, " \n");
		if (!fresh && col + 1 + (int)n > COLI_HELP_WIDTH)
			col = put(f, "\n%*s", indent, "") - 1, fresh = 1;
		if (n)
			col += put(f, "%s%.*s", fresh ? "" : " ", (int)n, s), fresh = 0;
		s += n;
		if (*s == '\n')
			col = put(f, "\n%*s", indent, "") - 1, fresh = 1;
		if (*s)
			s++;
	}
	put(f, "\n");
}

static void option_row(text *f, const coli_option *o, int column)
{
	char buf[256];
	names(o, buf, sizeof(buf));
	int col = put(f, "  %s", buf);
	if (col + 2 > column)
		col = put(f, "\n") - 1;
	col += put(f, "%*s", column - col, "");
	wrap(f, o->help, col, column);
}

/* The --help text into f. */
static void help(text *f, const char *const *synopsis, const coli_option *opts)
{
	for (int i = 0; synopsis[i]; i++)
		wrap(f, synopsis[i], put(f, "%s", i ? "       " : "usage: "), 7);
	put(f, "\n");
	int column = help_column(opts);
	for (const coli_option *o = opts; o->kind; o++) {
		if (o->kind == COLI_OPTION_GROUP || o->kind == COLI_OPTION_TEXT)
			wrap(f, o->help, 0, 0);
		else if (o->help)
			option_row(f, o, column);
	}
}

char *coli_opts_usage(const char *tool, const char *msg, const char *const *synopsis,
		      const coli_option *opts)
{
	text t = {0};
	if (msg)
		put(&t, "%s: %s\n", tool, msg);
	help(&t, synopsis, opts);
	if (t.failed || !t.s) {
		free(t.s);
		return NULL;
	}
	return t.s;
}

char *coli_opts_help(const char *const *synopsis, const coli_option *opts)
{
	return coli_opts_usage(NULL, NULL, synopsis, opts);
}
