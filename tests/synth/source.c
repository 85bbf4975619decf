/* source.c: float32 rows of named tensors, regenerated from the plan or read from a checkpoint.
 *
 * Both go through libcoli's coli_source_row_f32, so the regenerated values are exactly what a
 * reader of the written checkpoint gets (bf16 rounding, fp8 codes x block scale_inv).
 */
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "quant.h"
#include "safetensors.h"

/* ---- regenerated ---------------------------------------------------------------------------- */

/* ctx: the plan; ctx2: the table. */
static const synth_tensor *regen_find(const synth_src *s, const char *name)
{
	const synth_table *tb = s->ctx2;
	int i = synth_table_find(tb, name);
	return i < 0 ? NULL : &tb->t[i];
}

static int regen_shape(const synth_src *s, const char *name, int64_t *rows, int64_t *cols)
{
	const synth_tensor *t = regen_find(s, name);
	if (!t)
		return -1;
	*rows = t->rows;
	*cols = t->cols;
	return 0;
}

/* Rows of an fp8 weight, a 128-row block at a time. */
static int regen_fp8(const synth_plan *p, const synth_tensor *t, int64_t row0, int64_t n,
		     float *out, coli_err *e)
{
	int64_t B = SYNTH_FP8_BLOCK, ncb = (t->cols + B - 1) / B;
	float *w = coli_malloc((size_t)(B * t->cols + ncb) * sizeof(float), e);
	uint8_t *codes = w ? coli_malloc((size_t)(B * t->cols), e) : NULL;
	if (!codes) {
		free(w);
		return -1;
	}
	float *scale = w + B * t->cols;
	for (int64_t r = row0; r < row0 + n;) {
		int64_t b0 = r / B * B, nb = t->rows - b0 < B ? t->rows - b0 : B;
		synth_fp8_block(p, t, b0, nb, w, codes, scale);
		for (; r < row0 + n && r < b0 + nb; r++)
			coli_source_row_f32(COLI_DT_F8_E4M3, codes, (size_t)nb, (size_t)t->cols,
					    (size_t)(r - b0), scale, (size_t)B, (size_t)B,
					    out + (r - row0) * t->cols);
	}
	free(w);
	free(codes);
	return 0;
}

static int regen_rows(const synth_src *s, const char *name, int64_t row0, int64_t n, float *out,
		      coli_err *e)
{
	const synth_plan *p = s->ctx;
	const synth_tensor *t = regen_find(s, name);
	if (!t)
		return coli_errf(e, COLI_EDATA, "%s: no such tensor", name);
	if (t->dtype == COLI_DT_F8_E4M3)
		return regen_fp8(p, t, row0, n, out, e);
	size_t rb = (size_t)synth_row_bytes(t);
	uint8_t *buf = coli_malloc(rb, e);
	if (!buf)
		return -1;
	for (int64_t i = 0; i < n; i++) {
		float *o = out + i * t->cols;
		synth_encode_rows(p, t, row0 + i, 1, o, buf);
		coli_source_row_f32(t->dtype, buf, 1, (size_t)t->cols, 0, NULL, 0, 0, o);
	}
	free(buf);
	return 0;
}

void synth_src_regen(synth_src *s, const synth_plan *p, const synth_table *tb)
{
	memset(s, 0, sizeof(*s));
	s->m = p->m;
	s->rows = regen_rows;
	s->shape = regen_shape;
	s->ctx = (void *)p;
	s->ctx2 = tb;
}

/* ---- checkpoint ------------------------------------------------------------------------------
 * Read through libcoli's view of a released layout (qwen3_5_moe: the table's names over fused
 * experts and model.language_model.*), so the names are the table's whatever the file's. */

static int ckpt_shape(const synth_src *s, const char *name, int64_t *rows, int64_t *cols)
{
	const coli_st_tensor *t = coli_ckpt_find(s->ctx, name);
	if (!t || t->ndim < 1 || t->ndim > 2)
		return -1;
	*rows = t->ndim == 2 ? t->shape[0] : 1;
	*cols = t->shape[t->ndim - 1];
	return 0;
}

static int ckpt_rows(const synth_src *s, const char *name, int64_t row0, int64_t n, float *out,
		     coli_err *e)
{
	const coli_ckpt *c = s->ctx;
	const coli_st_tensor *t = coli_ckpt_find(c, name);
	if (!t)
		return coli_errf(e, COLI_EDATA, "%s: no such tensor", name);
	int64_t cols = t->shape[t->ndim - 1], rows = t->ndim == 2 ? t->shape[0] : 1;
	const float *scale = NULL;
	if (t->dtype == COLI_DT_F8_E4M3) {
		char sname[256];
		snprintf(sname, sizeof(sname), "%s_scale_inv", name);
		const coli_st_tensor *st = coli_ckpt_find(c, sname);
		if (!st)
			return coli_errf(e, COLI_EDATA, "%s: missing", sname);
		scale = coli_ckpt_data(c, st);
	}
	for (int64_t r = 0; r < n; r++)
		coli_source_row_f32(t->dtype, coli_ckpt_data(c, t), (size_t)rows, (size_t)cols,
				    (size_t)(row0 + r), scale, (size_t)s->m->fp8_block[0],
				    (size_t)s->m->fp8_block[1], out + r * cols);
	return 0;
}

int synth_src_ckpt_open(synth_src *s, coli_model *m, const char *dir, coli_err *e)
{
	char *cfg = coli_path_join(dir, "config.json");
	coli_ckpt *c = NULL;
	memset(s, 0, sizeof(*s));
	if (!cfg)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	int rc = coli_model_load(m, cfg, e), skipped;
	free(cfg);
	if (rc || coli_ckpt_open(&c, dir, e) || coli_model_map_ckpt(m, c, &skipped, e) ||
	    coli_model_check_ckpt(m, c, e)) {
		coli_ckpt_close(c);
		return -1;
	}
	s->m = m;
	s->rows = ckpt_rows;
	s->shape = ckpt_shape;
	s->ctx = c;
	return 0;
}

void synth_src_ckpt_close(synth_src *s)
{
	if (s)
		coli_ckpt_close(s->ctx);
}
