/* impl.h: what kernels.c needs from each ISA variant (scalar, AVX2, AVX-512, AMX); internal.
 *
 * A variant computes products over a range of rows (or, for the transposed product, of
 * columns); kernels.c splits those ranges over the thread pool. Every output element is
 * computed by one call in an order that depends only on the matrix and the variant, never on
 * the range it was part of, so any split gives the same bits.
 *
 * Prepared activations carry their type (ggml's vec_dot_type): xtype(W) is what the variant
 * wants x turned into for W; kernels.c calls prep once per token into a buffer of prep_bytes(W)
 * per token and passes it typed (kern_x). NULL means "not prepared" (no preparation wanted, or the
 * buffer could not be allocated) and the variant must still compute the same product.
 */
#ifndef COLI_KERNELS_IMPL_H
#define COLI_KERNELS_IMPL_H

#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "kernels/enc.h"

typedef enum kern_xtype {
	KX_F32,     /* x as given: float32 in column order (nothing prepared) */
	KX_F32_NIB, /* float32 in the order a 4-bit row's nibbles unpack to in the variant (body.h) */
	KX_Q8,      /* 8-bit blocks with float32 scales, the precision q8 (kernels/q8.h); the same bytes
		     * for every variant, so every variant's q8 product is the reference's, bit for bit */
	KX_BF16X3,  /* many tokens, each float32 the sum of three bfloat16 parts, in AMX's tiles
		     * (body_amx.h): the amx variant's GEMM */
	KX_Q8T,     /* many tokens of KX_Q8's bytes placed for AMX's int8 tiles (body_amx.h) */
} kern_xtype;

/* Prepared activations of one or more tokens. */
typedef struct kern_x {
	kern_xtype type;
	int64_t stride; /* bytes from one token's to the next */
	const void *data;
} kern_x;

/* The q8 products of a variant (kernels/q8.h): y[t * ys + r - r0] = W[r] . x_t for n tokens of
 * KX_Q8 activations (xp->stride bytes apart), r in [r0, r1). */
typedef struct kern_q8_ops {
	const char *name; /* "scalar", "avx2", "avx512", "avx512vnni", "amx" */
	void (*rows)(const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys, int64_t r0, int64_t r1);
	/* Q8_TILES_N tokens or more (NULL: none): bytes of KX_Q8T activations per 16 tokens of cols
	 * columns, and their preparation, tokens [16 b, 16 e) of X's n (kernels.c splits the blocks
	 * over the pool; tokens past n are zero); rows then takes xp of that type. */
	int64_t (*tiles_bytes)(int64_t cols);
	void (*tiles_prep)(int64_t cols, const float *X, int n, int64_t b, int64_t e, void *xp);
} kern_q8_ops;

#define Q8_TILES_N 9 /* tokens from which kernels.c prepares KX_Q8T where a variant takes it (Xeon, q4
		       * 768x2048: at 12 and 16 tokens 1.7-1.8x the VNNI kernels, at 8 even) */

/* amx's q8 product over KX_Q8T without its GEMM's scratch (kern_q8_ops.rows' arguments): what
 * it runs when that memory cannot be had. */
void kern_amx_q8_slow(const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys, int64_t r0, int64_t r1);

typedef struct kern_ops {
	const char *name;
	const kern_q8_ops *q8; /* its q8 products (kernels.c takes avx512vnni's where the CPU has VNNI) */
	kern_xtype (*xtype)(const coli_mat *W);
	int64_t (*prep_bytes)(const coli_mat *W); /* per token; 0 for KX_F32 */
	void (*prep)(const coli_mat *W, const float *x, void *xp);
	/* y[r - r0] = W[r] . x for r in [r0, r1); xp: x prepared, or NULL. */
	void (*vec)(const coli_mat *W, const float *x, const kern_x *xp, float *y, int64_t r0, int64_t r1);
	/* Y[t][r] = W[r] . X[t] for t < n, r in [r0, r1), Y being [n][W->rows]; XP: the n tokens
	 * prepared, or NULL. */
	void (*mul)(const coli_mat *W, const float *X, const kern_x *XP, int n, float *Y, int64_t r0,
		    int64_t r1);
	/* y[c] += sum over r in [r0, r0 + nr) of a[r - r0] * W[r][c], for c in [c0, c1). */
	void (*vec_t)(const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y, int64_t c0,
		      int64_t c1);
	/* out[c] = W[r][c], exactly. */
	void (*row)(const coli_mat *W, int64_t r, float *out);
	int small_n; /* mul prepares x (and the variant uses its matvec path) up to this n */
	/* More than small_n tokens: bytes of W's prepared activations per 16 tokens (0: the GEMM takes
	 * X as given), and their preparation, tokens [16 b, 16 e) of X's n into xp (kernels.c splits
	 * the blocks over the pool; a block's tokens past n are zero). NULL: no variant GEMM type. */
	int64_t (*gemm_bytes)(const coli_mat *W);
	void (*gemm_prep)(const coli_mat *W, const float *X, int n, int64_t b, int64_t e, void *xp);
} kern_ops;

extern const kern_ops kern_scalar, kern_avx2, kern_avx512, kern_amx;
extern const kern_q8_ops kern_q8_scalar, kern_q8_avx2, kern_q8_avx512, kern_q8_avx512vnni, kern_q8_amx;

#endif
