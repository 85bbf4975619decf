/* rope.h: rotary position embeddings: default, linear and YaRN frequencies (as HF computes them,
 * in float32), applied to the first rotary_dim dims of a head, pairs (i, i+d/2) (rotate_half)
 * or (2i, 2i+1) (DeepSeek's interleaved layout; equivalent to HF's de-interleave + rotate_half
 * up to a permutation shared by q and k, which dot products do not see). */
#ifndef COLI_ROPE_H
#define COLI_ROPE_H

#include "error.h"
#include "model.h"

typedef struct rope {
	int dim;            /* rotary dims per head */
	int interleave;
	float *inv_freq;    /* [dim/2] */
	float attn_factor;  /* YaRN cos/sin scaling, else 1 */
} rope;

int rope_init(rope *r, const coli_model *m, coli_err *e);
/* The same for another RoPE of the model (deepseek_v4's compressed layers': m->rope_compress). */
int rope_init_with(rope *r, const coli_model *m, const coli_rope *p, coli_err *e);
void rope_release(rope *r);

/* Rotates x[h * stride .. h * stride + dim) of n_heads heads for position pos (the cos and sin
 * computed once for all of them). */
void rope_apply(const rope *r, float *x, int n_heads, int stride, int pos);

/* YaRN's attention-scale multiplier for MLA (mscale(factor, mscale_all_dim)^2), else 1. */
double rope_mla_scale(const coli_model *m);

#endif
