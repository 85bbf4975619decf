/* isa_avx512.h: the AVX-512 (F, BW, VL + FMA, F16C) mapping of the kernel bodies' vector
 * operations; internal. The operations are those of isa_avx2.h (its header comment lists them);
 * here masks are mask registers and 4-bit codes become floats through vpermps, a 16-entry
 * lookup (KV_LUT16).
 */
#ifndef COLI_KERNELS_ISA_AVX512_H
#define COLI_KERNELS_ISA_AVX512_H

/* Everything after this in the file is built for the ISA (body.h ends clang's push). KV_VNNI 1
 * (avx512vnni.c): AVX512-VNNI too, for the q8 products' vpdpbusd. KV_AMX 1 (amx.c): the amx
 * variant, AVX512-VNNI and AVX512-BF16 with AMX's tiles (body_amx.h: the GEMM). */
#ifndef KV_AMX
#define KV_AMX 0
#endif
#if KV_AMX
#define KV_VNNI 1
#endif
#ifndef KV_VNNI
#define KV_VNNI 0
#endif
#if KV_AMX
#define KV_TARGET "avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,amx-tile,amx-bf16,amx-int8,fma,f16c"
#elif KV_VNNI
#define KV_TARGET "avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c" /* also in the GCC pragma below */
#else
#define KV_TARGET "avx512f,avx512bw,avx512vl,fma,f16c"
#endif
#ifdef __clang__
#pragma clang attribute push(__attribute__((target(KV_TARGET))), apply_to = function)
#elif KV_AMX
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,amx-tile,amx-bf16,amx-int8,fma,f16c")
#elif KV_VNNI
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,fma,f16c")
#endif

#include <immintrin.h>
#include <math.h>

#include "kernels/impl.h"
#include "kernels/q8.h"

#if KV_AMX
#define KV_ISA "amx"
#define KV_OPS kern_amx
#else
#define KV_ISA "avx512"
#define KV_OPS kern_avx512
#endif
#define KV_N 16
#define KV_LUT16 1
#define KV_GEMM_MV 3 /* 24 accumulators of the 32 registers; 8 tokens' x rows fit an L1 set (body.h) */
#define KV_GEMM_NR 8
#define KV_INLINE static inline __attribute__((always_inline))

typedef __m512 kv_f;
typedef __m512i kv_i;
typedef __mmask16 kv_m;

KV_INLINE kv_f kv_zero(void) { return _mm512_setzero_ps(); }
KV_INLINE kv_f kv_set1(float f) { return _mm512_set1_ps(f); }
KV_INLINE kv_f kv_bcast(const float *p) { return _mm512_set1_ps(*p); }
KV_INLINE kv_f kv_load(const float *p) { return _mm512_loadu_ps(p); }
KV_INLINE kv_f kv_load_a(const float *p) { return _mm512_load_ps(p); }
KV_INLINE void kv_store(float *p, kv_f v) { _mm512_storeu_ps(p, v); }
KV_INLINE void kv_store_a(float *p, kv_f v) { _mm512_store_ps(p, v); }
KV_INLINE kv_f kv_as_f(kv_i v) { return _mm512_castsi512_ps(v); } /* the same bits */
KV_INLINE kv_i kv_as_i(kv_f v) { return _mm512_castps_si512(v); }
KV_INLINE kv_f kv_add(kv_f a, kv_f b) { return _mm512_add_ps(a, b); }
KV_INLINE kv_f kv_mul(kv_f a, kv_f b) { return _mm512_mul_ps(a, b); }
KV_INLINE kv_f kv_fma(kv_f a, kv_f b, kv_f c) { return _mm512_fmadd_ps(a, b, c); } /* a * b + c */
KV_INLINE float kv_f16(uint16_t h) { return _cvtsh_ss(h); }
KV_INLINE float kv_reduce(kv_f a) { return _mm512_reduce_add_ps(a); }

/* ---- masks: the first n lanes (n <= 0: none) ---- */

KV_INLINE kv_m kv_first(int64_t n)
{
	return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}
KV_INLINE int kv_all(kv_m m) { return m == 0xFFFF; }
KV_INLINE kv_f kv_load_m(const float *p, kv_m m) { return _mm512_maskz_loadu_ps(m, p); }
KV_INLINE void kv_store_m(float *p, kv_m m, kv_f v) { _mm512_mask_storeu_ps(p, m, v); }
KV_INLINE kv_f kv_keep(kv_f v, kv_m m) { return _mm512_maskz_mov_ps(m, v); }
KV_INLINE int kv_nonfinite(const float *p, int64_t n) /* every exponent bit set: inf or NaN */
{
	const __m512i e = _mm512_set1_epi32(0x7F800000);
	return _mm512_mask_cmpeq_epi32_mask(kv_first(n), _mm512_and_si512(_mm512_castps_si512(kv_load_m(p, kv_first(n))), e), e) != 0;
}

/* ---- codes ---- */

KV_INLINE kv_f kv_bf16(const uint8_t *p)
{
	__m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)p));
	return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}
KV_INLINE kv_f kv_f16x(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const void *)p)); }
KV_INLINE kv_f kv_i8(const uint8_t *p) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)p))); }
KV_INLINE kv_i kv_u8(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const void *)p)); }
KV_INLINE kv_i kv_srli(kv_i v, int n) { return _mm512_srli_epi32(v, (unsigned)n); }
KV_INLINE kv_i kv_iload(const uint8_t *p) { return _mm512_loadu_si512(p); }
KV_INLINE kv_i kv_iload_m(const uint8_t *p, kv_m m) { return _mm512_maskz_loadu_epi32(m, p); }
KV_INLINE kv_f kv_perm(kv_i idx, kv_f v) { return _mm512_permutexvar_ps(idx, v); }
KV_INLINE kv_i kv_iadd(kv_i a, kv_i b) { return _mm512_add_epi32(a, b); }
KV_INLINE kv_i kv_iset1(int v) { return _mm512_set1_epi32(v); }
KV_INLINE kv_i kv_lanes_by(int n) /* each lane's index / n, n a power of two */
{
	return _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
				 (unsigned)__builtin_ctz((unsigned)n));
}

KV_INLINE kv_f kv_f16n(const uint8_t *p, int64_t n)
{
	return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(kv_first(n), p));
}

/* Whether any of the n (>= 1) UE8M0 bytes at p is 0 or 255 ((b + 1) & 255 below 2): rare, then
 * kv_e8 sets them apart. */
KV_INLINE int kv_e8_odd(const uint8_t *p, int64_t n)
{
	const __m512i one = _mm512_set1_epi8(1);
	__mmask64 odd = 0;
	for (int64_t i = 0; i < n; i += 64) {
		__mmask64 m = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
		odd |= _mm512_mask_cmple_epu8_mask(m, _mm512_add_epi8(_mm512_maskz_loadu_epi8(m, p + i), one), one);
	}
	return odd != 0;
}

/* The first n (<= 0: none) UE8M0 bytes at p as floats 2^(b - 127), the rest zero: a shift each, and
 * where odd (kv_e8_odd) the bytes 0 (2^-127, a subnormal) and 255 (NaN) set apart. */
KV_INLINE kv_f kv_e8(const uint8_t *p, int64_t n, int odd)
{
	__m512i d = _mm512_cvtepu8_epi32(n >= 16 ? _mm_loadu_si128((const void *)p) : _mm_maskz_loadu_epi8(kv_first(n), p));
	__m512i f = _mm512_slli_epi32(d, 23);
	if (odd) {
		f = _mm512_mask_mov_epi32(f, _mm512_cmpeq_epi32_mask(d, _mm512_setzero_si512()) & kv_first(n), _mm512_set1_epi32(0x00400000));
		f = _mm512_mask_mov_epi32(f, _mm512_cmpeq_epi32_mask(d, _mm512_set1_epi32(255)), _mm512_set1_epi32(0x7FC00000));
	}
	return _mm512_castsi512_ps(f);
}

/* The scales of a chunk of pairs (FP4), its 4 UE8M0 bytes at p, spread over its lanes as floats
 * (lane i: byte i / 4): the bytes broadcast, byte L put at the top of every dword of 128-bit lane
 * L, shifted into the exponent. Bytes 0 and 255 (kv_e8_odd) do not come out right. */
KV_INLINE kv_f kv_e8_spread(const uint8_t *p)
{
	int32_t w;
	memcpy(&w, p, 4);
	const char z = (char)0x80;
	const __m512i put = _mm512_set_epi8(3, z, z, z, 3, z, z, z, 3, z, z, z, 3, z, z, z, 2, z, z, z, 2, z, z, z, 2, z, z, z,
					    2, z, z, z, 1, z, z, z, 1, z, z, z, 1, z, z, z, 1, z, z, z, 0, z, z, z, 0, z, z, z,
					    0, z, z, z, 0, z, z, z);
	return _mm512_castsi512_ps(_mm512_srli_epi32(_mm512_shuffle_epi8(_mm512_set1_epi32(w), put), 1));
}

/* KV_N 4-bit codes at p, two a byte, the low nibble first: code i in bits 0..3 of lane i (higher
 * bits not zero). */
KV_INLINE kv_i kv_u4pairs(const uint8_t *p)
{
	__m128i b = _mm_loadl_epi64((const void *)p);
	__m512i d = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, b));
	return _mm512_srlv_epi32(d, _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4));
}

KV_INLINE kv_f kv_e4m3(const uint8_t *p)
{
	__m256i h = _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const void *)p)), 7);
	return _mm512_cvtph_ps(_mm256_and_si256(h, _mm256_set1_epi16((short)0xBFFF)));
}

KV_INLINE kv_f kv_e4m3_nan(const uint8_t *p)
{
	__m128i b = _mm_loadu_si128((const void *)p);
	__mmask16 nan = _mm_cmpeq_epi8_mask(_mm_and_si128(b, _mm_set1_epi8(0x7F)), _mm_set1_epi8(0x7F));
	kv_f w = kv_e4m3(p);
	return nan ? _mm512_mask_mov_ps(w, nan, _mm512_set1_ps(NAN)) : w;
}

KV_INLINE int kv_e4m3_clean4(const uint8_t *p)
{
	__m512i b = _mm512_and_si512(_mm512_loadu_si512(p), _mm512_set1_epi8(0x7F));
	return _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8(0x7F)) == 0;
}

/* The table of a 4-bit encoding, for kv_lut. */
KV_INLINE kv_f kv_lut_of(const kern_enc *e) { return _mm512_loadu_ps(e->lut); }

/* lut[code] for the code in bits 0..3 of each lane of d (higher bits ignored). */
KV_INLINE kv_f kv_lut(kv_i d, kv_f lut) { return _mm512_permutexvar_ps(d, lut); }

/* w[j] = lut[nibble j (bits 4j .. 4j+3) of every dword of v]. */
KV_INLINE void kv_nibbles(kv_i v, const kern_enc *e, kv_f *w)
{
	const kv_f lut = kv_lut_of(e);
	w[0] = _mm512_permutexvar_ps(v, lut);
#pragma GCC unroll 7
	for (int j = 1; j < 8; j++)
		w[j] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4 * j), lut);
}

/* 4-bit pairs (FP4) in the nibble order: nibble j of dword d is column 8d + j, its value lut's. */
static inline int kv_pairs_col(int d, int j) { return 8 * d + j; }

#define KV_PIN(v) __asm__("" : "+v"(v))

/* ---- the GEMM's transpose of KV_N vectors ---- */

KV_INLINE void kv_transpose(kv_f *r)
{
	__m512 t[16], u[16];
#pragma GCC unroll 8
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
	/* u[4q + c], 128-bit lane L: column 4L + c of rows 4q .. 4q+3 */
#pragma GCC unroll 4
	for (int i = 0; i < 16; i += 4) {
		__m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
		__m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
		u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
		u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
		u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
		u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
	}
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m512 v = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), w = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
		__m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
		__m512 w2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
		r[c] = _mm512_shuffle_f32x4(v, v2, 0x88);
		r[8 + c] = _mm512_shuffle_f32x4(v, v2, 0xDD);
		r[4 + c] = _mm512_shuffle_f32x4(w, w2, 0x88);
		r[12 + c] = _mm512_shuffle_f32x4(w, w2, 0xDD);
	}
}


/* ---- q8 activations (kernels/q8.h): a pair of groups at a time (matrix-vector), rows in the
 * lanes (GEMM) ---- */

#if KV_AMX
#define KV_Q8_OPS kern_q8_amx
#define KV_Q8_ISA "amx"
#elif KV_VNNI
#define KV_Q8_OPS kern_q8_avx512vnni
#define KV_Q8_ISA "avx512vnni"
#endif
#if KV_VNNI
#define KQ_Q8_OFF 128 /* GEMM: q8's codes as vpdpbusd's unsigned operand: w + 128 */
#else
#define KV_Q8_OPS kern_q8_avx512
#define KV_Q8_ISA "avx512"
#define KQ_Q8_OFF 0 /* GEMM: q8's codes as maddubs' unsigned operand: |w| (x takes w's sign) */
#endif

#define KQ_T 4 /* tokens a pass: with 8, 8 tokens' prepared x of 4096 columns (64 KiB) leave L1 while
		* a row is read (q4 2048x4096, 29 tokens, Zen 4: 69 GFLOP/s against 97 with 4) */
#define KQ_RL 16  /* GEMM: rows a vector */
#define KQ_GMV 2  /* GEMM: vectors of rows of a panel */
#define KQ_GNR 8  /* GEMM: tokens a micro-kernel call */

/* a: the unsigned operand of vpdpbusd per half (q4: codes 0..15, q8: |w|), neg: q8's lanes where
 * w < 0. */
typedef struct kq_w {
	__m512i a[2];
	__mmask64 neg[2];
} kq_w;

typedef __m512i kq_p; /* a pair's sums: lanes 0-7 group 2P's lanes j, 8-15 group 2P + 1's */

/* acc + the 4-byte dot products of u (unsigned) and s (signed) per lane; without VNNI, maddubs
 * and madd: exact for the operands here (|u s + u s| <= 2 x 128 x 127 fits int16). */
KV_INLINE __m512i kq_dpbusd(__m512i acc, __m512i u, __m512i s)
{
#if KV_VNNI
	return _mm512_dpbusd_epi32(acc, u, s);
#else
	return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#endif
}

KV_INLINE kq_w kq_codes(coli_enc enc, const uint8_t *c, int64_t P, int64_t G)
{
	kq_w w;
	int live = 2 * P + 1 < G;
	if (enc == COLI_ENC_Q4) {
		__m512i v = live ? _mm512_loadu_si512(c + 64 * P) : _mm512_maskz_loadu_epi32(0xFF, c + 64 * P);
		w.a[0] = _mm512_and_si512(v, _mm512_set1_epi8(15));
		w.a[1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(15));
		w.neg[0] = w.neg[1] = 0;
		return w;
	}
	__m512i a = _mm512_loadu_si512(c + 128 * P), b = live ? _mm512_loadu_si512(c + 128 * P + 64) : _mm512_setzero_si512();
	__m512i lo = _mm512_shuffle_i64x2(a, b, 0x44), hi = _mm512_shuffle_i64x2(a, b, 0xEE);
	w.a[0] = _mm512_abs_epi8(lo);
	w.a[1] = _mm512_abs_epi8(hi);
	w.neg[0] = _mm512_movepi8_mask(lo);
	w.neg[1] = _mm512_movepi8_mask(hi);
	return w;
}

/* Pair P's sums against one token (xp: its prepared bytes; q4: of the codes, not yet less 8 x q). */
KV_INLINE kq_p kq_pair(coli_enc enc, const kq_w *w, const uint8_t *xp, int64_t P)
{
	const int8_t *qs = kern_q8_qs(xp) + 128 * P;
	__m512i x0 = _mm512_load_si512(qs), x1 = _mm512_load_si512(qs + 64);
	if (enc == COLI_ENC_Q4)
		return kq_dpbusd(kq_dpbusd(_mm512_setzero_si512(), w->a[0], x0), w->a[1], x1);
	const __m512i z = _mm512_setzero_si512();
	__m512i p = kq_dpbusd(_mm512_setzero_si512(), w->a[0], _mm512_mask_sub_epi8(x0, w->neg[0], z, x0));
	return kq_dpbusd(p, w->a[1], _mm512_mask_sub_epi8(x1, w->neg[1], z, x1));
}

KV_INLINE kq_p kq_pzero(void) { return _mm512_setzero_si512(); }

/* Four pairs' sums (8 groups) as 8 p_g, lane i = group i: per 128-bit lane L the 4-lane sums of
 * pairs 0-3 (z), L0 + L1 (groups 0, 2, 4, 6) and L2 + L3 (1, 3, 5, 7), then in group order. */
KV_INLINE __m256i kq_sum8(const kq_p *p)
{
	__m512i x = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
	__m512i y = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
	__m512i z = _mm512_add_epi32(_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y));
	z = _mm512_add_epi32(z, _mm512_shuffle_i64x2(z, z, 0xB1));
	return _mm512_castsi512_si256(_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0), z));
}

/* GEMM: a panel's step vector (KQ_RL rows x 4 columns of codes, pan) made ready for kq_gdot. */
typedef __m512i kq_gi;
typedef __m512 kq_gf;

typedef struct kq_gw {
	__m512i a;
	__mmask64 neg;
} kq_gw;

KV_INLINE kq_gw kq_gload(coli_enc enc, const uint8_t *pan)
{
	__m512i v = _mm512_load_si512(pan);
	if (enc == COLI_ENC_Q4)
		return (kq_gw){v, 0};
#if KV_VNNI
	return (kq_gw){_mm512_xor_si512(v, _mm512_set1_epi8(-128)), 0};
#else
	return (kq_gw){_mm512_abs_epi8(v), _mm512_movepi8_mask(v)};
#endif
}

/* A half group's 8 steps accumulate in h (kq_ghalf, kq_gdot), then go into p (kq_gdone): here p
 * itself. */
typedef __m512i kq_gh;

KV_INLINE kq_gh kq_ghalf(coli_enc enc, kq_gi p)
{
	(void)enc;
	return p;
}

KV_INLINE kq_gi kq_gdone(coli_enc enc, kq_gi p, kq_gh h)
{
	(void)enc, (void)p;
	return h;
}

/* h + each row's dot of its 4 codes with a token's 4 bytes of q at x4 (VNNI: a broadcast
 * operand of vpdpbusd). */
KV_INLINE kq_gh kq_gdot(coli_enc enc, kq_gh acc, const kq_gw *w, const int8_t *x4)
{
	int32_t v;
	memcpy(&v, x4, 4);
	__m512i x = _mm512_set1_epi32(v);
	if (!KV_VNNI && enc != COLI_ENC_Q4)
		x = _mm512_mask_sub_epi8(x, w->neg, _mm512_setzero_si512(), x);
	return kq_dpbusd(acc, w->a, x);
}

KV_INLINE kq_gi kq_gset(int32_t v) { return _mm512_set1_epi32(v); }

/* f + (float)p x (sw x d): the float step of a group. */
KV_INLINE kq_gf kq_gstep(kq_gi p, const float *sw, float d, kq_gf f)
{
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(_mm512_load_ps(sw), _mm512_set1_ps(d)), f);
}

KV_INLINE kq_gf kq_gzero(void) { return _mm512_setzero_ps(); }
KV_INLINE kq_gf kq_gadd(kq_gf a, kq_gf b) { return _mm512_add_ps(a, b); }

/* The first n (<= KQ_RL) lanes of f to y. */
KV_INLINE void kq_gstore(float *y, kq_gf f, int n)
{
	_mm512_mask_storeu_ps(y, (__mmask16)((1u << n) - 1), f);
}

/* The binary16 scales of ng (<= KQ_RL) groups of KQ_RL rows (sr[i]: row i's, from the first of
 * them) as float: group j's at out + j * os, lane i row i. */
KV_INLINE void kq_pscales(const uint8_t *const *sr, int ng, float *out, int64_t os)
{
	kv_f v[16];
	for (int i = 0; i < 16; i++)
		v[i] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << ng) - 1), sr[i]));
	kv_transpose(v);
	for (int j = 0; j < ng; j++)
		_mm512_store_ps(out + j * os, v[j]);
}

/* A group of KQ_RL rows (grp[i]: row i's codes of the group) into the panel: step k (columns
 * 4k .. 4k+3) of row i at pan + k * ps + 4 i. */
KV_INLINE void kq_panel(coli_enc enc, const uint8_t *const *grp, uint8_t *pan, int64_t ps)
{
	kv_f v[16];
	for (int i = 0; i < 16; i++) {
		__m512i c;
		if (enc == COLI_ENC_Q4) {
			__m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const void *)grp[i]));
			c = _mm512_and_si512(_mm512_mask_srli_epi16(b, 0xFFFF0000, b, 4), _mm512_set1_epi8(15));
		} else {
			c = _mm512_loadu_si512(grp[i]);
		}
		v[i] = _mm512_castsi512_ps(c);
	}
	kv_transpose(v);
	for (int k = 0; k < 16; k++)
		_mm512_store_ps((float *)(void *)(pan + k * ps), v[k]);
}

#endif
