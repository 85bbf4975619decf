/* probe.c: probe.json <-> coli_probe, every field typed and range-checked (formats/probe.md). */
#include "probe.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

#define BPS_MAX 1e15          /* bytes/s: a petabyte per second is no measurement */
#define TIME_MAX 1e11         /* unix seconds, year 5138 */
#define BYTES_MAX 0x1p63

/* One field: its JSON key, where it lives in the struct, and its range. */
typedef enum { F_NUM, F_INT, F_UNS, F_STR } fkind; /* double, int, unsigned, char[] */
typedef struct field {
	const char *key;
	fkind kind;
	size_t off;
	size_t size;      /* F_STR: the buffer (the text fits in size - 1 bytes) */
	double lo, hi;    /* F_NUM: lo < v <= hi when lo_open, else lo <= v <= hi; F_INT, F_STR (length): [lo, hi] */
	int lo_open;
	int optional;     /* F_NUM: absent reads as 0 (a field a later revision of version 1 added) */
} field;

#define NUM(s, k, lo, hi, open) {#k, F_NUM, offsetof(s, k), 0, lo, hi, open, 0}
#define INT(s, k, lo, hi) {#k, F_INT, offsetof(s, k), 0, lo, hi, 0, 0}
#define UNS(s, k, lo, hi) {#k, F_UNS, offsetof(s, k), 0, lo, hi, 0, 0}
#define STR(s, k, min) {#k, F_STR, offsetof(s, k), sizeof(((s *)0)->k), min, sizeof(((s *)0)->k) - 1, 0, 0}
#define OPT(s, k, hi) {#k, F_NUM, offsetof(s, k), 0, 0, hi, 0, 1} /* [0, hi], 0 when absent */

static const field top_fields[] = {
	NUM(coli_probe, taken, 0, TIME_MAX, 1),
	STR(coli_probe, cpu_model, 1),
	STR(coli_probe, isa, 0),
	INT(coli_probe, physical_cores, 1, 65536),
	INT(coli_probe, logical_cpus, 1, 65536),
	STR(coli_probe, kernels, 1),
	NUM(coli_probe, cpu_taken, 0, TIME_MAX, 1),
	NUM(coli_probe, mem_bps_1, 0, BPS_MAX, 1),
	NUM(coli_probe, mem_bps_all, 0, BPS_MAX, 1),
	NUM(coli_probe, int4_bps_1, 0, BPS_MAX, 1),
	NUM(coli_probe, int4_bps_all, 0, BPS_MAX, 1),
	NUM(coli_probe, int8_bps_1, 0, BPS_MAX, 1),
	NUM(coli_probe, int8_bps_all, 0, BPS_MAX, 1),
	NUM(coli_probe, int4_prefill_bps_all, 0, BPS_MAX, 1),
	NUM(coli_probe, int8_prefill_bps_all, 0, BPS_MAX, 1),
	OPT(coli_probe, attn_fma_per_s, BPS_MAX),
	OPT(coli_probe, fp4_bps_1, BPS_MAX),
	OPT(coli_probe, fp4_bps_all, BPS_MAX),
	OPT(coli_probe, fp4_prefill_bps_all, BPS_MAX),
	OPT(coli_probe, q8_int4_bps_1, BPS_MAX),
	OPT(coli_probe, q8_int4_bps_all, BPS_MAX),
	OPT(coli_probe, q8_int8_bps_1, BPS_MAX),
	OPT(coli_probe, q8_int8_bps_all, BPS_MAX),
	NUM(coli_probe, ram_total, 0, BYTES_MAX, 1),
	NUM(coli_probe, ram_available, 0, BYTES_MAX, 0),
	STR(coli_probe, gpus, 1),
	{NULL, F_NUM, 0, 0, 0, 0, 0, 0},
};

static const field disk_fields[] = {
	STR(coli_probe_disk, dir, 1),
	STR(coli_probe_disk, dev, 1),
	UNS(coli_probe_disk, major, 0, 4095),
	UNS(coli_probe_disk, minor, 0, 1048575),
	STR(coli_probe_disk, identity, 0),
	STR(coli_probe_disk, fs, 1),
	NUM(coli_probe_disk, free_bytes, 0, BYTES_MAX, 0),
	NUM(coli_probe_disk, record_bytes, 4096, 0x1p30, 0),
	NUM(coli_probe_disk, file_bytes, 4096, 0x1p50, 0),
	OPT(coli_probe_disk, burst_bps, BPS_MAX),
	NUM(coli_probe_disk, buffered_bps, 0, BPS_MAX, 1),
	NUM(coli_probe_disk, latency_s, 0, 1000, 1),
	NUM(coli_probe_disk, taken, 0, TIME_MAX, 1),
	{NULL, F_NUM, 0, 0, 0, 0, 0, 0},
};

/* ---- ranges, on the struct ---- */

static int bad(coli_err *e, const char *name, const char *where, const char *key, const char *fmt, double v)
{
	char why[160];
	snprintf(why, sizeof(why), fmt, v);
	return coli_errf(e, COLI_EDATA, "%s: %s%s: %s", name, where, key, why);
}

static double int_at(const void *s, const field *f)
{
	const char *p = (const char *)s + f->off;
	return f->kind == F_UNS ? (double)*(const unsigned *)p : (double)*(const int *)p;
}

static int check_field(const void *s, const field *f, const char *name, const char *where, coli_err *e)
{
	const char *p = (const char *)s + f->off;
	if (f->kind == F_STR) {
		size_t n = strnlen(p, f->size);
		if (n == f->size || n < (size_t)f->lo)
			return bad(e, name, where, f->key, n == f->size ? "longer than %.0f bytes" : "empty (at least %.0f byte)",
				   n == f->size ? f->hi : f->lo);
		return 0;
	}
	double v = f->kind == F_NUM ? *(const double *)p : int_at(s, f);
	if (!isfinite(v))
		return bad(e, name, where, f->key, "%g, must be finite", v);
	if (v > f->hi || v < f->lo || (f->lo_open && v == f->lo)) {
		char fmt[96];
		snprintf(fmt, sizeof(fmt), "%%.17g out of range %s%g, %g]", f->lo_open ? "(" : "[", f->lo, f->hi);
		return bad(e, name, where, f->key, fmt, v);
	}
	return 0;
}

static int check_fields(const void *s, const field *fs, const char *name, const char *where, coli_err *e)
{
	for (const field *f = fs; f->key; f++)
		if (check_field(s, f, name, where, e) < 0)
			return -1;
	return 0;
}

static int check_qd(const coli_probe_disk *d, const char *name, const char *where, coli_err *e)
{
	if (d->n_qd < 1 || d->n_qd > COLI_PROBE_MAX_QD)
		return bad(e, name, where, "qd", "%.0f queue depths, expected 1..8", d->n_qd);
	for (int i = 0; i < d->n_qd; i++) {
		char key[40];
		snprintf(key, sizeof(key), "qd[%d]", i);
		if (d->qd[i] < 1 || d->qd[i] > 1024)
			return bad(e, name, where, key, "%.0f out of range [1, 1024]", d->qd[i]);
		if (i > 0 && d->qd[i] <= d->qd[i - 1])
			return bad(e, name, where, key, "%.0f, not above the one before (ascending)", d->qd[i]);
		snprintf(key, sizeof(key), "direct_bps[%d]", i);
		double v = d->direct_bps[i];
		if (!isfinite(v) || v <= 0 || v > BPS_MAX)
			return bad(e, name, where, key, "%.17g out of range (0, 1e+15]", v);
	}
	return 0;
}

static int check_disk(const coli_probe_disk *d, int i, const char *name, coli_err *e)
{
	char where[40];
	snprintf(where, sizeof(where), "disks[%d].", i);
	if (check_fields(d, disk_fields, name, where, e) < 0 || check_qd(d, name, where, e) < 0)
		return -1;
	if (d->dir[0] != '/')
		return coli_errf(e, COLI_EDATA, "%s: %sdir: '%s' is not an absolute path", name, where, d->dir);
	if (fmod(d->record_bytes, 4096) != 0)
		return bad(e, name, where, "record_bytes", "%.17g, not a multiple of 4096", d->record_bytes);
	if (d->file_bytes < d->record_bytes)
		return bad(e, name, where, "file_bytes", "%.17g, less than record_bytes", d->file_bytes);
	return 0;
}

/* Two entries for one folder would give a planner two bandwidths for one disk. */
static int check_dirs(const coli_probe *p, const char *name, coli_err *e)
{
	for (int i = 0; i < p->n_disks; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(p->disks[i].dir, p->disks[j].dir))
				return coli_errf(e, COLI_EDATA, "%s: disks[%d].dir: '%s' already in disks[%d]", name, i,
						 p->disks[i].dir, j);
	return 0;
}

int coli_probe_validate(const coli_probe *p, const char *name, coli_err *e)
{
	if (p->version != COLI_PROBE_VERSION)
		return bad(e, name, "", "version", "%.0f, this reader knows 1", p->version);
	if (check_fields(p, top_fields, name, "", e) < 0)
		return -1;
	if (p->logical_cpus < p->physical_cores)
		return bad(e, name, "", "logical_cpus", "%.0f, fewer than physical_cores", p->logical_cpus);
	if (p->ram_available > p->ram_total)
		return bad(e, name, "", "ram_available", "%.17g, more than ram_total", p->ram_available);
	if (!isfinite(p->cgroup_limit) || p->cgroup_limit < 0 || p->cgroup_limit > BYTES_MAX)
		return bad(e, name, "", "cgroup_limit", "%.17g out of range: \"none\" or (0, 2^63]", p->cgroup_limit);
	if (p->n_disks < 0 || p->n_disks > COLI_PROBE_MAX_DISKS)
		return bad(e, name, "", "disks", "%.0f entries, at most 8", p->n_disks);
	for (int i = 0; i < p->n_disks; i++)
		if (check_disk(&p->disks[i], i, name, e) < 0)
			return -1;
	return check_dirs(p, name, e);
}

double coli_probe_best_bps(const coli_probe_disk *d)
{
	double best = 0;
	for (int i = 0; i < d->n_qd; i++)
		best = d->direct_bps[i] > best ? d->direct_bps[i] : best;
	return best;
}

/* ---- JSON -> struct: types and string lengths ---- */

static const char *kind_of(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

static int bad_type(coli_err *e, const char *name, const char *where, const char *key, const char *want, const json_t *v)
{
	if (!v)
		return coli_errf(e, COLI_EDATA, "%s: %s%s: missing", name, where, key);
	return coli_errf(e, COLI_EDATA, "%s: %s%s: %s, expected %s", name, where, key, kind_of(v), want);
}

static int read_field(json_t *o, const field *f, void *s, const char *name, const char *where, coli_err *e)
{
	json_t *v = json_object_get(o, f->key);
	char *p = (char *)s + f->off;
	if (f->kind == F_NUM) {
		if (!v && f->optional)
			return *(double *)p = 0, 0;
		if (!json_is_number(v))
			return bad_type(e, name, where, f->key, "a number", v);
		*(double *)p = json_number_value(v);
	} else if (f->kind != F_STR) {
		if (!json_is_integer(v))
			return bad_type(e, name, where, f->key, "an integer", v);
		json_int_t x = json_integer_value(v);
		if (x < (json_int_t)f->lo || x > (json_int_t)f->hi)
			return coli_errf(e, COLI_EDATA, "%s: %s%s: %lld out of range [%.0f, %.0f]", name, where, f->key,
					 (long long)x, f->lo, f->hi);
		if (f->kind == F_UNS)
			*(unsigned *)p = (unsigned)x;
		else
			*(int *)p = (int)x;
	} else {
		if (!json_is_string(v))
			return bad_type(e, name, where, f->key, "a string", v);
		if (json_string_length(v) >= f->size || strlen(json_string_value(v)) != json_string_length(v))
			return bad(e, name, where, f->key, "longer than %.0f bytes, or holds a NUL", f->hi);
		memcpy(p, json_string_value(v), json_string_length(v) + 1);
	}
	return 0;
}

static int read_fields(json_t *o, const field *fs, void *s, const char *name, const char *where, coli_err *e)
{
	for (const field *f = fs; f->key; f++)
		if (read_field(o, f, s, name, where, e) < 0)
			return -1;
	return 0;
}

/* qd and direct_bps: arrays of one length, 1..COLI_PROBE_MAX_QD. */
static int read_qd(json_t *o, coli_probe_disk *d, const char *name, const char *where, coli_err *e)
{
	json_t *q = json_object_get(o, "qd"), *b = json_object_get(o, "direct_bps");
	if (!json_is_array(q))
		return bad_type(e, name, where, "qd", "an array", q);
	if (!json_is_array(b))
		return bad_type(e, name, where, "direct_bps", "an array", b);
	size_t n = json_array_size(q);
	if (n < 1 || n > COLI_PROBE_MAX_QD)
		return bad(e, name, where, "qd", "%.0f queue depths, expected 1..8", (double)n);
	if (json_array_size(b) != n)
		return bad(e, name, where, "direct_bps", "%.0f entries, qd has a different count", (double)json_array_size(b));
	d->n_qd = (int)n;
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(q, i), *y = json_array_get(b, i);
		char key[40];
		snprintf(key, sizeof(key), json_is_integer(x) ? "direct_bps[%zu]" : "qd[%zu]", i);
		if (!json_is_integer(x) || !json_is_number(y))
			return bad_type(e, name, where, key, json_is_integer(x) ? "a number" : "an integer", json_is_integer(x) ? y : x);
		json_int_t v = json_integer_value(x);
		if (v < 1 || v > 1024)
			return coli_errf(e, COLI_EDATA, "%s: %sqd[%zu]: %lld out of range [1, 1024]", name, where, i, (long long)v);
		d->qd[i] = (int)v;
		d->direct_bps[i] = json_number_value(y);
	}
	return 0;
}

static int read_disks(json_t *root, coli_probe *p, const char *name, coli_err *e)
{
	json_t *a = json_object_get(root, "disks");
	if (!json_is_array(a))
		return bad_type(e, name, "", "disks", "an array", a);
	if (json_array_size(a) > COLI_PROBE_MAX_DISKS)
		return bad(e, name, "", "disks", "%.0f entries, at most 8", (double)json_array_size(a));
	p->n_disks = (int)json_array_size(a);
	for (int i = 0; i < p->n_disks; i++) {
		json_t *o = json_array_get(a, (size_t)i);
		char where[40];
		snprintf(where, sizeof(where), "disks[%d].", i);
		if (!json_is_object(o))
			return coli_errf(e, COLI_EDATA, "%s: disks[%d]: %s, expected an object", name, i, kind_of(o));
		if (read_fields(o, disk_fields, &p->disks[i], name, where, e) < 0 || read_qd(o, &p->disks[i], name, where, e) < 0)
			return -1;
	}
	return 0;
}

static int read_cgroup(json_t *root, coli_probe *p, const char *name, coli_err *e)
{
	json_t *v = json_object_get(root, "cgroup_limit");
	if (json_is_string(v) && !strcmp(json_string_value(v), "none"))
		return p->cgroup_limit = 0, 0;
	if (!json_is_number(v))
		return bad_type(e, name, "", "cgroup_limit", "a number or \"none\"", v);
	p->cgroup_limit = json_number_value(v);
	if (!(p->cgroup_limit > 0))
		return bad(e, name, "", "cgroup_limit", "%.17g, must be > 0 (\"none\" for no limit)", p->cgroup_limit);
	return 0;
}

static int read_head(json_t *root, coli_probe *p, const char *name, coli_err *e)
{
	json_t *f = json_object_get(root, "format"), *v = json_object_get(root, "version");
	if (!json_is_object(root))
		return coli_errf(e, COLI_EDATA, "%s: %s, expected a JSON object", name, kind_of(root));
	if (!json_is_string(f) || strcmp(json_string_value(f), "coli-probe"))
		return coli_errf(e, COLI_EDATA, "%s: format: not \"coli-probe\": not a probe file", name);
	if (!json_is_integer(v))
		return bad_type(e, name, "", "version", "an integer", v);
	if (json_integer_value(v) != COLI_PROBE_VERSION)
		return bad(e, name, "", "version", "%.0f, this reader knows 1", (double)json_integer_value(v));
	p->version = COLI_PROBE_VERSION;
	return 0;
}

int coli_probe_parse(const char *text, size_t len, const char *name, coli_probe *out, coli_err *e)
{
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return coli_errf(e, COLI_EDATA, "%s: line %d column %d: %s", name, je.line, je.column, je.text);
	coli_probe *p = coli_calloc(1, sizeof(*p), e);
	int rc = p ? read_head(root, p, name, e) : -1;
	if (rc == 0)
		rc = read_fields(root, top_fields, p, name, "", e);
	if (rc == 0)
		rc = read_cgroup(root, p, name, e);
	if (rc == 0)
		rc = read_disks(root, p, name, e);
	if (rc == 0)
		rc = coli_probe_validate(p, name, e);
	if (rc == 0)
		*out = *p;
	free(p);
	json_decref(root);
	return rc;
}

int coli_probe_read(const char *path, coli_probe *p, coli_err *e)
{
	char *text;
	size_t len;
	if (coli_read_file(path, &text, &len, e) < 0)
		return -1;
	int rc = coli_probe_parse(text, len, path, p, e);
	free(text);
	return rc;
}

/* ---- struct -> JSON ---- */

static json_t *field_json(const void *s, const field *f)
{
	const char *p = (const char *)s + f->off;
	if (f->kind == F_STR)
		return json_string(p);
	if (f->kind != F_NUM)
		return json_integer((json_int_t)int_at(s, f));
	return json_real(*(const double *)p);
}

static void put_fields(json_t *o, const void *s, const field *fs)
{
	for (const field *f = fs; f->key; f++)
		json_object_set_new(o, f->key, field_json(s, f));
}

static json_t *disk_json(const coli_probe_disk *d)
{
	json_t *o = json_object(), *q = json_array(), *b = json_array();
	put_fields(o, d, disk_fields);
	for (int i = 0; i < d->n_qd; i++) {
		json_array_append_new(q, json_integer(d->qd[i]));
		json_array_append_new(b, json_real(d->direct_bps[i]));
	}
	json_object_set_new(o, "qd", q);
	json_object_set_new(o, "direct_bps", b);
	return o;
}

static json_t *probe_json(const coli_probe *p)
{
	json_t *o = json_object(), *disks = json_array();
	json_object_set_new(o, "format", json_string("coli-probe"));
	json_object_set_new(o, "version", json_integer(p->version));
	put_fields(o, p, top_fields);
	json_object_set_new(o, "cgroup_limit", p->cgroup_limit > 0 ? json_real(p->cgroup_limit) : json_string("none"));
	for (int i = 0; i < p->n_disks; i++)
		json_array_append_new(disks, disk_json(&p->disks[i]));
	json_object_set_new(o, "disks", disks);
	return o;
}

/* The JSON text of p, validated first (name stands for it in errors). */
static char *json_text(const coli_probe *p, int indent, const char *name, coli_err *e)
{
	if (coli_probe_validate(p, name, e) < 0)
		return NULL;
	json_t *o = probe_json(p);
	char *text = o ? json_dumps(o, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17) | (indent ? JSON_INDENT(1) : JSON_COMPACT)) : NULL;
	json_decref(o);
	size_t n = text ? strlen(text) : 0;
	char *out = text ? realloc(text, n + 2) : NULL;
	if (!out) {
		free(text);
		return coli_errf(e, COLI_ENOMEM, "out of memory for the probe's JSON"), NULL;
	}
	memcpy(out + n, "\n", 2);
	return out;
}

char *coli_probe_json(const coli_probe *p, int indent, coli_err *e)
{
	return json_text(p, indent, "probe", e);
}

int coli_probe_write(const char *path, const coli_probe *p, coli_err *e)
{
	char *text = json_text(p, 1, path, e);
	if (!text)
		return -1;
	int rc = coli_write_atomic(path, text, strlen(text), e);
	free(text);
	return rc;
}
