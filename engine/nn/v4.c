/* v4.c: DeepSeek V4's forward pass, token by token, exactly as docs/deepseek_v4.md section 3
 * gives transformers' computation: mHC streams mixed around every block (Sinkhorn), the
 * attention over a window of raw keys and the compressed rows (all of them on HCA layers, the
 * lightning indexer's choice on CSA layers) with per-head sinks and the grouped output, the hash
 * or sqrt(softplus) router, clamped SwiGLU experts, the mHC head; the MTP layer (DeepSeek's
 * MTPBlock) and the replay that rolls the fixed-size state back. */
#include "nn/v4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "nn/blocks.h"
#include "nn/kv.h"
#include "nn/dsa.h"
#include "nn/moe.h"
#include "nn/rope.h"
#include "nn/weights.h"

/* One layer's views of its state parts (formats/state.h): the window ring, and with a
 * compressor its rows and the projections of its previous and current window (the indexer's
 * likewise on CSA layers). */
typedef struct v4_layer {
	float *ring;              /* [W][hd] keys (= values), slot p % W (COLI_STATE_WINDOW) */
	float *rows;              /* [cap / r][hd] compressed rows (COMP_ROW: hd / r floats per token) */
	float *cwin, *zwin;       /* [2][r][cw] each: the compressor's kv and gate rows, previous and current window */
	float *irows;             /* CSA: [cap / r][index_hd] the indexer's rows */
	float *icwin, *izwin;     /* CSA: [2][r][2 index_hd] each */
} v4_layer;

typedef struct v4_kv {
	const coli_model *cfg;    /* the model's (its rollback reads it) */
	int first, last, cap;
	rope main, comp;          /* window-only layers' RoPE, compressed layers' */
	v4_layer *L;              /* [last - first] */
	/* scratch of one token */
	float *st, *st2, *flat;   /* [S][D] streams, the mixed streams, the normed flat streams */
	float *x, *xn, *y;        /* [D] a block's input, normed, its output */
	float *mix, *post, *comb; /* [(2 + S) S], [S], [S][S] */
	float *qr, *q, *kv, *o, *og; /* [q_lora], [H hd], [hd], [H hd], [G o_lora] */
	float *c, *z, *r;         /* [2 max(hd, index_hd)] a compressor's projections; [2 max(...)] a row */
	float *qi, *iw, *isc, *itmp; /* [IH index_hd], [IH], [cap / 4 + 1] scores and dsa_top's scratch */
	int32_t *isel;            /* [index_topk] */
	float *sc;                /* [W + most rows attended] scores */
	const float **keys;       /* [W + most rows attended] */
	float *rl, *rs;           /* [E] router logits, scores */
	int32_t *ids;             /* [top_k] */
	float *wts;               /* [top_k] */
	float *g, *u, *ey;        /* [I], [I], [D] */
	float *mem;
} v4_kv;

static int64_t rows_cap(int cap, int r)
{
	return cap / r;
}

/* The most compressed rows one query attends over layers [first, last). */
static int64_t most_rows(const coli_model *c, int first, int last, int cap)
{
	int64_t m = 0;
	for (int l = first; l < last; l++) {
		int r = c->compress[l];
		int64_t n = r ? (c->index_full[l] && c->index_topk < rows_cap(cap, r) ? c->index_topk : rows_cap(cap, r)) : 0;
		m = n > m ? n : m;
	}
	return m;
}

/* Lays the scratch out from base (NULL: counting); returns the floats (and pointers, counted as
 * two floats each) it takes. */
static uint64_t lay_out(v4_kv *s, const coli_model *c, int first, int last, int cap, float *base)
{
	uint64_t at = 0;
	int S = c->hc_mult, D = c->hidden_size, hd = c->head_dim, ihd = c->index_head_dim, H = c->n_heads;
	int64_t W = c->sliding_window, wide = 2 * (hd > ihd ? hd : ihd), att = W + most_rows(c, first, last, cap);
#define TAKE(p, n) ((p) = base ? (void *)(base + at) : NULL, at += (uint64_t)(n))
	v4_kv t;
	v4_kv *d = base ? s : &t;
	TAKE(d->keys, 2 * att); /* first: pointers, 8-aligned at the (calloc'd) base */
	TAKE(d->st, S * D), TAKE(d->st2, S * D), TAKE(d->flat, S * D);
	TAKE(d->x, D), TAKE(d->xn, D), TAKE(d->y, D);
	TAKE(d->mix, (2 + S) * S), TAKE(d->post, S), TAKE(d->comb, S * S);
	TAKE(d->qr, c->q_lora_rank), TAKE(d->q, H * hd), TAKE(d->kv, hd), TAKE(d->o, H * hd);
	TAKE(d->og, c->o_groups * c->o_lora_rank);
	TAKE(d->c, wide), TAKE(d->z, wide), TAKE(d->r, wide);
	TAKE(d->qi, c->index_n_heads * ihd), TAKE(d->iw, c->index_n_heads), TAKE(d->isc, cap / 4 + 1), TAKE(d->itmp, cap / 4 + 1);
	TAKE(d->isel, c->index_topk);
	TAKE(d->sc, att);
	TAKE(d->rl, c->n_experts), TAKE(d->rs, c->n_experts), TAKE(d->ids, c->top_k), TAKE(d->wts, c->top_k);
	TAKE(d->g, c->moe_intermediate_size), TAKE(d->u, c->moe_intermediate_size), TAKE(d->ey, D);
#undef TAKE
	return at;
}

uint64_t v4_kv_bytes(const coli_model *c, int first, int last, int cap)
{
	return lay_out(NULL, c, first, last, cap, NULL) * sizeof(float) + (uint64_t)(last - first) * sizeof(v4_layer) +
	       sizeof(v4_kv);
}

/* Each layer's views of kv's parts. */
static void views(v4_kv *s, const coli_kv *kv)
{
	for (int i = 0; i < kv->n_parts; i++) {
		const coli_state_part *p = &kv->parts[i];
		v4_layer *L = &s->L[p->layer - s->first];
		float *at = kv->part[i];
		int64_t half = p->fixed / 2; /* a window part: kv rows, then gate rows */
		switch (p->kind) {
		case COLI_STATE_WINDOW: L->ring = at; break;
		case COLI_STATE_COMP_ROW: L->rows = at; break;
		case COLI_STATE_COMP_WINDOW: L->cwin = at, L->zwin = at + half; break;
		case COLI_STATE_INDEX_ROW: L->irows = at; break;
		case COLI_STATE_INDEX_WINDOW: L->icwin = at, L->izwin = at + half; break;
		default: break;
		}
	}
}

int v4_kv_open(coli_kv *kv, const coli_engine *m, int first, int last, int cap, coli_err *e)
{
	const coli_model *c = m->cfg;
	v4_kv *s = kv->v4 = coli_calloc(1, sizeof(*s), e);
	if (!s || !(s->L = coli_calloc((size_t)(last - first), sizeof(*s->L), e)))
		return -1;
	s->cfg = c, s->first = first, s->last = last, s->cap = cap;
	uint64_t n = lay_out(s, c, first, last, cap, NULL);
	if (!(s->mem = coli_calloc(n, sizeof(float), e)) || rope_init(&s->main, c, e) < 0 ||
	    rope_init_with(&s->comp, c, &c->rope_compress, e) < 0)
		return -1;
	lay_out(s, c, first, last, cap, s->mem);
	views(s, kv);
	return 0;
}

void v4_kv_close(coli_kv *kv)
{
	v4_kv *s = kv->v4;
	if (!s)
		return;
	rope_release(&s->main);
	rope_release(&s->comp);
	free(s->mem);
	free(s->L);
	free(s);
	kv->v4 = NULL;
}

/* ---- mHC ---------------------------------------------------------------------------------- */

/* The block input x = sum_j pre_j st_j from the streams, and (post non-NULL) the mixing after
 * the block: post and comb made doubly stochastic by Sinkhorn. fn [rows][S D], rows 2S + S^2
 * (S at the head), base [rows], scale [3] (1 at the head). */
static void hc_pre(const coli_model *c, v4_kv *s, const float *fn, const float *base, const float *scale, float *x,
		   float *post)
{
	int S = c->hc_mult, D = c->hidden_size, rows = post ? (2 + S) * S : S;
	float eps = (float)c->hc_eps, *comb = s->comb;
	rmsnorm(s->flat, s->st, NULL, S * D, (float)c->rms_norm_eps);
	for (int r = 0; r < rows; r++)
		s->mix[r] = dot(fn + (int64_t)r * S * D, s->flat, S * D);
	memset(x, 0, (size_t)D * sizeof(float));
	for (int j = 0; j < S; j++)
		axpy(x, sigmoid(s->mix[j] * scale[0] + base[j]) + eps, s->st + (int64_t)j * D, D);
	if (!post)
		return;
	for (int j = 0; j < S; j++)
		post[j] = 2.0f * sigmoid(s->mix[S + j] * scale[1] + base[S + j]);
	for (int j = 0; j < S; j++) {
		for (int k = 0; k < S; k++)
			comb[j * S + k] = s->mix[2 * S + j * S + k] * scale[2] + base[2 * S + j * S + k];
		softmax(comb + j * S, S);
		for (int k = 0; k < S; k++)
			comb[j * S + k] += eps;
	}
	for (int it = 0; it < 2 * c->hc_iters - 1; it++) /* columns, then (rows, columns) x (iters - 1) */
		for (int a = 0; a < S; a++) {
			float sum = 0;
			for (int b = 0; b < S; b++)
				sum += it % 2 ? comb[a * S + b] : comb[b * S + a];
			for (int b = 0; b < S; b++)
				*(it % 2 ? &comb[a * S + b] : &comb[b * S + a]) /= sum + eps;
		}
}

/* The streams after a block of output y: st_k = post_k y + sum_j comb[j][k] st_j. */
static void hc_post(const coli_model *c, v4_kv *s, const float *y)
{
	int S = c->hc_mult, D = c->hidden_size;
	for (int k = 0; k < S; k++) {
		float *o = s->st2 + (int64_t)k * D;
		for (int i = 0; i < D; i++)
			o[i] = s->post[k] * y[i];
		for (int j = 0; j < S; j++)
			axpy(o, s->comb[j * S + k], s->st + (int64_t)j * D, D);
	}
	memcpy(s->st, s->st2, (size_t)S * D * sizeof(float));
}

/* ---- compressors and the indexer ---------------------------------------------------------- */

/* A compressor's window complete: it becomes the previous one (cwin, zwin: [previous,
 * current][r][cw]). */
static void win_shift(float *cwin, float *zwin, int r, int cw)
{
	memcpy(cwin, cwin + (int64_t)r * cw, (size_t)r * cw * sizeof(float));
	memcpy(zwin, zwin + (int64_t)r * cw, (size_t)r * cw * sizeof(float));
}

/* One token of a compressor of ratio r at position p: its kv and gate rows (width cw) kept for
 * its window; when the window is complete, row p / r: per channel of the hd output channels a
 * softmax over the window's gates (+ position biases ape) pooling its kv rows (CSA, cw = 2 hd:
 * the previous window's first halves too), normed, rotated at the window's first position. */
static int comp_push(coli_engine *m, v4_kv *s, const coli_mat *wkv, const coli_mat *wgate, const float *ape,
		     const float *norm, float *cwin, float *zwin, float *rows, int r, int hd, int overlap, int p)
{
	int cw = overlap ? 2 * hd : hd, j = p % r, w = p / r;
	float *cur_c = cwin + (int64_t)r * cw, *cur_z = zwin + (int64_t)r * cw;
	coli_mat_vec(m->kc, wkv, s->xn, cur_c + (int64_t)j * cw);
	coli_mat_vec(m->kc, wgate, s->xn, cur_z + (int64_t)j * cw);
	if (j != r - 1)
		return 0;
	float *row = rows + (int64_t)w * hd, *gate = s->sc;
	int prev = overlap && w > 0 ? r : 0;
	for (int ch = 0; ch < hd; ch++) {
		for (int i = 0; i < prev; i++)
			gate[i] = zwin[(int64_t)i * cw + ch] + ape[(int64_t)i * cw + ch];
		for (int i = 0; i < r; i++)
			gate[prev + i] = cur_z[(int64_t)i * cw + (overlap ? hd : 0) + ch] + ape[(int64_t)i * cw + (overlap ? hd : 0) + ch];
		softmax(gate, prev + r);
		float v = 0;
		for (int i = 0; i < prev; i++)
			v += gate[i] * cwin[(int64_t)i * cw + ch];
		for (int i = 0; i < r; i++)
			v += gate[prev + i] * cur_c[(int64_t)i * cw + (overlap ? hd : 0) + ch];
		row[ch] = v;
	}
	rmsnorm(row, row, norm, hd, (float)m->cfg->rms_norm_eps);
	rope_apply(&s->comp, row + hd - m->cfg->qk_rope_head_dim, 1, hd, w * r);
	win_shift(cwin, zwin, r, cw); /* this window is the next one's previous */
	return 1;
}

/* The lightning indexer of a CSA layer at position p: the n complete rows' scores (sum over
 * heads of weight x relu(q . k) / sqrt(index_hd)), and the min(index_topk, n) best into isel
 * (ties to the lower row), ascending; returns how many. */
static int index_select(coli_engine *m, v4_kv *s, const layer_w *W, const v4_layer *L, int n, int p)
{
	const coli_model *c = m->cfg;
	int IH = c->index_n_heads, ihd = c->index_head_dim, rd = c->qk_rope_head_dim;
	coli_mat_vec(m->kc, &W->idx_wq_b, s->qr, s->qi);
	rope_apply(&s->comp, s->qi + ihd - rd, IH, ihd, p);
	coli_mat_vec(m->kc, &W->idx_weights, s->xn, s->iw);
	float ws = 1.0f / sqrtf((float)IH), ks = 1.0f / sqrtf((float)ihd);
	for (int r = 0; r < n; r++) {
		float v = 0;
		for (int h = 0; h < IH; h++) {
			float d = dot(s->qi + (int64_t)h * ihd, L->irows + (int64_t)r * ihd, ihd);
			v += s->iw[h] * ws * (d > 0 ? d * ks : 0);
		}
		s->isc[r] = v;
	}
	return dsa_top(s->isc, n, c->index_topk, s->itmp, s->isel);
}

/* ---- attention ----------------------------------------------------------------------------- */

/* The attention of layer l for the token at p, input s->xn, output s->y. */
static void v4_attention(coli_engine *m, v4_kv *s, int l, int p)
{
	const coli_model *c = m->cfg;
	const layer_w *W = &m->w->layers[l];
	v4_layer *L = &s->L[l - s->first];
	int H = c->n_heads, hd = c->head_dim, rd = c->qk_rope_head_dim, r = c->compress[l], csa = c->index_full[l];
	int Wn = c->sliding_window, G = c->o_groups, olr = c->o_lora_rank;
	float eps = (float)c->rms_norm_eps;
	const rope *ro = r ? &s->comp : &s->main;
	coli_mat_vec(m->kc, &W->q_a, s->xn, s->qr);
	rmsnorm(s->qr, s->qr, W->q_a_norm, c->q_lora_rank, eps);
	coli_mat_vec(m->kc, &W->q_b, s->qr, s->q);
	for (int h = 0; h < H; h++)
		rmsnorm(s->q + (int64_t)h * hd, s->q + (int64_t)h * hd, NULL, hd, eps);
	rope_apply(ro, s->q + hd - rd, H, hd, p);
	float *key = L->ring + (int64_t)(p % Wn) * hd;
	coli_mat_vec(m->kc, &W->wkv, s->xn, key);
	rmsnorm(key, key, W->kv_norm, hd, eps);
	rope_apply(ro, key + hd - rd, 1, hd, p);
	int n = 0, nrows = 0, k = 0;
	for (int t = p - Wn + 1 > 0 ? p - Wn + 1 : 0; t <= p; t++)
		s->keys[n++] = L->ring + (int64_t)(t % Wn) * hd;
	coli_tracer_mark(m->tr, COLI_SPAN_ATTENTION, l);
	if (r) {
		comp_push(m, s, &W->cmp_wkv, &W->cmp_wgate, W->cmp_ape, W->cmp_norm, L->cwin, L->zwin, L->rows, r, hd, csa, p);
		nrows = (p + 1) / r;
	}
	if (r && csa) {
		comp_push(m, s, &W->icmp_wkv, &W->icmp_wgate, W->icmp_ape, W->icmp_norm, L->icwin, L->izwin, L->irows, r,
			  c->index_head_dim, 1, p);
		k = index_select(m, s, W, L, nrows, p);
	}
	coli_tracer_mark(m->tr, COLI_SPAN_INDEXER, l); /* the compressors and the indexer */
	for (int i = 0; i < (r && csa ? k : nrows); i++)
		s->keys[n++] = L->rows + (int64_t)(r && csa ? s->isel[i] : i) * hd;
	float scale = 1.0f / sqrtf((float)hd);
	for (int h = 0; h < H; h++) {
		const float *q = s->q + (int64_t)h * hd;
		float *o = s->o + (int64_t)h * hd, mx = W->sink[h];
		for (int i = 0; i < n; i++) {
			s->sc[i] = dot(q, s->keys[i], hd) * scale;
			mx = s->sc[i] > mx ? s->sc[i] : mx;
		}
		double sum = expf(W->sink[h] - mx);
		for (int i = 0; i < n; i++)
			sum += s->sc[i] = expf(s->sc[i] - mx);
		memset(o, 0, (size_t)hd * sizeof(float));
		for (int i = 0; i < n; i++)
			axpy(o, (float)(s->sc[i] / sum), s->keys[i], hd);
	}
	rope_apply(ro, s->o + hd - rd, H, hd, -p); /* the inverse rotation at the query's position */
	int per = H * hd / G;
	for (int g = 0; g < G; g++)
		coli_mat_vec_range(m->kc, &W->wo_a, (int64_t)g * olr, olr, s->o + (int64_t)g * per, s->og + (int64_t)g * olr);
	coli_mat_vec(m->kc, &W->wo_b, s->og, s->y);
}

/* ---- MoE -------------------------------------------------------------------------------------- */

/* y (+)= weight x the clamped SwiGLU expert (gate, up, down) of x. */
static void v4_expert(coli_engine *m, v4_kv *s, const coli_mat *gate, const coli_mat *up, const coli_mat *down,
		   float weight, float *y)
{
	const coli_model *c = m->cfg;
	int I = (int)gate->rows;
	float lim = (float)c->swiglu_limit;
	coli_mat_vec(m->kc, gate, s->xn, s->g);
	coli_mat_vec(m->kc, up, s->xn, s->u);
	for (int i = 0; lim > 0 && i < I; i++) {
		s->g[i] = s->g[i] > lim ? lim : s->g[i];
		s->u[i] = s->u[i] > lim ? lim : s->u[i] < -lim ? -lim : s->u[i];
	}
	swiglu(s->g, s->u, I);
	coli_mat_vec(m->kc, down, s->g, s->ey);
	axpy(y, weight, s->ey, c->hidden_size);
}

/* A hash layer's k experts for token tok (its tid2eid row, stored as floats). */
static void hash_ids(const layer_w *W, int32_t tok, int k, int32_t *ids)
{
	for (int j = 0; j < k; j++)
		ids[j] = (int32_t)W->tid2eid[(int64_t)tok * k + j];
}

/* The router of layer l for token tok: hash layers' table, else the top-k of sqrt(softplus)
 * scores plus the correction bias (ties to the lower id); weights the chosen scores
 * renormalised x routed_scaling_factor, sorted by weight (ties lower id). */
static void v4_route(coli_engine *m, v4_kv *s, int l, int32_t tok)
{
	const coli_model *c = m->cfg;
	const layer_w *W = &m->w->layers[l];
	int E = c->n_experts, k = c->top_k;
	coli_mat_vec(m->kc, &W->router, s->xn, s->rl);
	for (int x = 0; x < E; x++) {
		float v = s->rl[x];
		s->rs[x] = sqrtf(v > 20.0f ? v : log1pf(expf(v)));
	}
	if (W->tid2eid) {
		hash_ids(W, tok, k, s->ids);
	} else {
		for (int x = 0; x < E; x++) /* the choice: score + correction bias (the logits no longer needed) */
			s->rl[x] = s->rs[x] + W->corr_bias[x];
		top_k(s->rl, E, k, s->ids);
	}
	float sum = 0;
	for (int j = 0; j < k; j++)
		sum += s->rs[s->ids[j]];
	for (int j = 0; j < k; j++)
		s->wts[j] = s->rs[s->ids[j]] / (sum + 1e-20f) * (float)c->routed_scaling_factor;
	sort_pairs(s->ids, s->wts, k);
}

/* The MoE of layer l for token tok (input s->xn, output s->y); its routing into ids, wts when
 * given. */
static int v4_moe(coli_engine *m, v4_kv *s, int l, int32_t tok, int32_t *ids, float *wts, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *W = &m->w->layers[l];
	v4_route(m, s, l, tok);
	coli_tracer_mark(m->tr, COLI_SPAN_ROUTER, l);
	memset(s->y, 0, (size_t)c->hidden_size * sizeof(float));
	coli_store_request(m->store, l, s->ids, c->top_k);
	for (int j = 0; j < c->top_k; j++) {
		const coli_expert *x = moe_get(m, l, s->ids[j], e);
		if (!x)
			return -1;
		v4_expert(m, s, &x->gate, &x->up, &x->down, s->wts[j], s->y);
		coli_store_release(m->store, l, s->ids[j]);
	}
	if (c->n_shared_experts)
		v4_expert(m, s, &W->sh_gate, &W->sh_up, &W->sh_down, 1.0f, s->y);
	coli_tracer_mark(m->tr, COLI_SPAN_EXPERTS, l);
	if (ids)
		memcpy(ids, s->ids, (size_t)c->top_k * sizeof(*ids));
	if (wts)
		memcpy(wts, s->wts, (size_t)c->top_k * sizeof(*wts));
	if (m->usage)
		for (int j = 0; j < c->top_k; j++)
			m->usage[(int64_t)l * c->n_experts + s->ids[j]] += 1;
	return 0;
}

/* ---- rollback (nn/kv.h's kv_keep) --------------------------------------------------------- */

/* Widths of what a token overwrites in layer l's fixed parts: its window slot, its slot of the
 * compressor's current window (kv and gate rows each), the indexer compressor's (0: none). */
static void keep_widths(const coli_model *c, int l, int w[3])
{
	int r = c->compress[l], csa = c->index_full[l];
	w[0] = c->head_dim;
	w[1] = r ? (csa ? 2 : 1) * c->head_dim : 0;
	w[2] = r && csa ? 2 * c->index_head_dim : 0;
}

/* Floats kept per token: its slots. */
static size_t row_floats(const coli_model *c, int l)
{
	int w[3];
	keep_widths(c, l, w);
	return (size_t)w[0] + 2 * (size_t)w[1] + 2 * (size_t)w[2];
}

/* Floats kept per window completed: the previous windows it replaces. */
static size_t prev_floats(const coli_model *c, int l)
{
	return (row_floats(c, l) - (size_t)c->head_dim) * (size_t)c->compress[l];
}

size_t v4_keep_floats(const coli_model *c, int l)
{
	int T = COLI_DRAFT_MAX + 1, r = c->compress[l];
	return (size_t)T * row_floats(c, l) + (r ? (size_t)((T + r - 1) / r) * prev_floats(c, l) : 0);
}

/* n floats between the state and what is kept: into kept (save), else back into the state. */
static void xfer(float *state, float *kept, size_t n, int save)
{
	memcpy(save ? kept : state, save ? state : kept, n * sizeof(float));
}

/* What token p of layer l overwrites (its window slot, its slots of the compressors' current
 * windows, and when it completes a window their previous windows) saved into row and prev, or
 * (save 0) put back from them. */
static void token_slots(const coli_model *c, v4_layer *L, int l, int p, float *row, float *prev, int save)
{
	int w[3], r = c->compress[l], j = r ? r + p % r : 0;
	float *win[4] = {L->cwin, L->zwin, L->icwin, L->izwin};
	keep_widths(c, l, w);
	xfer(L->ring + (int64_t)(p % c->sliding_window) * w[0], row, (size_t)w[0], save);
	row += w[0];
	for (int k = 0; k < 4; k++) {
		int cw = w[1 + k / 2];
		if (!cw)
			continue;
		xfer(win[k] + (int64_t)j * cw, row, (size_t)cw, save);
		row += cw;
		if (p % r == r - 1) { /* win_shift will replace the previous window */
			xfer(win[k], prev, (size_t)r * cw, save);
			prev += (size_t)r * cw;
		}
	}
}

/* Where token p (i-th of the kept) keeps its slots and the previous windows it replaces. */
static void kept_at(const coli_model *c, int l, float *base, int p, int i, float **row, float **prev)
{
	int r = c->compress[l], n0 = p - i;
	size_t done = r ? (size_t)(p / r - n0 / r) : 0; /* windows completed among the kept before p's */
	*row = base + (size_t)i * row_floats(c, l);
	*prev = base + (size_t)(COLI_DRAFT_MAX + 1) * row_floats(c, l) + done * prev_floats(c, l);
}

/* Before token p runs layer l: what it will overwrite, kept when the state keeps p. */
static void keep_token(coli_kv *kv, v4_layer *L, int l, int p)
{
	const coli_model *c = kv->v4->cfg;
	int i;
	float *base = kv_keep_at(kv, l, p, &i), *row, *prev;
	if (!base)
		return;
	kept_at(c, l, base, p, i, &row, &prev);
	token_slots(c, L, l, p, row, prev, 1);
}

/* Rows [n / r, old / r) of a compressor's (width w): completed after position n, unmade. */
static void unmake(float *rows, int w, int r, int n, int old)
{
	if (old / r > n / r)
		memset(rows + (int64_t)(n / r) * w, 0, (size_t)(old / r - n / r) * (size_t)w * sizeof(float));
}

void v4_undo(coli_kv *kv, int l, float *base, int n0, int n, int old)
{
	const coli_model *c = kv->v4->cfg;
	v4_layer *L = &kv->v4->L[l - kv->v4->first];
	int r = c->compress[l];
	for (int p = old - 1; p >= n; p--) { /* the latest first: each slot ends as before its first write */
		float *row, *prev;
		kept_at(c, l, base, p, p - n0, &row, &prev);
		token_slots(c, L, l, p, row, prev, 0);
	}
	if (r)
		unmake(L->rows, c->head_dim, r, n, old);
	if (r && c->index_full[l])
		unmake(L->irows, c->index_head_dim, r, n, old);
}

/* ---- the stack ----------------------------------------------------------------------------- */

/* Layer l for the token tok at position p on the streams s->st: the attention and the MoE, each
 * between its mHC mixings; the routing into ids and wts when given. Traced: the mixings as MIX,
 * the compressors and the indexer as INDEXER (v4_attention), the rest as its block's span. */
static int layer(coli_engine *m, coli_kv *kv, int l, int32_t tok, int p, int32_t *ids, float *wts, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *W = &m->w->layers[l];
	v4_kv *s = kv->v4;
	int D = c->hidden_size;
	float eps = (float)c->rms_norm_eps;
	hc_pre(c, s, W->hc_fn[0], W->hc_base[0], W->hc_scale[0], s->x, s->post);
	coli_tracer_mark(m->tr, COLI_SPAN_MIX, l);
	rmsnorm(s->xn, s->x, W->attn_norm, D, eps);
	keep_token(kv, &s->L[l - s->first], l, p);
	v4_attention(m, s, l, p);
	coli_tracer_mark(m->tr, COLI_SPAN_ATTENTION, l);
	hc_post(c, s, s->y);
	hc_pre(c, s, W->hc_fn[1], W->hc_base[1], W->hc_scale[1], s->x, s->post);
	coli_tracer_mark(m->tr, COLI_SPAN_MIX, l);
	rmsnorm(s->xn, s->x, W->mlp_norm, D, eps);
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, l);
	if (v4_moe(m, s, l, tok, ids, wts, e) < 0)
		return -1;
	hc_post(c, s, s->y);
	coli_tracer_mark(m->tr, COLI_SPAN_MIX, l);
	return 0;
}

/* When logits are asked: the streams collapsed by the mHC head of W (site 2), normed by norm,
 * through the head. */
static void head(coli_engine *m, v4_kv *s, const layer_w *W, const float *norm, float *logits)
{
	const coli_model *c = m->cfg;
	if (!logits)
		return;
	hc_pre(c, s, W->hc_fn[2], W->hc_base[2], W->hc_scale[2], s->x, NULL);
	rmsnorm(s->xn, s->x, norm, c->hidden_size, (float)c->rms_norm_eps);
	coli_mat_vec(m->kc, &m->w->lm_head, s->xn, logits);
}

/* The token tok at p through the decoder stack: its logits (when asked) and its final streams
 * (before the head) into hid ([S][D], when given); routing rows at row of n_all. */
static int token(coli_engine *m, coli_kv *kv, int32_t tok, int p, float *logits, float *hid, coli_routing_log *routing,
		 int64_t row, int64_t n_all, coli_err *e)
{
	const coli_model *c = m->cfg;
	const weights *w = m->w;
	v4_kv *s = kv->v4;
	int S = c->hc_mult, D = c->hidden_size, k = c->top_k;
	coli_mat_row(m->kc, &w->embed, tok, s->x);
	for (int l = 0; l < c->n_hash_layers && l < c->n_layers; l++) { /* known from the token: read ahead */
		hash_ids(&w->layers[l], tok, k, s->ids);
		coli_store_prefetch(m->store, l, s->ids, k);
	}
	for (int j = 0; j < S; j++)
		memcpy(s->st + (int64_t)j * D, s->x, (size_t)D * sizeof(float));
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, -1);
	for (int l = 0; l < c->n_layers; l++) {
		int64_t at = ((int64_t)l * n_all + row) * k;
		if (layer(m, kv, l, tok, p, routing ? routing->ids + at : NULL,
			  routing && routing->weights ? routing->weights + at : NULL, e) < 0)
			return -1;
	}
	if (hid)
		memcpy(hid, s->st, (size_t)S * D * sizeof(float));
	head(m, s, &w->top, w->final_norm, logits);
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, -1);
	return 0;
}

int v4_batch(coli_engine *m, coli_kv *kv, const int32_t *tokens, int n, float *logits, float *last,
	     coli_routing_log *routing, int at, int n_all, float *hid, coli_err *e)
{
	int V = m->cfg->vocab_size;
	int64_t sd = (int64_t)m->cfg->hc_mult * m->cfg->hidden_size;
	coli_tracer_begin(m->tr);
	for (int i = 0; i < n; i++) {
		float *out = logits ? logits + (int64_t)i * V : i == n - 1 ? last : NULL;
		if (token(m, kv, tokens[i], kv->n, out, hid ? hid + i * sd : NULL, routing, at + i, n_all, e) < 0)
			return -1;
		if (logits && last && i == n - 1)
			memcpy(last, out, (size_t)V * sizeof(float));
		kv->n++;
	}
	coli_tracer_end(m->tr, (uint64_t)n);
	return 0;
}

/* ---- the MTP layer ------------------------------------------------------------------------------ */

/* The MTP layer's streams from the main model's final streams h ([S][D]) and the next token tok:
 * e_proj enorm(embed(tok)) added to h_proj hnorm(h_j) on every stream j. */
static void mtp_in(coli_engine *m, v4_kv *s, const layer_w *L, const float *h, int32_t tok)
{
	const coli_model *c = m->cfg;
	int S = c->hc_mult, D = c->hidden_size;
	float eps = (float)c->rms_norm_eps;
	coli_mat_row(m->kc, &m->w->embed, tok, s->x);
	rmsnorm(s->x, s->x, L->enorm, D, eps);
	coli_mat_vec(m->kc, &L->e_proj, s->x, s->y);
	for (int j = 0; j < S; j++)
		rmsnorm(s->st2 + (int64_t)j * D, h + (int64_t)j * D, L->hnorm, D, eps);
	coli_mat_mul(m->kc, &L->h_proj, s->st2, S, s->st);
	for (int j = 0; j < S; j++)
		axpy(s->st + (int64_t)j * D, 1.0f, s->y, D);
}

int v4_mtp(coli_engine *m, coli_kv *kv, int l, const float *hid, const int32_t *tok, int n, float *logits, float *h,
	   coli_err *e)
{
	const layer_w *L = &m->w->layers[l];
	v4_kv *s = kv->v4;
	int64_t sd = (int64_t)m->cfg->hc_mult * m->cfg->hidden_size;
	coli_tracer_begin(m->tr);
	for (int i = 0; i < n; i++) {
		mtp_in(m, s, L, hid + i * sd, tok[i]);
		coli_tracer_mark(m->tr, COLI_SPAN_OTHER, l);
		if (layer(m, kv, l, tok[i], kv->n, NULL, NULL, e) < 0)
			return -1;
		kv->n++;
	}
	memcpy(h, s->st, (size_t)sd * sizeof(float));
	head(m, s, L, L->head_norm, logits);
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, -1);
	coli_tracer_end(m->tr, (uint64_t)n);
	return 0;
}
