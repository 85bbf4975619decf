/* impl.h: what kernels.c needs from each ISA variant (scalar, AVX2, AVX-512); internal.
 *
 * A variant computes products over a range of rows (or, for the transposed product, of
 * columns); kernels.c splits those ranges over the thread pool. Every output element is
 * computed by one call in an order that depends only on the matrix and the variant, never on
 * the range it was part of, so any split gives the same bits.
 *
 * Prepared activations: a variant may want x rearranged (q4 SIMD kernels read x in the order
 * the packed nibbles unpack to). prep_floats(W) is the floats it needs per token (0: none);
 * kernels.c calls prep once per token and passes the result; NULL means "not prepared" (the
 * buffer could not be allocated) and the variant must still compute the same product.
 */
#ifndef COLI_KERNELS_IMPL_H
#define COLI_KERNELS_IMPL_H

#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"

typedef struct kern_ops {
	const char *name;
	int64_t (*prep_floats)(const coli_mat *W);
	void (*prep)(const coli_mat *W, const float *x, float *xp);
	/* y[r - r0] = W[r] . x for r in [r0, r1). */
	void (*vec)(const coli_mat *W, const float *x, const float *xp, float *y, int64_t r0, int64_t r1);
	/* Y[t][r] = W[r] . X[t] for t < n, r in [r0, r1), Y being [n][W->rows]; XP: n prepared
	 * tokens or NULL. */
	void (*mul)(const coli_mat *W, const float *X, const float *XP, int n, float *Y, int64_t r0,
		    int64_t r1);
	/* y[c] += sum over r in [r0, r0 + nr) of a[r - r0] * W[r][c], for c in [c0, c1). */
	void (*vec_t)(const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y, int64_t c0,
		      int64_t c1);
	/* out[c] = W[r][c], exactly. */
	void (*row)(const coli_mat *W, int64_t r, float *out);
	int small_n; /* mul prepares x (and the variant uses its matvec path) up to this n */
} kern_ops;

extern const kern_ops kern_scalar, kern_avx2, kern_avx512;

/* Scale groups: columns sharing one scale (64 for q4/q8, block[1] for fp8, else the row). */
static inline int64_t kern_scale_width(const coli_mat *W)
{
	if (W->enc == COLI_ENC_Q4 || W->enc == COLI_ENC_Q8)
		return COLI_GS;
	return W->enc == COLI_ENC_FP8 ? W->block[1] : W->cols;
}

static inline int64_t kern_groups(const coli_mat *W)
{
	return (W->cols + COLI_GS - 1) / COLI_GS;
}

/* The scale of row r, scale group b: fp16 for q4/q8, fp8's scale_inv, else 1. Scales need
 * not be aligned in a mapped file, hence memcpy. */
static inline float kern_scale(const coli_mat *W, int64_t r, int64_t b)
{
	if (W->enc == COLI_ENC_Q4 || W->enc == COLI_ENC_Q8) {
		uint16_t h;
		memcpy(&h, W->scales + 2 * (r * kern_groups(W) + b), 2);
		return coli_f16_to_f32(h);
	}
	if (W->enc == COLI_ENC_FP8) {
		int64_t nb1 = (W->cols + W->block[1] - 1) / W->block[1];
		float s;
		memcpy(&s, W->scales + 4 * ((r / W->block[0]) * nb1 + b), 4);
		return s;
	}
	return 1.0f;
}

#endif
