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

#endif
