/* encode.c: turns source rows into container bytes: f32 for small tensors, the source's own
 * bits at 16, gs64 int8/int4 at 8/4, FP4 experts' codes and scales copied (fp4) or widened
 * exactly (bf16); every value checked finite unless allowed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "crc32.h"
#include "convert.h"
#include "quant.h"

/* Rows [row0, row0+nrows) of one source tensor, read into memory, and where they go. */
typedef struct rows_task {
	const coli_st_tensor *s;      /* source weight */
	const coli_st_tensor *ss;     /* its fp8 scale_inv tensor, else NULL */
	const uint8_t *data;          /* source row row0 */
	const float *scale;           /* scale_inv block row row0 / b0, else NULL */
	int64_t src_row_bytes, bcols; /* bcols: scale blocks per row (fp8) */
	int64_t b0, b1;               /* the scales' blocks: fp8's weight_block_size, FP4's 1 x 32 */
	int fp4;                      /* an FP4 expert: e2m1 codes two a byte, low nibble first */
	const coli_blob *b;           /* target geometry */
	int64_t row0, nrows;
	uint8_t *codes, *scales;      /* destinations of row row0 */
} rows_task;

/* Element i of the fp8 scale_inv tensor is not finite: blame the scale, not the weight. */
static int bad_scale(const conv *cv, const rows_task *t, int64_t i, float v, coli_err *e)
{
	return coli_errf(e, COLI_EDATA,
			 "%s: tensor '%s': element %lld (scale block row %lld column %lld): value %g is not finite (--allow-nonfinite keeps it)",
			 cv->src->files[t->ss->file].path, t->ss->name, (long long)i, (long long)(i / t->bcols),
			 (long long)(i % t->bcols), (double)v);
}

static int nonfinite(const conv *cv, const rows_task *t, int64_t r, int64_t c, float v, coli_err *e)
{
	if (cv->o->allow_nonfinite)
		return 0;
	int64_t b0 = t->b0, b1 = t->b1;
	int64_t i = t->scale ? (r / b0) * t->bcols + c / b1 : 0; /* the scale element of (r, c) */
	if (t->scale && !isfinite(t->scale[i - t->row0 / b0 * t->bcols]))
		return bad_scale(cv, t, i, t->scale[i - t->row0 / b0 * t->bcols], e);
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

/* Row r as float32, exactly as the checkpoint defines it (fp8: code x its block's scale_inv;
 * FP4: e2m1 code x its 32 columns' scale). */
static void decode_row(const rows_task *t, int64_t r, float *out)
{
	const float *srow = t->scale ? t->scale + (r / t->b0 - t->row0 / t->b0) * t->bcols : NULL;
	const uint8_t *src = t->data + (r - t->row0) * t->src_row_bytes;
	if (t->fp4)
		coli_fp4_row_f32(src, (size_t)t->b->cols, srow, out);
	else
		coli_source_row_f32((int)t->s->dtype, src, 1, (size_t)t->b->cols, 0, srow, (size_t)t->b0, (size_t)t->b1, out);
}

/* An FP4 row as bf16: its values (e2m1 x a power of two) are exact in bf16, checked. */
static int fp4_as_bf16(const conv *cv, const rows_task *t, int64_t r, const float *w, uint8_t *dst, coli_err *e)
{
	for (int64_t c = 0; c < t->b->cols; c++) {
		uint32_t u;
		memcpy(&u, &w[c], 4);
		uint16_t h = (uint16_t)(u >> 16);
		if ((uint32_t)h << 16 != u)
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s': row %lld column %lld: %g is not exact in bf16",
					 cv->src->files[t->s->file].path, t->s->name, (long long)r, (long long)c, (double)w[c]);
		memcpy(dst + 2 * c, &h, 2);
	}
	return 0;
}

/* Rows kept bit for bit (bf16/f16/fp8 at 16 bits): copy, after the finiteness check; FP4 rows as
 * their exact bf16 values. */
static int copy_row(const conv *cv, const rows_task *t, int64_t r, float *scratch, coli_err *e)
{
	uint8_t *dst = t->codes + (uint64_t)(r - t->row0) * t->b->row_bytes;
	decode_row(t, r, scratch);
	if (check_row(cv, t, r, scratch, e) < 0)
		return -1;
	if (t->fp4)
		return fp4_as_bf16(cv, t, r, scratch, dst, e);
	memcpy(dst, t->data + (r - t->row0) * t->src_row_bytes, t->b->row_bytes);
	return 0;
}

/* An FP4 row kept (fp4): its codes copied, its scales as UE8M0 bytes (an F8_E8M0 source's bytes
 * again: read_scales widened them exactly; an F32 source's must be powers of two), after the
 * finiteness check of its values. */
static int fp4_row(const conv *cv, const rows_task *t, int64_t r, float *scratch, coli_err *e)
{
	int64_t nb = (t->b->cols + 31) / 32;
	const float *srow = t->scale + (r - t->row0) * t->bcols;
	uint8_t *sc = t->scales + (uint64_t)(r - t->row0) * (uint64_t)nb;
	decode_row(t, r, scratch);
	if (check_row(cv, t, r, scratch, e) < 0)
		return -1;
	memcpy(t->codes + (uint64_t)(r - t->row0) * t->b->row_bytes, t->data + (r - t->row0) * t->src_row_bytes,
	       (size_t)t->src_row_bytes);
	for (int64_t b = 0; b < nb; b++) {
		int u = coli_f32_to_e8m0(srow[b]);
		if (u < 0)
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s': element %lld: scale %g is not a power of two in "
					 "[2^-127, 2^127] (UE8M0)", cv->src->files[t->ss->file].path, t->ss->name,
					 (long long)(r * t->bcols + b), (double)srow[b]);
		sc[b] = (uint8_t)u;
	}
	return 0;
}

/* Rows re-encoded from their float32 value: f32, or gs64 over the row zero-padded to 64. */
static int quant_row(const conv *cv, const rows_task *t, int64_t r, float *scratch, coli_err *e)
{
	uint64_t groups = (uint64_t)(t->b->cols + 63) / 64;
	uint8_t *dst = t->codes + (uint64_t)(r - t->row0) * t->b->row_bytes;
	uint16_t *sc = (uint16_t *)(t->scales + (uint64_t)(r - t->row0) * groups * 2);
	decode_row(t, r, scratch);
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

/* fp8 kept: copy the scale_inv block rows covering the task's rows; they must be finite. */
static int copy_fp8_scales(const conv *cv, const rows_task *t, coli_err *e)
{
	int64_t b0 = t->b->block[0], n = ((t->row0 + t->nrows + b0 - 1) / b0 - t->row0 / b0) * t->bcols;
	for (int64_t i = 0; i < n; i++)
		if (!isfinite(t->scale[i]) && !cv->o->allow_nonfinite)
			return bad_scale(cv, t, t->row0 / b0 * t->bcols + i, t->scale[i], e);
	memcpy(t->scales, t->scale, (size_t)n * 4);
	return 0;
}

/* Scales [at, at + n) of ss as float32: F32 as read; F8_E8M0 bytes b widened in the read buffer
 * (the job reserved 4 bytes each) to 2^(b - 127) exactly (b 255, NaN in torch's e8m0, as NaN). */
static const float *read_scales(const conv *cv, const coli_st_tensor *ss, uint64_t at, uint64_t n, inbuf *in,
				coli_err *e)
{
	if (ss->dtype == COLI_DT_F32)
		return (const float *)(const void *)source_read(cv, ss, at * 4, n * 4, 1, in, e);
	uint8_t *b = (uint8_t *)source_read(cv, ss, at, n, 1, in, e);
	if (!b)
		return NULL;
	if ((uint64_t)(b - in->base) + n * 4 > in->cap)
		return coli_errf(e, COLI_ENOMEM, "read buffer of %llu bytes too small for '%s' as float32",
				 (unsigned long long)in->cap, ss->name), NULL;
	float *f = (float *)(void *)b;
	for (uint64_t i = n; i-- > 0;) /* backwards: each float lands at or after its byte */
		f[i] = b[i] == 255 ? NAN : ldexpf(1.0f, (int)b[i] - 127);
	if ((uint64_t)(b - in->base) + n * 4 > in->used)
		in->used = (uint64_t)(b - in->base) + n * 4;
	return f;
}

/* Finds the source of `name` and reads rows [row0, row0+nrows) (and their scales) into in. */
static int load_rows(const conv *cv, const char *name, int64_t row0, int64_t nrows, int64_t cols,
		     rows_task *t, inbuf *in, coli_err *e)
{
	t->s = coli_ckpt_find(cv->src, name);
	t->ss = coli_model_scale_of(&cv->ct.model, cv->src, name);
	t->fp4 = t->s && t->s->dtype == COLI_DT_I8; /* the check lets I8 be an FP4 expert only */
	int scaled = t->s && (t->s->dtype == COLI_DT_F8_E4M3 || t->fp4);
	if (!t->s || (scaled && (!t->ss || (t->ss->dtype != COLI_DT_F32 && t->ss->dtype != COLI_DT_F8_E8M0))))
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s' or its block scales missing", cv->src->dir, name);
	if (!scaled)
		t->ss = NULL;
	t->row0 = row0;
	t->nrows = nrows;
	t->b0 = t->fp4 ? 1 : cv->ct.model.fp8_block[0], t->b1 = t->fp4 ? 32 : cv->ct.model.fp8_block[1];
	t->src_row_bytes = t->fp4 ? cols / 2 : cols * (int64_t)coli_dtype_size(t->s->dtype);
	t->data = source_read(cv, t->s, (uint64_t)(row0 * t->src_row_bytes), (uint64_t)(nrows * t->src_row_bytes), 0,
			      in, e);
	t->scale = NULL;
	if (t->data && t->ss) {
		int64_t b0 = t->b0, b1 = t->b1;
		int64_t r0 = row0 / b0, r1 = (row0 + nrows + b0 - 1) / b0;
		t->bcols = (cols + b1 - 1) / b1;
		t->scale = read_scales(cv, t->ss, (uint64_t)(r0 * t->bcols), (uint64_t)((r1 - r0) * t->bcols), in, e);
	}
	return t->data && (!t->ss || t->scale) ? 0 : -1;
}

static int encode_rows(const conv *cv, rows_task *t, float *scratch, coli_err *e)
{
	int keep = t->b->enc == COLI_ENC_BF16 || t->b->enc == COLI_ENC_F16 || t->b->enc == COLI_ENC_FP8;
	for (int64_t r = t->row0; r < t->row0 + t->nrows; r++)
		if ((t->b->enc == COLI_ENC_FP4 ? fp4_row(cv, t, r, scratch, e)
		     : keep			? copy_row(cv, t, r, scratch, e)
						: quant_row(cv, t, r, scratch, e)) < 0)
			return -1;
	if (t->b->enc == COLI_ENC_FP8 && copy_fp8_scales(cv, t, e) < 0)
		return -1;
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

static int encode_record(const conv *cv, const job *j, job_out *out, float *scratch, inbuf *in, coli_err *e)
{
	const coli_lexperts *x = &cv->ct.layout.elayers[j->elayer];
	rows_task parts[3];
	for (int p = 0; p < 3; p++)
		if (load_rows(cv, cv->specs[cv->xspec[3 * j->rec + p]].name, 0, x->part[p].rows, x->part[p].cols,
			      &parts[p], in, e) < 0)
			return -1;
	memset(out->buf, 0, x->record_size);
	for (int p = 0; p < 3; p++) {
		parts[p].b = &x->part[p];
		parts[p].codes = out->buf + x->part_off[p];
		parts[p].scales = parts[p].codes + x->part[p].scales_off;
		if (encode_rows(cv, &parts[p], scratch, e) < 0)
			return -1;
	}
	out->codes_len = x->record_size;
	out->scales_len = 0;
	return 0;
}

static int encode_chunk(const conv *cv, const job *j, job_out *out, float *scratch, inbuf *in, coli_err *e)
{
	const coli_ltensor *lt = &cv->ct.layout.tensors[j->tensor];
	rows_task t;
	if (load_rows(cv, lt->name, j->row0, j->nrows, lt->blob.cols, &t, in, e) < 0)
		return -1;
	t.b = &lt->blob;
	t.codes = out->buf;
	out->codes_len = lt->blob.row_bytes * (uint64_t)j->nrows;
	out->scales_len = j->out_bytes - out->codes_len;
	t.scales = out->buf + out->codes_len;
	return encode_rows(cv, &t, scratch, e);
}

int encode_job(const conv *cv, const job *j, job_out *out, float *scratch, inbuf *in, coli_err *e)
{
	in->used = 0;
	if ((j->tensor < 0 ? encode_record(cv, j, out, scratch, in, e) : encode_chunk(cv, j, out, scratch, in, e)) < 0)
		return -1;
	out->codes_crc = coli_crc32(0, out->buf, out->codes_len);
	out->scales_crc = coli_crc32(0, out->buf + out->codes_len, out->scales_len);
	return 0;
}
