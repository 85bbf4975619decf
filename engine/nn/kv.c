/* kv.c: a sequence's state, allocated part by part from what its layers declare (formats/state.h),
 * with per-layer views for the attention blocks; its rollback (what a short forward call keeps,
 * the fixed parts restored and replayed). */
#include "nn/kv.h"

#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "nn/attention.h"
#include "nn/gdn.h"
#include "nn/v4.h"

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
	if (c->attn != COLI_ATTN_V4 && c->index_topk && !(kv->iscore = coli_calloc(2 * (size_t)cap, sizeof(float), e)))
		return -1;
	if (alloc_parts(kv, e) < 0)
		return -1;
	return c->attn == COLI_ATTN_V4 ? v4_kv_open(kv, m, first, last, cap, e) : 0;
}

uint64_t kv_layers_bytes(const coli_model *c, int first, int last, int cap, int threads)
{
	uint64_t b = (uint64_t)threads * (uint64_t)attn_score_rows(c) * (uint64_t)cap * sizeof(float);
	for (int l = first; l < last; l++)
		b += coli_model_layer_token_bytes(c, l) * (uint64_t)cap + coli_model_layer_fixed_bytes(c, l);
	if (c->attn == COLI_ATTN_V4) /* its scratch; no DSA scores */
		return b + v4_kv_bytes(c, first, last, cap);
	return b + (c->index_topk ? 2 * (uint64_t)cap * sizeof(float) : 0);
}

/* coli_kv_keep's buffers. */
static void keep_free(coli_kv *kv)
{
	kv_keep *k = kv->keep;
	if (!k)
		return;
	float **rows[5] = {k->R, k->Y, k->B, k->A, k->W};
	for (int r = 0; r < 5; r++) {
		for (int l = 0; rows[r] && l < kv->n_layers; l++)
			free(rows[r][l]);
		free(rows[r]);
	}
	free(k->snap);
	free(k);
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
	keep_free(kv);
	v4_kv_close(kv);
	memset(kv, 0, sizeof(*kv));
}

/* Floats of every fixed part together. */
static size_t fixed_floats(const coli_kv *kv)
{
	size_t n = 0;
	for (int i = 0; i < kv->n_parts; i++)
		n += (size_t)kv->parts[i].fixed;
	return n;
}

/* A fixed part coli_kv_keep copies whole before a kept call (a Gated DeltaNet's, which every
 * token rewrites throughout); deepseek_v4's, of which a token rewrites a few slots, are put back
 * slot by slot (v4_undo). */
static int snapped(const coli_state_part *p)
{
	return p->fixed && p->kind != COLI_STATE_WINDOW && p->kind != COLI_STATE_COMP_WINDOW &&
	       p->kind != COLI_STATE_INDEX_WINDOW;
}

/* Floats of the snapped parts together. */
static size_t snap_floats(const coli_kv *kv)
{
	size_t n = 0;
	for (int i = 0; i < kv->n_parts; i++)
		n += snapped(&kv->parts[i]) ? (size_t)kv->parts[i].fixed : 0;
	return n;
}

/* Floats coli_kv_keep keeps per token of a Gated DeltaNet layer: its conv inputs and its q, k,
 * v ([conv_dim] each), b and a ([v_heads] each). */
static size_t keep_row_floats(const coli_model *c, size_t *conv_dim)
{
	*conv_dim = 2 * (size_t)c->lin_k_heads * c->lin_k_dim + (size_t)c->lin_v_heads * c->lin_v_dim;
	return 2 * *conv_dim + 2 * (size_t)c->lin_v_heads;
}

uint64_t kv_keep_bytes(const coli_model *c, int first, int last)
{
	uint64_t b = 0, T = COLI_DRAFT_MAX + 1;
	size_t C, row = keep_row_floats(c, &C);
	for (int l = first; l < last; l++) {
		uint64_t fixed = coli_model_layer_fixed_bytes(c, l);
		if (c->attn == COLI_ATTN_V4)
			b += v4_keep_floats(c, l) * sizeof(float);
		else if (fixed)
			b += fixed + T * row * sizeof(float);
	}
	return b;
}

/* The kept rows of every layer with fixed parts: a Gated DeltaNet's four, deepseek_v4's one. */
static int keep_rows(coli_kv *kv, kv_keep *k, const coli_model *c, coli_err *e)
{
	size_t S = COLI_DRAFT_MAX + 1, C;
	keep_row_floats(c, &C);
	float ***rows[5] = {&k->R, &k->Y, &k->B, &k->A, &k->W};
	for (int r = 0; r < 5; r++)
		if (!(*rows[r] = coli_calloc((size_t)kv->n_layers, sizeof(float *), e)))
			return -1;
	for (int i = 0; i < kv->n_parts; i++) {
		int l = kv->parts[i].layer;
		if (kv->parts[i].kind == COLI_STATE_RECURRENT) {
			size_t w[4] = {C, C, (size_t)c->lin_v_heads, (size_t)c->lin_v_heads};
			for (int r = 0; r < 4; r++)
				if (!((*rows[r])[l] = coli_malloc(S * w[r] * sizeof(float), e)))
					return -1;
		} else if (kv->parts[i].kind == COLI_STATE_WINDOW &&
			   !(k->W[l] = coli_malloc(v4_keep_floats(c, l) * sizeof(float), e))) {
			return -1;
		}
	}
	return 0;
}

int coli_kv_keep(coli_kv *kv, const coli_engine *m, coli_err *e)
{
	if (kv->keep || !fixed_floats(kv))
		return 0;
	kv_keep *k = kv->keep = coli_calloc(1, sizeof(*k), e);
	if (!k || (snap_floats(kv) && !(k->snap = coli_malloc(snap_floats(kv) * sizeof(float), e))))
		return -1;
	return keep_rows(kv, k, m->cfg, e);
}

void kv_keep_begin(coli_kv *kv, int n)
{
	kv_keep *k = kv->keep;
	if (!k)
		return;
	k->n0 = kv->n;
	k->n = n <= COLI_DRAFT_MAX + 1 ? n : 0;
	float *at = k->snap;
	for (int i = 0; k->n && i < kv->n_parts; i++) {
		if (!snapped(&kv->parts[i]))
			continue;
		memcpy(at, kv->part[i], (size_t)kv->parts[i].fixed * sizeof(float));
		at += kv->parts[i].fixed;
	}
}

void kv_keep_rows(coli_kv *kv, const coli_model *c, int l, int i, const float *R, const float *Y, const float *B,
		  const float *A)
{
	kv_keep *k = kv->keep;
	if (!k || !k->n || !k->R[l])
		return;
	size_t C, H = (size_t)c->lin_v_heads;
	keep_row_floats(c, &C);
	memcpy(k->R[l] + i * C, R, C * sizeof(float));
	memcpy(k->Y[l] + i * C, Y, C * sizeof(float));
	memcpy(k->B[l] + i * H, B, H * sizeof(float));
	memcpy(k->A[l] + i * H, A, H * sizeof(float));
}

float *kv_keep_at(coli_kv *kv, int l, int p, int *i)
{
	kv_keep *k = kv->keep;
	if (!k || !k->W || !k->W[l] || p < k->n0 || p >= k->n0 + k->n)
		return NULL;
	*i = p - k->n0;
	return k->W[l];
}

/* The state at n is within reach: the kept tokens hold every position from n to kv->n. */
static int kept(const coli_kv *kv, int n)
{
	const kv_keep *k = kv->keep;
	return k && k->n && n >= k->n0 && kv->n <= k->n0 + k->n;
}

/* The state of n tokens again: snapped parts restored to the kept start and its tokens before n
 * replayed, deepseek_v4's put back slot by slot; growing parts cut at n (deepseek_v4's
 * compressed rows completed after n zeroed). */
static void rewind_to(const coli_engine *m, coli_kv *kv, int n)
{
	kv_keep *k = kv->keep;
	const float *at = k->snap;
	for (int i = 0; i < kv->n_parts; i++) {
		if (!snapped(&kv->parts[i]))
			continue;
		memcpy(kv->part[i], at, (size_t)kv->parts[i].fixed * sizeof(float));
		at += kv->parts[i].fixed;
	}
	for (int l = 0; l < kv->n_layers; l++) {
		if (kv->rec[l])
			gdn_replay(m, kv, l, n - k->n0);
		if (k->W[l])
			v4_undo(kv, l, k->W[l], k->n0, n, kv->n);
	}
	kv->n = n;
	k->n = 0;
}

void kv_cut(const coli_engine *m, coli_kv *kv, int n)
{
	if (n < kv->n && fixed_floats(kv) && kept(kv, n))
		rewind_to(m, kv, n);
	kv->n = n < kv->n ? n : kv->n;
}

int coli_kv_rollback(const coli_engine *m, coli_kv *kv, int n, coli_err *e)
{
	kv_keep *k = kv->keep;
	if (n > kv->n || n < 0)
		return coli_errf(e, COLI_EUSAGE, "rollback to %d tokens: the state holds %d", n, kv->n);
	if (n == kv->n || !fixed_floats(kv)) {
		kv->n = n;
		return 0;
	}
	if (!kept(kv, n))
		return coli_errf(e, COLI_EUSAGE, "rollback to %d tokens: the fixed-size state keeps only the last short "
				 "forward call (positions %d..%d)", n, k ? k->n0 : 0, k ? k->n0 + k->n : 0);
	rewind_to(m, kv, n);
	return 0;
}
