/* jobs.c: the ordered job list: dense and MTP tensors in row chunks, then expert records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "fileio.h"

#define CHUNK_BYTES (16u << 20) /* bounds a job's buffer and a worker's source window */

static uint64_t src_row_bytes(const conv *cv, const coli_ltensor *t)
{
	const coli_st_tensor *s = coli_ckpt_find(cv->src, t->name);
	return (uint64_t)t->blob.cols * coli_dtype_size(s->dtype);
}

/* Rows per chunk: about CHUNK_BYTES of input or output, whole fp8 scale blocks. */
static int64_t chunk_rows(const conv *cv, const coli_ltensor *t)
{
	uint64_t per_row = src_row_bytes(cv, t);
	if (t->blob.row_bytes > per_row)
		per_row = t->blob.row_bytes;
	int64_t rows = (int64_t)(CHUNK_BYTES / per_row);
	if (rows < 1)
		rows = 1;
	if (t->blob.enc == COLI_ENC_FP8)
		rows = rows < t->blob.block[0] ? t->blob.block[0] : rows / t->blob.block[0] * t->blob.block[0];
	return rows;
}

static uint64_t scale_bytes_for(const coli_blob *b, int64_t row0, int64_t nrows)
{
	if (b->enc == COLI_ENC_Q4 || b->enc == COLI_ENC_Q8)
		return (uint64_t)nrows * ((uint64_t)(b->cols + 63) / 64) * 2;
	if (b->enc == COLI_ENC_FP8) {
		uint64_t bcols = (uint64_t)(b->cols + b->block[1] - 1) / (uint64_t)b->block[1];
		uint64_t r0 = (uint64_t)row0 / (uint64_t)b->block[0];
		uint64_t r1 = ((uint64_t)(row0 + nrows) + (uint64_t)b->block[0] - 1) / (uint64_t)b->block[0];
		return (r1 - r0) * bcols * 4;
	}
	return 0;
}

/* The fp8 scale tensor of weight `name`, or NULL. */
static const coli_st_tensor *scale_of(const conv *cv, const char *name)
{
	return coli_model_scale_of(&cv->ct.model, cv->src, name);
}

/* Source bytes a job reads (weights, and whole fp8 scale tensors) and the read buffer it needs. */
static void add_read(job *j, uint64_t len)
{
	j->in_bytes += len;
	j->in_span += source_span(len);
}

/* n scales of s read: F8_E8M0 ones are widened to float32 in the read buffer (encode.c). */
static void add_scales(job *j, const coli_st_tensor *s, uint64_t n)
{
	uint64_t len = n * coli_dtype_size(s->dtype);
	j->in_bytes += len;
	j->in_span += source_span(n * 4);
}

static void record_reads(const conv *cv, job *j)
{
	for (int p = 0; p < 3; p++) {
		const char *w = cv->specs[cv->xspec[3 * j->rec + p]].name;
		const coli_st_tensor *t = coli_ckpt_find(cv->src, w), *s = scale_of(cv, w);
		add_read(j, t ? t->nbytes : 0);
		if (s)
			add_scales(j, s, s->nelem);
	}
}

static void chunk_reads(const conv *cv, job *j)
{
	const coli_ltensor *t = &cv->ct.layout.tensors[j->tensor];
	const coli_st_tensor *s = scale_of(cv, t->name);
	add_read(j, src_row_bytes(cv, t) * (uint64_t)j->nrows);
	if (s) {
		int64_t b0 = cv->ct.model.fp8_block[0], b1 = cv->ct.model.fp8_block[1];
		int64_t r0 = j->row0 / b0, r1 = (j->row0 + j->nrows + b0 - 1) / b0;
		add_scales(j, s, (uint64_t)((r1 - r0) * ((t->blob.cols + b1 - 1) / b1)));
	}
}

static int count_jobs(const conv *cv)
{
	const coli_layout *L = &cv->ct.layout;
	int n = 0;
	for (int i = 0; i < L->n_tensors; i++) {
		int64_t r = chunk_rows(cv, &L->tensors[i]);
		n += (int)((L->tensors[i].blob.rows + r - 1) / r);
	}
	for (int i = 0; i < L->n_elayers; i++)
		n += L->elayers[i].n_experts;
	return n;
}

/* Spec indices of every record's parts, in record order (the spec order is layer-major,
 * experts ascending, gate/up/down, like the records). */
static int index_expert_specs(conv *cv, coli_err *e)
{
	int n = 0;
	if (coli_model_tensors(&cv->ct.model, &cv->specs, &cv->n_specs, e) < 0)
		return -1;
	if (!(cv->xspec = coli_calloc((size_t)cv->n_specs, sizeof(int), e)))
		return -1;
	for (int i = 0; i < cv->n_specs; i++)
		if (cv->specs[i].cls == COLI_TC_EXPERT)
			cv->xspec[3 * (n / 3) + cv->specs[i].proj] = i, n++;
	return 0;
}

int jobs_build(conv *cv, coli_err *e)
{
	const coli_layout *L = &cv->ct.layout;
	int n = count_jobs(cv), k = 0;
	if (index_expert_specs(cv, e) < 0 || !(cv->jobs = coli_calloc((size_t)n, sizeof(job), e)))
		return -1;
	for (int i = 0; i < L->n_tensors; i++) {
		const coli_ltensor *t = &L->tensors[i];
		int64_t per = chunk_rows(cv, t);
		for (int64_t r = 0; r < t->blob.rows; r += per, k++) {
			int64_t nr = t->blob.rows - r < per ? t->blob.rows - r : per;
			cv->jobs[k] = (job){.tensor = i, .row0 = r, .nrows = nr, .elayer = -1, .expert = -1, .rec = -1,
					    .out_bytes = t->blob.row_bytes * (uint64_t)nr + scale_bytes_for(&t->blob, r, nr)};
			chunk_reads(cv, &cv->jobs[k]);
		}
	}
	int rec = 0;
	for (int i = 0; i < L->n_elayers; i++)
		for (int x = 0; x < L->elayers[i].n_experts; x++, k++) {
			cv->jobs[k] = (job){.tensor = -1, .elayer = i, .expert = x, .rec = rec++,
					    .out_bytes = L->elayers[i].record_size};
			record_reads(cv, &cv->jobs[k]);
		}
	cv->n_jobs = k;
	for (int i = 0; i < k; i++) {
		cv->total_in += cv->jobs[i].in_bytes;
		cv->total_out += cv->jobs[i].out_bytes;
	}
	return 0;
}
