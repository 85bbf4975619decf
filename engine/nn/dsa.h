/* dsa.h: DeepSeek Sparse Attention's lightning indexer (glm_moe_dsa), as transformers'
 * GlmMoeDsaIndexer computes it (internal). */
#ifndef COLI_DSA_H
#define COLI_DSA_H

#include "engine.h"
#include "nn/weights.h"

/* On a "full" layer l: the batch's index keys k = RoPE(LayerNorm(wk x)) appended to kv->ix[l]
 * (rows kv->n ..), and for each token i (position p = kv->n + i) the positions its attention
 * looks at, in ws->sel[i] ascending, ws->nsel[i] of them: the index_topk best by
 *   score(s) = sum_h w_h relu(q_h . k_s / sqrt(index_hd)),  w = weights_proj(x) / sqrt(heads),
 *   q = RoPE(wq_b(qa)) over s <= p,
 * ties to the lower position; -1 (every position) when p + 1 <= index_topk or m->dsa_dense.
 * X: [n][hidden] the attention's input, QA: [n][q_lora] the normalised query latent. On a
 * "shared" layer nothing: ws->sel still holds the previous full layer's choice. */
void dsa_index(const coli_engine *m, const layer_w *L, coli_kv *kv, int l, const float *X, const float *QA, int n);

/* The index_topk best of scores[0..n) (ties to the lower index) written ascending to out; tmp
 * [n] is scratch. Returns how many (min(k, n)). */
int dsa_top(const float *scores, int n, int k, float *tmp, int32_t *out);

#endif
