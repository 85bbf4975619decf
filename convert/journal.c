/* journal.c: the resume state of an unfinished conversion, DIR/convert.journal (JSON):
 *   {"identity": hex, "jobs": N, "next_job": k, "codes_crc": c, "scales_crc": s,
 *    "tensor_crc": [...], "record_crc": [...]}
 * written atomically after the data it describes is on disk; a crash leaves the old or the new
 * journal, and jobs from next_job on are simply redone (the output is deterministic). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert.h"
#include "fileio.h"

static json_t *crc_arrays(const coli_layout *L, json_t **records)
{
	json_t *t = json_array();
	*records = json_array();
	for (int i = 0; i < L->n_tensors; i++)
		json_array_append_new(t, json_integer(L->tensors[i].crc));
	for (int i = 0; i < L->n_elayers; i++)
		for (int x = 0; x < L->elayers[i].n_experts; x++)
			json_array_append_new(*records, json_integer(L->elayers[i].crc[x]));
	return t;
}

int journal_save(const conv *cv, const journal *j, coli_err *e)
{
	json_t *records;
	json_t *tensors = crc_arrays(&cv->ct.layout, &records);
	json_t *o = json_pack("{s:s, s:s, s:b, s:i, s:i, s:I, s:I, s:o, s:o}", "identity", cv->ct.identity_hex,
			      "source", cv->source_hex, "allow_nonfinite", cv->o->allow_nonfinite, "jobs",
			      cv->n_jobs, "next_job", j->next_job, "codes_crc", (json_int_t)j->codes_crc,
			      "scales_crc", (json_int_t)j->scales_crc, "tensor_crc", tensors, "record_crc", records);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	char *path = coli_path_join(cv->o->out, JOURNAL_FILE);
	int rc = text && path ? coli_write_atomic(path, text, strlen(text), e)
			      : coli_errf(e, COLI_ENOMEM, "cannot serialise the journal");
	json_decref(o);
	free(text);
	free(path);
	return rc;
}

static int restore_crcs(conv *cv, json_t *t, json_t *r, const char *path, coli_err *e)
{
	coli_layout *L = &cv->ct.layout;
	size_t k = 0, n_records = 0;
	for (int i = 0; i < L->n_elayers; i++)
		n_records += (size_t)L->elayers[i].n_experts;
	if (json_array_size(r) != n_records)
		return coli_errf(e, COLI_EDATA, "%s: record_crc: %zu entries, expected %zu", path,
				 json_array_size(r), n_records);
	if (json_array_size(t) != (size_t)L->n_tensors)
		return coli_errf(e, COLI_EDATA, "%s: tensor_crc: %zu entries, expected %d", path,
				 json_array_size(t), L->n_tensors);
	for (int i = 0; i < L->n_tensors; i++)
		L->tensors[i].crc = (uint32_t)json_integer_value(json_array_get(t, (size_t)i));
	for (int i = 0; i < L->n_elayers; i++)
		for (int x = 0; x < L->elayers[i].n_experts; x++, k++) {
			L->elayers[i].crc[x] = (uint32_t)json_integer_value(json_array_get(r, k));
		}
	return 0;
}

int journal_load(conv *cv, journal *j, coli_err *e)
{
	char *path = coli_path_join(cv->o->out, JOURNAL_FILE), *text = NULL;
	const char *id = NULL, *source = NULL;
	json_t *t = NULL, *r = NULL;
	json_int_t jobs = 0, next = 0, cc = 0, sc = 0;
	int nonfinite = 0;
	json_error_t je;
	int rc = 0;
	if (!path)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	if (access(path, F_OK) != 0) {
		free(path);
		return 0;
	}
	json_t *o = coli_read_file(path, &text, NULL, e) < 0 ? NULL : json_loads(text, 0, &je);
	if (!o || json_unpack(o, "{s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:o, s:o}", "identity", &id, "source", &source,
			      "allow_nonfinite", &nonfinite, "jobs", &jobs, "next_job",
			      &next, "codes_crc", &cc, "scales_crc", &sc, "tensor_crc", &t, "record_crc", &r) < 0)
		rc = text ? coli_errf(e, COLI_EDATA, "%s: unreadable journal (remove the folder or use --force)", path) : -1;
	else if (strcmp(id, cv->ct.identity_hex) != 0 || jobs != cv->n_jobs || next < 0 || next > jobs)
		rc = coli_errf(e, COLI_EDATA,
			       "%s: an unfinished conversion of another model or other options (identity %.12s, now %.12s); use --force to start over",
			       cv->o->out, id, cv->ct.identity_hex);
	else if (nonfinite && !cv->o->allow_nonfinite)
		rc = coli_errf(e, COLI_EDATA, "%s: the interrupted conversion ran with --allow-nonfinite and may have kept non-finite values; resume it with --allow-nonfinite or use --force to start over",
			       cv->o->out);
	else if (strcmp(source, cv->source_hex) != 0)
		rc = coli_errf(e, COLI_EDATA,
			       "%s: the source checkpoint changed (shard sizes or modification times) since the interrupted conversion; use --force to start over",
			       cv->o->out);
	else
		rc = restore_crcs(cv, t, r, path, e);
	if (rc == 0) {
		*j = (journal){(int)next, (uint32_t)cc, (uint32_t)sc};
		rc = 1;
	}
	json_decref(o);
	free(text);
	free(path);
	return rc;
}
