/* route.c: the route_trace v1 reader: header lines, one checked row per routed expert, then the
 * table's shape (complete entries, contiguous positions, prefill before decode). */
#include "route.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

#define COLUMNS "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes"
#define N_FIELDS 9

typedef struct span {
	const char *s;
	size_t n;
} span;

/* The buffer being read and the line at hand. */
typedef struct rparser {
	const char *p, *end;       /* what is left after the current line */
	const char *name;
	int line;                  /* 1-based number of the current line */
	span ln;                   /* the current line, without LF (nor a CR before it) */
	coli_err *e;
} rparser;

/* One row, checked on its own. */
typedef struct row {
	int32_t pos, layer, slot, expert, line, phase;
	float w;
} row;

/* Where the table is built: the rows, then per position its phase and first line, per entry
 * slot the line that filled it. */
typedef struct build {
	row *rows;
	size_t n_rows, cap;
	int32_t max_pos, max_pos_line, first_decode_line;
	int8_t *phase;             /* [n_positions]: -1 before a row names the position */
	int32_t *pos_line;         /* [n_positions] */
	int32_t *slot_line;        /* [n_positions][n_layers][top_k]: 0 while unfilled */
} build;

/* "NAME: line N: FIELD: <problem>": the file, the line, the field and the value. */
__attribute__((format(printf, 4, 5))) static int bad(const rparser *s, int line, const char *field, const char *fmt, ...)
{
	char what[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (line > 0)
		return coli_errf(s->e, COLI_EDATA, "%s: line %d: %s: %s", s->name, line, field, what);
	return coli_errf(s->e, COLI_EDATA, "%s: %s: %s", s->name, field, what);
}

/* The next line into s->ln: 0, 1 at the end of the data, -1 for a control byte in it. */
static int next_line(rparser *s)
{
	if (s->p >= s->end)
		return 1;
	const char *nl = memchr(s->p, '\n', (size_t)(s->end - s->p)), *stop = nl ? nl : s->end;
	s->ln = (span){s->p, (size_t)(stop - s->p)};
	s->p = nl ? nl + 1 : s->end;
	s->line++;
	if (s->ln.n && s->ln.s[s->ln.n - 1] == '\r')
		s->ln.n--;
	for (size_t i = 0; i < s->ln.n; i++) {
		unsigned char c = (unsigned char)s->ln.s[i];
		if (c < 0x20 || c == 0x7f)
			return bad(s, s->line, "line", "control byte 0x%02x at column %zu", c, i + 1);
	}
	return 0;
}

/* The next line, which must exist: what names what it should have been. */
static int need_line(rparser *s, const char *what)
{
	int rc = next_line(s);
	if (rc > 0)
		return bad(s, s->line + 1, what, "missing: the file ends after %d lines", s->line);
	return rc;
}

static int span_is(span v, const char *lit)
{
	return v.n == strlen(lit) && memcmp(v.s, lit, v.n) == 0;
}

/* A decimal integer of digits only, at most max; bound says where max comes from. */
static int uint_field(const rparser *s, const char *field, span v, uint64_t max, const char *bound, uint64_t *out)
{
	uint64_t x = 0;
	int ok = v.n > 0 && v.n <= 20;
	for (size_t i = 0; ok && i < v.n; i++) {
		unsigned d = (unsigned)(v.s[i] - '0');
		ok = d <= 9 && x <= (UINT64_MAX - d) / 10;
		x = x * 10 + d;
	}
	if (!ok)
		return bad(s, s->line, field, "'%.*s' is not a decimal integer", (int)(v.n > 40 ? 40 : v.n), v.s);
	if (x > max)
		return bad(s, s->line, field, "%llu out of range 0..%llu%s", (unsigned long long)x,
			   (unsigned long long)max, bound);
	*out = x;
	return 0;
}

/* A routing weight: a finite decimal number >= 0 (finite as a float too). */
static int weight_field(const rparser *s, span v, float *out)
{
	char buf[64], *end;
	int ok = v.n > 0 && v.n < sizeof(buf) && ((v.s[0] >= '0' && v.s[0] <= '9') || v.s[0] == '.');
	double x = 0;
	if (ok) {
		memcpy(buf, v.s, v.n);
		buf[v.n] = 0;
		ok = strspn(buf, "0123456789.eE+-") == v.n; /* decimal: no hex float */
	}
	if (ok) {
		x = strtod(buf, &end);
		ok = *end == 0 && isfinite(x) && isfinite((float)x);
	}
	if (!ok)
		return bad(s, s->line, "weight", "'%.*s' is not a finite number >= 0", (int)(v.n > 40 ? 40 : v.n), v.s);
	*out = (float)x;
	return 0;
}

/* "key=VALUE" at *at: VALUE runs to the next space, where key `next` follows, or to the end of
 * the line when next is NULL; *at moves past it and its space. */
static int take(const rparser *s, span *at, const char *key, const char *next, span *v)
{
	size_t k = strlen(key);
	if (at->n <= k || memcmp(at->s, key, k) || at->s[k] != '=')
		return bad(s, s->line, key, "expected '%s=' at '%.*s'", key, (int)(at->n > 40 ? 40 : at->n), at->s);
	const char *sp = next ? memchr(at->s + k + 1, ' ', at->n - k - 1) : NULL;
	if (next && !sp)
		return bad(s, s->line, next, "missing: the line ends after '%s='", key);
	*v = (span){at->s + k + 1, (sp ? (size_t)(sp - at->s) : at->n) - k - 1};
	size_t used = sp ? (size_t)(sp - at->s) + 1 : at->n;
	*at = (span){at->s + used, at->n - used};
	return 0;
}

/* A "key=N" count of the second line, 1..max. */
static int take_count(const rparser *s, span *at, const char *key, const char *next, uint64_t max, int *out)
{
	span v;
	uint64_t x;
	if (take(s, at, key, next, &v) < 0 || uint_field(s, key, v, UINT64_MAX, "", &x) < 0)
		return -1;
	if (x == 0 || x > max)
		return bad(s, s->line, key, "%llu out of range 1..%llu", (unsigned long long)x, (unsigned long long)max);
	*out = (int)x;
	return 0;
}

static char *dup_span(span v, coli_err *e)
{
	char *d = coli_malloc(v.n + 1, e);
	if (d) {
		memcpy(d, v.s, v.n);
		d[v.n] = 0;
	}
	return d;
}

/* Line 1: "# route_trace v1". */
static int magic_line(rparser *s)
{
	static const char pre[] = "# route_trace v";
	if (need_line(s, "magic") < 0)
		return -1;
	if (s->ln.n < sizeof(pre) - 1 || memcmp(s->ln.s, pre, sizeof(pre) - 1))
		return bad(s, 1, "magic", "'%.*s' is not '# route_trace v1': not a route trace", (int)(s->ln.n > 40 ? 40 :
			   s->ln.n), s->ln.s);
	span v = {s->ln.s + sizeof(pre) - 1, s->ln.n - (sizeof(pre) - 1)};
	if (!span_is(v, "1"))
		return bad(s, 1, "version", "'%.*s', this reader knows route_trace v1", (int)(v.n > 20 ? 20 : v.n), v.s);
	return 0;
}

/* Line 2: "# model=PATH arch=ARCH n_layer=L n_expert=E n_expert_used=K" (PATH may hold spaces:
 * it runs to the last " arch="). */
static int model_line(rparser *s, coli_route *r)
{
	static const char pre[] = "# model=", arch[] = " arch=";
	if (need_line(s, "model") < 0)
		return -1;
	const char *a = NULL;
	for (const char *q = s->ln.s; s->ln.n >= sizeof(arch) - 1 && q <= s->ln.s + s->ln.n - (sizeof(arch) - 1); q++)
		if (memcmp(q, arch, sizeof(arch) - 1) == 0)
			a = q;
	if (s->ln.n < sizeof(pre) - 1 || memcmp(s->ln.s, pre, sizeof(pre) - 1) || !a || a < s->ln.s + sizeof(pre) - 1)
		return bad(s, 2, "model", "'%.*s' is not '# model=PATH arch=ARCH n_layer=L n_expert=E n_expert_used=K'",
			   (int)(s->ln.n > 60 ? 60 : s->ln.n), s->ln.s);
	span at = {a + 1, (size_t)(s->ln.s + s->ln.n - a - 1)}, v;
	if (!(r->model = dup_span((span){s->ln.s + sizeof(pre) - 1, (size_t)(a - s->ln.s) - (sizeof(pre) - 1)}, s->e)) ||
	    take(s, &at, "arch", "n_layer", &v) < 0 || !(r->arch = dup_span(v, s->e)) ||
	    take_count(s, &at, "n_layer", "n_expert", COLI_ROUTE_MAX_LAYERS, &r->n_layers) < 0 ||
	    take_count(s, &at, "n_expert", "n_expert_used", COLI_ROUTE_MAX_EXPERTS, &r->n_experts) < 0 ||
	    take_count(s, &at, "n_expert_used", NULL, COLI_ROUTE_MAX_TOP_K, &r->top_k) < 0)
		return -1;
	if (r->top_k > r->n_experts)
		return bad(s, 2, "n_expert_used", "%d exceeds n_expert %d", r->top_k, r->n_experts);
	return 0;
}

/* Lines 3 .. 2 + n_layer: "# layer=L expert_bytes=B dense_bytes=D", L = 0, 1, ... in order. */
static int layer_lines(rparser *s, coli_route *r)
{
	r->expert_bytes = coli_calloc((size_t)r->n_layers, sizeof(uint64_t), s->e);
	r->dense_bytes = coli_calloc((size_t)r->n_layers, sizeof(uint64_t), s->e);
	if (!r->expert_bytes || !r->dense_bytes)
		return -1;
	for (int l = 0; l < r->n_layers; l++) {
		span v;
		uint64_t x;
		if (need_line(s, "layer") < 0)
			return -1;
		if (s->ln.n < 2 || memcmp(s->ln.s, "# ", 2))
			return bad(s, s->line, "layer", "'%.*s' is not '# layer=%d expert_bytes=B dense_bytes=D' (n_layer %d)",
				   (int)(s->ln.n > 40 ? 40 : s->ln.n), s->ln.s, l, r->n_layers);
		span at = {s->ln.s + 2, s->ln.n - 2};
		if (take(s, &at, "layer", "expert_bytes", &v) < 0 || uint_field(s, "layer", v, UINT64_MAX, "", &x) < 0)
			return -1;
		if (x != (uint64_t)l)
			return bad(s, s->line, "layer", "%llu, expected %d (layer lines run 0..%d in order)",
				   (unsigned long long)x, l, r->n_layers - 1);
		if (take(s, &at, "expert_bytes", "dense_bytes", &v) < 0 ||
		    uint_field(s, "expert_bytes", v, UINT64_MAX >> 1, "", &r->expert_bytes[l]) < 0 ||
		    take(s, &at, "dense_bytes", NULL, &v) < 0 ||
		    uint_field(s, "dense_bytes", v, UINT64_MAX >> 1, "", &r->dense_bytes[l]) < 0)
			return -1;
	}
	return 0;
}

static int column_line(rparser *s)
{
	if (need_line(s, "columns") < 0)
		return -1;
	if (!span_is(s->ln, COLUMNS))
		return bad(s, s->line, "columns", "'%.*s', expected '" COLUMNS "'", (int)(s->ln.n > 100 ? 100 : s->ln.n),
			   s->ln.s);
	return 0;
}

/* The line's comma-separated fields; exactly N_FIELDS. */
static int split(const rparser *s, span *f)
{
	int n = 0;
	const char *q = s->ln.s, *end = s->ln.s + s->ln.n;
	for (;;) {
		const char *c = memchr(q, ',', (size_t)(end - q));
		if (n < N_FIELDS)
			f[n] = (span){q, (size_t)((c ? c : end) - q)};
		n++;
		if (!c)
			break;
		q = c + 1;
	}
	if (n != N_FIELDS)
		return bad(s, s->line, "row", "%d fields, expected %d (" COLUMNS ")", n, N_FIELDS);
	return 0;
}

/* One row's fields, each in its range. */
static int parse_row(const rparser *s, const coli_route *r, row *out)
{
	span f[N_FIELDS];
	uint64_t v[N_FIELDS];
	char kb[48], lb[48], eb[48];
	snprintf(lb, sizeof(lb), " (n_layer %d)", r->n_layers);
	snprintf(kb, sizeof(kb), " (n_expert_used %d)", r->top_k);
	snprintf(eb, sizeof(eb), " (n_expert %d)", r->n_experts);
	if (split(s, f) < 0 || uint_field(s, "turn", f[0], UINT64_MAX, "", &v[0]) < 0)
		return -1;
	if (v[0] != 0)
		return bad(s, s->line, "turn", "%llu: a route_trace v1 file holds one turn (turn 0): split a longer "
			   "conversation into one file per turn", (unsigned long long)v[0]);
	if (uint_field(s, "phase", f[1], 1, " (0 prefill, 1 decode)", &v[1]) < 0 ||
	    uint_field(s, "step", f[2], COLI_ROUTE_MAX_POSITIONS - 1, "", &v[2]) < 0 ||
	    uint_field(s, "layer", f[3], (uint64_t)r->n_layers - 1, lb, &v[3]) < 0 ||
	    uint_field(s, "slot", f[4], (uint64_t)r->top_k - 1, kb, &v[4]) < 0 ||
	    uint_field(s, "expert", f[5], (uint64_t)r->n_experts - 1, eb, &v[5]) < 0 || weight_field(s, f[6], &out->w) < 0 ||
	    uint_field(s, "residency", f[7], 1, "", &v[7]) < 0 ||
	    uint_field(s, "expert_bytes", f[8], UINT64_MAX >> 1, "", &v[8]) < 0)
		return -1;
	out->phase = (int32_t)v[1], out->pos = (int32_t)v[2], out->layer = (int32_t)v[3];
	out->slot = (int32_t)v[4], out->expert = (int32_t)v[5], out->line = s->line;
	return 0;
}

static int push_row(build *b, const row *w, coli_err *e)
{
	if (b->n_rows == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 1024;
		row *g = realloc(b->rows, cap * sizeof(*g));
		if (!g)
			return coli_errf(e, COLI_ENOMEM, "out of memory for %zu route rows", cap);
		b->rows = g, b->cap = cap;
	}
	b->rows[b->n_rows++] = *w;
	return 0;
}

/* Every row to the end, checked alone and for the phase order (prefill rows first). */
static int read_rows(rparser *s, const coli_route *r, build *b)
{
	int rc;
	row w;
	b->max_pos = -1;
	while ((rc = next_line(s)) == 0) {
		if (parse_row(s, r, &w) < 0 || push_row(b, &w, s->e) < 0)
			return -1;
		if (w.phase == 0 && b->first_decode_line)
			return bad(s, s->line, "phase", "0 (prefill) after decode rows (from line %d): prefill rows come first",
				   b->first_decode_line);
		if (w.phase == 1 && !b->first_decode_line)
			b->first_decode_line = s->line;
		if (w.pos > b->max_pos)
			b->max_pos = w.pos, b->max_pos_line = s->line;
	}
	if (rc < 0)
		return -1;
	return b->n_rows ? 0 : bad(s, 0, "rows", "none after the column names");
}

/* The table for positions 0..max_pos, once the rows can fill it: every position needs at least
 * (n_layers - 1) x top_k rows (the last layer may be absent), so fewer rows mean missing positions
 * (and the table stays within a small multiple of the rows). */
static int alloc_table(const rparser *s, coli_route *r, build *b)
{
	uint64_t n = (uint64_t)b->max_pos + 1, L = (uint64_t)r->n_layers, k = (uint64_t)r->top_k;
	uint64_t least = n * (L > 1 ? L - 1 : 1) * k;
	if (least > b->n_rows)
		return bad(s, b->max_pos_line, "step", "%d, but %zu rows cannot fill positions 0..%d (%llu rows at least: "
			   "%llu layers x %llu experts each): positions are missing", b->max_pos, b->n_rows, b->max_pos,
			   (unsigned long long)least, (unsigned long long)(L > 1 ? L - 1 : 1), (unsigned long long)k);
	size_t cells = (size_t)(n * L * k);
	r->n_positions = (int)n;
	r->ids = coli_malloc(cells * sizeof(int32_t), s->e);
	r->weights = coli_calloc(cells, sizeof(float), s->e);
	b->slot_line = coli_calloc(cells, sizeof(int32_t), s->e);
	b->phase = coli_malloc((size_t)n, s->e);
	b->pos_line = coli_calloc((size_t)n, sizeof(int32_t), s->e);
	if (!r->ids || !r->weights || !b->slot_line || !b->phase || !b->pos_line)
		return -1;
	memset(r->ids, 0xff, cells * sizeof(int32_t));
	memset(b->phase, 0xff, (size_t)n);
	return 0;
}

/* One row into its entry: a slot given once, an expert once per entry, one phase per position. */
static int place(const rparser *s, coli_route *r, build *b, const row *w)
{
	size_t at = ((size_t)w->pos * (size_t)r->n_layers + (size_t)w->layer) * (size_t)r->top_k;
	int32_t *ids = r->ids + at, *lines = b->slot_line + at;
	if (lines[w->slot])
		return bad(s, w->line, "slot", "%d of position %d layer %d given again (first at line %d)", w->slot, w->pos,
			   w->layer, lines[w->slot]);
	for (int j = 0; j < r->top_k; j++)
		if (ids[j] == w->expert)
			return bad(s, w->line, "expert", "%d twice at position %d layer %d (slot %d at line %d, slot %d)",
				   w->expert, w->pos, w->layer, j, lines[j], w->slot);
	if (b->phase[w->pos] >= 0 && b->phase[w->pos] != w->phase)
		return bad(s, w->line, "phase", "%d at position %d, which is phase %d at line %d", w->phase, w->pos,
			   b->phase[w->pos], b->pos_line[w->pos]);
	if (b->phase[w->pos] < 0)
		b->phase[w->pos] = (int8_t)w->phase, b->pos_line[w->pos] = w->line;
	ids[w->slot] = w->expert, r->weights[at + (size_t)w->slot] = w->w, lines[w->slot] = w->line;
	return 0;
}

/* Positions 0..n-1 all present, the prompt (phase 0) first and starting at 0. */
static int check_positions(const rparser *s, coli_route *r, const build *b)
{
	for (int p = 0; p < r->n_positions; p++) {
		if (b->phase[p] < 0)
			return bad(s, b->max_pos_line, "step", "position %d has no rows, though the trace reaches %d: positions "
				   "run from 0 without a gap", p, b->max_pos);
		if (p == 0 && b->phase[0] != 0)
			return bad(s, b->pos_line[0], "phase", "1 (decode) at position 0: a trace starts with its prompt");
		if (p > 0 && b->phase[p] < b->phase[p - 1])
			return bad(s, b->pos_line[p], "phase", "0 (prefill) at position %d, after decode position %d", p, p - 1);
		r->n_prefill += b->phase[p] == 0;
	}
	return 0;
}

/* One (position, layer) entry: top_k slots filled, weights non-increasing by slot; or wholly
 * absent where the format allows it (the last layer of a prompt position but the last). */
static int check_entry(const rparser *s, coli_route *r, const build *b, int p, int l)
{
	int k = r->top_k, filled = 0, missing = -1, line = 0;
	size_t at = ((size_t)p * (size_t)r->n_layers + (size_t)l) * (size_t)k;
	const float *w = r->weights + at;
	for (int j = 0; j < k; j++)
		if (b->slot_line[at + (size_t)j])
			filled++, line = line ? line : b->slot_line[at + (size_t)j];
		else if (missing < 0)
			missing = j;
	int hole = r->n_layers > 1 && l == r->n_layers - 1 && p < r->n_prefill - 1;
	if (filled == 0 && hole) {
		r->n_absent++;
		return 0;
	}
	if (filled == 0)
		return bad(s, b->pos_line[p], "layer", "position %d (this line) has no rows for layer %d: every position "
			   "routes every layer%s", p, l, r->n_layers > 1 ? " (but a prompt position other than the last may "
			   "lack the last)" : "");
	if (filled < k)
		return bad(s, line, "slot",
			   "position %d layer %d has %d of %d experts (slot %d missing)", p, l, filled, k, missing);
	for (int j = 1; j < k; j++)
		if (w[j] > w[j - 1])
			return bad(s, b->slot_line[at + (size_t)j], "weight", "%g in slot %d above %g in slot %d at position %d "
				   "layer %d: slots rank the experts by weight, descending", (double)w[j], j, (double)w[j - 1],
				   j - 1, p, l);
	return 0;
}

static int check_table(const rparser *s, coli_route *r, build *b)
{
	for (size_t i = 0; i < b->n_rows; i++)
		if (place(s, r, b, &b->rows[i]) < 0)
			return -1;
	if (check_positions(s, r, b) < 0)
		return -1;
	for (int p = 0; p < r->n_positions; p++)
		for (int l = 0; l < r->n_layers; l++)
			if (check_entry(s, r, b, p, l) < 0)
				return -1;
	return 0;
}

static int parse(rparser *s, coli_route *r)
{
	build b = {0};
	int rc = magic_line(s) < 0 || model_line(s, r) < 0 || layer_lines(s, r) < 0 || column_line(s) < 0 ||
		 read_rows(s, r, &b) < 0 || alloc_table(s, r, &b) < 0 || check_table(s, r, &b) < 0 ? -1 : 0;
	free(b.rows);
	free(b.phase);
	free(b.pos_line);
	free(b.slot_line);
	return rc;
}

int coli_route_open_mem(coli_route **out, const char *data, size_t size, const char *name, coli_err *e)
{
	*out = NULL;
	coli_route *r = coli_calloc(1, sizeof(*r), e);
	if (!r || !(r->name = strdup(name))) {
		free(r);
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	}
	rparser s = {.p = data, .end = data + size, .name = name, .e = e};
	if (parse(&s, r) < 0) {
		coli_route_close(r);
		return -1;
	}
	*out = r;
	return 0;
}

int coli_route_open(coli_route **out, const char *path, coli_err *e)
{
	char *data = NULL;
	size_t n = 0;
	*out = NULL;
	if (coli_read_file(path, &data, &n, e) < 0)
		return -1;
	int rc = coli_route_open_mem(out, data, n, path, e);
	free(data);
	return rc;
}

void coli_route_close(coli_route *r)
{
	if (!r)
		return;
	free(r->name);
	free(r->model);
	free(r->arch);
	free(r->expert_bytes);
	free(r->dense_bytes);
	free(r->ids);
	free(r->weights);
	free(r);
}

const int32_t *coli_route_at(const coli_route *r, int position, int layer, const float **w)
{
	if (!r || position < 0 || position >= r->n_positions || layer < 0 || layer >= r->n_layers)
		return NULL;
	size_t at = ((size_t)position * (size_t)r->n_layers + (size_t)layer) * (size_t)r->top_k;
	if (r->ids[at] < 0)
		return NULL;
	if (w)
		*w = r->weights + at;
	return r->ids + at;
}
