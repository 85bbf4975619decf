/* q8.c: the 8-bit activation type: every variant's preparation of x, and the reference product
 * (q8.h gives both exactly). */
#include "kernels/q8.h"

#include <emmintrin.h>
#include <math.h>

/* Group g of x (n <= 64 columns of it) quantized: its q in column order, its scale. SSE2 (every
 * x86-64): the maximum is exact in any order, and each q[c] is computed alone, as written. */
static float quant_group(const float *x, int n, int8_t *q)
{
	float v[64], m[4];
	memcpy(v, x, (size_t)n * sizeof(float));
	memset(v + n, 0, (size_t)(64 - n) * sizeof(float));
	__m128 amax = _mm_setzero_ps(), nan = _mm_setzero_ps(), abs = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
	for (int c = 0; c < 64; c += 4) {
		__m128 a = _mm_and_ps(_mm_loadu_ps(v + c), abs);
		nan = _mm_or_ps(nan, _mm_cmpunord_ps(a, a));
		amax = _mm_max_ps(amax, a);
	}
	_mm_storeu_ps(m, amax);
	float d = m[0] > m[1] ? m[0] : m[1], e = m[2] > m[3] ? m[2] : m[3];
	d = d > e ? d : e;
	if (_mm_movemask_ps(nan))
		d = NAN;
	if (!isfinite(d) || d == 0) {
		memset(q, 0, 64);
		return d;
	}
	/* x / amax: finite for any finite amax (127 / amax may not be); |u| <= 127, so the truncation
	 * is exact and u - t too: roundf(u) = t, +-1 where that difference reaches a half */
	const __m128 den = _mm_set1_ps(d), k = _mm_set1_ps(127.0f), one = _mm_set1_ps(1.0f), half = _mm_set1_ps(0.5f);
	for (int c = 0; c < 64; c += 16) {
		__m128i w[4];
		for (int i = 0; i < 4; i++) {
			__m128 u = _mm_mul_ps(_mm_div_ps(_mm_loadu_ps(v + c + 4 * i), den), k);
			__m128 t = _mm_cvtepi32_ps(_mm_cvttps_epi32(u)), f = _mm_sub_ps(u, t);
			t = _mm_add_ps(t, _mm_and_ps(_mm_cmpge_ps(f, half), one));
			t = _mm_sub_ps(t, _mm_and_ps(_mm_cmple_ps(f, _mm_sub_ps(_mm_setzero_ps(), half)), one));
			w[i] = _mm_cvttps_epi32(_mm_max_ps(_mm_min_ps(t, k), _mm_sub_ps(_mm_setzero_ps(), k)));
		}
		__m128i b = _mm_packs_epi16(_mm_packs_epi32(w[0], w[1]), _mm_packs_epi32(w[2], w[3]));
		_mm_storeu_si128((__m128i *)(void *)(q + c), b);
	}
	return d / 127.0f;
}

void kern_q8_prep(int64_t cols, const float *x, void *out)
{
	const int64_t G2 = kern_q8_groups(cols);
	int8_t *qs = out, q[64];
	int32_t *bias = (int32_t *)(void *)((uint8_t *)out + 64 * G2);
	float *dx = (float *)(void *)((uint8_t *)out + 96 * G2);
	for (int64_t g = 0; g < G2; g++) {
		int64_t n = cols - 64 * g;
		float d = quant_group(x + (n > 0 ? 64 * g : 0), n < 0 ? 0 : n > 64 ? 64 : (int)n, q);
		memcpy(qs + kern_q8_at(g, 0), q, 32); /* columns 0-31 and 32-63: each a run of 32 bytes */
		memcpy(qs + kern_q8_at(g, 32), q + 32, 32);
		for (int j = 0; j < 8; j++) {
			int32_t s = 0;
			for (int i = 0; i < 4; i++)
				s += q[4 * j + i] + q[32 + 4 * j + i];
			bias[8 * g + j] = 8 * s;
			dx[8 * g + j] = d;
		}
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
	const int64_t G = kern_blocks(W), G2 = kern_q8_groups(W->cols);
	const uint8_t *codes = W->codes + r * W->row_bytes;
	const int8_t *qs = kern_q8_qs(xp);
	const float *dx = kern_q8_dx(xp, G2);
	float acc[2][8] = {{0}}, s8[8], s4[4], s2[2];
	for (int64_t g = 0; g < G2; g++) {
		const float sw = g < G ? kern_scale(W, r, g) : 0.0f;
		for (int j = 0; j < 8; j++) {
			int32_t p = 0;
			for (int i = 0; i < 8; i++) {
				int c = (i < 4 ? 4 * j : 28 + 4 * j) + i;
				p += g < G ? weight(W->enc, codes, g, c) * qs[kern_q8_at(g, c)] : 0;
			}
			acc[g % 2][j] = fmaf((float)p, sw * dx[8 * g + j], acc[g % 2][j]);
		}
	}
	for (int j = 0; j < 8; j++)
		s8[j] = acc[0][j] + acc[1][j];
	for (int i = 0; i < 4; i++)
		s4[i] = s8[i] + s8[i + 4];
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

const kern_q8_ops kern_q8_scalar = {"scalar", rows};
