/* kv.c: a sequence's state, allocated part by part from what its layers declare (formats/state.h),
 * with per-layer views for the attention blocks. */
#include "nn/kv.h"

#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "nn/attention.h"

/* The per-layer view a part of this kind fills, or NULL (a kind the views do not name). */
static float **view_of(coli_kv *kv, int kind)
{
	switch (kind) {
	case COLI_STATE_KEY:
	case COLI_STATE_LATENT: return kv->k;
	case COLI_STATE_VALUE:
	case COLI_STATE_ROPE_KEY: return kv->v;
	case COLI_STATE_INDEX_KEY: return kv->ix;
	case COLI_STATE_CONV: return kv->conv;
	case COLI_STATE_RECURRENT: return kv->rec;
	default: return NULL;
	}
}

/* Each part's buffer (zeroed), its width recorded for the view it fills. */
static int alloc_parts(coli_kv *kv, coli_err *e)
{
	for (int i = 0; i < kv->n_parts; i++) {
		const coli_state_part *p = &kv->parts[i];
		size_t floats = p->width ? (size_t)kv->cap * (size_t)p->width : (size_t)p->fixed;
		if (!(kv->part[i] = coli_calloc(floats ? floats : 1, sizeof(float), e)))
			return -1;
		float **view = view_of(kv, p->kind);
		if (view)
			view[p->layer] = kv->part[i];
		int *width = p->kind == COLI_STATE_INDEX_KEY ? &kv->ix_width
			     : view == kv->k		     ? &kv->k_width
			     : view == kv->v		     ? &kv->v_width
							     : NULL;
		if (width)
			*width = p->width;
	}
	return 0;
}

int kv_open_layers(coli_kv *kv, const coli_engine *m, int first, int last, int cap, coli_err *e)
{
	const coli_model *c = m->cfg;
	memset(kv, 0, sizeof(*kv));
	kv->cap = cap;
	kv->n_layers = c->n_layers + c->n_mtp_layers;
	kv->n_parts = coli_model_state_range(c, first, last, NULL);
	kv->parts = coli_calloc((size_t)kv->n_parts + 1, sizeof(*kv->parts), e);
	kv->part = kv->parts ? coli_calloc((size_t)kv->n_parts + 1, sizeof(float *), e) : NULL;
	kv->k = kv->part ? coli_calloc((size_t)kv->n_layers, sizeof(float *), e) : NULL;
	kv->v = kv->k ? coli_calloc((size_t)kv->n_layers, sizeof(float *), e) : NULL;
	kv->ix = kv->v ? coli_calloc((size_t)kv->n_layers, sizeof(float *), e) : NULL;
	kv->conv = kv->ix ? coli_calloc((size_t)kv->n_layers, sizeof(float *), e) : NULL;
	kv->rec = kv->conv ? coli_calloc((size_t)kv->n_layers, sizeof(float *), e) : NULL;
	kv->att = kv->rec ? coli_calloc((size_t)coli_kernels_threads(m->kc) * (size_t)attn_score_rows(c) * (size_t)cap,
				       sizeof(float), e)
			 : NULL;
	if (!kv->att)
		return -1;
	coli_model_state_range(c, first, last, kv->parts);
	if (c->index_topk && !(kv->iscore = coli_calloc(2 * (size_t)cap, sizeof(float), e)))
		return -1;
	return alloc_parts(kv, e);
}

int coli_kv_init(coli_kv *kv, const coli_engine *m, int cap, coli_err *e)
{
	return kv_open_layers(kv, m, 0, m->cfg->n_layers, cap, e);
}

uint64_t coli_kv_token_bytes(const coli_model *c)
{
	return coli_model_state_token_bytes(c);
}

void coli_kv_release(coli_kv *kv)
{
	for (int i = 0; kv->part && i < kv->n_parts; i++)
		free(kv->part[i]);
	free(kv->parts);
	free(kv->part);
	free(kv->k);
	free(kv->v);
	free(kv->ix);
	free(kv->conv);
	free(kv->rec);
	free(kv->att);
	free(kv->iscore);
	memset(kv, 0, sizeof(*kv));
}
