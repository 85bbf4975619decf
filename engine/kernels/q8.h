/* q8.h: the 8-bit activation type (KX_Q8, the precision q8) and its products; internal.
 *
 * Which encodings: KERN_Q8_ENCS, integer codes in groups of 64 with a binary16 scale per row and
 * group (q8: int8; q4: quant.h's nibbles, value = code - 8). Every other encoding (f32, bf16, f16,
 * fp8, and 4-bit tables that are not integers) keeps float32 activations under q8.
 *
 * The activations of one token, prepared once per product (kern_q8_prep, the same bytes for every
 * variant), group by group (G groups of 64 columns, G2 = G rounded up to even, G16 = G2 rounded up
 * to a multiple of 16; a group past G is zero everywhere):
 *   amax = max |x[64g .. 64g+63]|  (columns past cols: 0)   d_g = amax / 127
 *   q[c] = clamp(roundf(x[c] * (127 / amax)), -127, 127)     (amax 0: q = 0, d = 0)
 * (a NaN or infinite amax gives d_g = amax and q = 0: the rows' products are NaN). Bytes, per token,
 * for pairs P of groups (2P, 2P+1), so that one 64-byte load holds what two groups' 4-bit codes
 * unpack to (low nibbles: columns 0-31 of each group, high nibbles: columns 32-63):
 *   qs[128 G2 / 2]  int8: pair P at 128 P: group 2P columns 0-31, group 2P+1 columns 0-31,
 *                   group 2P columns 32-63, group 2P+1 columns 32-63
 *   sq[G16]         int32: the sum of group g's q (what an offset in the weights' codes adds: q4's
 *                   codes are value + 8)
 *   dx[G16]         float: d_g
 * 64 G2 + 8 G16 bytes in all (kern_q8_bytes); each part starts 64-byte aligned.
 *
 * The product, exactly (every variant; kern_q8_scalar writes it out): sw_g the row's scale of
 * group g, p_g = the sum over its 64 columns of w[c] q[c] (an exact integer, |p| < 2^20, so any
 * split of it over lanes or steps gives the same p_g), then eight chains over the groups and a
 * fixed tree:
 *   acc[g mod 8] = fmaf((float)p_g, sw_g * d_g, acc[g mod 8])   for g = 0 .. G-1 in order
 *   s4[i] = acc[i] + acc[i+4]; s2[i] = s4[i] + s4[i+2]; y = s2[0] + s2[1]
 * (acc starts at +0 and is never -0, so a variant may add fmaf(0, 0, acc) for groups past G). The
 * matrix-vector bodies sum 8 groups' lanes into one vector of 8 p_g and take one float step per 8
 * groups; the GEMM (rows in the vector lanes) takes one float step per group and 16 integer
 * steps. The order depends on nothing but the matrix: any split of rows or tokens, any variant,
 * 1 or n tokens give the same bits.
 */
#ifndef COLI_KERNELS_Q8_H
#define COLI_KERNELS_Q8_H

#include "kernels/impl.h"

/* Encodings whose products take q8 activations, as X(ENUM_SUFFIX). */
#define KERN_Q8_ENCS(X) X(Q8) X(Q4)

/* 1 when products over enc take q8 activations. */
static inline int kern_q8_enc(coli_enc enc)
{
#define KERN_Q8_IS(E) enc == COLI_ENC_##E ||
	return KERN_Q8_ENCS(KERN_Q8_IS) 0;
#undef KERN_Q8_IS
}

/* Groups of 64 of a prepared token, rounded up to even (G2) and to a multiple of 16 (G16); bytes
 * per token. */
static inline int64_t kern_q8_groups(int64_t cols)
{
	return (cols + 127) / 128 * 2;
}

static inline int64_t kern_q8_groups16(int64_t cols)
{
	return (cols + 1023) / 1024 * 16;
}

static inline int64_t kern_q8_bytes(int64_t cols)
{
	return 64 * kern_q8_groups(cols) + 8 * kern_q8_groups16(cols);
}

/* A prepared token's parts. */
static inline const int8_t *kern_q8_qs(const uint8_t *xp)
{
	return (const int8_t *)xp;
}

static inline const int32_t *kern_q8_sq(const uint8_t *xp, int64_t cols)
{
	return (const int32_t *)(const void *)(xp + 64 * kern_q8_groups(cols));
}

static inline const float *kern_q8_dx(const uint8_t *xp, int64_t cols)
{
	return (const float *)(const void *)(xp + 64 * kern_q8_groups(cols) + 4 * kern_q8_groups16(cols));
}

/* The byte of qs holding column c (0..63) of group g. */
static inline int64_t kern_q8_at(int64_t g, int c)
{
	return 128 * (g / 2) + 64 * (c / 32) + 32 * (g % 2) + c % 32;
}

/* x[cols] prepared into out (kern_q8_bytes(cols) bytes, 64-byte aligned). */
void kern_q8_prep(int64_t cols, const float *x, void *out);

/* One group of kern_q8_prep: the n (<= 64) columns at x (zero past n) into q[64] in column order;
 * returns d_g. For variants that place the bytes otherwise (amx's tiles). */
float kern_q8_group(const float *x, int n, int8_t *q);

#endif
