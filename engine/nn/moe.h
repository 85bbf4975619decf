/* moe.h: the MLP blocks: routers (softmax top-k with or without renormalisation, Mixtral's
 * softmax over the top-k, sigmoid + correction bias with group-limited top-k and routed
 * scaling), SwiGLU experts through the expert store (each expert chosen by several tokens of a
 * batch read and multiplied once), shared experts, and the dense MLP. */
#ifndef COLI_MOE_H
#define COLI_MOE_H

#include "engine.h"
#include "nn/rope.h"
#include "nn/weights.h"

/* Indices of the k largest v[0..n) (ties: lower index first), largest first. */
void top_k(const float *v, int n, int k, int32_t *idx);

/* Sorts (id, weight) pairs by weight descending, ties by lower id. */
void sort_pairs(int32_t *ids, float *w, int k);

/* Experts and weights for one token from its router logits [n_experts]; ids sorted by weight
 * descending, ties by lower id. scratch: 2 x n_experts + n_group floats; gsel: n_group. */
void route(const coli_model *c, const float *corr_bias, const float *logits, int32_t *ids, float *w,
	   float *scratch, int32_t *gsel);

/* out[n][hidden] = MLP of layer l on the normed rows X[n][hidden] of positions pos..pos+n-1; MoE
 * layers log their routing into ids/wts ([n][top_k], may be NULL). */
int mlp_block(const coli_engine *m, int l, int pos, const float *X, int n, float *out, int32_t *ids, float *wts,
	      coli_err *e);

/* out[n][hidden] = the routed experts the batch chose (m->ws->ids, m->ws->W: [n][top_k], filled
 * by the caller's router) and the shared experts of layer l on the normed rows X[n][hidden]:
 * each chosen expert read once and multiplied over its tokens (one token: its experts' reads
 * overlapped), summed in ascending expert id, then the shared expert's; SwiGLU clamped at the
 * config's swiglu_limit when > 0 (deepseek_v4). Then the choice copied out to ids and wts
 * ([n][top_k], each NULL: not wanted). */
int moe_apply(const coli_engine *m, int l, const float *X, int n, float *out, int32_t *ids, float *wts, coli_err *e);

/* Reads ahead, for layer l, the experts moe_apply will get first for the batch's choice
 * (m->ws->ids, [n][top_k]): the first top_k of their union, ascending (all of a token's). */
void moe_read_ahead(const coli_engine *m, int l, int n);

/* Expert x of layer l from the store, traced: in RAM a pin outcome; streamed, the get's wait as
 * the trace's I/O wait (the time before it as expert compute). Release with coli_store_release. */
const coli_expert *moe_get(const coli_engine *m, int l, int x, coli_err *e);

/* Decode: predicts the experts MoE layer l will choose from x, the residual before its MLP is
 * added (layer l-1's post-attention state), by layer l's own norm, router and route(), and
 * hands them to coli_store_predict (reads queued behind every demanded one). Does nothing unless the
 * store predicts; never changes what is computed. */
void moe_predict(const coli_engine *m, int l, const float *x);

#endif
