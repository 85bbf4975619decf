/* attention.c: GQA/MHA and MLA attention over the KV cache, causal within the batch. */
#include "nn/attention.h"

#include <stdlib.h>
#include <string.h>

#include "nn/blocks.h"
#include "nn/ws.h"
#include "fileio.h"
#include "hot.h"
#include "kernels/pool.h"

/* Per-head RMSNorm (qwen3_moe, glm4_moe) or one over the whole projection (olmoe). */
static void qk_norm(const coli_engine *m, float *x, const float *w, int heads, int hd)
{
	if (!w)
		return;
	float eps = (float)m->cfg->rms_norm_eps;
	if (m->cfg->qk_norm == COLI_QKNORM_WHOLE)
		rmsnorm(x, x, w, heads * hd, eps);
	else
		for (int h = 0; h < heads; h++)
			rmsnorm(x + h * hd, x + h * hd, w, hd, eps);
}

static void clip(float *x, int n, float c)
{
	if (c <= 0)
		return;
	for (int i = 0; i < n; i++)
		x[i] = x[i] < -c ? -c : x[i] > c ? c : x[i];
}

typedef float v16 __attribute__((vector_size(64))); /* 16 floats: one AVX-512 register */

/* 16 floats from p, unaligned (a statement expression: a function returning a vector would
 * change the ABI in the baseline build of the callers). */
#define load16(p) ({ v16 v_; memcpy(&v_, (p), sizeof(v_)); v_; })

typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));

/* The sum of a vector's 16 lanes, as a tree of halves (4 dependent adds, not 16). */
static inline __attribute__((always_inline)) float sum16(const v16 *s)
{
	v8 h = __builtin_shufflevector(*s, *s, 0, 1, 2, 3, 4, 5, 6, 7) +
	       __builtin_shufflevector(*s, *s, 8, 9, 10, 11, 12, 13, 14, 15);
	v4 f = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
	return (f[0] + f[2]) + (f[1] + f[3]);
}

/* Adds part a's products for 4 positions (keys a->k + (t + i) x a->stride) into s[i], 16 lanes
 * at a time; the dims past a multiple of 16 into tail[i]. */
static inline __attribute__((always_inline)) void part4(const attn_part *a, int t, v16 *restrict s, float *restrict tail)
{
	const float *q = a->q, *k0 = a->k + (int64_t)t * a->stride;
	const float *k1 = k0 + a->stride, *k2 = k1 + a->stride, *k3 = k2 + a->stride;
	int d = 0;
	for (; d + 16 <= a->dim; d += 16) {
		v16 x = load16(q + d);
		s[0] += x * load16(k0 + d), s[1] += x * load16(k1 + d), s[2] += x * load16(k2 + d), s[3] += x * load16(k3 + d);
	}
	for (; d < a->dim; d++)
		tail[0] += q[d] * k0[d], tail[1] += q[d] * k1[d], tail[2] += q[d] * k2[d], tail[3] += q[d] * k3[d];
}

/* Scores of positions t..t+3 over the parts (b may be NULL), 4 chains in flight. */
static inline __attribute__((always_inline)) void scores4(const attn_part *a, const attn_part *b, int t, float scale,
							  float *restrict att)
{
	v16 s[4] = {{0}, {0}, {0}, {0}};
	float tail[4] = {0, 0, 0, 0};
	part4(a, t, s, tail);
	if (b)
		part4(b, t, s, tail);
	for (int i = 0; i < 4; i++)
		att[t + i] = (sum16(&s[i]) + tail[i]) * scale;
}

/* out[hd] += the 4 positions' values v0 + i * v_stride weighted by a[i], 16 lanes at a time. */
static inline __attribute__((always_inline)) void axpy4(float *restrict out, const float *restrict a,
							const float *restrict v0, int64_t v_stride, int hd)
{
	const float *v1 = v0 + v_stride, *v2 = v1 + v_stride, *v3 = v2 + v_stride;
	int d = 0;
	for (; d + 16 <= hd; d += 16) {
		v16 o = load16(out + d) + ((a[0] * load16(v0 + d) + a[1] * load16(v1 + d)) +
					   (a[2] * load16(v2 + d) + a[3] * load16(v3 + d)));
		memcpy(out + d, &o, sizeof(o));
	}
	for (; d < hd; d++)
		out[d] += (a[0] * v0[d] + a[1] * v1[d]) + (a[2] * v2[d] + a[3] * v3[d]);
}

COLI_HOT void attn_head(const attn_part *a, const attn_part *b, const float *v, int64_t v_stride, int vd, int n,
			float scale, float *att, float *out)
{
	int t = 0;
	for (; t + 4 <= n; t += 4)
		scores4(a, b, t, scale, att);
	for (; t < n; t++) {
		float x = dot(a->q, a->k + (int64_t)t * a->stride, a->dim);
		att[t] = (b ? x + dot(b->q, b->k + (int64_t)t * b->stride, b->dim) : x) * scale;
	}
	softmax(att, n);
	memset(out, 0, (size_t)vd * sizeof(float));
	for (t = 0; t + 4 <= n; t += 4) /* four positions per pass over out */
		axpy4(out, att + t, v + (int64_t)t * v_stride, v_stride, vd);
	for (; t < n; t++)
		axpy(out, att[t], v + (int64_t)t * v_stride, vd);
}

/* One query head against cached positions 0..last of layer l's KV head kvh. */
static void attend(const float *q, const coli_kv *kv, int l, int kvh, int hd, int last, float scale,
		   float *att, float *out)
{
	attn_part a = {q, kv->k[l] + kvh * hd, kv->k_width, hd};
	attn_head(&a, NULL, kv->v[l] + kvh * hd, kv->v_width, hd, last + 1, scale, att, out);
}

/* q, k, v projections of the batch, normed, clipped and rotated, keys/values cached. */
static void gqa_project(const coli_engine *m, const layer_w *L, coli_kv *kv, int l, const float *X, int n, float *Q)
{
	const coli_model *c = m->cfg;
	int hd = c->head_dim, qw = c->n_heads * hd, kw = c->n_kv_heads * hd;
	float *K = kv->k[l] + (int64_t)kv->n * kw; /* [n][kv_heads * hd], appended to the cache */
	float *V = kv->v[l] + (int64_t)kv->n * kw; /* [n][kv_heads * hd] */
	const coli_mat *W[3] = {&L->q, &L->k, &L->v};
	const float *xs[3] = {X, X, X};
	float *ys[3] = {Q, K, V};
	if (n != 1 || mat_vec_batch(m->kc, W, xs, ys, 3) < 0) { /* decode: the three in one dispatch */
		mat_mul(m->kc, &L->q, X, n, Q);
		mat_mul(m->kc, &L->k, X, n, K);
		mat_mul(m->kc, &L->v, X, n, V);
	}
	add_bias(Q, L->q_bias, n, qw);
	add_bias(K, L->k_bias, n, kw);
	add_bias(V, L->v_bias, n, kw);
	for (int i = 0; i < n; i++) {
		float *q = Q + (int64_t)i * qw, *k = K + (int64_t)i * kw;
		qk_norm(m, q, L->q_norm, c->n_heads, hd);
		qk_norm(m, k, L->k_norm, c->n_kv_heads, hd);
		clip(q, qw, (float)c->clip_qkv);
		clip(k, kw, (float)c->clip_qkv);
		clip(V + (int64_t)i * kw, kw, (float)c->clip_qkv);
		rope_apply(m->rope, q, c->n_heads, hd, kv->n + i);
		rope_apply(m->rope, k, c->n_kv_heads, hd, kv->n + i);
	}
}

/* The (token, head) pairs of a batch, shared out over the kernels' threads. */
typedef struct gqa_job {
	const coli_engine *m;
	const coli_kv *kv;
	int l;
	const float *Q;
	float *A;
} gqa_job;

static void gqa_pairs(void *arg, int64_t begin, int64_t end)
{
	gqa_job *j = arg;
	const coli_model *c = j->m->cfg;
	int hd = c->head_dim, qw = c->n_heads * hd, group = c->n_heads / c->n_kv_heads;
	float *att = j->kv->att + (int64_t)kpool_self() * j->kv->cap; /* this thread's scores */
	for (int64_t p = begin; p < end; p++) {
		int i = (int)(p / c->n_heads), h = (int)(p % c->n_heads);
		attend(j->Q + (int64_t)i * qw + h * hd, j->kv, j->l, h / group, hd, j->kv->n + i,
		       (float)j->m->attn_scale, att, j->A + (int64_t)i * qw + h * hd);
	}
}

int attn_gqa(const coli_engine *m, int l, coli_kv *kv, const float *X, int n, float *out, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[l];
	float *Q = m->ws->Q; /* [n][heads * hd] queries */
	float *A = m->ws->A; /* [n][heads * hd] attention output */
	(void)e;
	gqa_project(m, L, kv, l, X, n, Q);
	gqa_job j = {m, kv, l, Q, A};
	/* Threads only when there is enough work to pay for waking them (a prefill, a long context). */
	int64_t pairs = (int64_t)n * c->n_heads, work = pairs * (kv->n + n) * c->head_dim;
	if (work < COLI_ATTN_THREAD_WORK)
		gqa_pairs(&j, 0, pairs);
	else
		coli_kernels_for(m->kc, pairs, pairs / (4 * coli_kernels_threads(m->kc)) + 1, gqa_pairs, &j);
	mat_mul(m->kc, &L->o, A, n, out);
	add_bias(out, L->o_bias, n, c->hidden_size);
	return 0;
}

/* Queries and the cached latent + rope key of the batch. */
static void mla_project(const coli_engine *m, const layer_w *L, coli_kv *kv, int l, const float *X, int n, fwd_ws *w)
{
	const coli_model *c = m->cfg;
	int ql = c->q_lora_rank, lat = c->kv_lora_rank, rd = c->qk_rope_head_dim;
	if (ql > 0) {
		mat_mul(m->kc, &L->q_a, X, n, w->QA);
		add_bias(w->QA, L->q_a_bias, n, ql);
		for (int i = 0; i < n; i++)
			rmsnorm(w->QA + (int64_t)i * ql, w->QA + (int64_t)i * ql, L->q_a_norm, ql, 1e-6f);
		mat_mul(m->kc, &L->q_b, w->QA, n, w->Q);
	} else {
		mat_mul(m->kc, &L->q_b, X, n, w->Q);
	}
	mat_mul(m->kc, &L->kv_a, X, n, w->CKV);
	add_bias(w->CKV, L->kv_a_bias, n, lat + rd);
	for (int i = 0; i < n; i++) {
		const float *ckv = w->CKV + (int64_t)i * (lat + rd);
		float *cl = kv->k[l] + (int64_t)(kv->n + i) * lat; /* [kv_lora] normed latent, cached */
		float *kr = kv->v[l] + (int64_t)(kv->n + i) * rd;  /* [rope] rotated shared key, cached */
		rmsnorm(cl, ckv, L->kv_a_norm, lat, 1e-6f);
		memcpy(kr, ckv + lat, (size_t)rd * sizeof(float));
		rope_apply(m->rope, kr, 1, 0, kv->n + i);
	}
}

/* Absorbed MLA for one head of one token (its rope part already rotated): scores against the
 * latent, values from it. */
static void mla_head(const coli_engine *m, const layer_w *L, const coli_kv *kv, int l, int h, float *q, int pos,
		     fwd_ws *w, float *out)
{
	float *att = kv->att; /* [pos + 1] scores */
	const coli_model *c = m->cfg;
	int nope = c->qk_nope_head_dim, rd = c->qk_rope_head_dim, lat = c->kv_lora_rank, vd = c->v_head_dim;
	int64_t band = (int64_t)h * (nope + vd);
	memset(w->qc, 0, (size_t)lat * sizeof(float));
	mat_vec_t_acc(m->kc, &L->kv_b, band, nope, q, w->qc); /* qc = W_kb_h^T q_nope */
	attn_part latent = {w->qc, kv->k[l], lat, lat}, rot = {q + nope, kv->v[l], rd, rd};
	attn_head(&latent, &rot, kv->k[l], lat, lat, pos + 1, (float)m->attn_scale, att, w->ctx); /* values: the latent */
	mat_vec_range(m->kc, &L->kv_b, band + nope, vd, w->ctx, out); /* v = W_vb_h ctx */
}

int attn_mla(const coli_engine *m, int l, coli_kv *kv, const float *X, int n, float *out, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[l];
	int qk = c->qk_nope_head_dim + c->qk_rope_head_dim, vd = c->v_head_dim;
	fwd_ws *w = m->ws;
	(void)e;
	mla_project(m, L, kv, l, X, n, w);
	for (int i = 0; i < n; i++) {
		rope_apply(m->rope, w->Q + (int64_t)i * c->n_heads * qk + c->qk_nope_head_dim, c->n_heads, qk, kv->n + i);
		for (int h = 0; h < c->n_heads; h++)
			mla_head(m, L, kv, l, h, w->Q + ((int64_t)i * c->n_heads + h) * qk, kv->n + i, w,
				 w->A + ((int64_t)i * c->n_heads + h) * vd);
	}
	mat_mul(m->kc, &L->o, w->A, n, out);
	add_bias(out, L->o_bias, n, c->hidden_size);
	return 0;
}
