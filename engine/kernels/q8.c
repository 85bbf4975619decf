/* q8.c: the 8-bit activation type: every variant's preparation of x, and the reference product
 * (q8.h gives both exactly). */
#include "kernels/q8.h"

#include <math.h>

/* Group g of x (n <= 64 columns of it) quantized: its q in column order, its scale. Written so
 * that the compiler vectorizes it: 64 columns always (zero past n), the conversion rounding
 * without a call or a branch. */
static inline __attribute__((always_inline)) float quant_group(const float *x, int n, int8_t *q)
{
	float xs[64] = {0}, amax, v[64];
	uint32_t top = 0;
	memcpy(xs, x, (size_t)n * sizeof(float));
	for (int c = 0; c < 64; c++) { /* max |x| as bits: their order is the values' (a NaN's: above inf) */
		uint32_t b;
		memcpy(&b, xs + c, 4);
		b &= 0x7FFFFFFFu;
		top = b > top ? b : top;
	}
	memcpy(&amax, &top, 4);
	if (top > 0x7F800000u)
		amax = NAN;
	if (!isfinite(amax) || amax == 0) {
		memset(q, 0, 64);
		return amax;
	}
	for (int c = 0; c < 64; c++) /* x / amax: finite for any finite amax (127 / amax may not be) */
		v[c] = xs[c] / amax * 127.0f;
	for (int c = 0; c < 64; c++) { /* roundf(v): away from zero from a half */
		int32_t i = (int32_t)v[c];
		float f = v[c] - (float)i; /* exact: the fraction of v */
		i += (f >= 0.5f) - (f <= -0.5f);
		q[c] = (int8_t)(i > 127 ? 127 : i < -127 ? -127 : i);
	}
	return amax / 127.0f;
}

/* Built twice on x86-64: with AVX2 too (where the CPU has it), 8 lanes at a time: the same
 * operations on each element, so the same bytes. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
float kern_q8_group(const float *x, int n, int8_t *q)
{
	return quant_group(x, n, q);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
void kern_q8_prep(int64_t cols, const float *x, void *out)
{
	const int64_t G2 = kern_q8_groups(cols), G16 = kern_q8_groups16(cols);
	int8_t *qs = out, q[64];
	int32_t *sq = (int32_t *)kern_q8_sq(out, cols); /* q8.h's layout, written here */
	float *dx = (float *)kern_q8_dx(out, cols);
	for (int64_t g = 0; g < G16; g++) {
		int64_t n = cols - 64 * g;
		float d = quant_group(x + (n > 0 ? 64 * g : 0), n < 0 ? 0 : n > 64 ? 64 : (int)n, q);
		int32_t s = 0;
		for (int c = 0; c < 64; c++)
			s += q[c];
		if (g < G2) {
			memcpy(qs + kern_q8_at(g, 0), q, 32);
			memcpy(qs + kern_q8_at(g, 32), q + 32, 32);
		}
		sq[g] = s;
		dx[g] = d;
	}
}

/* The integer value of column c (0..63) of group g of a row of codes. */
static int weight(coli_enc enc, const uint8_t *codes, int64_t g, int c)
{
	if (enc == COLI_ENC_Q8)
		return (int8_t)codes[64 * g + c];
	uint8_t b = codes[32 * g + (c & 31)];
	return ((c & 32) ? b >> 4 : b & 15) - 8;
}

/* W[r] . x of one prepared token (q8.h's order, written out). */
static float row_dot(const coli_mat *W, int64_t r, const uint8_t *xp)
{
	const int64_t G = kern_blocks(W);
	const uint8_t *codes = W->codes + r * W->row_bytes;
	const int8_t *qs = kern_q8_qs(xp);
	const float *dx = kern_q8_dx(xp, W->cols);
	float acc[8] = {0}, s4[4], s2[2];
	for (int64_t g = 0; g < G; g++) {
		int32_t p = 0;
		for (int c = 0; c < 64; c++)
			p += weight(W->enc, codes, g, c) * qs[kern_q8_at(g, c)];
		acc[g % 8] = fmaf((float)p, kern_scale(W, r, g) * dx[g], acc[g % 8]);
	}
	for (int i = 0; i < 4; i++)
		s4[i] = acc[i] + acc[i + 4];
	for (int i = 0; i < 2; i++)
		s2[i] = s4[i] + s4[i + 2];
	return s2[0] + s2[1];
}

static void rows(const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys, int64_t r0, int64_t r1)
{
	for (int t = 0; t < n; t++)
		for (int64_t r = r0; r < r1; r++)
			y[t * ys + r - r0] = row_dot(W, r, (const uint8_t *)xp->data + t * xp->stride);
}

const kern_q8_ops kern_q8_scalar = {.name = "scalar", .rows = rows};
