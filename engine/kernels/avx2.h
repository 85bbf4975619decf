/* avx2.h: AVX2 decoding of 8 weights at a time, shared by the AVX2 files.
 *
 * k256_d8 gives W'[k .. k+8) of one row exactly as the encoding defines it, for whole slices
 * (k256_d8_part copies a partial slice of an unpadded row into a zeroed buffer first). q4:
 * (n - 8) * s as fma(n, s, -8s), exact since the result is representable. fp8 decodes through
 * binary16 as in avx512.h: the f16 is value / 256, so s is scale_inv * 256.
 */
#ifndef COLI_KERNELS_AVX2_H
#define COLI_KERNELS_AVX2_H

#include <immintrin.h>
#include <math.h>

#include "kernels/impl.h"

#define K256_TARGET "avx2,fma,f16c"
#define K256 __attribute__((target(K256_TARGET)))
#define K256_INLINE static inline __attribute__((always_inline, target(K256_TARGET)))

/* The GEMM path (avx2_gemm.c): Y[t][r] for r in [r0, r1), any n. */
void k256_gemm(const coli_mat *W, const float *X, int n, float *Y, int64_t r0, int64_t r1);

/* Bytes per column of the unpadded encodings (q4/q8 rows are padded to whole groups). */
static inline int64_t k256_bpc(coli_enc enc)
{
	return enc == COLI_ENC_F32 ? 4 : enc == COLI_ENC_BF16 || enc == COLI_ENC_F16 ? 2 : 1;
}

/* Whether 8-column slices never straddle a scale group (else: the scalar kernels). */
static inline int k256_slices_ok(const coli_mat *W)
{
	return W->enc != COLI_ENC_FP8 || W->block[1] % 8 == 0;
}

/* Row r's scales: fp16 [groups] for q4/q8, the f32 scale_inv row of its block for fp8. */
static inline const uint8_t *k256_row_scales(const coli_mat *W, int64_t r)
{
	if (W->enc == COLI_ENC_Q4 || W->enc == COLI_ENC_Q8)
		return W->scales + 2 * r * kern_groups(W);
	if (W->enc == COLI_ENC_FP8)
		return W->scales + 4 * (r / W->block[0]) * ((W->cols + W->block[1] - 1) / W->block[1]);
	return NULL;
}

/* The multiplier k256_d8 wants for scale group b of a row whose scales are sr. */
K256_INLINE __m256 k256_scale(coli_enc enc, const uint8_t *sr, int64_t b)
{
	if (enc == COLI_ENC_Q4 || enc == COLI_ENC_Q8) {
		uint16_t h;
		memcpy(&h, sr + 2 * b, 2);
		return _mm256_set1_ps(_cvtsh_ss(h));
	}
	if (enc == COLI_ENC_FP8) {
		float s;
		memcpy(&s, sr + 4 * b, 4);
		return _mm256_set1_ps(s * 256.0f);
	}
	return _mm256_set1_ps(1.0f);
}

/* NaN in the lanes whose fp8 code is 0x7F or 0xFF (rare: a slow path). */
K256_INLINE __m256 k256_fp8_nan(__m256 w, const uint8_t *c)
{
	float f[8];
	_mm256_storeu_ps(f, w);
	for (int i = 0; i < 8; i++)
		if ((c[i] & 0x7F) == 0x7F)
			f[i] = NAN;
	return _mm256_loadu_ps(f);
}

/* fp8 W' of the 8 codes at c, none of them NaN (see k256_fp8_clean). */
K256_INLINE __m256 k256_fp8_8(const uint8_t *c, __m256 s)
{
	__m128i h = _mm_slli_epi16(_mm_cvtepi8_epi16(_mm_loadl_epi64((const void *)c)), 7);
	return _mm256_mul_ps(_mm256_cvtph_ps(_mm_and_si128(h, _mm_set1_epi16((short)0xBFFF))), s);
}

/* Whether none of the 32 fp8 codes at c is NaN (0x7F, 0xFF): one test for four k256_fp8_8. */
K256_INLINE int k256_fp8_clean(const uint8_t *c)
{
	__m256i b = _mm256_and_si256(_mm256_loadu_si256((const void *)c), _mm256_set1_epi8(0x7F));
	return _mm256_movemask_epi8(_mm256_cmpeq_epi8(b, _mm256_set1_epi8(0x7F))) == 0;
}

/* q4 W'[k .. k+8) of the row whose codes start at c: (n - 8) * s as fma(n, s, m8), m8 = -8s. */
K256_INLINE __m256 k256_q4_8(const uint8_t *c, int64_t k, __m256 s, __m256 m8)
{
	__m256i d = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const void *)(c + (k / 64) * 32 + (k & 31))));
	if (k & 32)
		d = _mm256_srli_epi32(d, 4);
	return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(d, _mm256_set1_epi32(15))), s, m8);
}

/* W'[k .. k+8) of the row whose codes start at c (a whole slice); s from k256_scale. */
K256_INLINE __m256 k256_d8(coli_enc enc, const uint8_t *c, int64_t k, __m256 s)
{
	switch (enc) {
	case COLI_ENC_F32:
		return _mm256_loadu_ps((const float *)(const void *)(c + 4 * k));
	case COLI_ENC_BF16: {
		__m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const void *)(c + 2 * k)));
		return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
	}
	case COLI_ENC_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const void *)(c + 2 * k)));
	case COLI_ENC_FP8: {
		__m128i b = _mm_loadl_epi64((const void *)(c + k));
		__m128i h = _mm_slli_epi16(_mm_cvtepi8_epi16(b), 7);
		__m256 w = _mm256_cvtph_ps(_mm_and_si128(h, _mm_set1_epi16((short)0xBFFF)));
		__m128i nan = _mm_cmpeq_epi8(_mm_and_si128(b, _mm_set1_epi8(0x7F)), _mm_set1_epi8(0x7F));
		if (_mm_movemask_epi8(nan) & 0xFF)
			w = k256_fp8_nan(w, c + k);
		return _mm256_mul_ps(w, s);
	}
	case COLI_ENC_Q8: {
		__m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const void *)(c + k)));
		return _mm256_mul_ps(_mm256_cvtepi32_ps(q), s);
	}
	case COLI_ENC_Q4:
		return k256_q4_8(c, k, s, _mm256_mul_ps(s, _mm256_set1_ps(-8.0f)));
	default:
		return _mm256_setzero_ps();
	}
}

/* The first n (< 8) columns of the slice at k, the rest zero. q4/q8 rows are padded (with
 * zero codes) to whole groups, so their slice decodes in place; the lanes past n are zeroed. */
K256_INLINE __m256 k256_d8_part(coli_enc enc, const uint8_t *c, int64_t k, int64_t n, __m256 s)
{
	if (enc == COLI_ENC_Q4 || enc == COLI_ENC_Q8) {
		const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
		__m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane));
		return _mm256_and_ps(k256_d8(enc, c, k, s), keep);
	}
	uint8_t buf[32] = {0};
	memcpy(buf, c + k * k256_bpc(enc), (size_t)(n * k256_bpc(enc)));
	return k256_d8(enc, buf, 0, s);
}

/* Mask vector of the first n lanes, for maskload/maskstore. */
K256_INLINE __m256i k256_first(int64_t n)
{
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), lane);
}

#endif
