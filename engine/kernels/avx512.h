/* avx512.h: AVX-512 decoding of 16 weights at a time, shared by the AVX-512 files.
 *
 * k512_d16 gives W'[k .. k+16) of one row exactly as the encoding defines it (zero in lanes
 * outside the mask). Each row's scales are found once (k512_row_scales), then one scale group
 * at a time (k512_scale). fp8 codes decode through binary16: the e4m3 bits shifted into an f16
 * (sign kept, exponent and mantissa moved up by 7) are the value / 256, subnormals included,
 * so the scale handed to k512_d16 is scale_inv * 256 and the product is fl(value * scale_inv).
 */
#ifndef COLI_KERNELS_AVX512_H
#define COLI_KERNELS_AVX512_H

#include <immintrin.h>
#include <math.h>

#include "kernels/impl.h"

#define K512_TARGET "avx512f,avx512bw,avx512vl,fma,f16c"
#define K512 __attribute__((target(K512_TARGET)))
#define K512_INLINE static inline __attribute__((always_inline, target(K512_TARGET)))

/* The GEMM path (avx512_gemm.c): Y[t][r] for r in [r0, r1), any n. */
void k512_gemm(const coli_mat *W, const float *X, int n, float *Y, int64_t r0, int64_t r1);

/* Mask of the first n lanes (n <= 0: none, n >= 16: all). */
K512_INLINE __mmask16 k512_first(int64_t n)
{
	return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* Whether the SIMD paths that decode 16 columns under one scale apply (fp8 blocks of a
 * width that is not a multiple of 16 go to the scalar kernels). */
static inline int k512_slices_ok(const coli_mat *W)
{
	return W->enc != COLI_ENC_FP8 || W->block[1] % 16 == 0;
}

/* Row r's scales: fp16 [groups] for q4/q8, the f32 scale_inv row of its block for fp8. */
static inline const uint8_t *k512_row_scales(const coli_mat *W, int64_t r)
{
	if (W->enc == COLI_ENC_Q4 || W->enc == COLI_ENC_Q8)
		return W->scales + 2 * r * kern_groups(W);
	if (W->enc == COLI_ENC_FP8)
		return W->scales + 4 * (r / W->block[0]) * ((W->cols + W->block[1] - 1) / W->block[1]);
	return NULL;
}

/* The multiplier k512_d16 wants for scale group b of a row whose scales are sr. */
K512_INLINE __m512 k512_scale(coli_enc enc, const uint8_t *sr, int64_t b)
{
	if (enc == COLI_ENC_Q4 || enc == COLI_ENC_Q8) {
		uint16_t h;
		memcpy(&h, sr + 2 * b, 2);
		return _mm512_set1_ps(_cvtsh_ss(h));
	}
	if (enc == COLI_ENC_FP8) {
		float s;
		memcpy(&s, sr + 4 * b, 4);
		return _mm512_set1_ps(s * 256.0f);
	}
	return _mm512_set1_ps(1.0f);
}

/* fp8 W' of the 16 codes at c, none of them NaN (see k512_fp8_clean). */
K512_INLINE __m512 k512_fp8_16(const uint8_t *c, __m512 s)
{
	__m256i h = _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const void *)c)), 7);
	return _mm512_mul_ps(_mm512_cvtph_ps(_mm256_and_si256(h, _mm256_set1_epi16((short)0xBFFF))), s);
}

/* Whether none of the 64 fp8 codes at c is NaN (0x7F, 0xFF): one test for four k512_fp8_16. */
K512_INLINE int k512_fp8_clean(const uint8_t *c)
{
	__m512i b = _mm512_and_si512(_mm512_loadu_si512(c), _mm512_set1_epi8(0x7F));
	return _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8(0x7F)) == 0;
}

/* W'[k .. k+16) of the row whose codes start at c; lanes outside m are zero. k is a multiple
 * of 16 for q4 (so the 16 columns lie in one half of a group); s from k512_scale. */
K512_INLINE __m512 k512_d16(coli_enc enc, const uint8_t *c, int64_t k, __mmask16 m, __m512 s)
{
	switch (enc) {
	case COLI_ENC_F32:
		return _mm512_maskz_loadu_ps(m, c + 4 * k);
	case COLI_ENC_BF16: {
		__m512i u = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, c + 2 * k));
		return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
	}
	case COLI_ENC_F16:
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, c + 2 * k));
	case COLI_ENC_FP8: {
		__m128i b = _mm_maskz_loadu_epi8(m, c + k);
		__m256i h = _mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7);
		__m512 w = _mm512_cvtph_ps(_mm256_and_si256(h, _mm256_set1_epi16((short)0xBFFF)));
		__mmask16 nan = _mm_cmpeq_epi8_mask(_mm_and_si128(b, _mm_set1_epi8(0x7F)),
						    _mm_set1_epi8(0x7F));
		if (nan)
			w = _mm512_mask_mov_ps(w, nan, _mm512_set1_ps(NAN));
		return _mm512_mul_ps(w, s);
	}
	case COLI_ENC_Q8: {
		__m512i q = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, c + k));
		return _mm512_mul_ps(_mm512_cvtepi32_ps(q), s);
	}
	case COLI_ENC_Q4: {
		/* vpermps reads bits 0..3 of each lane as an index into -8..7; masked-out lanes
		 * would decode as -8, hence the masked multiply. */
		const __m512 tbl = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
		__m512i d = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, c + (k / 64) * 32 + (k & 31)));
		if (k & 32)
			d = _mm512_srli_epi32(d, 4);
		return _mm512_maskz_mul_ps(m, _mm512_permutexvar_ps(d, tbl), s);
	}
	default:
		return _mm512_setzero_ps();
	}
}

#endif
