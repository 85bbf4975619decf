/* journal.c: reading and checking convert.journal, coli-convert's resume state (journal.h). */
#include "journal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

static int bad(const char *path, const char *field, const char *why, coli_err *e)
{
	return coli_errf(e, COLI_EDATA, "%s: %s: %s (remove the folder or use --force)", path, field, why);
}

static int hex_field(json_t *o, const char *key, char out[65], const char *path, coli_err *e)
{
	json_t *v = json_object_get(o, key);
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	if (!s || strlen(s) != 64 || strspn(s, "0123456789abcdef") != 64)
		return bad(path, key, v ? "not 64 lowercase hex digits" : "missing", e);
	memcpy(out, s, 65);
	return 0;
}

static int int_field(json_t *o, const char *key, long long lo, long long hi, long long *out, const char *path,
		     coli_err *e)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return coli_errf(e, COLI_EDATA, "%s: %s: %s, expected an integer in %lld..%lld (remove the folder or use "
				 "--force)", path, key, v ? "out of range" : "missing", lo, hi);
	*out = (long long)json_integer_value(v);
	return 0;
}

/* An array of CRC32s (integers in 0..2^32-1) into a malloc'd table. */
static int crc_array(json_t *o, const char *key, uint32_t **out, size_t *n, const char *path, coli_err *e)
{
	json_t *a = json_object_get(o, key);
	if (!json_is_array(a))
		return bad(path, key, a ? "not an array" : "missing", e);
	*n = json_array_size(a);
	if (!(*out = coli_calloc(*n ? *n : 1, sizeof(**out), e)))
		return -1;
	for (size_t i = 0; i < *n; i++) {
		json_t *v = json_array_get(a, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0xffffffffLL)
			return coli_errf(e, COLI_EDATA, "%s: %s[%zu]: not a CRC32 (remove the folder or use --force)", path,
					 key, i);
		(*out)[i] = (uint32_t)json_integer_value(v);
	}
	return 0;
}

static int read_object(json_t *o, const char *path, coli_journal *j, coli_err *e)
{
	long long cc, sc;
	json_t *nf = json_object_get(o, "allow_nonfinite");
	if (!json_is_object(o))
		return bad(path, "journal", "not a JSON object", e);
	if (hex_field(o, "identity", j->identity, path, e) < 0 || hex_field(o, "source", j->source, path, e) < 0)
		return -1;
	if (!json_is_boolean(nf))
		return bad(path, "allow_nonfinite", nf ? "not true or false" : "missing", e);
	j->allow_nonfinite = json_is_true(nf);
	if (int_field(o, "jobs", 1, 1LL << 40, &j->jobs, path, e) < 0 ||
	    int_field(o, "next_job", 0, j->jobs, &j->next_job, path, e) < 0 ||
	    int_field(o, "codes_crc", 0, 0xffffffffLL, &cc, path, e) < 0 ||
	    int_field(o, "scales_crc", 0, 0xffffffffLL, &sc, path, e) < 0)
		return -1;
	j->codes_crc = (uint32_t)cc, j->scales_crc = (uint32_t)sc;
	if (crc_array(o, "tensor_crc", &j->tensor_crc, &j->n_tensor_crc, path, e) < 0)
		return -1;
	return crc_array(o, "record_crc", &j->record_crc, &j->n_record_crc, path, e);
}

int coli_journal_parse(const char *text, size_t len, const char *path, coli_journal *j, coli_err *e)
{
	memset(j, 0, sizeof(*j));
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return coli_errf(e, COLI_EDATA, "%s: unreadable journal (bad JSON at line %d: %s); remove the folder or "
				 "use --force", path, je.line, je.text);
	int rc = read_object(o, path, j, e);
	json_decref(o);
	if (rc < 0)
		coli_journal_release(j);
	return rc;
}

void coli_journal_release(coli_journal *j)
{
	free(j->tensor_crc), free(j->record_crc);
	memset(j, 0, sizeof(*j));
}
