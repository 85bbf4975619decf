/* attention.h: the two attention blocks: GQA/MHA (optional q/k norm, biases, partial RoPE) and
 * MLA (DeepSeek's compressed KV cache, absorbed form: see docs/coli-run.md). */
#ifndef COLI_ATTENTION_H
#define COLI_ATTENTION_H

#include "engine.h"
#include "nn/rope.h"
#include "nn/weights.h"

/* out[n][hidden] = attention of the n normed rows X[n][hidden] at positions kv->n .. +n-1 of
 * layer l; appends their keys/values to the cache (kv->n itself is advanced by the caller). */
int attn_gqa(const coli_engine *m, int l, coli_kv *kv, const float *X, int n, float *out, coli_err *e);
int attn_mla(const coli_engine *m, int l, coli_kv *kv, const float *X, int n, float *out, coli_err *e);

/* GQA decode shares its (token, head) pairs over the kernels' threads from this much work
 * (pairs x positions x head_dim) on; below it one thread does them (waking others costs more). */
#define COLI_ATTN_THREAD_WORK (1 << 22)

/* fn over items [0, n): on the calling thread below COLI_ATTN_THREAD_WORK of work (multiply-adds),
 * else shared over the kernels' threads, a few pieces a thread. */
void attn_for(const coli_engine *m, int64_t work, int64_t n, void (*fn)(void *, int64_t, int64_t), void *arg);

/* Rows of scores attention keeps per thread (kv->att holds threads x this x cap floats): the
 * query heads that share a KV head (GQA's batches score them together); MLA: all its heads. */
int attn_score_rows(const coli_model *c);

/* One part of a query head's scores: the query q[dim] against the cached keys k + t x stride. */
typedef struct attn_part {
	const float *q, *k;
	int64_t stride;
	int dim;
} attn_part;

/* One query head against n cached positions: out[vd] = softmax((a + b) * scale) . v, the scores
 * a's products plus b's (b NULL: a's alone; MLA's latent and rotary parts), values v + t x
 * v_stride, att[n] the scores. Decode's inner loop, and what `coli-plan probe` times as the
 * attention core. */
void attn_head(const attn_part *a, const attn_part *b, const float *v, int64_t v_stride, int vd, int n, float scale,
	       float *att, float *out);

#endif
