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
#include "journal.h"

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

/* The CRCs computed before the interruption, back into the layout (their counts checked). */
static int restore_crcs(conv *cv, const coli_journal *jr, const char *path, coli_err *e)
{
	coli_layout *L = &cv->ct.layout;
	size_t k = 0, n_records = 0;
	for (int i = 0; i < L->n_elayers; i++)
		n_records += (size_t)L->elayers[i].n_experts;
	if (jr->n_record_crc != n_records)
		return coli_errf(e, COLI_EDATA, "%s: record_crc: %zu entries, expected %zu", path, jr->n_record_crc, n_records);
	if (jr->n_tensor_crc != (size_t)L->n_tensors)
		return coli_errf(e, COLI_EDATA, "%s: tensor_crc: %zu entries, expected %d", path, jr->n_tensor_crc,
				 L->n_tensors);
	for (int i = 0; i < L->n_tensors; i++)
		L->tensors[i].crc = jr->tensor_crc[i];
	for (int i = 0; i < L->n_elayers; i++)
		for (int x = 0; x < L->elayers[i].n_experts; x++, k++)
			L->elayers[i].crc[x] = jr->record_crc[k];
	return 0;
}

/* The journal against the conversion about to resume it. */
static int matches(const conv *cv, const coli_journal *jr, coli_err *e)
{
	if (strcmp(jr->identity, cv->ct.identity_hex) != 0 || jr->jobs != cv->n_jobs)
		return coli_errf(e, COLI_EDATA, "%s: an unfinished conversion of another model or other options (identity "
				 "%.12s, now %.12s); use --force to start over", cv->o->out, jr->identity, cv->ct.identity_hex);
	if (jr->allow_nonfinite && !cv->o->allow_nonfinite)
		return coli_errf(e, COLI_EDATA, "%s: the interrupted conversion ran with --allow-nonfinite and may have kept "
				 "non-finite values; resume it with --allow-nonfinite or use --force to start over", cv->o->out);
	if (strcmp(jr->source, cv->source_hex) != 0)
		return coli_errf(e, COLI_EDATA, "%s: the source checkpoint changed (shard sizes or modification times) since "
				 "the interrupted conversion; use --force to start over", cv->o->out);
	return 0;
}

int journal_load(conv *cv, journal *j, coli_err *e)
{
	char *path = coli_path_join(cv->o->out, JOURNAL_FILE), *text = NULL;
	size_t len = 0;
	coli_journal jr;
	memset(&jr, 0, sizeof(jr));
	if (!path)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	if (access(path, F_OK) != 0) {
		free(path);
		return 0;
	}
	int rc = coli_read_file(path, &text, &len, e);
	if (rc == 0)
		rc = coli_journal_parse(text, len, path, &jr, e);
	if (rc == 0)
		rc = matches(cv, &jr, e);
	if (rc == 0)
		rc = restore_crcs(cv, &jr, path, e);
	if (rc == 0) {
		*j = (journal){(int)jr.next_job, jr.codes_crc, jr.scales_crc};
		rc = 1;
	}
	coli_journal_release(&jr);
	free(text);
	free(path);
	return rc;
}
