/* attention.c: GQA/MHA and MLA attention over the KV cache, causal within the batch. */
#include "nn/attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/blocks.h"
#include "nn/dsa.h"
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

/* The core's sums run in 16 lanes (lane l of a 16-float block of the head's dims), each kept as
 * two 8-float halves: the same additions in the same order whatever the CPU, so the AVX-512,
 * AVX2 and baseline builds agree bit for bit, and a batch's scores are decode's. The halves are
 * named locals in macros: 16-float vectors (or arrays of them behind a pointer) in the AVX2
 * build were kept on the stack and moved through 16-byte pieces, and the core ran at 5% of the
 * core's peak. */
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));

/* 8 floats from p, unaligned (a statement expression: a function returning a vector would
 * change the ABI in the baseline build of the callers). */
#define load8(p) ({ v8 v_; memcpy(&v_, (p), sizeof(v_)); v_; })

/* The sum of 16 lanes held as halves lo, hi, as a tree (4 dependent adds, not 16). */
#define SUM16(lo, hi)                                                                              \
	({                                                                                         \
		v8 h_ = (lo) + (hi);                                                               \
		v4 f_ = __builtin_shufflevector(h_, h_, 0, 1, 2, 3) + __builtin_shufflevector(h_, h_, 4, 5, 6, 7); \
		(f_[0] + f_[2]) + (f_[1] + f_[3]);                                                 \
	})

/* Adds part a's products for 4 positions (keys a->k + (t + i) x a->stride) into the halves
 * s[i], 16 lanes at a time; the dims past a multiple of 16 into tl[i]. */
#define PART4(a, t, s0l, s0h, s1l, s1h, s2l, s2h, s3l, s3h, tl)                                    \
	do {                                                                                       \
		const float *q_ = (a)->q, *k0_ = (a)->k + (int64_t)(t) * (a)->stride;              \
		const float *k1_ = k0_ + (a)->stride, *k2_ = k1_ + (a)->stride, *k3_ = k2_ + (a)->stride; \
		int d_ = 0;                                                                        \
		for (; d_ + 16 <= (a)->dim; d_ += 16) {                                            \
			v8 xl_ = load8(q_ + d_), xh_ = load8(q_ + d_ + 8);                         \
			s0l += xl_ * load8(k0_ + d_), s0h += xh_ * load8(k0_ + d_ + 8);            \
			s1l += xl_ * load8(k1_ + d_), s1h += xh_ * load8(k1_ + d_ + 8);            \
			s2l += xl_ * load8(k2_ + d_), s2h += xh_ * load8(k2_ + d_ + 8);            \
			s3l += xl_ * load8(k3_ + d_), s3h += xh_ * load8(k3_ + d_ + 8);            \
		}                                                                                  \
		for (; d_ < (a)->dim; d_++)                                                        \
			tl[0] += q_[d_] * k0_[d_], tl[1] += q_[d_] * k1_[d_], tl[2] += q_[d_] * k2_[d_], \
				tl[3] += q_[d_] * k3_[d_];                                         \
	} while (0)

/* att[t + i] for positions t..t+3 over the parts (b may be NULL), 4 chains in flight. */
#define SCORES4(a, b, t, scale, att)                                                               \
	do {                                                                                       \
		v8 a0_ = {0}, b0_ = {0}, a1_ = {0}, b1_ = {0}, a2_ = {0}, b2_ = {0}, a3_ = {0}, b3_ = {0}; \
		float tl_[4] = {0, 0, 0, 0};                                                       \
		PART4(a, t, a0_, b0_, a1_, b1_, a2_, b2_, a3_, b3_, tl_);                          \
		if (b)                                                                             \
			PART4(b, t, a0_, b0_, a1_, b1_, a2_, b2_, a3_, b3_, tl_);                  \
		(att)[(t) + 0] = (SUM16(a0_, b0_) + tl_[0]) * (scale);                             \
		(att)[(t) + 1] = (SUM16(a1_, b1_) + tl_[1]) * (scale);                             \
		(att)[(t) + 2] = (SUM16(a2_, b2_) + tl_[2]) * (scale);                             \
		(att)[(t) + 3] = (SUM16(a3_, b3_) + tl_[3]) * (scale);                             \
	} while (0)

/* out[hd] += the 4 positions' values v0 + i * v_stride weighted by a[i], 8 lanes at a time. */
static inline __attribute__((always_inline)) void axpy4(float *restrict out, const float *restrict a,
							const float *restrict v0, int64_t v_stride, int hd)
{
	const float *v1 = v0 + v_stride, *v2 = v1 + v_stride, *v3 = v2 + v_stride;
	int d = 0;
	for (; d + 8 <= hd; d += 8) {
		v8 o = load8(out + d) + ((a[0] * load8(v0 + d) + a[1] * load8(v1 + d)) +
					 (a[2] * load8(v2 + d) + a[3] * load8(v3 + d)));
		memcpy(out + d, &o, sizeof(o));
	}
	for (; d < hd; d++)
		out[d] += (a[0] * v0[d] + a[1] * v1[d]) + (a[2] * v2[d] + a[3] * v3[d]);
}

/* The G query heads h < G of one token that share one KV head, against its n cached positions:
 * head h's parts are a and b (b may be NULL) with their queries q_step x h further on, its
 * scores att + h x att_stride, its output out + h x vd. Each block of four keys and of four
 * values is used by every head before the next, so a batch reads the keys and values once per
 * group, not once per head; a head's sums are the same for any G (the same blocks of four
 * positions, in the same order). */
static COLI_HOT void attn_group(const attn_part *a, const attn_part *b, int G, int64_t q_step, const float *v,
				int64_t v_stride, int vd, int n, float scale, float *att, int64_t att_stride, float *out)
{
	int t = 0;
	for (; t + 4 <= n; t += 4)
		for (int h = 0; h < G; h++) {
			attn_part ah = *a, bh = b ? *b : *a;
			const attn_part *bp = b ? &bh : NULL;
			ah.q += h * q_step, bh.q += h * q_step;
			SCORES4(&ah, bp, t, scale, att + h * att_stride);
		}
	for (; t < n; t++)
		for (int h = 0; h < G; h++) {
			float x = dot(a->q + h * q_step, a->k + (int64_t)t * a->stride, a->dim);
			att[h * att_stride + t] = (b ? x + dot(b->q + h * q_step, b->k + (int64_t)t * b->stride, b->dim) : x) * scale;
		}
	for (int h = 0; h < G; h++) {
		softmax(att + h * att_stride, n);
		memset(out + h * vd, 0, (size_t)vd * sizeof(float));
	}
	for (t = 0; t + 4 <= n; t += 4) /* four positions per pass over out */
		for (int h = 0; h < G; h++)
			axpy4(out + h * vd, att + h * att_stride + t, v + (int64_t)t * v_stride, v_stride, vd);
	for (; t < n; t++)
		for (int h = 0; h < G; h++)
			axpy(out + h * vd, att[h * att_stride + t], v + (int64_t)t * v_stride, vd);
}

void attn_head(const attn_part *a, const attn_part *b, const float *v, int64_t v_stride, int vd, int n, float scale,
	       float *att, float *out)
{
	attn_group(a, b, 1, 0, v, v_stride, vd, n, scale, att, 0, out);
}

/* One query head against cached positions 0..last of layer l's KV head kvh. */
static void attend(const float *q, const coli_kv *kv, int l, int kvh, int hd, int last, float scale,
		   float *att, float *out)
{
	attn_part a = {q, kv->k[l] + kvh * hd, kv->k_width, hd};
	attn_head(&a, NULL, kv->v[l] + kvh * hd, kv->v_width, hd, last + 1, scale, att, out);
}

/* qwen3_5_moe's gated attention: q_proj gave [query | gate] per head in QG; the queries into Q,
 * the gates into G. */
static void split_gate(const coli_model *c, const float *QG, int n, float *Q, float *G)
{
	int hd = c->head_dim;
	for (int64_t r = 0; r < (int64_t)n * c->n_heads; r++) {
		memcpy(Q + r * hd, QG + 2 * r * hd, (size_t)hd * sizeof(float));
		memcpy(G + r * hd, QG + (2 * r + 1) * hd, (size_t)hd * sizeof(float));
	}
}

/* q, k, v projections of the batch, normed, clipped and rotated, keys/values cached. */
static void gqa_project(const coli_engine *m, const layer_w *L, coli_kv *kv, int l, const float *X, int n, float *Q)
{
	const coli_model *c = m->cfg;
	int hd = c->head_dim, qw = c->n_heads * hd, kw = c->n_kv_heads * hd;
	float *K = kv->k[l] + (int64_t)kv->n * kw; /* [n][kv_heads * hd], appended to the cache */
	float *V = kv->v[l] + (int64_t)kv->n * kw; /* [n][kv_heads * hd] */
	float *QP = c->attn_gate ? m->ws->QG : Q;   /* what q_proj writes */
	const coli_mat *W[3] = {&L->q, &L->k, &L->v};
	const float *xs[3] = {X, X, X};
	float *ys[3] = {QP, K, V};
	if (n != 1 || coli_mat_vec_batch(m->kc, W, xs, ys, 3) < 0) { /* decode: the three in one dispatch */
		coli_mat_mul(m->kc, &L->q, X, n, QP);
		coli_mat_mul(m->kc, &L->k, X, n, K);
		coli_mat_mul(m->kc, &L->v, X, n, V);
	}
	if (c->attn_gate)
		split_gate(c, QP, n, Q, m->ws->AG);
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

/* Decode: (token, head) pairs p, each with attn_head (what coli-plan probe times). */
static void gqa_pairs(void *arg, int64_t begin, int64_t end)
{
	gqa_job *j = arg;
	const coli_model *c = j->m->cfg;
	int hd = c->head_dim, qw = c->n_heads * hd, group = c->n_heads / c->n_kv_heads;
	float *att = j->kv->att + (int64_t)kpool_self() * attn_score_rows(c) * j->kv->cap; /* this thread's scores */
	for (int64_t p = begin; p < end; p++) {
		int i = (int)(p / c->n_heads), h = (int)(p % c->n_heads);
		attend(j->Q + (int64_t)i * qw + h * hd, j->kv, j->l, h / group, hd, j->kv->n + i,
		       (float)j->m->attn_scale, att, j->A + (int64_t)i * qw + h * hd);
	}
}

/* A batch (prefill, verify): (token, KV head) items p, each with attn_group over the heads
 * that share the KV head; the same bits as gqa_pairs. */
static void gqa_groups(void *arg, int64_t begin, int64_t end)
{
	gqa_job *j = arg;
	const coli_model *c = j->m->cfg;
	const coli_kv *kv = j->kv;
	int hd = c->head_dim, qw = c->n_heads * hd, group = c->n_heads / c->n_kv_heads;
	float *att = kv->att + (int64_t)kpool_self() * group * kv->cap; /* this thread's scores */
	for (int64_t p = begin; p < end; p++) {
		int i = (int)(p / c->n_kv_heads), g = (int)(p % c->n_kv_heads);
		int64_t at = (int64_t)i * qw + (int64_t)g * group * hd;
		const attn_part a = {j->Q + at, kv->k[j->l] + g * hd, kv->k_width, hd};
		attn_group(&a, NULL, group, hd, kv->v[j->l] + g * hd, kv->v_width, hd, kv->n + i + 1,
			   (float)j->m->attn_scale, att, kv->cap, j->A + at);
	}
}

void attn_for(const coli_engine *m, int64_t work, int64_t n, void (*fn)(void *, int64_t, int64_t), void *arg)
{
	if (work < COLI_ATTN_THREAD_WORK)
		fn(arg, 0, n);
	else
		coli_kernels_for(m->kc, n, n / (4 * coli_kernels_threads(m->kc)) + 1, fn, arg);
}

int attn_score_rows(const coli_model *c)
{
	if (c->attn == COLI_ATTN_MLA) /* every head shares the latent: one group (mla_heads) */
		return c->n_heads;
	return c->n_kv_heads < 1 ? 1 : c->n_heads / c->n_kv_heads;
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
	int64_t items = n == 1 ? pairs : (int64_t)n * c->n_kv_heads;
	void (*fn)(void *, int64_t, int64_t) = n == 1 ? gqa_pairs : gqa_groups;
	attn_for(m, work, items, fn, &j);
	for (int64_t i = 0; c->attn_gate && i < (int64_t)n * c->n_heads * c->head_dim; i++)
		A[i] *= sigmoid(m->ws->AG[i]); /* the output gate */
	coli_mat_mul(m->kc, &L->o, A, n, out);
	add_bias(out, L->o_bias, n, c->hidden_size);
	return 0;
}

/* Queries and the cached latent + rope key of the batch. */
static void mla_project(const coli_engine *m, const layer_w *L, coli_kv *kv, int l, const float *X, int n, fwd_ws *w)
{
	const coli_model *c = m->cfg;
	int ql = c->q_lora_rank, lat = c->kv_lora_rank, rd = c->qk_rope_head_dim;
	if (ql > 0) {
		coli_mat_mul(m->kc, &L->q_a, X, n, w->QA);
		add_bias(w->QA, L->q_a_bias, n, ql);
		for (int i = 0; i < n; i++)
			rmsnorm(w->QA + (int64_t)i * ql, w->QA + (int64_t)i * ql, L->q_a_norm, ql, 1e-6f);
		coli_mat_mul(m->kc, &L->q_b, w->QA, n, w->Q);
	} else {
		coli_mat_mul(m->kc, &L->q_b, X, n, w->Q);
	}
	coli_mat_mul(m->kc, &L->kv_a, X, n, w->CKV);
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

/* Absorbed MLA's heads of one token share one cached latent and rope key per position: an MQA of
 * n_heads query heads, each query the head's absorbed qc = W_kb_h^T q_nope (kv_lora floats) and
 * its rope part. The heads [begin, end) go through attn_group together, so each block of cached
 * rows is read once for all of them (the same sums as one head at a time). */
typedef struct mla_job {
	const coli_engine *m;
	const coli_kv *kv;
	const float *lat, *rk; /* [n][kv_lora], [n][rope] the positions looked at */
	int n;
} mla_job;

static void mla_heads(void *arg, int64_t begin, int64_t end)
{
	const mla_job *j = arg;
	const coli_model *c = j->m->cfg;
	fwd_ws *w = j->m->ws;
	int lw = c->kv_lora_rank, rd = c->qk_rope_head_dim, qs = lw + rd;
	float *att = j->kv->att + (int64_t)kpool_self() * attn_score_rows(c) * j->kv->cap; /* this thread's scores */
	attn_part latent = {w->qc + begin * qs, j->lat, lw, lw}, rot = {w->qc + begin * qs + lw, j->rk, rd, rd};
	attn_group(&latent, &rot, (int)(end - begin), qs, j->lat, lw, lw, j->n, (float)j->m->attn_scale, att, j->kv->cap,
		   w->ctx + begin * lw);
}

/* One token's heads: absorbed queries (the kernels' threads share each product), the grouped
 * core over n positions, then v = W_vb_h ctx_h per head into out[heads][v_head_dim]. */
static void mla_token(const coli_engine *m, const layer_w *L, const coli_kv *kv, const float *Q, const float *lat,
		      const float *rk, int n, float *out)
{
	const coli_model *c = m->cfg;
	fwd_ws *w = m->ws;
	int H = c->n_heads, nope = c->qk_nope_head_dim, rd = c->qk_rope_head_dim, lw = c->kv_lora_rank, vd = c->v_head_dim;
	int qk = nope + rd, qs = lw + rd;
	for (int h = 0; h < H; h++) {
		float *qc = w->qc + (int64_t)h * qs;
		memset(qc, 0, (size_t)lw * sizeof(float));
		coli_mat_vec_t_acc(m->kc, &L->kv_b, (int64_t)h * (nope + vd), nope, Q + (int64_t)h * qk, qc); /* W_kb_h^T q_nope */
		memcpy(qc + lw, Q + (int64_t)h * qk + nope, (size_t)rd * sizeof(float));
	}
	mla_job j = {m, kv, lat, rk, n};
	int64_t work = (int64_t)H * n * (2 * lw + rd);
	if (work < COLI_ATTN_THREAD_WORK)
		mla_heads(&j, 0, H);
	else
		coli_kernels_for(m->kc, H, (H + coli_kernels_threads(m->kc) - 1) / coli_kernels_threads(m->kc), mla_heads, &j);
	for (int h = 0; h < H; h++) /* v = W_vb_h ctx_h */
		coli_mat_vec_range(m->kc, &L->kv_b, (int64_t)h * (nope + vd) + nope, vd, w->ctx + (int64_t)h * lw,
			      out + (int64_t)h * vd);
}

/* Token i's positions: every one up to pos in place in the cache, or (DSA) the nsel selected
 * ones gathered into GL, GR; *lat, *rk and the count returned. */
static int mla_rows(const coli_engine *m, const coli_kv *kv, int l, int i, int pos, const float **lat,
		    const float **rk)
{
	fwd_ws *w = m->ws;
	const coli_model *c = m->cfg;
	int lw = c->kv_lora_rank, rd = c->qk_rope_head_dim, n = c->index_topk ? w->nsel[i] : -1;
	if (n < 0 || n >= pos + 1) {
		*lat = kv->k[l], *rk = kv->v[l];
		return pos + 1;
	}
	const int32_t *sel = w->sel + (int64_t)i * c->index_topk;
	for (int j = 0; j < n; j++) {
		memcpy(w->GL + (int64_t)j * lw, kv->k[l] + (int64_t)sel[j] * lw, (size_t)lw * sizeof(float));
		memcpy(w->GR + (int64_t)j * rd, kv->v[l] + (int64_t)sel[j] * rd, (size_t)rd * sizeof(float));
	}
	*lat = w->GL, *rk = w->GR;
	return n;
}

int attn_mla(const coli_engine *m, int l, coli_kv *kv, const float *X, int n, float *out, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[l];
	int qk = c->qk_nope_head_dim + c->qk_rope_head_dim, vd = c->v_head_dim;
	fwd_ws *w = m->ws;
	(void)e;
	mla_project(m, L, kv, l, X, n, w);
	if (c->index_topk) {
		coli_tracer_mark(m->tr, COLI_SPAN_ATTENTION, l);
		dsa_index(m, L, kv, l, X, w->QA, n);
		coli_tracer_mark(m->tr, COLI_SPAN_INDEXER, l);
	}
	for (int i = 0; i < n; i++) {
		const float *lat, *rk;
		int rows = mla_rows(m, kv, l, i, kv->n + i, &lat, &rk);
		rope_apply(m->rope, w->Q + (int64_t)i * c->n_heads * qk + c->qk_nope_head_dim, c->n_heads, qk, kv->n + i);
		mla_token(m, L, kv, w->Q + (int64_t)i * c->n_heads * qk, lat, rk, rows, w->A + (int64_t)i * c->n_heads * vd);
	}
	coli_mat_mul(m->kc, &L->o, w->A, n, out);
	add_bias(out, L->o_bias, n, c->hidden_size);
	return 0;
}
