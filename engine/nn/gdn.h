/* gdn.h: the Gated DeltaNet block ("linear_attention" layers of qwen3_5_moe), as transformers'
 * Qwen3_5MoeGatedDeltaNet computes it (internal). */
#ifndef COLI_GDN_H
#define COLI_GDN_H

#include "engine.h"

/* out[n][hidden] = the block over the n normed rows X[n][hidden] at positions kv->n ..: q, k, v
 * through the causal conv (its last kernel - 1 inputs are the layer's conv state) and SiLU, q
 * and k L2-normalised, beta = sigmoid(b), decay g = -exp(A_log) softplus(a + dt_bias), the delta
 * rule on the layer's recurrent state one token at a time, the gated RMSNorm with SiLU(z), and
 * out_proj. Both states move forward n tokens. */
int attn_gdn(const coli_engine *m, int l, coli_kv *kv, const float *X, int n, float *out, coli_err *e);

/* One value head's delta-rule step (what decode does per head): S[dk][dv] decayed by exp(g),
 * then S += k (beta (v - S^T k))^T, o = S^T q. */
void gdn_step(float *S, const float *q, const float *k, const float *v, float g, float beta, int dk, int dv, float *o);

/* coli_kv_rollback: layer l's fixed state (restored to the kept call's start) moved forward by
 * the first `steps` kept tokens, from their kept rows. */
void gdn_replay(const coli_engine *m, coli_kv *kv, int l, int steps);

#endif
