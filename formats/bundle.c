/* bundle.c: a datapoint bundle's manifest.json, parsed and checked, and written (bundle.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

static const char *const kinds[] = {"cold", "warm", "rotate"};

int coli_bundle_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > COLI_BUNDLE_MAX_NAME || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
							 "0123456789._-/") != n)
		return 0;
	for (const char *p = name; *p; p += strcspn(p, "/"), p += *p == '/') {
		size_t k = strcspn(p, "/");
		if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (p[k] == '/' && p[k + 1] == 0)
			return 0;
	}
	return 1;
}

const coli_bundle_file *coli_bundle_file_of(const coli_bundle_manifest *m, const char *name)
{
	for (int i = 0; i < m->n_files; i++)
		if (strcmp(m->files[i].name, name) == 0)
			return &m->files[i];
	return NULL;
}

/* A string field of o into out (size n): required, at most n - 1 bytes. */
static int str_field(json_t *o, const char *key, char *out, size_t n, const char *where, coli_err *e)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		return coli_errf(e, COLI_EDATA, "%s.%s: %s, expected a string", where, key, v ? "not a string" : "missing");
	if (json_string_length(v) >= n || strlen(json_string_value(v)) != json_string_length(v))
		return coli_errf(e, COLI_EDATA, "%s.%s: %zu bytes, expected at most %zu without NUL", where, key,
				 json_string_length(v), n - 1);
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int num_field(json_t *o, const char *key, double lo, double hi, double *out, const char *where, coli_err *e)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_number(v))
		return coli_errf(e, COLI_EDATA, "%s.%s: %s, expected a number", where, key, v ? "not a number" : "missing");
	*out = json_number_value(v);
	if (!(*out >= lo && *out <= hi))
		return coli_errf(e, COLI_EDATA, "%s.%s: %g out of range [%g, %g]", where, key, *out, lo, hi);
	return 0;
}

static int name_field(json_t *o, const char *key, char *out, const char *where, coli_err *e)
{
	if (str_field(o, key, out, COLI_BUNDLE_MAX_NAME + 1, where, e) < 0)
		return -1;
	if (!coli_bundle_name_ok(out))
		return coli_errf(e, COLI_EDATA, "%s.%s: '%s' is not a member name (relative, parts of [A-Za-z0-9._-], no "
				 "'.' or '..')", where, key, out);
	return 0;
}

static int hex_ok(const char *s, size_t n) { return strlen(s) == n && strspn(s, "0123456789abcdef") == n; }

static int parse_file(json_t *f, int i, const char *name, coli_bundle_manifest *m, coli_err *e)
{
	char where[300];
	double bytes;
	coli_bundle_file *x = &m->files[i];
	snprintf(where, sizeof(where), "%s: files[%d]", name, i);
	if (!json_is_object(f))
		return coli_errf(e, COLI_EDATA, "%s: not an object", where);
	if (name_field(f, "name", x->name, where, e) < 0 || num_field(f, "bytes", 0, 9007199254740992.0, &bytes, where, e) < 0 ||
	    str_field(f, "sha256", x->sha256, sizeof(x->sha256), where, e) < 0)
		return -1;
	if (bytes != floor(bytes))
		return coli_errf(e, COLI_EDATA, "%s.bytes: %g is not a whole number", where, bytes);
	if (!hex_ok(x->sha256, 64))
		return coli_errf(e, COLI_EDATA, "%s.sha256: '%s' is not 64 lowercase hex digits", where, x->sha256);
	x->bytes = (uint64_t)bytes;
	for (int j = 0; j < i; j++)
		if (strcmp(m->files[j].name, x->name) == 0)
			return coli_errf(e, COLI_EDATA, "%s.name: '%s' listed twice (files[%d])", where, x->name, j);
	return 0;
}

static int parse_run(json_t *r, int i, const char *name, coli_bundle_manifest *m, coli_err *e)
{
	char where[300], kind[16];
	coli_bundle_run *x = &m->runs[i];
	snprintf(where, sizeof(where), "%s: runs[%d]", name, i);
	if (!json_is_object(r))
		return coli_errf(e, COLI_EDATA, "%s: not an object", where);
	if (str_field(r, "name", x->name, sizeof(x->name), where, e) < 0 ||
	    str_field(r, "kind", kind, sizeof(kind), where, e) < 0 || name_field(r, "trace", x->trace, where, e) < 0 ||
	    name_field(r, "json", x->json, where, e) < 0 ||
	    num_field(r, "tokens_per_s", 0, 1e12, &x->tokens_per_s, where, e) < 0)
		return -1;
	for (x->kind = 0; x->kind < 3 && strcmp(kind, kinds[x->kind]) != 0; x->kind++)
		;
	if (x->kind == 3)
		return coli_errf(e, COLI_EDATA, "%s.kind: '%s' is not cold, warm or rotate", where, kind);
	if (!coli_bundle_file_of(m, x->trace) || !coli_bundle_file_of(m, x->json))
		return coli_errf(e, COLI_EDATA, "%s: '%s' is not in files", where,
				 coli_bundle_file_of(m, x->trace) ? x->json : x->trace);
	for (int j = 0; j < i; j++)
		if (strcmp(m->runs[j].name, x->name) == 0)
			return coli_errf(e, COLI_EDATA, "%s.name: '%s' used twice (runs[%d])", where, x->name, j);
	return 0;
}

/* An array field of o: required, 1..max entries, each through fn. */
static int each(json_t *o, const char *key, int max, int *n, const char *name, coli_bundle_manifest *m,
		int (*fn)(json_t *, int, const char *, coli_bundle_manifest *, coli_err *), coli_err *e)
{
	json_t *a = json_object_get(o, key);
	if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > (size_t)max)
		return coli_errf(e, COLI_EDATA, "%s: %s: %s, expected an array of 1..%d entries", name, key,
				 json_is_array(a) ? "size out of range" : a ? "not an array" : "missing", max);
	for (*n = 0; *n < (int)json_array_size(a); (*n)++)
		if (fn(json_array_get(a, (size_t)*n), *n, name, m, e) < 0)
			return -1;
	return 0;
}

static int parse_head(json_t *j, const char *name, coli_bundle_manifest *m, coli_err *e)
{
	char fmt[32], where[300];
	double v;
	if (str_field(j, "format", fmt, sizeof(fmt), name, e) < 0)
		return -1;
	if (strcmp(fmt, "coli-bundle") != 0)
		return coli_errf(e, COLI_EDATA, "%s: format '%s', expected 'coli-bundle'", name, fmt);
	if (num_field(j, "version", 0, 1e9, &v, name, e) < 0)
		return -1;
	if (v != COLI_BUNDLE_VERSION)
		return coli_errf(e, COLI_EDATA, "%s: version %g unsupported (this reader knows %d)", name, v, COLI_BUNDLE_VERSION);
	m->version = COLI_BUNDLE_VERSION;
	json_t *model = json_object_get(j, "model"), *head = json_object_get(j, "headline");
	snprintf(where, sizeof(where), "%s: model", name);
	if (num_field(j, "created", 0, 1e11, &m->created, name, e) < 0 ||
	    str_field(j, "coli_version", m->coli_version, sizeof(m->coli_version), name, e) < 0 ||
	    str_field(j, "git_commit", m->git_commit, sizeof(m->git_commit), name, e) < 0 ||
	    str_field(model, "path", m->model, sizeof(m->model), where, e) < 0 ||
	    str_field(model, "identity", m->identity, sizeof(m->identity), where, e) < 0)
		return -1;
	if (!hex_ok(m->identity, 64))
		return coli_errf(e, COLI_EDATA, "%s.identity: '%s' is not 64 lowercase hex digits", where, m->identity);
	snprintf(where, sizeof(where), "%s: headline", name);
	if (str_field(head, "run", m->headline_run, sizeof(m->headline_run), where, e) < 0 ||
	    num_field(head, "tokens_per_s", 0, 1e12, &m->headline_tok_s, where, e) < 0)
		return -1;
	return 0;
}

static int parse_all(json_t *j, const char *name, coli_bundle_manifest *m, coli_err *e)
{
	if (!json_is_object(j))
		return coli_errf(e, COLI_EDATA, "%s: not a JSON object", name);
	if (parse_head(j, name, m, e) < 0 || each(j, "files", COLI_BUNDLE_MAX_FILES, &m->n_files, name, m, parse_file, e) < 0 ||
	    each(j, "runs", COLI_BUNDLE_MAX_RUNS, &m->n_runs, name, m, parse_run, e) < 0)
		return -1;
	for (int i = 0; i < m->n_runs; i++)
		if (strcmp(m->runs[i].name, m->headline_run) == 0) {
			memcpy(m->headline, m->runs[i].trace, sizeof(m->headline));
			return 0;
		}
	return coli_errf(e, COLI_EDATA, "%s: headline.run: '%s' is not a run", name, m->headline_run);
}

int coli_bundle_manifest_parse(const char *text, size_t len, const char *name, coli_bundle_manifest *m, coli_err *e)
{
	json_error_t je;
	json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return coli_errf(e, COLI_EDATA, "%s: not JSON: %s (line %d)", name, je.text, je.line);
	coli_bundle_manifest *t = calloc(1, sizeof(*t));
	int rc = t ? parse_all(j, name, t, e) : coli_errf(e, COLI_ENOMEM, "%s: out of memory", name);
	if (rc == 0)
		memcpy(m, t, sizeof(*m));
	free(t);
	json_decref(j);
	return rc;
}

static json_t *to_json(const coli_bundle_manifest *m)
{
	json_t *files = json_array(), *runs = json_array();
	for (int i = 0; i < m->n_files; i++)
		json_array_append_new(files, json_pack("{s:s, s:I, s:s}", "name", m->files[i].name, "bytes",
						       (json_int_t)m->files[i].bytes, "sha256", m->files[i].sha256));
	for (int i = 0; i < m->n_runs; i++)
		json_array_append_new(runs, json_pack("{s:s, s:s, s:s, s:s, s:f}", "name", m->runs[i].name, "kind",
						      kinds[m->runs[i].kind], "trace", m->runs[i].trace, "json",
						      m->runs[i].json, "tokens_per_s", m->runs[i].tokens_per_s));
	return json_pack("{s:s, s:i, s:f, s:s, s:s, s:{s:s, s:s}, s:{s:s, s:f}, s:o, s:o}", "format", "coli-bundle",
			 "version", COLI_BUNDLE_VERSION, "created", m->created, "coli_version", m->coli_version,
			 "git_commit", m->git_commit, "model", "path", m->model, "identity", m->identity, "headline", "run",
			 m->headline_run, "tokens_per_s", m->headline_tok_s, "runs", runs, "files", files);
}

char *coli_bundle_manifest_json(const coli_bundle_manifest *m, coli_err *e)
{
	json_t *j = to_json(m);
	char *text = j ? json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) : NULL;
	json_decref(j);
	if (!text)
		return coli_errf(e, COLI_ENOMEM, "out of memory for a bundle manifest"), NULL;
	coli_bundle_manifest *back = malloc(sizeof(*back));
	int rc = back ? coli_bundle_manifest_parse(text, strlen(text), "manifest.json", back, e)
		      : coli_errf(e, COLI_ENOMEM, "out of memory");
	free(back);
	if (rc < 0)
		free(text), text = NULL;
	return text;
}
