/* isa_avx2.h: the AVX2 (+FMA, F16C) mapping of the kernel bodies' vector operations; internal.
 *
 * Included first by avx2.c, then body.h: every function of that file is built for this ISA. An
 * ISA mapping gives (ggml's simd-mappings.h is the model):
 *   KV_N lanes of float32 (kv_f), their integer view (kv_i), a lane mask (kv_m) and its uses,
 *   and whether any of the first n lanes is not finite (kv_nonfinite);
 *   arithmetic, a horizontal sum (kv_reduce: its order is the variant's), an in-register
 *   transpose of KV_N vectors (the GEMM);
 *   conversions of KV_N codes: bf16, f16, e4m3 (value / 256, through binary16), int8, bytes;
 *   4-bit codes: the 8 nibbles of every dword (kv_nibbles), and KV_LUT16 when a 16-entry float
 *   lookup is one instruction (the bodies then take the table paths);
 *   KV_GEMM_MV x KV_GEMM_NR, the rows (in vectors) and tokens of the GEMM's micro-kernel (its
 *   accumulators; with its KV_GEMM_MV weights and a broadcast, at most the ISA's registers);
 *   the q8 products' kq_* operations (body_q8.h): a pair of groups' integer lanes against a token
 *   and 8 groups' sums (matrix-vector), the GEMM's panel of KQ_RL-row vectors, its 4-byte dot step,
 *   float step and KQ_GMV x KQ_GNR tile.
 * AVX2 has no 16-entry permute: 4-bit codes of an affine table become floats by arithmetic, those
 * of a sign-magnitude table (e2m1) by an 8-entry permute of the magnitude and the sign bit xored,
 * or, a chunk of FP4 pairs in the nibble order, by byte lookups of their bfloat16 (kv_pairs).
 */
#ifndef COLI_KERNELS_ISA_AVX2_H
#define COLI_KERNELS_ISA_AVX2_H

/* Everything after this in the file is built for the ISA (body.h ends clang's push). */
#define KV_TARGET "avx2,fma,f16c" /* also spelled out in the GCC pragma below (it expands no macros) */
#ifdef __clang__
#pragma clang attribute push(__attribute__((target(KV_TARGET))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c")
#endif

#include <immintrin.h>
#include <math.h>

#include "kernels/impl.h"
#include "kernels/q8.h"

#define KV_ISA "avx2"
#define KV_OPS kern_avx2
#define KV_N 8
#define KV_LUT16 0
#define KV_GEMM_MV 3 /* 12 accumulators, 3 weights, a broadcast: the 16 registers */
#define KV_GEMM_NR 4
#define KV_INLINE static inline __attribute__((always_inline))

typedef __m256 kv_f;
typedef __m256i kv_i;
typedef __m256i kv_m;

KV_INLINE kv_f kv_zero(void) { return _mm256_setzero_ps(); }
KV_INLINE kv_f kv_set1(float f) { return _mm256_set1_ps(f); }
KV_INLINE kv_f kv_bcast(const float *p) { return _mm256_broadcast_ss(p); }
KV_INLINE kv_f kv_load(const float *p) { return _mm256_loadu_ps(p); }
KV_INLINE kv_f kv_load_a(const float *p) { return _mm256_load_ps(p); }
KV_INLINE void kv_store(float *p, kv_f v) { _mm256_storeu_ps(p, v); }
KV_INLINE void kv_store_a(float *p, kv_f v) { _mm256_store_ps(p, v); }
KV_INLINE kv_f kv_as_f(kv_i v) { return _mm256_castsi256_ps(v); } /* the same bits */
KV_INLINE kv_i kv_as_i(kv_f v) { return _mm256_castps_si256(v); }
KV_INLINE kv_f kv_add(kv_f a, kv_f b) { return _mm256_add_ps(a, b); }
KV_INLINE kv_f kv_mul(kv_f a, kv_f b) { return _mm256_mul_ps(a, b); }
KV_INLINE kv_f kv_fma(kv_f a, kv_f b, kv_f c) { return _mm256_fmadd_ps(a, b, c); } /* a * b + c */
KV_INLINE float kv_f16(uint16_t h) { return _cvtsh_ss(h); }

KV_INLINE float kv_reduce(kv_f a)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* ---- masks: the first n lanes (n <= 0: none) ---- */

KV_INLINE kv_m kv_first(int64_t n)
{
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)), lane);
}
KV_INLINE int kv_all(kv_m m) { return _mm256_testc_si256(m, _mm256_set1_epi32(-1)); }
KV_INLINE kv_f kv_load_m(const float *p, kv_m m) { return _mm256_maskload_ps(p, m); }
KV_INLINE void kv_store_m(float *p, kv_m m, kv_f v) { _mm256_maskstore_ps(p, m, v); }
KV_INLINE kv_f kv_keep(kv_f v, kv_m m) { return _mm256_and_ps(v, _mm256_castsi256_ps(m)); }
KV_INLINE int kv_nonfinite(const float *p, int64_t n) /* every exponent bit set: inf or NaN */
{
	const __m256i e = _mm256_set1_epi32(0x7F800000);
	const __m256i v = _mm256_and_si256(_mm256_castps_si256(kv_load_m(p, kv_first(n))), e);
	return !_mm256_testz_si256(_mm256_cmpeq_epi32(v, e), _mm256_set1_epi32(-1));
}

/* ---- codes ---- */

KV_INLINE kv_f kv_bf16(const uint8_t *p)
{
	__m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const void *)p));
	return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
KV_INLINE kv_f kv_f16x(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const void *)p)); }
KV_INLINE kv_f kv_i8(const uint8_t *p) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const void *)p))); }
KV_INLINE kv_i kv_u8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const void *)p)); }
KV_INLINE kv_i kv_srli(kv_i v, int n) { return _mm256_srli_epi32(v, n); }
KV_INLINE kv_i kv_iload(const uint8_t *p) { return _mm256_loadu_si256((const void *)p); }
KV_INLINE kv_i kv_iload_m(const uint8_t *p, kv_m m) { return _mm256_maskload_epi32((const int *)(const void *)p, m); }
KV_INLINE kv_f kv_perm(kv_i idx, kv_f v) { return _mm256_permutevar8x32_ps(v, idx); }
KV_INLINE kv_i kv_iadd(kv_i a, kv_i b) { return _mm256_add_epi32(a, b); }
KV_INLINE kv_i kv_iset1(int v) { return _mm256_set1_epi32(v); }
KV_INLINE kv_i kv_lanes_by(int n) /* each lane's index / n, n a power of two */
{
	return _mm256_srli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), __builtin_ctz((unsigned)n));
}

/* The first n (<= 0: none, else at most KV_N) binary16 values at p as floats, the rest zero. */
KV_INLINE kv_f kv_f16n(const uint8_t *p, int64_t n)
{
	if (n >= 8)
		return _mm256_cvtph_ps(_mm_loadu_si128((const void *)p));
	uint16_t h[8] = {0};
	memcpy(h, p, (size_t)(n > 0 ? 2 * n : 0));
	return _mm256_cvtph_ps(_mm_loadu_si128((const void *)h));
}

/* Whether any of the n (>= 1) UE8M0 bytes at p is 0 or 255: rare, then kv_e8 sets them apart. */
KV_INLINE int kv_e8_odd(const uint8_t *p, int64_t n)
{
	__m256i odd = _mm256_setzero_si256();
	for (int64_t i = 0; i < n; i += 32) {
		uint8_t t[32];
		memset(t, 127, sizeof(t));
		if (n - i < 32)
			memcpy(t, p + i, (size_t)(n - i));
		__m256i b = _mm256_loadu_si256((const void *)(n - i >= 32 ? p + i : t));
		odd = _mm256_or_si256(odd, _mm256_or_si256(_mm256_cmpeq_epi8(b, _mm256_setzero_si256()), _mm256_cmpeq_epi8(b, _mm256_set1_epi8(-1))));
	}
	return !_mm256_testz_si256(odd, odd);
}

/* The first n (<= 0: none) UE8M0 bytes at p as floats 2^(b - 127), the rest zero: a shift each, and
 * where odd (kv_e8_odd) the bytes 0 (2^-127, a subnormal) and 255 (NaN) set apart. */
KV_INLINE kv_f kv_e8(const uint8_t *p, int64_t n, int odd)
{
	uint8_t b[16] = {0};
	if (n < 8)
		memcpy(b, p, (size_t)(n > 0 ? n : 0));
	__m256i d = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const void *)(n >= 8 ? p : b)));
	__m256i f = _mm256_slli_epi32(d, 23);
	if (odd) {
		__m256i zero = _mm256_and_si256(_mm256_cmpeq_epi32(d, _mm256_setzero_si256()), kv_first(n));
		f = _mm256_blendv_epi8(f, _mm256_set1_epi32(0x00400000), zero);
		f = _mm256_blendv_epi8(f, _mm256_set1_epi32(0x7FC00000), _mm256_cmpeq_epi32(d, _mm256_set1_epi32(255)));
	}
	return _mm256_castsi256_ps(f);
}

/* The scales of a chunk of pairs (FP4), its 2 UE8M0 bytes at p, spread over its lanes as floats
 * (lane i: byte i / 4): the bytes broadcast, byte L put at the top of every dword of 128-bit lane
 * L, shifted into the exponent. Bytes 0 and 255 (kv_e8_odd) do not come out right. */
KV_INLINE kv_f kv_e8_spread(const uint8_t *p)
{
	int16_t w;
	memcpy(&w, p, 2);
	const char z = (char)0x80;
	const __m256i put = _mm256_setr_epi8(z, z, z, 0, z, z, z, 0, z, z, z, 0, z, z, z, 0, z, z, z, 1, z, z, z, 1, z, z, z, 1,
					     z, z, z, 1);
	return _mm256_castsi256_ps(_mm256_srli_epi32(_mm256_shuffle_epi8(_mm256_set1_epi16(w), put), 1));
}

/* KV_N 4-bit codes at p, two a byte, the low nibble first: code i in bits 0..3 of lane i (higher
 * bits not zero). */
KV_INLINE kv_i kv_u4pairs(const uint8_t *p)
{
	int32_t w;
	memcpy(&w, p, 4);
	__m128i b = _mm_cvtsi32_si128(w);
	__m256i d = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(b, b));
	return _mm256_srlv_epi32(d, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
}

/* lut[code] of a sign-magnitude table (lut_signmag) for the code in bits 4q .. 4q+3 of each lane
 * of d (other bits ignored): the magnitude lut[code & 7] by an 8-entry permute of d >> 4q, the
 * sign bit 4q + 3 moved to bit 31 and xored. */
KV_INLINE kv_f kv_lut_sm(kv_i d, int q, const kern_enc *e)
{
	__m256 mag = _mm256_permutevar8x32_ps(_mm256_loadu_ps(e->lut), q ? _mm256_srli_epi32(d, 4 * q) : d);
	__m256i sign = _mm256_and_si256(q == 7 ? d : _mm256_slli_epi32(d, 28 - 4 * q), _mm256_set1_epi32((int)0x80000000u));
	return _mm256_xor_ps(mag, _mm256_castsi256_ps(sign));
}

/* e4m3 codes as binary16 (sign kept, exponent and mantissa moved up by 7): value / 256, but
 * NaN codes (0x7F, 0xFF) come out finite (see kv_e4m3_nan). */
KV_INLINE kv_f kv_e4m3(const uint8_t *p)
{
	__m128i h = _mm_slli_epi16(_mm_cvtepi8_epi16(_mm_loadl_epi64((const void *)p)), 7);
	return _mm256_cvtph_ps(_mm_and_si128(h, _mm_set1_epi16((short)0xBFFF)));
}

/* kv_e4m3 with NaN in the lanes of NaN codes (rare: a slow path). */
KV_INLINE kv_f kv_e4m3_nan(const uint8_t *p)
{
	__m128i b = _mm_loadl_epi64((const void *)p);
	kv_f w = kv_e4m3(p);
	__m128i nan = _mm_cmpeq_epi8(_mm_and_si128(b, _mm_set1_epi8(0x7F)), _mm_set1_epi8(0x7F));
	if (_mm_movemask_epi8(nan) & 0xFF) {
		float f[8];
		_mm256_storeu_ps(f, w);
		for (int i = 0; i < 8; i++)
			if ((p[i] & 0x7F) == 0x7F)
				f[i] = NAN;
		w = _mm256_loadu_ps(f);
	}
	return w;
}

/* Whether none of the 4 x KV_N e4m3 codes at p is NaN: one test for four kv_e4m3. */
KV_INLINE int kv_e4m3_clean4(const uint8_t *p)
{
	__m256i b = _mm256_and_si256(_mm256_loadu_si256((const void *)p), _mm256_set1_epi8(0x7F));
	return _mm256_movemask_epi8(_mm256_cmpeq_epi8(b, _mm256_set1_epi8(0x7F))) == 0;
}

/* 4-bit codes d (a code in bits 0..3 of each lane, higher bits ignored) of an affine table as
 * lut_bias + code, times s: fma(code, s, m) with m = lut_bias * s, exact (the result is
 * representable). */
KV_INLINE kv_f kv_u4_affine(kv_i d, kv_f s, kv_f m)
{
	return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(d, _mm256_set1_epi32(15))), s, m);
}

/* ---- 4-bit pairs (FP4) in the nibble order ---- */

/* A chunk of KV_N dwords of pairs (64 columns: block 0 in the low 128 bits, block 1 in the high)
 * decodes through vpshufb, in-lane, to the exact values: each byte's low and high nibble looked up
 * in two 16-byte tables, the upper and the lower byte of lut's bfloat16 (e2m1 values are
 * bfloat16 numbers: their float32 has 16 zero low bits), the two interleaved into bfloat16 words,
 * and each word made a float by a shift (even words) or a mask (odd ones). w[4k + q] (k: the low or
 * the high nibbles) holds bytes 16 h + 8 (q / 2) + 2 (d % 4) + q % 2 of half h = d / 4 in lane d:
 * lanes 0-3 block 0's, 4-7 block 1's. 19 operations per 64 weights (q4's arithmetic takes 25),
 * the weights' own values: a sum of them times x overflows only where float32's would. */
static inline int kv_pairs_col(int d, int j)
{
	return 2 * (16 * (d / 4) + 8 * ((j & 3) >> 1) + 2 * (d % 4) + (j & 1)) + (j >> 2);
}

KV_INLINE void kv_pairs(kv_i v, const kern_enc *e, kv_f *w)
{
	int8_t hi[16], lo[16];
	for (int i = 0; i < 16; i++) {
		uint32_t u;
		memcpy(&u, &e->lut[i], 4);
		hi[i] = (int8_t)(u >> 24);
		lo[i] = (int8_t)(u >> 16);
	}
	const __m256i th = _mm256_broadcastsi128_si256(_mm_loadu_si128((const void *)hi));
	const __m256i tl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const void *)lo));
	const __m256i m = _mm256_set1_epi8(15), top = _mm256_set1_epi32((int)0xFFFF0000u);
	__m256i n[2] = {_mm256_and_si256(v, m), _mm256_and_si256(_mm256_srli_epi16(v, 4), m)};
#pragma GCC unroll 2
	for (int k = 0; k < 2; k++) {
		__m256i h = _mm256_shuffle_epi8(th, n[k]), l = _mm256_shuffle_epi8(tl, n[k]);
		__m256i u0 = _mm256_unpacklo_epi8(l, h), u1 = _mm256_unpackhi_epi8(l, h);
		w[4 * k] = _mm256_castsi256_ps(_mm256_slli_epi32(u0, 16));
		w[4 * k + 1] = _mm256_castsi256_ps(_mm256_and_si256(u0, top));
		w[4 * k + 2] = _mm256_castsi256_ps(_mm256_slli_epi32(u1, 16));
		w[4 * k + 3] = _mm256_castsi256_ps(_mm256_and_si256(u1, top));
	}
}

/* w[j] = lut[nibble j (bits 4j .. 4j+3) of every dword of v] (pairs: kv_pairs' order): a
 * sign-magnitude table through kv_lut_sm; an affine one as lut_bias + the nibble, exactly: the
 * nibble masked in
 * place and given the exponent of 2^(23-4j) is the float 2^(23-4j) + n; subtracting
 * 2^(23-4j) - lut_bias leaves n + lut_bias. The high half-word's nibbles go the same way after one
 * shift by 16. */
KV_INLINE void kv_nibbles(kv_i v, const kern_enc *e, kv_f *w)
{
	if (e->code == KC_U4_PAIRS) {
		kv_pairs(v, e, w);
		return;
	}
	if (e->lut_signmag) {
#pragma GCC unroll 8
		for (int j = 0; j < 8; j++)
			w[j] = kv_lut_sm(v, j, e);
		return;
	}
	__m256i h = _mm256_srli_epi32(v, 16);
#pragma GCC unroll 8
	for (int j = 0; j < 8; j++) {
		int q = j & 3;
		__m256i f = _mm256_or_si256(_mm256_and_si256(j < 4 ? v : h, _mm256_set1_epi32(15 << (4 * q))),
					    _mm256_set1_epi32((150 - 4 * q) << 23));
		w[j] = _mm256_sub_ps(_mm256_castsi256_ps(f), _mm256_set1_ps((float)(1 << (23 - 4 * q)) - (float)e->lut_bias));
	}
}

/* Keeps v in a register (a load folded into each use would repeat it). */
#define KV_PIN(v) __asm__("" : "+x"(v))

/* ---- the GEMM's transpose of KV_N vectors ---- */

KV_INLINE void kv_transpose(kv_f *r)
{
	__m256 t[8], u[8];
#pragma GCC unroll 4
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
	}
#pragma GCC unroll 2
	for (int i = 0; i < 8; i += 4) {
		u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
		u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
		u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
		u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
	}
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
		r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
	}
}


/* ---- q8 activations (kernels/q8.h): a pair of groups at a time (matrix-vector), rows in the
 * lanes (GEMM) ---- */

#define KV_Q8_OPS kern_q8_avx2
#define KQ_T 4 /* tokens a pass: 4 x 4 pair sums and a pair's 8 code vectors */
#define KV_Q8_ISA "avx2"
#define KQ_RL 8      /* GEMM: rows a vector */
#define KQ_GMV 2     /* GEMM: vectors of rows of a panel */
#define KQ_GNR 2     /* GEMM: tokens a micro-kernel call (q4: 2 x 2 x 2 accumulators) */
#define KQ_Q8_OFF 0  /* GEMM: q8's codes as maddubs' unsigned operand: |w| (x takes w's sign) */

/* a: the unsigned operand of maddubs per group and half (q4: the codes 0..15; q8: |w|), s: q8's
 * signs (x is negated where w < 0). */
typedef struct kq_w {
	__m256i a[2][2], s[2][2];
} kq_w;

typedef __m256i kq_p; /* a pair's sums: 128-bit half h, lanes: group 2P's j = 4h + (0+1, 2+3), then 2P+1's */

/* The codes of pair P of a row (c), group 2P + 1 zero when past G. */
KV_INLINE kq_w kq_codes(coli_enc enc, const uint8_t *c, int64_t P, int64_t G)
{
	kq_w w;
	for (int g = 0; g < 2; g++) {
		int live = 2 * P + g < G;
		if (enc == COLI_ENC_Q4) {
			__m256i v = live ? _mm256_loadu_si256((const void *)(c + 32 * (2 * P + g))) : _mm256_setzero_si256();
			w.a[g][0] = _mm256_and_si256(v, _mm256_set1_epi8(15));
			w.a[g][1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
			w.s[g][0] = w.s[g][1] = _mm256_setzero_si256();
		} else {
			for (int h = 0; h < 2; h++) {
				w.s[g][h] = live ? _mm256_loadu_si256((const void *)(c + 64 * (2 * P + g) + 32 * h))
						 : _mm256_setzero_si256();
				w.a[g][h] = _mm256_abs_epi8(w.s[g][h]);
			}
		}
	}
	return w;
}

/* Group g of the pair against prepared x (qs: its pair's bytes): lane j = the sum over columns
 * 4j .. 4j+3 and 32+4j .. 32+4j+3 (q4: of the codes, not yet less 8 x q). */
KV_INLINE __m256i kq_dot(coli_enc enc, const kq_w *w, int g, const int8_t *qs)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i x0 = _mm256_load_si256((const void *)(qs + 32 * g)), x1 = _mm256_load_si256((const void *)(qs + 64 + 32 * g));
	if (enc == COLI_ENC_Q4)
		return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w->a[g][0], x0), _mm256_maddubs_epi16(w->a[g][1], x1)), ones);
	__m256i m0 = _mm256_maddubs_epi16(w->a[g][0], _mm256_sign_epi8(x0, w->s[g][0]));
	__m256i m1 = _mm256_maddubs_epi16(w->a[g][1], _mm256_sign_epi8(x1, w->s[g][1]));
	return _mm256_add_epi32(_mm256_madd_epi16(m0, ones), _mm256_madd_epi16(m1, ones));
}

/* Pair P's sums against one token (xp: its prepared bytes). */
KV_INLINE kq_p kq_pair(coli_enc enc, const kq_w *w, const uint8_t *xp, int64_t P)
{
	const int8_t *qs = kern_q8_qs(xp) + 128 * P;
	return _mm256_hadd_epi32(kq_dot(enc, w, 0, qs), kq_dot(enc, w, 1, qs));
}

KV_INLINE kq_p kq_pzero(void) { return _mm256_setzero_si256(); }

/* Four pairs' sums (8 groups) as 8 p_g, lane i = group i. */
KV_INLINE __m256i kq_sum8(const kq_p *p)
{
	__m256i a = _mm256_hadd_epi32(p[0], p[1]), b = _mm256_hadd_epi32(p[2], p[3]);
	return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* GEMM: a panel's step vector (KQ_RL rows x 4 columns of codes, pan) made ready for kq_gdot. */
typedef __m256i kq_gi;
typedef __m256 kq_gf;

typedef struct kq_gw {
	__m256i a, s;
} kq_gw;

KV_INLINE kq_gw kq_gload(coli_enc enc, const uint8_t *pan)
{
	__m256i v = _mm256_load_si256((const void *)pan);
	return enc == COLI_ENC_Q4 ? (kq_gw){v, v} : (kq_gw){_mm256_abs_epi8(v), v};
}

/* A half group's 8 steps accumulate in h (kq_ghalf, kq_gdot), then go into p (kq_gdone). q4: in
 * 16-bit lanes (8 steps of two columns: at most 8 x 2 x 15 x 127 = 30480), one madd a half; q8:
 * maddubs, madd, add each step. */
typedef __m256i kq_gh;

KV_INLINE kq_gh kq_ghalf(coli_enc enc, kq_gi p) { return enc == COLI_ENC_Q4 ? _mm256_setzero_si256() : p; }

KV_INLINE kq_gi kq_gdone(coli_enc enc, kq_gi p, kq_gh h)
{
	return enc == COLI_ENC_Q4 ? _mm256_add_epi32(p, _mm256_madd_epi16(h, _mm256_set1_epi16(1))) : h;
}

/* h + each row's dot of its 4 codes with a token's 4 bytes of q at x4. */
KV_INLINE kq_gh kq_gdot(coli_enc enc, kq_gh h, const kq_gw *w, const int8_t *x4)
{
	int32_t v;
	memcpy(&v, x4, 4);
	__m256i x = _mm256_set1_epi32(v);
	if (enc == COLI_ENC_Q4)
		return _mm256_add_epi16(h, _mm256_maddubs_epi16(w->a, x));
	x = _mm256_sign_epi8(x, w->s);
	return _mm256_add_epi32(h, _mm256_madd_epi16(_mm256_maddubs_epi16(w->a, x), _mm256_set1_epi16(1)));
}

KV_INLINE kq_gi kq_gset(int32_t v) { return _mm256_set1_epi32(v); }

/* f + (float)p x (sw x d): the float step of a group. */
KV_INLINE kq_gf kq_gstep(kq_gi p, const float *sw, float d, kq_gf f)
{
	return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(_mm256_load_ps(sw), _mm256_set1_ps(d)), f);
}

KV_INLINE kq_gf kq_gzero(void) { return _mm256_setzero_ps(); }
KV_INLINE kq_gf kq_gadd(kq_gf a, kq_gf b) { return _mm256_add_ps(a, b); }

/* The first n (<= KQ_RL) lanes of f to y. */
KV_INLINE void kq_gstore(float *y, kq_gf f, int n)
{
	if (n == KQ_RL)
		_mm256_storeu_ps(y, f);
	else
		_mm256_maskstore_ps(y, kv_first(n), f);
}

/* The binary16 scales of ng (<= KQ_RL) groups of KQ_RL rows (sr[i]: row i's, from the first of
 * them) as float: group j's at out + j * os, lane i row i. */
KV_INLINE void kq_pscales(const uint8_t *const *sr, int ng, float *out, int64_t os)
{
	kv_f v[8];
	for (int i = 0; i < 8; i++) {
		uint16_t h[8] = {0};
		memcpy(h, sr[i], (size_t)(2 * ng));
		v[i] = _mm256_cvtph_ps(_mm_loadu_si128((const void *)h));
	}
	kv_transpose(v);
	for (int j = 0; j < ng; j++)
		_mm256_store_ps(out + j * os, v[j]);
}

/* A group of KQ_RL rows (grp[i]: row i's codes of the group) into the panel: step k (columns
 * 4k .. 4k+3) of row i at pan + k * ps + 4 i. */
KV_INLINE void kq_panel(coli_enc enc, const uint8_t *const *grp, uint8_t *pan, int64_t ps)
{
	kv_f v[2][8];
	for (int i = 0; i < 8; i++) {
		__m256i lo, hi;
		if (enc == COLI_ENC_Q4) {
			__m256i c = _mm256_loadu_si256((const void *)grp[i]);
			lo = _mm256_and_si256(c, _mm256_set1_epi8(15));
			hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), _mm256_set1_epi8(15));
		} else {
			lo = _mm256_loadu_si256((const void *)grp[i]);
			hi = _mm256_loadu_si256((const void *)(grp[i] + 32));
		}
		v[0][i] = _mm256_castsi256_ps(lo);
		v[1][i] = _mm256_castsi256_ps(hi);
	}
	for (int h = 0; h < 2; h++) {
		kv_transpose(v[h]);
		for (int k = 0; k < 8; k++)
			_mm256_store_ps((float *)(void *)(pan + (8 * h + k) * ps), v[h][k]);
	}
}

#endif
