/* gdn.h: the Gated DeltaNet block ("linear_attention" layers of qwen3_5_moe), as transformers'
 * Qwen3_5MoeGatedDeltaNet computes it (internal).
 *
 * A layer's recurrent state is, per value head, the delta rule's S [k_head_dim][v_head_dim]
 * stored transposed: S^T [v_head_dim][k_head_dim], row j holding S's column j (the weights of
 * value dimension j over the key dimensions), so that a decode step is one pass over the state. */
#ifndef COLI_GDN_H
#define COLI_GDN_H

#include "engine.h"

/* Tokens per chunk of the chunked form (transformers' chunk_size is 64: 32 does fewer
 * multiply-adds within a chunk, and ran fastest of 16, 32 and 64 on Zen 5 in the AVX-512, AVX2
 * and baseline clones). */
#define GDN_CHUNK 32

/* out[n][hidden] = the block over the n normed rows X[n][hidden] at positions kv->n ..: q, k, v
 * through the causal conv (its last kernel - 1 inputs are the layer's conv state) and SiLU, q
 * and k L2-normalised, beta = sigmoid(b), decay g = -exp(A_log) softplus(a + dt_bias), the delta
 * rule on the layer's recurrent state (up to COLI_EXACT_N tokens one at a time, decode's bits;
 * more in chunks of GDN_CHUNK), the gated RMSNorm with SiLU(z), and out_proj. Both states move
 * forward n tokens. */
int attn_gdn(const coli_engine *m, int l, coli_kv *kv, const float *X, int n, float *out, coli_err *e);

/* One value head's delta-rule step (what decode does per head), on St = S^T [dv][dk], in one
 * pass over it: per row j, row *= exp(g); delta = beta (v[j] - row . k); row += delta k;
 * o[j] = row . q. */
void gdn_step(float *St, const float *q, const float *k, const float *v, float g, float beta, int dk, int dv, float *o);

/* One value head over n tokens: token t's q, k at + t x stride (dk floats), v at + t x stride
 * (dv floats), its decay g and beta at + t x gstride, its output at o + t x ostride. */
typedef struct gdn_seq {
	const float *q, *k, *v, *g, *beta;
	float *o;
	int64_t stride, gstride, ostride;
	int dk, dv;
} gdn_seq;

/* The n tokens of s through gdn_step one by one. */
void gdn_recurrent(float *St, const gdn_seq *s, int n);

/* The n tokens of s in chunks of GDN_CHUNK (transformers' torch_chunk_gated_delta_rule: the
 * same state and outputs up to float32 rounding); scratch: gdn_chunk_floats(dk, dv) floats. */
void gdn_chunked(float *St, const gdn_seq *s, int n, float *scratch);
size_t gdn_chunk_floats(int dk, int dv);

/* coli_kv_rollback: layer l's fixed state (restored to the kept call's start) moved forward by
 * the first `steps` kept tokens, from their kept rows. */
void gdn_replay(const coli_engine *m, coli_kv *kv, int l, int steps);

#endif
