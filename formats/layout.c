/* layout.c: blob geometry and the placement of tensors and expert records in a container. */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

static const char *const enc_names[COLI_ENC_COUNT] = {"f32", "bf16", "f16", "fp8", "q8", "q4", "fp4"};
static const char *const section_files[COLI_SEC_COUNT] = {"dense.bin", "mtp.bin", "experts.bin"};

const char *coli_enc_name(coli_enc enc)
{
	return (unsigned)enc < COLI_ENC_COUNT ? enc_names[enc] : "?";
}

int coli_enc_parse(const char *s)
{
	for (int i = 0; i < COLI_ENC_COUNT; i++)
		if (strcmp(s, enc_names[i]) == 0)
			return i;
	return -1;
}

const char *coli_section_file(coli_section s)
{
	return (unsigned)s < COLI_SEC_COUNT ? section_files[s] : "?";
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static uint64_t div_up(uint64_t x, uint64_t a) { return (x + a - 1) / a; }

/* Sizes stay far below 2^62 when rows and cols are below 2^31, so no product overflows. */
int coli_blob_init(coli_blob *b, coli_enc enc, int64_t rows, int64_t cols, const int64_t block[2],
		   coli_err *e)
{
	memset(b, 0, sizeof(*b));
	if (rows <= 0 || cols <= 0 || rows >= (1ll << 31) || cols >= (1ll << 31))
		return coli_errf(e, COLI_EDATA, "shape [%lld, %lld] out of range", (long long)rows, (long long)cols);
	if ((unsigned)enc >= COLI_ENC_COUNT)
		return coli_errf(e, COLI_EDATA, "encoding %d unknown", (int)enc);
	b->enc = enc;
	b->rows = rows;
	b->cols = cols;
	uint64_t groups = div_up((uint64_t)cols, 64), scale_count = 0, scale_size = 0;
	switch (enc) {
	case COLI_ENC_F32: b->row_bytes = (uint64_t)cols * 4; break;
	case COLI_ENC_BF16:
	case COLI_ENC_F16: b->row_bytes = (uint64_t)cols * 2; break;
	case COLI_ENC_Q8: b->row_bytes = groups * 64; scale_count = (uint64_t)rows * groups; scale_size = 2; break;
	case COLI_ENC_Q4: b->row_bytes = groups * 32; scale_count = (uint64_t)rows * groups; scale_size = 2; break;
	case COLI_ENC_FP4:
		b->row_bytes = div_up((uint64_t)cols, 32) * 16;
		scale_count = (uint64_t)rows * div_up((uint64_t)cols, 32);
		scale_size = 1;
		break;
	case COLI_ENC_FP8:
		if (!block || block[0] <= 0 || block[1] <= 0)
			return coli_errf(e, COLI_EDATA, "fp8 block size missing");
		b->block[0] = block[0];
		b->block[1] = block[1];
		b->row_bytes = (uint64_t)cols;
		scale_count = div_up((uint64_t)rows, (uint64_t)block[0]) * div_up((uint64_t)cols, (uint64_t)block[1]);
		scale_size = 4;
		break;
	default: break;
	}
	b->codes_bytes = b->row_bytes * (uint64_t)rows;
	b->scales_bytes = scale_count * scale_size;
	b->scales_off = scale_count ? align_up(b->codes_bytes, COLI_TENSOR_ALIGN) : 0;
	b->nbytes = scale_count ? b->scales_off + b->scales_bytes : b->codes_bytes;
	return 0;
}

/* The encoding a class gets at `bits`: 16 keeps the source's own encoding. FP4 experts (I8 codes)
 * are never requantized: below 16 bits their codes and scales are kept (fp4), at 16 their values
 * widened exactly (e2m1 x a power of two is exact in bf16). */
static int pick_enc(const coli_st_tensor *t, coli_tclass cls, int bits)
{
	if (cls == COLI_TC_SMALL)
		return COLI_ENC_F32;
	if (cls == COLI_TC_EXPERT && t->dtype == COLI_DT_I8)
		return bits == 16 ? COLI_ENC_BF16 : COLI_ENC_FP4;
	if (bits == 4)
		return COLI_ENC_Q4;
	if (bits == 8)
		return COLI_ENC_Q8;
	switch (t->dtype) {
	case COLI_DT_BF16: return COLI_ENC_BF16;
	case COLI_DT_F16: return COLI_ENC_F16;
	case COLI_DT_F8_E4M3: return COLI_ENC_FP8;
	default: return COLI_ENC_F32;
	}
}

static int spec_blob(coli_blob *b, const coli_tensor_spec *s, const coli_model *m,
		     const coli_ckpt *src, int bits, coli_err *e)
{
	const coli_st_tensor *t = coli_ckpt_find(src, s->name);
	if (!t)
		return coli_errf(e, COLI_EDATA, "tensor '%s' missing from the checkpoint", s->name);
	int64_t rows = s->ndim == 2 ? s->shape[0] : 1, cols = s->ndim == 2 ? s->shape[1] : s->shape[0];
	int64_t block[2] = {m->fp8_block[0], m->fp8_block[1]};
	if (coli_blob_init(b, (coli_enc)pick_enc(t, s->cls, bits), rows, cols, block, e) < 0) {
		coli_err_prefix(e, s->name);
		return -1;
	}
	return 0;
}

static int add_tensor(coli_layout *L, const coli_tensor_spec *s, const coli_model *m,
		      const coli_ckpt *src, int bits, coli_err *e)
{
	coli_ltensor *t = &L->tensors[L->n_tensors];
	memset(t, 0, sizeof(*t));
	t->name = strdup(s->name);
	if (!t->name)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	L->n_tensors++;
	t->section = s->mtp ? COLI_SEC_MTP : COLI_SEC_DENSE;
	t->layer = s->layer;
	t->cls = s->cls;
	t->ndim = s->ndim;
	return spec_blob(&t->blob, s, m, src, bits, e);
}

/* Expert 0's parts define the layer's record: every expert must have expert 0's dtype (shapes
 * are checked by coli_model_check_ckpt). */
static int same_dtype_as_expert0(const coli_layout *L, const coli_tensor_spec *s, const coli_ckpt *src,
				 coli_err *e)
{
	const coli_st_tensor *t = coli_ckpt_find(src, s->name);
	const coli_lexperts *x = &L->elayers[L->n_elayers - 1];
	int want = x->part_dtype[s->proj];
	if (!t)
		return coli_errf(e, COLI_EDATA, "tensor '%s' missing from the checkpoint", s->name);
	if ((int)t->dtype != want)
		return coli_errf(e, COLI_EDATA, "tensor '%s': dtype %s, but expert 0 of layer %d is %s (a layer's experts must share one dtype)",
				 s->name, coli_dtype_name(t->dtype), s->layer, coli_dtype_name((coli_dtype)want));
	return 0;
}

static int add_expert_part(coli_layout *L, const coli_tensor_spec *s, const coli_model *m,
			   const coli_ckpt *src, int bits, coli_err *e)
{
	coli_lexperts *x = L->n_elayers ? &L->elayers[L->n_elayers - 1] : NULL;
	if (!x || x->layer != s->layer) {
		x = &L->elayers[L->n_elayers++];
		memset(x, 0, sizeof(*x));
		x->layer = s->layer;
		x->mtp = s->mtp;
	}
	if (s->expert + 1 > x->n_experts)
		x->n_experts = s->expert + 1;
	if (s->expert != 0)
		return same_dtype_as_expert0(L, s, src, e);
	const coli_st_tensor *t = coli_ckpt_find(src, s->name);
	x->part_dtype[s->proj] = t ? (int)t->dtype : -1;
	return spec_blob(&x->part[s->proj], s, m, src, bits, e);
}

int coli_layout_plan(coli_layout *L, const coli_model *m, const coli_ckpt *src, int expert_bits,
		     int dense_bits, int mtp_bits, coli_err *e)
{
	memset(L, 0, sizeof(*L));
	coli_tensor_spec *specs = NULL;
	int n = 0;
	if (coli_model_tensors(m, &specs, &n, e) < 0)
		return -1;
	L->tensors = coli_calloc((size_t)n, sizeof(*L->tensors), e);
	L->elayers = coli_calloc((size_t)m->n_layers + (size_t)m->n_mtp_layers, sizeof(*L->elayers), e);
	int rc = L->tensors && L->elayers ? 0 : -1;
	for (int i = 0; rc == 0 && i < n; i++) {
		const coli_tensor_spec *s = &specs[i];
		int bits = s->mtp ? mtp_bits : s->cls == COLI_TC_EXPERT ? expert_bits : dense_bits;
		rc = s->cls == COLI_TC_EXPERT ? add_expert_part(L, s, m, src, bits, e)
					      : add_tensor(L, s, m, src, bits, e);
	}
	free(specs);
	if (rc == 0)
		rc = coli_layout_place(L, e);
	for (int i = 0; rc == 0 && i < L->n_elayers; i++) {
		L->elayers[i].crc = coli_calloc((size_t)L->elayers[i].n_experts, sizeof(uint32_t), e);
		rc = L->elayers[i].crc ? 0 : -1;
	}
	if (rc < 0)
		coli_layout_release(L);
	return rc;
}

int coli_layout_place(coli_layout *L, coli_err *e)
{
	uint64_t end[COLI_SEC_COUNT] = {COLI_SECTION_HEADER, COLI_SECTION_HEADER, COLI_SECTION_HEADER};
	for (int i = 0; i < L->n_tensors; i++) {
		coli_ltensor *t = &L->tensors[i];
		t->offset = align_up(end[t->section], COLI_TENSOR_ALIGN);
		end[t->section] = t->offset + t->blob.nbytes;
	}
	for (int i = 0; i < L->n_elayers; i++) {
		coli_lexperts *x = &L->elayers[i];
		uint64_t off = 0;
		for (int p = 0; p < 3; p++) {
			if (x->part[p].nbytes == 0)
				return coli_errf(e, COLI_EDATA, "layer %d: expert part %d has no tensor", x->layer, p);
			x->part_off[p] = align_up(off, COLI_TENSOR_ALIGN);
			off = x->part_off[p] + x->part[p].nbytes;
		}
		x->record_size = align_up(off, COLI_RECORD_ALIGN);
		x->offset = align_up(end[COLI_SEC_EXPERTS], COLI_RECORD_ALIGN);
		end[COLI_SEC_EXPERTS] = x->offset + x->record_size * (uint64_t)x->n_experts;
	}
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		L->section_size[s] = align_up(end[s], COLI_RECORD_ALIGN);
	return 0;
}

void coli_layout_release(coli_layout *L)
{
	if (!L)
		return;
	for (int i = 0; i < L->n_tensors; i++)
		free(L->tensors[i].name);
	for (int i = 0; i < L->n_elayers; i++)
		free(L->elayers[i].crc);
	free(L->tensors);
	free(L->elayers);
	memset(L, 0, sizeof(*L));
}
