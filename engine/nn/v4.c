/* v4.c: DeepSeek V4's forward pass, a batch of tokens layer by layer (the projections, router
 * and experts as products over the batch; the attention core and the state it updates token by
 * token in position order), exactly as docs/deepseek_v4.md section 3 gives transformers'
 * computation: mHC streams mixed around every block (Sinkhorn), the
 * attention over a window of raw keys and the compressed rows (all of them on HCA layers, the
 * lightning indexer's choice on CSA layers) with per-head sinks and the grouped output, the hash
 * or sqrt(softplus) router, clamped SwiGLU experts, the mHC head; the MTP layer (DeepSeek's
 * MTPBlock) and the replay that rolls the fixed-size state back. */
#include "nn/v4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "kernels/pool.h"
#include "nn/attention.h"
#include "nn/blocks.h"
#include "nn/kv.h"
#include "nn/dsa.h"
#include "nn/moe.h"
#include "nn/rope.h"
#include "nn/weights.h"
#include "nn/ws.h"

/* One layer's views of its state parts (formats/state.h): the window ring, and with a
 * compressor its rows and the projections of its previous and current window (the indexer's
 * likewise on CSA layers). */
/* Query heads the attention core takes over the keys at once. */
enum { V4_HEADS = 8 };

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
	/* scratch of one token (the batch's buffers are the engine's: nn/ws.h) */
	float *st2, *flat;        /* [S][D] the mixed streams, the normed flat streams */
	float *x, *y;             /* [D] the MTP layer's embedded token, its projection */
	float *mix;               /* [(2 + S) S] */
	float *isc, *itmp;        /* [cap / 4 + 1] the indexer's scores and dsa_top's scratch */
	int32_t *isel;            /* [index_topk] */
	float *sc;                /* [W + most rows attended] the compressors' gate scratch */
	const float **keys;       /* [W + most rows attended] */
	float *rs;                /* [E] router scores */
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
	int S = c->hc_mult, D = c->hidden_size;
	int64_t W = c->sliding_window, att = W + most_rows(c, first, last, cap);
#define TAKE(p, n) ((p) = base ? (void *)(base + at) : NULL, at += (uint64_t)(n))
	v4_kv t;
	v4_kv *d = base ? s : &t;
	TAKE(d->keys, 2 * att); /* first: pointers, 8-aligned at the (calloc'd) base */
	TAKE(d->st2, S * D), TAKE(d->flat, S * D);
	TAKE(d->x, D), TAKE(d->y, D);
	TAKE(d->mix, (2 + S) * S);
	TAKE(d->isc, cap / 4 + 1), TAKE(d->itmp, cap / 4 + 1);
	TAKE(d->isel, c->index_topk);
	TAKE(d->sc, att);
	TAKE(d->rs, c->n_experts);
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

/* The block input x = sum_j pre_j st_j from one token's streams st ([S][D]), and (post
 * non-NULL) the mixing after the block: post [S] and comb [S][S] made doubly stochastic by
 * Sinkhorn. fn [rows][S D], rows 2S + S^2 (S at the head), base [rows], scale [3] (1 at the
 * head). */
static void hc_pre(const coli_model *c, v4_kv *s, const float *fn, const float *base, const float *scale,
		   const float *st, float *x, float *post, float *comb)
{
	int S = c->hc_mult, D = c->hidden_size, rows = post ? (2 + S) * S : S;
	float eps = (float)c->hc_eps;
	rmsnorm(s->flat, st, NULL, S * D, (float)c->rms_norm_eps);
	for (int r = 0; r < rows; r++)
		s->mix[r] = dot(fn + (int64_t)r * S * D, s->flat, S * D);
	memset(x, 0, (size_t)D * sizeof(float));
	for (int j = 0; j < S; j++)
		axpy(x, sigmoid(s->mix[j] * scale[0] + base[j]) + eps, st + (int64_t)j * D, D);
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

/* One token's streams st after a block of output y: st_k = post_k y + sum_j comb[j][k] st_j. */
static void hc_post(const coli_model *c, v4_kv *s, float *st, const float *post, const float *comb, const float *y)
{
	int S = c->hc_mult, D = c->hidden_size;
	for (int k = 0; k < S; k++) {
		float *o = s->st2 + (int64_t)k * D;
		for (int i = 0; i < D; i++)
			o[i] = post[k] * y[i];
		for (int j = 0; j < S; j++)
			axpy(o, comb[j * S + k], st + (int64_t)j * D, D);
	}
	memcpy(st, s->st2, (size_t)S * D * sizeof(float));
}

/* ---- compressors and the indexer ---------------------------------------------------------- */

/* A compressor's window complete: it becomes the previous one (cwin, zwin: [previous,
 * current][r][cw]). */
static void win_shift(float *cwin, float *zwin, int r, int cw)
{
	memcpy(cwin, cwin + (int64_t)r * cw, (size_t)r * cw * sizeof(float));
	memcpy(zwin, zwin + (int64_t)r * cw, (size_t)r * cw * sizeof(float));
}

/* One token of a compressor of ratio r at position p: its kv and gate rows kv, gt (width cw, the
 * compressor's projections of the token) kept for its window; when the window is complete, row p / r: per channel of the hd output channels a
 * softmax over the window's gates (+ position biases ape) pooling its kv rows (CSA, cw = 2 hd:
 * the previous window's first halves too), normed, rotated at the window's first position. */
static int comp_push(const coli_engine *m, v4_kv *s, const float *kv, const float *gt, const float *ape,
		     const float *norm, float *cwin, float *zwin, float *rows, int r, int hd, int overlap, int p)
{
	int cw = overlap ? 2 * hd : hd, j = p % r, w = p / r;
	float *cur_c = cwin + (int64_t)r * cw, *cur_z = zwin + (int64_t)r * cw;
	memcpy(cur_c + (int64_t)j * cw, kv, (size_t)cw * sizeof(float));
	memcpy(cur_z + (int64_t)j * cw, gt, (size_t)cw * sizeof(float));
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

/* The indexer's scores of rows [begin, end) for one token (rows are independent: the same bits
 * however they are shared out). */
typedef struct index_job {
	const coli_model *c;
	const float *rows, *qi, *iw; /* the indexer's rows, the token's rotated queries and head weights */
	float *isc;
} index_job;

static void index_rows(void *arg, int64_t begin, int64_t end)
{
	const index_job *j = arg;
	int IH = j->c->index_n_heads, ihd = j->c->index_head_dim;
	float ws = 1.0f / sqrtf((float)IH), ks = 1.0f / sqrtf((float)ihd);
	for (int64_t r = begin; r < end; r++) {
		float v = 0;
		for (int h = 0; h < IH; h++) {
			float d = dot(j->qi + (int64_t)h * ihd, j->rows + r * ihd, ihd);
			v += j->iw[h] * ws * (d > 0 ? d * ks : 0);
		}
		j->isc[r] = v;
	}
}

/* The lightning indexer of a CSA layer for one token: the n complete rows' scores (sum over
 * heads of weight iw x relu(qi . k) / sqrt(index_hd), qi its rotated queries), over the kernels'
 * threads once the scan is long (as coli_attn_index_fmas counts it), and the min(index_topk, n)
 * best into isel (ties to the lower row), ascending; returns how many. */
static int index_select(coli_engine *m, v4_kv *s, const v4_layer *L, const float *qi, const float *iw, int n)
{
	const coli_model *c = m->cfg;
	index_job j = {c, L->irows, qi, iw, s->isc};
	attn_for(m, (int64_t)n * c->index_n_heads * c->index_head_dim, n, index_rows, &j);
	return dsa_top(s->isc, n, c->index_topk, s->itmp, s->isel);
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

/* ---- attention ----------------------------------------------------------------------------- */

/* Layer l's projections of the n tokens at p0 .. (normed inputs ws->N): queries (ws->QA the
 * normed q-LoRA rows, ws->Q the normed, rotated heads), keys (ws->VK, normed, rotated), the
 * compressors' rows (ws->VCK, VCZ; the indexer's ws->VIK, VIZ) and the indexer's queries and
 * weights (ws->IQ, IW). */
static void attn_in(coli_engine *m, v4_kv *s, int l, int n, int p0)
{
	const coli_model *c = m->cfg;
	const layer_w *W = &m->w->layers[l];
	fwd_ws *w = m->ws;
	int H = c->n_heads, hd = c->head_dim, rd = c->qk_rope_head_dim, r = c->compress[l], ql = c->q_lora_rank;
	int IH = c->index_n_heads, ihd = c->index_head_dim;
	float eps = (float)c->rms_norm_eps;
	const rope *ro = r ? &s->comp : &s->main;
	coli_mat_mul(m->kc, &W->q_a, w->N, n, w->QA);
	for (int i = 0; i < n; i++)
		rmsnorm(w->QA + (int64_t)i * ql, w->QA + (int64_t)i * ql, W->q_a_norm, ql, eps);
	coli_mat_mul(m->kc, &W->q_b, w->QA, n, w->Q);
	coli_mat_mul(m->kc, &W->wkv, w->N, n, w->VK);
	for (int i = 0; i < n; i++) {
		float *q = w->Q + (int64_t)i * H * hd, *key = w->VK + (int64_t)i * hd;
		for (int h = 0; h < H; h++)
			rmsnorm(q + (int64_t)h * hd, q + (int64_t)h * hd, NULL, hd, eps);
		rope_apply(ro, q + hd - rd, H, hd, p0 + i);
		rmsnorm(key, key, W->kv_norm, hd, eps);
		rope_apply(ro, key + hd - rd, 1, hd, p0 + i);
	}
	coli_tracer_mark(m->tr, COLI_SPAN_ATTENTION, l);
	if (r) {
		coli_mat_mul(m->kc, &W->cmp_wkv, w->N, n, w->VCK);
		coli_mat_mul(m->kc, &W->cmp_wgate, w->N, n, w->VCZ);
	}
	if (r && c->index_full[l]) {
		coli_mat_mul(m->kc, &W->icmp_wkv, w->N, n, w->VIK);
		coli_mat_mul(m->kc, &W->icmp_wgate, w->N, n, w->VIZ);
		coli_mat_mul(m->kc, &W->idx_wq_b, w->QA, n, w->IQ);
		for (int i = 0; i < n; i++)
			rope_apply(&s->comp, w->IQ + (int64_t)i * IH * ihd + ihd - rd, IH, ihd, p0 + i);
		coli_mat_mul(m->kc, &W->idx_weights, w->N, n, w->IW);
	}
	coli_tracer_mark(m->tr, COLI_SPAN_INDEXER, l); /* the compressors' and the indexer's projections */
}

/* One token's attention over its n keys (= values) with the sinks, V4_HEADS heads a pass over
 * the keys so that a key is read once for them (a long context's keys outgrow the cache); blocks
 * of heads over the kernels' threads, each thread's scores its own rows of the sequence's
 * kv->att. Each head's sums in the order of one head at a time: the same bits for any threads. */
typedef struct heads_job {
	const coli_model *c;
	const float *sink, *Q; /* [H] the layer's sinks, [H][hd] the token's queries */
	float *A;              /* [H][hd] the output */
	const float **keys;
	int n;
	float *att; /* [threads][rows] scores */
	int64_t rows;
} heads_job;

static void attend_heads(void *arg, int64_t begin, int64_t end)
{
	const heads_job *j = arg;
	int H = j->c->n_heads, hd = j->c->head_dim, n = j->n;
	float *sc = j->att + (int64_t)kpool_self() * j->rows, scale = 1.0f / sqrtf((float)hd), mx[V4_HEADS];
	double sum[V4_HEADS];
	for (int64_t blk = begin; blk < end; blk++) {
		int h0 = (int)blk * V4_HEADS, hb = H - h0 < V4_HEADS ? H - h0 : V4_HEADS;
		const float *q = j->Q + (int64_t)h0 * hd;
		float *o = j->A + (int64_t)h0 * hd;
		for (int b = 0; b < hb; b++)
			mx[b] = j->sink[h0 + b];
		for (int t = 0; t < n; t++)
			for (int b = 0; b < hb; b++) {
				float x = sc[(int64_t)b * n + t] = dot(q + (int64_t)b * hd, j->keys[t], hd) * scale;
				mx[b] = x > mx[b] ? x : mx[b];
			}
		for (int b = 0; b < hb; b++) {
			float *row = sc + (int64_t)b * n;
			sum[b] = expf(j->sink[h0 + b] - mx[b]);
			for (int t = 0; t < n; t++)
				sum[b] += row[t] = expf(row[t] - mx[b]);
		}
		memset(o, 0, (size_t)hb * hd * sizeof(float));
		for (int t = 0; t < n; t++)
			for (int b = 0; b < hb; b++)
				axpy(o + (int64_t)b * hd, (float)(sc[(int64_t)b * n + t] / sum[b]), j->keys[t], hd);
	}
}

/* The attention core of layer l for the batch's token i at p (projections from attn_in): what it
 * overwrites kept, its key into the window, its compressors' rows pushed (a window complete: a
 * compressed row), on CSA layers the indexer's choice; over the window and the rows attended
 * with the sinks, into ws->A's row i, rotated back at p. */
static void attn_core(coli_engine *m, coli_kv *kv, int l, int i, int p)
{
	const coli_model *c = m->cfg;
	const layer_w *W = &m->w->layers[l];
	fwd_ws *w = m->ws;
	v4_kv *s = kv->v4;
	v4_layer *L = &s->L[l - s->first];
	int H = c->n_heads, hd = c->head_dim, rd = c->qk_rope_head_dim, r = c->compress[l], csa = c->index_full[l];
	int Wn = c->sliding_window, ihd = c->index_head_dim, cw = csa ? 2 * hd : hd;
	keep_token(kv, L, l, p);
	memcpy(L->ring + (int64_t)(p % Wn) * hd, w->VK + (int64_t)i * hd, (size_t)hd * sizeof(float));
	int n = 0, nrows = 0, k = 0;
	for (int t = p - Wn + 1 > 0 ? p - Wn + 1 : 0; t <= p; t++)
		s->keys[n++] = L->ring + (int64_t)(t % Wn) * hd;
	if (r) {
		comp_push(m, s, w->VCK + (int64_t)i * cw, w->VCZ + (int64_t)i * cw, W->cmp_ape, W->cmp_norm, L->cwin, L->zwin,
			  L->rows, r, hd, csa, p);
		nrows = (p + 1) / r;
	}
	if (r && csa) {
		comp_push(m, s, w->VIK + (int64_t)i * 2 * ihd, w->VIZ + (int64_t)i * 2 * ihd, W->icmp_ape, W->icmp_norm,
			  L->icwin, L->izwin, L->irows, r, ihd, 1, p);
		k = index_select(m, s, L, w->IQ + (int64_t)i * c->index_n_heads * ihd, w->IW + (int64_t)i * c->index_n_heads,
				 nrows);
	}
	for (int j = 0; j < (r && csa ? k : nrows); j++)
		s->keys[n++] = L->rows + (int64_t)(r && csa ? s->isel[j] : j) * hd;
	heads_job j = {c, W->sink, w->Q + (int64_t)i * H * hd, w->A + (int64_t)i * H * hd, s->keys, n, kv->att,
		       (int64_t)attn_score_rows(c) * kv->cap};
	attn_for(m, (int64_t)H * n * hd, (H + V4_HEADS - 1) / V4_HEADS, attend_heads, &j);
	rope_apply(r ? &s->comp : &s->main, w->A + (int64_t)i * H * hd + hd - rd, H, hd, -p); /* the inverse rotation */
}

/* The grouped output of layer l for n tokens: group g's rows of wo_a over its heads' slice of
 * ws->A (a band of wo_a over the batch; token by token where the band is no matrix of its own),
 * then wo_b into ws->Y. */
static void attn_out(coli_engine *m, int l, int n)
{
	const coli_model *c = m->cfg;
	const layer_w *W = &m->w->layers[l];
	fwd_ws *w = m->ws;
	int G = c->o_groups, olr = c->o_lora_rank;
	int64_t ho = (int64_t)c->n_heads * c->head_dim, per = ho / G;
	for (int g = 0; g < G; g++) {
		coli_mat band;
		if (coli_mat_band(&W->wo_a, (int64_t)g * olr, olr, &band) < 0) {
			for (int i = 0; i < n; i++)
				coli_mat_vec_range(m->kc, &W->wo_a, (int64_t)g * olr, olr, w->A + i * ho + g * per,
						   w->VO + ((int64_t)i * G + g) * olr);
			continue;
		}
		for (int i = 0; i < n; i++)
			memcpy(w->VG + i * per, w->A + i * ho + g * per, (size_t)per * sizeof(float));
		coli_mat_mul(m->kc, &band, w->VG, n, w->VT);
		for (int i = 0; i < n; i++)
			memcpy(w->VO + ((int64_t)i * G + g) * olr, w->VT + (int64_t)i * olr, (size_t)olr * sizeof(float));
	}
	coli_mat_mul(m->kc, &W->wo_b, w->VO, n, w->Y);
}

/* ---- MoE -------------------------------------------------------------------------------------- */

/* A hash layer's k experts for token tok (its tid2eid row, stored as floats). */
static void hash_ids(const layer_w *W, int32_t tok, int k, int32_t *ids)
{
	for (int j = 0; j < k; j++)
		ids[j] = (int32_t)W->tid2eid[(int64_t)tok * k + j];
}

/* The router of layer W for token tok from its logits rl [E] (overwritten): hash layers' table,
 * else the top-k of sqrt(softplus) scores plus the correction bias (ties to the lower id); the
 * weights the chosen scores renormalised x routed_scaling_factor, sorted by weight (ties lower
 * id), into ids, wts [top_k]. */
static void v4_route(const coli_model *c, v4_kv *s, const layer_w *W, float *rl, int32_t tok, int32_t *ids, float *wts)
{
	int E = c->n_experts, k = c->top_k;
	for (int x = 0; x < E; x++) {
		float v = rl[x];
		s->rs[x] = sqrtf(v > 20.0f ? v : log1pf(expf(v)));
	}
	if (W->tid2eid) {
		hash_ids(W, tok, k, ids);
	} else {
		for (int x = 0; x < E; x++) /* the choice: score + correction bias (the logits no longer needed) */
			rl[x] = s->rs[x] + W->corr_bias[x];
		top_k(rl, E, k, ids);
	}
	float sum = 0;
	for (int j = 0; j < k; j++)
		sum += s->rs[ids[j]];
	for (int j = 0; j < k; j++)
		wts[j] = s->rs[ids[j]] / (sum + 1e-20f) * (float)c->routed_scaling_factor;
	sort_pairs(ids, wts, k);
}

/* The MoE of layer l for the n tokens tok (normed inputs ws->N, output ws->Y): each routed, then
 * the experts (moe_apply: each read once for the batch); the routing into ids, wts ([n][top_k])
 * when given. */
static int v4_moe(coli_engine *m, v4_kv *s, int l, const int32_t *tok, int n, int32_t *ids, float *wts, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *W = &m->w->layers[l];
	fwd_ws *w = m->ws;
	int E = c->n_experts, k = c->top_k;
	coli_mat_mul(m->kc, &W->router, w->N, n, w->R);
	for (int i = 0; i < n; i++)
		v4_route(c, s, W, w->R + (int64_t)i * E, tok[i], w->ids + i * k, w->W + i * k);
	for (int i = 0; m->usage && i < n * k; i++)
		m->usage[(int64_t)l * E + w->ids[i]] += 1;
	coli_tracer_mark(m->tr, COLI_SPAN_ROUTER, l);
	return moe_apply(m, l, w->N, n, w->Y, ids, wts, e);
}

/* ---- the stack ----------------------------------------------------------------------------- */

/* The mHC pre-mixing at site (0 attention, 1 MoE) of layer l for each of the n tokens' streams
 * (ws->VS): the block's input normed by norm into ws->N, the post-mixing into ws->VP, VC. */
static void pre_all(const coli_model *c, v4_kv *s, fwd_ws *w, const layer_w *W, int site, const float *norm, int n)
{
	int S = c->hc_mult, D = c->hidden_size;
	for (int i = 0; i < n; i++) {
		float *x = w->X + (int64_t)i * D;
		hc_pre(c, s, W->hc_fn[site], W->hc_base[site], W->hc_scale[site], w->VS + (int64_t)i * S * D, x,
		       w->VP + (int64_t)i * S, w->VC + (int64_t)i * S * S);
		rmsnorm(w->N + (int64_t)i * D, x, norm, D, (float)c->rms_norm_eps);
	}
}

/* Each of the n tokens' streams after its block's output (ws->Y). */
static void post_all(const coli_model *c, v4_kv *s, fwd_ws *w, int n)
{
	int S = c->hc_mult, D = c->hidden_size;
	for (int i = 0; i < n; i++)
		hc_post(c, s, w->VS + (int64_t)i * S * D, w->VP + (int64_t)i * S, w->VC + (int64_t)i * S * S,
			w->Y + (int64_t)i * D);
}

/* Layer l for the n tokens tok at positions p0 .. on their streams ws->VS: the attention and the
 * MoE, each between its mHC mixings; the routing into ids and wts ([n][top_k]) when given.
 * Traced: the mixings as MIX, the compressors' and indexer's projections as INDEXER (attn_in),
 * the rest as its block's span. */
static int layer(coli_engine *m, coli_kv *kv, int l, const int32_t *tok, int n, int p0, int32_t *ids, float *wts,
		 coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *W = &m->w->layers[l];
	v4_kv *s = kv->v4;
	fwd_ws *w = m->ws;
	pre_all(c, s, w, W, 0, W->attn_norm, n);
	coli_tracer_mark(m->tr, COLI_SPAN_MIX, l);
	attn_in(m, s, l, n, p0);
	for (int i = 0; i < n; i++) /* in position order: each token's state as a run of one token at a time */
		attn_core(m, kv, l, i, p0 + i);
	attn_out(m, l, n);
	coli_tracer_mark(m->tr, COLI_SPAN_ATTENTION, l);
	post_all(c, s, w, n);
	pre_all(c, s, w, W, 1, W->mlp_norm, n);
	coli_tracer_mark(m->tr, COLI_SPAN_MIX, l);
	if (v4_moe(m, s, l, tok, n, ids, wts, e) < 0)
		return -1;
	post_all(c, s, w, n);
	coli_tracer_mark(m->tr, COLI_SPAN_MIX, l);
	return 0;
}

/* The streams of the n tokens (ws->VS) collapsed by the mHC head of W (site 2), normed by norm,
 * through the head: every token's logits into logits ([n][vocab]) and/or the last's into last
 * (either NULL: not asked). */
static void head(coli_engine *m, v4_kv *s, const layer_w *W, const float *norm, int n, float *logits, float *last)
{
	const coli_model *c = m->cfg;
	fwd_ws *w = m->ws;
	int S = c->hc_mult, D = c->hidden_size;
	for (int i = logits ? 0 : n - 1; (logits || last) && i < n; i++) {
		float *x = w->X + (int64_t)i * D;
		hc_pre(c, s, W->hc_fn[2], W->hc_base[2], W->hc_scale[2], w->VS + (int64_t)i * S * D, x, NULL, NULL);
		rmsnorm(w->N + (int64_t)i * D, x, norm, D, (float)c->rms_norm_eps);
	}
	if (logits)
		coli_mat_mul(m->kc, &m->w->lm_head, w->N, n, logits);
	if (logits && last)
		memcpy(last, logits + (int64_t)(n - 1) * c->vocab_size, (size_t)c->vocab_size * sizeof(float));
	else if (last)
		coli_mat_vec(m->kc, &m->w->lm_head, w->N + (int64_t)(n - 1) * D, last);
}

int v4_batch(coli_engine *m, coli_kv *kv, const int32_t *tokens, int n, float *logits, float *last,
	     coli_routing_log *routing, int at, int n_all, float *hid, coli_err *e)
{
	const coli_model *c = m->cfg;
	const weights *w = m->w;
	fwd_ws *ws = m->ws;
	int S = c->hc_mult, D = c->hidden_size, k = c->top_k;
	coli_tracer_begin(m->tr);
	for (int i = 0; i < n; i++) {
		float *st = ws->VS + (int64_t)i * S * D;
		coli_mat_row(m->kc, &w->embed, tokens[i], st);
		for (int j = 1; j < S; j++)
			memcpy(st + (int64_t)j * D, st, (size_t)D * sizeof(float));
	}
	for (int l = 0; l < c->n_hash_layers && l < c->n_layers; l++) { /* known from the tokens: read ahead */
		for (int i = 0; i < n; i++)
			hash_ids(&w->layers[l], tokens[i], k, ws->ids + i * k);
		moe_read_ahead(m, l, n);
	}
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, -1);
	for (int l = 0; l < c->n_layers; l++) {
		int64_t row = ((int64_t)l * n_all + at) * k;
		if (layer(m, kv, l, tokens, n, kv->n, routing ? routing->ids + row : NULL,
			  routing && routing->weights ? routing->weights + row : NULL, e) < 0)
			return -1;
	}
	if (hid)
		memcpy(hid, ws->VS, (size_t)n * S * D * sizeof(float));
	head(m, kv->v4, &w->top, w->final_norm, n, logits, last);
	kv->n += n;
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, -1);
	coli_tracer_end(m->tr, (uint64_t)n);
	return 0;
}

/* ---- the MTP layer ------------------------------------------------------------------------------ */

/* The MTP layer's streams st ([S][D]) from the main model's final streams h ([S][D]) and the
 * next token tok: e_proj enorm(embed(tok)) added to h_proj hnorm(h_j) on every stream j. */
static void mtp_in(coli_engine *m, v4_kv *s, const layer_w *L, const float *h, int32_t tok, float *st)
{
	const coli_model *c = m->cfg;
	int S = c->hc_mult, D = c->hidden_size;
	float eps = (float)c->rms_norm_eps;
	coli_mat_row(m->kc, &m->w->embed, tok, s->x);
	rmsnorm(s->x, s->x, L->enorm, D, eps);
	coli_mat_vec(m->kc, &L->e_proj, s->x, s->y);
	for (int j = 0; j < S; j++)
		rmsnorm(s->st2 + (int64_t)j * D, h + (int64_t)j * D, L->hnorm, D, eps);
	coli_mat_mul(m->kc, &L->h_proj, s->st2, S, st);
	for (int j = 0; j < S; j++)
		axpy(st + (int64_t)j * D, 1.0f, s->y, D);
}

int v4_mtp(coli_engine *m, coli_kv *kv, int l, const float *hid, const int32_t *tok, int n, float *logits, float *h,
	   coli_err *e)
{
	const layer_w *L = &m->w->layers[l];
	v4_kv *s = kv->v4;
	fwd_ws *w = m->ws;
	int64_t sd = (int64_t)m->cfg->hc_mult * m->cfg->hidden_size;
	int piece = w->max_batch < COLI_EXACT_N ? w->max_batch : COLI_EXACT_N, nb = 0;
	coli_tracer_begin(m->tr);
	for (int at = 0; at < n; at += nb) { /* pieces of products exact per row: the same bits however rows queue */
		nb = n - at < piece ? n - at : piece;
		for (int i = 0; i < nb; i++)
			mtp_in(m, s, L, hid + (at + i) * sd, tok[at + i], w->VS + i * sd);
		coli_tracer_mark(m->tr, COLI_SPAN_OTHER, l);
		if (layer(m, kv, l, tok + at, nb, kv->n, NULL, NULL, e) < 0)
			return -1;
		kv->n += nb;
	}
	memcpy(h, w->VS + (nb - 1) * sd, (size_t)sd * sizeof(float));
	head(m, s, L, L->head_norm, nb, NULL, logits);
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, -1);
	coli_tracer_end(m->tr, (uint64_t)n);
	return 0;
}
