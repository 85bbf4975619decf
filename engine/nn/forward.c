/* forward.c: the decoder stack: embed -> per layer (norm, attention, residual, norm, MLP,
 * residual) -> final norm -> lm_head; and the model / KV cache lifetimes. */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "nn/blocks.h"
#include "nn/kv.h"
#include "nn/layer.h"
#include "nn/mtp.h"
#include "nn/rope.h"
#include "nn/v4.h"
#include "nn/weights.h"
#include "nn/ws.h"

/* The expert store the options ask for. */
static int open_store(coli_engine *m, const coli_engine_opts *o, coli_err *e)
{
	if (o && o->mmap)
		return coli_store_mmap_open(&m->store, m->ct, e);
	if (!o || !o->stream)
		return coli_store_ram_open(&m->store, m->ct, e);
	store_stream_opts so = o->so;
	so.tracer = o->tracer;
	return coli_store_stream_open(&m->store, m->ct, &so, e);
}

/* A replayed routing must have the model's experts per layer and top_k, and a layer for each
 * of its MoE layers. */
static int route_fits(const coli_engine *m, const coli_route *r, coli_err *e)
{
	const coli_model *c = m->cfg;
	int moe = coli_engine_moe_layers(m);
	if (r->n_experts != c->n_experts)
		return coli_errf(e, COLI_EUSAGE, "route trace %s: n_expert %d, but %s has %d routed experts per MoE layer",
				 r->name, r->n_experts, m->ct->dir, c->n_experts);
	if (r->top_k != c->top_k)
		return coli_errf(e, COLI_EUSAGE, "route trace %s: n_expert_used %d, but %s routes each token to top_k %d experts",
				 r->name, r->top_k, m->ct->dir, c->top_k);
	if (moe > r->n_layers)
		return coli_errf(e, COLI_EUSAGE, "route trace %s: n_layer %d, but %s has %d MoE layers (a model may have "
				 "fewer layers than the trace, not more)", r->name, r->n_layers, m->ct->dir, moe);
	return 0;
}

int coli_engine_open(coli_engine *m, const char *path, const coli_engine_opts *o, coli_err *e)
{
	coli_container *ct = NULL;
	memset(m, 0, sizeof(*m));
	if (coli_container_open(&ct, path, e) < 0)
		return -1;
	return coli_engine_open_container(m, ct, o, e);
}

int coli_engine_open_container(coli_engine *m, coli_container *ct, const coli_engine_opts *o, coli_err *e)
{
	memset(m, 0, sizeof(*m));
	m->ct = ct;
	if (coli_kernels_open(&m->kc, o ? o->isa : NULL, o ? o->threads : 0, e) < 0) {
		coli_engine_close(m);
		return -1;
	}
	coli_kernels_set_precision(m->kc, o ? o->precision : COLI_PREC_EXACT);
	m->cfg = &m->ct->model;
	if (o && o->route_from && route_fits(m, o->route_from, e) < 0) {
		coli_engine_close(m);
		return -1;
	}
	m->route = o ? o->route_from : NULL;
	m->dsa_dense = o ? o->dsa_dense : 0;
	m->usage = o ? o->usage : NULL;
	m->w = coli_calloc(1, sizeof(*m->w), e);
	m->rope = m->w ? coli_calloc(1, sizeof(*m->rope), e) : NULL;
	int batch = o && o->max_batch > 0 ? o->max_batch : COLI_MAX_BATCH;
	m->tr = o ? o->tracer : NULL;
	if (!m->rope || weights_load(m->w, m->ct, e) < 0 || open_store(m, o, e) < 0 ||
	    rope_init(m->rope, m->cfg, e) < 0 || ws_open(&m->ws, m->cfg, m->w, batch, e) < 0 ||
	    coli_kernels_reserve(m->kc, ws_max_cols(m->cfg, m->w), e) < 0) {
		coli_engine_close(m);
		return -1;
	}
	int qk = m->cfg->attn == COLI_ATTN_MLA ? m->cfg->qk_nope_head_dim + m->cfg->qk_rope_head_dim : m->cfg->head_dim;
	m->attn_scale = 1.0 / sqrt((double)qk) * (m->cfg->attn == COLI_ATTN_MLA ? rope_mla_scale(m->cfg) : 1.0);
	return 0;
}

void coli_engine_close(coli_engine *m)
{
	coli_store_close(m->store);
	ws_close(m->ws);
	if (m->w)
		weights_release(m->w);
	if (m->rope)
		rope_release(m->rope);
	free(m->w);
	free(m->rope);
	coli_container_close(m->ct);
	coli_kernels_close(m->kc);
	memset(m, 0, sizeof(*m));
}

/* Bytes of a stored matrix: codes and scales. */
static uint64_t mat_bytes(const coli_mat *w)
{
	uint64_t n = (uint64_t)w->rows * (uint64_t)w->row_bytes, g = (uint64_t)(w->cols + 63) / 64;
	if (w->enc == COLI_ENC_Q4 || w->enc == COLI_ENC_Q8)
		n += (uint64_t)w->rows * g * 2;
	if (w->enc == COLI_ENC_FP4)
		n += (uint64_t)w->rows * (uint64_t)((w->cols + 31) / 32);
	if (w->enc == COLI_ENC_FP8)
		n += (uint64_t)((w->rows + w->block[0] - 1) / w->block[0]) * (uint64_t)((w->cols + w->block[1] - 1) / w->block[1]) * 4;
	return n;
}

/* Weight bytes per decode token, of every matrix, or (q8) only of those whose products take q8
 * activations. */
static uint64_t bytes_per_token(const coli_engine *m, int q8)
{
	uint64_t n = !q8 || coli_mat_takes_q8(m->kc, &m->w->lm_head) ? mat_bytes(&m->w->lm_head) : 0;
	for (int l = 0; l < m->cfg->n_layers; l++) {
		const layer_w *L = &m->w->layers[l];
		const coli_mat *mats[] = {&L->q, &L->k, &L->v, &L->o, &L->q_a, &L->q_b, &L->kv_a, &L->kv_b, &L->idx_wq_b,
					  &L->idx_wk, &L->idx_weights, &L->lin_qkv, &L->lin_z, &L->lin_b, &L->lin_a,
					  &L->lin_out, &L->gate, &L->up, &L->down, &L->router, &L->sh_gate, &L->sh_up,
					  &L->sh_down};
		for (size_t i = 0; i < sizeof(mats) / sizeof(mats[0]); i++)
			n += mats[i]->rows && (!q8 || coli_mat_takes_q8(m->kc, mats[i])) ? mat_bytes(mats[i]) : 0;
		const coli_lexperts *x = m->cfg->is_moe[l] ? coli_container_experts(m->ct, l) : NULL;
		for (int p = 0; x && p < 3; p++) {
			coli_mat part = {.enc = x->part[p].enc};
			n += !q8 || coli_mat_takes_q8(m->kc, &part) ? (uint64_t)m->cfg->top_k * x->part[p].nbytes : 0;
		}
	}
	return n;
}

uint64_t coli_engine_bytes_per_token(const coli_engine *m)
{
	return bytes_per_token(m, 0);
}

uint64_t coli_engine_q8_bytes_per_token(const coli_engine *m)
{
	return bytes_per_token(m, 1);
}

uint64_t coli_engine_work_bytes(const coli_model *c, int max_batch)
{
	uint64_t cols = (uint64_t)ws_max_cols(c, NULL);
	return ws_bytes(c, max_batch > 0 ? max_batch : COLI_MAX_BATCH) + coli_kernels_reserve_bytes(cols);
}

int coli_engine_moe_layers(const coli_engine *m)
{
	int n = 0;
	for (int l = 0; l < m->cfg->n_layers; l++)
		n += m->cfg->is_moe[l];
	return n;
}

/* Final norm and lm_head: every row into logits, or the last row into last. */
static void head(const coli_engine *m, int n, float *logits, float *last)
{
	fwd_ws *w = m->ws;
	int d = m->cfg->hidden_size;
	for (int i = 0; i < n; i++)
		rmsnorm(w->N + (int64_t)i * d, w->X + (int64_t)i * d, m->w->final_norm, d, (float)m->cfg->rms_norm_eps);
	if (logits)
		coli_mat_mul(m->kc, &m->w->lm_head, w->N, n, logits);
	if (last)
		coli_mat_vec(m->kc, &m->w->lm_head, w->N + (int64_t)(n - 1) * d, last);
}

/* One batch of n <= max_batch tokens, the routing log's rows from row `at` of its n_all. */
static int batch(coli_engine *m, coli_kv *kv, const int32_t *tokens, int n, float *logits, float *last,
		 coli_routing_log *routing, int at, int n_all, coli_err *e)
{
	const coli_model *c = m->cfg;
	int d = c->hidden_size, k = c->top_k, moe = 0, rc = 0;
	coli_tracer_begin(m->tr);
	for (int i = 0; i < n; i++)
		coli_mat_row(m->kc, &m->w->embed, tokens[i], m->ws->X + (int64_t)i * d);
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, -1);
	for (int l = 0; rc == 0 && l < c->n_layers; l++) {
		int64_t row = ((int64_t)moe * n_all + at) * k;
		int32_t *ids = routing && c->is_moe[l] ? routing->ids + row : NULL;
		float *wts = routing && routing->weights && c->is_moe[l] ? routing->weights + row : NULL;
		rc = fwd_layer(m, kv, l, n, ids, wts, e);
		moe += c->is_moe[l];
	}
	if (rc == 0) {
		head(m, n, logits, last);
		kv->n += n;
	}
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, -1);
	coli_tracer_end(m->tr, (uint64_t)n);
	return rc;
}

/* coli_forward with the MTP state s (NULL: none) taking each batch's final hidden states. */
static int forward(coli_engine *m, coli_kv *kv, coli_mtp *s, const int32_t *tokens, int n, float *logits, float *last,
		   coli_routing_log *routing, coli_err *e)
{
	const coli_model *c = m->cfg;
	int B = m->ws->max_batch, rc = 0;
	if (kv->n + n > kv->cap)
		return coli_errf(e, COLI_EUSAGE, "context full: %d cached + %d new tokens exceed %d", kv->n, n, kv->cap);
	if (m->route && kv->n + n > m->route->n_positions)
		return coli_errf(e, COLI_EUSAGE, "route trace %s: positions: this call runs positions %d..%d, the trace has %d "
				 "(0..%d)", m->route->name, kv->n, kv->n + n - 1, m->route->n_positions,
				 m->route->n_positions - 1);
	for (int i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
			return coli_errf(e, COLI_EUSAGE, "token id %d out of range [0, %d)", tokens[i], c->vocab_size);
	kv_keep_begin(kv, n);
	for (int at = 0; rc == 0 && at < n; at += B) {
		int nb = n - at < B ? n - at : B;
		if (s && mtp_make_room(m, s, tokens[at], nb, e) < 0)
			return -1;
		float *lg = logits ? logits + (int64_t)at * c->vocab_size : NULL, *ls = at + nb == n ? last : NULL;
		float *hid = s && c->attn == COLI_ATTN_V4 ? mtp_slot(m, s) : NULL; /* its streams queued in place */
		rc = c->attn == COLI_ATTN_V4 ? v4_batch(m, kv, tokens + at, nb, lg, ls, routing, at, n, hid, e)
					     : batch(m, kv, tokens + at, nb, lg, ls, routing, at, n, e);
		if (rc == 0 && s)
			mtp_take(m, s, tokens + at, nb, kv->n - nb, hid ? NULL : m->ws->N);
	}
	return rc;
}

int coli_forward(coli_engine *m, coli_kv *kv, const int32_t *tokens, int n, float *logits, float *last,
		 coli_routing_log *routing, coli_err *e)
{
	return forward(m, kv, NULL, tokens, n, logits, last, routing, e);
}

int coli_forward_mtp(coli_engine *m, coli_kv *kv, coli_mtp *s, const int32_t *tokens, int n, float *logits,
		     float *last, coli_err *e)
{
	return forward(m, kv, s, tokens, n, logits, last, NULL, e);
}
