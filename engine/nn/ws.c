/* ws.c: the forward pass's working memory, allocated once at open. */
#include "nn/ws.h"

#include <stdlib.h>

#include "engine.h"
#include "fileio.h"

/* The widest MLP product the config describes: dense MLP layers, shared experts, routed
 * experts. */
static int64_t config_ffn(const coli_model *c)
{
	int64_t f = c->shared_inter > c->moe_intermediate_size ? c->shared_inter : c->moe_intermediate_size;
	for (int l = 0; l < c->n_layers; l++)
		if (!c->is_moe[l] && c->intermediate_size > f)
			f = c->intermediate_size;
	return f;
}

/* The widest MLP product of any layer: the config's, or a wider weight (MTP layers included). */
static int64_t max_ffn(const coli_model *c, const weights *w)
{
	int64_t f = config_ffn(c);
	for (int l = 0; w && l < w->n_layers; l++) {
		if (w->layers[l].gate.rows > f)
			f = w->layers[l].gate.rows;
		if (w->layers[l].sh_gate.rows > f)
			f = w->layers[l].sh_gate.rows;
	}
	return f;
}

static int64_t max3(int64_t a, int64_t b, int64_t c)
{
	int64_t m = a > b ? a : b;
	return m > c ? m : c;
}

int64_t ws_max_cols(const coli_model *c, const weights *w)
{
	int64_t heads = (int64_t)c->n_heads * max3(c->head_dim, c->v_head_dim, 1);
	int64_t value_dim = (int64_t)c->lin_v_heads * c->lin_v_dim; /* a Gated DeltaNet's out_proj */
	return max3(max3(c->hidden_size, max_ffn(c, w), heads), max3(c->q_lora_rank, c->kv_lora_rank, value_dim),
		    2 * (int64_t)c->hidden_size);
}

/* n elements of size sz into *p, counted in w->bytes; allocated unless w->dry. A failure
 * sets *bad. */
static void take(fwd_ws *w, void *p, int64_t n, size_t sz, int *bad, coli_err *e)
{
	void **q = p;
	size_t bytes = (size_t)(n > 0 ? n : 1) * sz;
	w->bytes += bytes;
	if (w->dry)
		return;
	*q = *bad ? NULL : coli_calloc(bytes / sz, sz, e);
	*bad |= !*q;
}

static void attention_bufs(fwd_ws *w, const coli_model *c, int64_t B, int *bad, coli_err *e)
{
	int64_t qk = c->qk_nope_head_dim + c->qk_rope_head_dim;
	take(w, &w->Q, B * c->n_heads * max3(c->head_dim, qk, 1), sizeof(float), bad, e);
	take(w, &w->A, B * c->n_heads * max3(c->head_dim, c->v_head_dim, 1), sizeof(float), bad, e);
	take(w, &w->CKV, B * (c->kv_lora_rank + c->qk_rope_head_dim), sizeof(float), bad, e);
	take(w, &w->QA, B * c->q_lora_rank, sizeof(float), bad, e);
	take(w, &w->qc, (int64_t)c->n_heads * (c->kv_lora_rank + c->qk_rope_head_dim), sizeof(float), bad, e);
	take(w, &w->ctx, (int64_t)c->n_heads * c->kv_lora_rank, sizeof(float), bad, e);
	int64_t K = c->index_topk, ih = (int64_t)c->index_n_heads;
	take(w, &w->IQ, K ? B * ih * c->index_head_dim : 0, sizeof(float), bad, e);
	take(w, &w->IW, K ? B * ih : 0, sizeof(float), bad, e);
	take(w, &w->sel, B * K, sizeof(int32_t), bad, e);
	take(w, &w->nsel, B, sizeof(int), bad, e);
	take(w, &w->GL, K * c->kv_lora_rank, sizeof(float), bad, e);
	take(w, &w->GR, K * c->qk_rope_head_dim, sizeof(float), bad, e);
	int64_t vd = (int64_t)c->lin_v_heads * c->lin_v_dim, cd = 2 * (int64_t)c->lin_k_heads * c->lin_k_dim + vd;
	int linear = 0;
	for (int l = 0; l < c->n_layers; l++)
		linear |= c->is_linear[l];
	take(w, &w->LR, linear ? B * cd : 0, sizeof(float), bad, e);
	take(w, &w->LY, linear ? B * cd : 0, sizeof(float), bad, e);
	take(w, &w->LZ, linear ? B * vd : 0, sizeof(float), bad, e);
	take(w, &w->LO, linear ? B * vd : 0, sizeof(float), bad, e);
	take(w, &w->LB, linear ? B * c->lin_v_heads : 0, sizeof(float), bad, e);
	take(w, &w->LA, linear ? B * c->lin_v_heads : 0, sizeof(float), bad, e);
	take(w, &w->LC, linear && B > COLI_EXACT_N ? (int64_t)coli_gdn_scratch_floats(c) : 0, sizeof(float), bad, e);
	take(w, &w->QG, c->attn_gate ? 2 * B * c->n_heads * c->head_dim : 0, sizeof(float), bad, e);
	take(w, &w->AG, c->attn_gate ? B * c->n_heads * c->head_dim : 0, sizeof(float), bad, e);
}

/* deepseek_v4's batch buffers (none for other families). */
static void v4_bufs(fwd_ws *w, const coli_model *c, int64_t B, int *bad, coli_err *e)
{
	int v4 = c->attn == COLI_ATTN_V4, G = c->o_groups > 0 ? c->o_groups : 1;
	int64_t S = c->hc_mult, hd = c->head_dim, ihd = c->index_head_dim, olr = c->o_lora_rank;
	take(w, &w->VS, v4 ? B * S * c->hidden_size : 0, sizeof(float), bad, e);
	take(w, &w->VP, v4 ? B * S : 0, sizeof(float), bad, e);
	take(w, &w->VC, v4 ? B * S * S : 0, sizeof(float), bad, e);
	take(w, &w->VK, v4 ? B * hd : 0, sizeof(float), bad, e);
	take(w, &w->VO, v4 ? B * G * olr : 0, sizeof(float), bad, e);
	take(w, &w->VG, v4 ? B * c->n_heads * hd / G : 0, sizeof(float), bad, e);
	take(w, &w->VT, v4 ? B * olr : 0, sizeof(float), bad, e);
	take(w, &w->VCK, v4 ? B * 2 * hd : 0, sizeof(float), bad, e);
	take(w, &w->VCZ, v4 ? B * 2 * hd : 0, sizeof(float), bad, e);
	take(w, &w->VIK, v4 ? B * 2 * ihd : 0, sizeof(float), bad, e);
	take(w, &w->VIZ, v4 ? B * 2 * ihd : 0, sizeof(float), bad, e);
}

static void mlp_bufs(fwd_ws *w, const coli_model *c, int64_t ffn, int *bad, coli_err *e)
{
	int64_t B = w->max_batch, E = c->n_experts, k = c->top_k, d = c->hidden_size;
	take(w, &w->R, B * E, sizeof(float), bad, e);
	take(w, &w->scratch, 3 * E + 2 * (int64_t)c->n_group, sizeof(float), bad, e);
	take(w, &w->gsel, c->n_group, sizeof(int32_t), bad, e);
	take(w, &w->G, B * d, sizeof(float), bad, e);
	take(w, &w->H, w->rows * ffn, sizeof(float), bad, e);
	take(w, &w->U, w->rows * ffn, sizeof(float), bad, e);
	take(w, &w->D, w->rows * d, sizeof(float), bad, e);
	take(w, &w->W, B * k, sizeof(float), bad, e);
	take(w, &w->wt, B, sizeof(float), bad, e);
	take(w, &w->ids, B * k, sizeof(int32_t), bad, e);
	take(w, &w->rows_of, B, sizeof(int32_t), bad, e);
	take(w, &w->uni, E, sizeof(int), bad, e);
}

static void decode_bufs(fwd_ws *w, const coli_model *c, int *bad, coli_err *e)
{
	int64_t k = c->top_k;
	take(w, &w->order, k, sizeof(int), bad, e);
	take(w, &w->want, k, sizeof(int), bad, e);
	take(w, &w->js, k, sizeof(int), bad, e);
	take(w, &w->ex, k, sizeof(*w->ex), bad, e);
	take(w, &w->pm, 2 * k, sizeof(*w->pm), bad, e);
	take(w, &w->px, 2 * k, sizeof(*w->px), bad, e);
	take(w, &w->py, 2 * k, sizeof(*w->py), bad, e);
	take(w, &w->pN, c->hidden_size, sizeof(float), bad, e);
	take(w, &w->pid, k, sizeof(int32_t), bad, e);
	take(w, &w->pint, k, sizeof(int), bad, e);
	take(w, &w->pw, k, sizeof(float), bad, e);
}

/* Every buffer of w for batches of max_batch (w->dry: only counted). */
static int layout(fwd_ws *w, const coli_model *c, int64_t ffn, int max_batch, coli_err *e)
{
	int bad = 0;
	int64_t B = max_batch, d = c->hidden_size;
	w->max_batch = max_batch;
	w->rows = max_batch > c->top_k ? max_batch : c->top_k;
	take(w, &w->X, B * d, sizeof(float), &bad, e);
	take(w, &w->N, B * d, sizeof(float), &bad, e);
	take(w, &w->Y, B * d, sizeof(float), &bad, e);
	attention_bufs(w, c, B, &bad, e);
	v4_bufs(w, c, B, &bad, e);
	mlp_bufs(w, c, ffn, &bad, e);
	decode_bufs(w, c, &bad, e);
	return bad ? -1 : 0;
}

uint64_t ws_bytes(const coli_model *c, int max_batch)
{
	fwd_ws w = {.dry = 1};
	layout(&w, c, config_ffn(c), max_batch, NULL);
	return w.bytes;
}

int ws_open(fwd_ws **out, const coli_model *c, const weights *wt, int max_batch, coli_err *e)
{
	fwd_ws *w = coli_calloc(1, sizeof(*w), e);
	if (!w)
		return -1;
	if (layout(w, c, max_ffn(c, wt), max_batch, e) < 0) {
		ws_close(w);
		return -1;
	}
	*out = w;
	return 0;
}

void ws_close(fwd_ws *w)
{
	if (!w)
		return;
	void *all[] = {w->X, w->N, w->Y, w->Q, w->A, w->CKV, w->QA, w->qc, w->ctx, w->IQ, w->IW, w->sel, w->nsel,
		       w->GL, w->GR, w->LR, w->LY, w->LZ, w->LO, w->LB, w->LA, w->LC, w->QG, w->AG, w->VS, w->VP, w->VC, w->VK,
		       w->VO, w->VG, w->VT, w->VCK, w->VCZ, w->VIK, w->VIZ, w->R, w->scratch, w->gsel,
		       w->G, w->H, w->U, w->D, w->W, w->wt, w->ids, w->rows_of, w->uni, w->order, w->want, w->js,
		       w->ex, w->pm, w->px, w->py, w->pN, w->pid, w->pint, w->pw};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		free(all[i]);
	free(w);
}
