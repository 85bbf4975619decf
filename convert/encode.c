/* encode.c: turns source rows into container bytes: f32 for small tensors, the source's own
 * bits at 16, gs64 int8/int4 at 8/4; every value checked finite unless allowed. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "convert.h"
#include "quant.h"

#include <zlib.h>

/* Where one blob's rows go and where they come from. */
typedef struct rows_task {
	const coli_st_tensor *s;      /* source */
	const float *scale_inv;       /* fp8 source block scales, else NULL */
	const coli_st_tensor *ss;     /* the scale tensor */
	const coli_blob *b;           /* target geometry */
	int64_t row0, nrows;
	uint8_t *codes, *scales;      /* destinations for these rows */
} rows_task;

static int nonfinite(const conv *cv, const rows_task *t, int64_t r, int64_t c, float v, coli_err *e)
{
	if (cv->o->allow_nonfinite)
		return 0;
	return coli_errf(e, COLI_EDATA,
			 "%s: tensor '%s': row %lld column %lld: value %g is not finite (--allow-nonfinite keeps it)",
			 cv->src->files[t->s->file].path, t->s->name, (long long)r, (long long)c, (double)v);
}

/* A branch-free scan for an all-ones exponent (NaN or Inf) first; the slow loop only runs to
 * name the culprit. */
static int check_row(const conv *cv, const rows_task *t, int64_t r, const float *w, coli_err *e)
{
	const uint32_t *u = (const uint32_t *)(const void *)w; /* scratch is float-aligned */
	uint32_t bad = 0;
	for (int64_t c = 0; c < t->b->cols; c++)
		bad |= (u[c] & 0x7f800000u) == 0x7f800000u;
	for (int64_t c = 0; bad && c < t->b->cols; c++)
		if (!isfinite(w[c]))
			return nonfinite(cv, t, r, c, w[c], e);
	return 0;
}

/* Rows kept bit for bit (bf16/f16/fp8 at 16 bits): copy, after the finiteness check. */
static int copy_row(const conv *cv, const rows_task *t, int64_t r, float *scratch, coli_err *e)
{
	const uint8_t *src = (const uint8_t *)coli_ckpt_data(cv->src, t->s) + (uint64_t)r * t->b->row_bytes;
	coli_source_row_f32((int)t->s->dtype, coli_ckpt_data(cv->src, t->s), (size_t)t->b->rows,
			    (size_t)t->b->cols, (size_t)r, t->scale_inv, (size_t)cv->ct.model.fp8_block[0],
			    (size_t)cv->ct.model.fp8_block[1], scratch);
	if (check_row(cv, t, r, scratch, e) < 0)
		return -1;
	memcpy(t->codes + (uint64_t)(r - t->row0) * t->b->row_bytes, src, t->b->row_bytes);
	return 0;
}

/* Rows re-encoded from their float32 value: f32, or gs64 over the row zero-padded to 64. */
static int quant_row(const conv *cv, const rows_task *t, int64_t r, float *scratch, coli_err *e)
{
	uint64_t groups = (uint64_t)(t->b->cols + 63) / 64;
	uint8_t *dst = t->codes + (uint64_t)(r - t->row0) * t->b->row_bytes;
	uint16_t *sc = (uint16_t *)(t->scales + (uint64_t)(r - t->row0) * groups * 2);
	coli_source_row_f32((int)t->s->dtype, coli_ckpt_data(cv->src, t->s), (size_t)t->b->rows,
			    (size_t)t->b->cols, (size_t)r, t->scale_inv, (size_t)cv->ct.model.fp8_block[0],
			    (size_t)cv->ct.model.fp8_block[1], scratch);
	if (check_row(cv, t, r, scratch, e) < 0)
		return -1;
	memset(scratch + t->b->cols, 0, (groups * 64 - (uint64_t)t->b->cols) * sizeof(float));
	if (t->b->enc == COLI_ENC_F32)
		memcpy(dst, scratch, t->b->row_bytes);
	else if (t->b->enc == COLI_ENC_Q8)
		coli_q8_quantize_row(scratch, groups * 64, (int8_t *)dst, sc);
	else
		coli_q4_quantize_row(scratch, groups * 64, dst, sc);
	return 0;
}

/* fp8 kept: copy the scale_inv rows covering [row0, row0+nrows); they must be finite. */
static int copy_fp8_scales(const conv *cv, const rows_task *t, coli_err *e)
{
	int64_t b0 = t->b->block[0], bcols = (t->b->cols + t->b->block[1] - 1) / t->b->block[1];
	int64_t r0 = t->row0 / b0, r1 = (t->row0 + t->nrows + b0 - 1) / b0;
	for (int64_t i = r0 * bcols; i < r1 * bcols; i++)
		if (!isfinite(t->scale_inv[i]) && !cv->o->allow_nonfinite)
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s': element %lld: value %g is not finite",
					 cv->src->files[t->ss->file].path, t->ss->name, (long long)i,
					 (double)t->scale_inv[i]);
	memcpy(t->scales, t->scale_inv + r0 * bcols, (size_t)((r1 - r0) * bcols) * 4);
	return 0;
}

/* Drops the source pages just read so a pass over a huge checkpoint keeps a small RSS. */
static void release_rows(const conv *cv, const rows_task *t)
{
	const coli_st_file *f = &cv->src->files[t->s->file];
	uint64_t row = t->s->nbytes / (uint64_t)t->b->rows, page = 4096;
	uint64_t a = t->s->offset + (uint64_t)t->row0 * row, z = a + (uint64_t)t->nrows * row;
	a = (a + page - 1) / page * page;
	z = z / page * page;
	if (z > a)
		madvise((void *)(f->map + a), z - a, MADV_DONTNEED);
}

static int find_source(const conv *cv, const char *name, rows_task *t, coli_err *e)
{
	char sname[256];
	t->s = coli_ckpt_find(cv->src, name);
	t->ss = NULL;
	t->scale_inv = NULL;
	if (!t->s)
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s' missing", cv->src->dir, name);
	if (t->s->dtype != COLI_DT_F8_E4M3)
		return 0;
	snprintf(sname, sizeof(sname), "%s_scale_inv", name);
	t->ss = coli_ckpt_find(cv->src, sname);
	if (!t->ss || t->ss->dtype != COLI_DT_F32)
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s' missing or not F32", cv->src->dir, sname);
	t->scale_inv = coli_ckpt_data(cv->src, t->ss);
	return 0;
}

static int encode_rows(const conv *cv, rows_task *t, float *scratch, coli_err *e)
{
	int keep = t->b->enc == COLI_ENC_BF16 || t->b->enc == COLI_ENC_F16 || t->b->enc == COLI_ENC_FP8;
	for (int64_t r = t->row0; r < t->row0 + t->nrows; r++)
		if ((keep ? copy_row(cv, t, r, scratch, e) : quant_row(cv, t, r, scratch, e)) < 0)
			return -1;
	if (t->b->enc == COLI_ENC_FP8 && copy_fp8_scales(cv, t, e) < 0)
		return -1;
	release_rows(cv, t);
	return 0;
}

uint64_t encode_scratch_floats(const conv *cv)
{
	int64_t m = 64;
	for (int i = 0; i < cv->ct.layout.n_tensors; i++)
		if (cv->ct.layout.tensors[i].blob.cols > m)
			m = cv->ct.layout.tensors[i].blob.cols;
	for (int i = 0; i < cv->ct.layout.n_elayers; i++)
		for (int p = 0; p < 3; p++)
			if (cv->ct.layout.elayers[i].part[p].cols > m)
				m = cv->ct.layout.elayers[i].part[p].cols;
	return (uint64_t)(m + 64);
}

static int encode_record(const conv *cv, const job *j, job_out *out, float *scratch, coli_err *e)
{
	const coli_lexperts *x = &cv->ct.layout.elayers[j->elayer];
	memset(out->buf, 0, x->record_size);
	for (int p = 0; p < 3; p++) {
		rows_task t;
		if (find_source(cv, cv->specs[cv->xspec[3 * j->rec + p]].name, &t, e) < 0)
			return -1;
		t.b = &x->part[p];
		t.row0 = 0;
		t.nrows = t.b->rows;
		t.codes = out->buf + x->part_off[p];
		t.scales = t.codes + t.b->scales_off;
		if (encode_rows(cv, &t, scratch, e) < 0)
			return -1;
	}
	out->codes_len = x->record_size;
	out->scales_len = 0;
	return 0;
}

int encode_job(const conv *cv, const job *j, job_out *out, float *scratch, coli_err *e)
{
	int rc;
	if (j->tensor < 0) {
		rc = encode_record(cv, j, out, scratch, e);
	} else {
		const coli_ltensor *lt = &cv->ct.layout.tensors[j->tensor];
		rows_task t;
		rc = find_source(cv, lt->name, &t, e);
		t.b = &lt->blob;
		t.row0 = j->row0;
		t.nrows = j->nrows;
		t.codes = out->buf;
		out->codes_len = lt->blob.row_bytes * (uint64_t)j->nrows;
		out->scales_len = j->out_bytes - out->codes_len;
		t.scales = out->buf + out->codes_len;
		if (rc == 0)
			rc = encode_rows(cv, &t, scratch, e);
	}
	if (rc < 0)
		return -1;
	out->codes_crc = (uint32_t)crc32_z(0, out->buf, out->codes_len);
	out->scales_crc = (uint32_t)crc32_z(0, out->buf + out->codes_len, out->scales_len);
	return 0;
}
