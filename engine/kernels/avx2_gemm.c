/* avx2_gemm.c: AVX2 batched product Y = X W^T for many tokens (prefill, verify).
 *
 * The AVX-512 scheme (avx512_gemm.c) at half width: panels of 16 rows decoded KC
 * columns at a time into wt[k][16] (8x8 transposes), micro-kernel of 2 vectors x 6 tokens, Y's
 * tile carried between chunks, so each Y[t][r] is one in-order chain of fused multiply-adds.
 * The tokens go in blocks of even size (32 = 6 + 6 + 5 + 5 + 5 + 5, not 6 x 5 + 2): a block of
 * fewer than 5 tokens keeps fewer chains in flight than Zen 3's two 5-cycle FMA pipes need,
 * and an expert's batch in a prefill is about 32 tokens.
 */
#include "kernels/avx2.h"

#define MR 16  /* rows of a panel: two vectors */
#define NR 6   /* tokens per micro-kernel call: 12 accumulators */
#define KC 256 /* columns per decoded chunk: wt is 16 KiB */

K256_INLINE void transpose8(__m256 *r)
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

/* Bytes of a row's codes that hold n columns (n a multiple of 64 for q4). */
static inline int64_t code_bytes(coli_enc enc, int64_t n)
{
	return enc == COLI_ENC_Q4 ? n / 2 : k256_bpc(enc) * n;
}

/* wt[k][i] = W'[p + i][k0 + k] for k < kc (rounded up to 8), i < 16; zero for i >= nr; the
 * rows' next chunk is prefetched meanwhile (see avx512_gemm.c). */
K256_INLINE void build(coli_enc enc, const coli_mat *W, int64_t p, int nr, int64_t k0, int64_t kc,
		       const uint8_t *const *sr, float *wt)
{
	const int64_t sw = kern_scale_width(W), next = code_bytes(enc, k0 + KC), nb = code_bytes(enc, KC);
	for (int i = 0; i < nr && k0 + KC < W->cols; i++)
		for (int64_t o = 0; o < nb; o += 64)
			_mm_prefetch((const char *)((uintptr_t)W->codes + (uintptr_t)((p + i) * W->row_bytes + next + o)),
				     _MM_HINT_T0);
	for (int h = 0; h < 2; h++) {
		__m256 s[8], m8[8]; /* the half's rows' multipliers in scale group gb: widened once per group */
		int64_t gb = -1;
		for (int64_t kb = 0; kb < kc; kb += 8) {
			int64_t n = kc - kb, b = (k0 + kb) / sw;
			__m256 v[8];
			if (b != gb) {
				gb = b;
				for (int i = 0; i < 8; i++) {
					s[i] = 8 * h + i < nr ? k256_scale(enc, sr[8 * h + i], b) : _mm256_setzero_ps();
					m8[i] = _mm256_mul_ps(s[i], _mm256_set1_ps(-8.0f));
				}
			}
#pragma GCC unroll 8
			for (int i = 0; i < 8; i++) {
				v[i] = _mm256_setzero_ps();
				if (8 * h + i >= nr)
					continue;
				const uint8_t *c = W->codes + (p + 8 * h + i) * W->row_bytes;
				v[i] = enc == COLI_ENC_Q4 && n >= 8 ? k256_q4_8(c, k0 + kb, s[i], m8[i])
				       : n >= 8		  ? k256_d8(enc, c, k0 + kb, s[i])
							  : k256_d8_part(enc, c, k0 + kb, n, s[i]);
			}
			transpose8(v);
#pragma GCC unroll 8
			for (int j = 0; j < 8; j++)
				_mm256_store_ps(wt + (kb + j) * MR + 8 * h, v[j]);
		}
	}
}

K256_INLINE void micro(const float *wt, int64_t kc, const float *x, int64_t xs, int T, float *y,
		       int64_t ys, __m256i m0, __m256i m1, int first)
{
	__m256 a0[NR], a1[NR];
	/* A whole panel (the usual case) moves its tile with plain loads and stores: Zen 3's masked
	 * ones are microcoded, and a tile moves once per chunk of KC columns. */
	int whole = _mm256_testc_si256(m1, _mm256_set1_epi32(-1));
#pragma GCC unroll 6
	for (int t = 0; t < T; t++) {
		a0[t] = first ? _mm256_setzero_ps() : whole ? _mm256_loadu_ps(y + t * ys) : _mm256_maskload_ps(y + t * ys, m0);
		a1[t] = first ? _mm256_setzero_ps() : whole ? _mm256_loadu_ps(y + t * ys + 8) : _mm256_maskload_ps(y + t * ys + 8, m1);
	}
	for (int64_t k = 0; k < kc; k++) {
		__m256 w0 = _mm256_load_ps(wt + k * MR), w1 = _mm256_load_ps(wt + k * MR + 8);
#pragma GCC unroll 6
		for (int t = 0; t < T; t++) {
			__m256 b = _mm256_broadcast_ss(x + t * xs + k);
			a0[t] = _mm256_fmadd_ps(w0, b, a0[t]);
			a1[t] = _mm256_fmadd_ps(w1, b, a1[t]);
		}
	}
#pragma GCC unroll 6
	for (int t = 0; t < T; t++) {
		if (whole) {
			_mm256_storeu_ps(y + t * ys, a0[t]);
			_mm256_storeu_ps(y + t * ys + 8, a1[t]);
		} else {
			_mm256_maskstore_ps(y + t * ys, m0, a0[t]);
			_mm256_maskstore_ps(y + t * ys + 8, m1, a1[t]);
		}
	}
}

typedef void (*micro_fn)(const float *wt, int64_t kc, const float *x, int64_t xs, float *y,
			 int64_t ys, __m256i m0, __m256i m1, int first);

#define MICRO(T)                                                                                  \
	static K256 void micro_##T(const float *wt, int64_t kc, const float *x, int64_t xs, float *y,  \
				   int64_t ys, __m256i m0, __m256i m1, int first)                  \
	{                                                                                         \
		micro(wt, kc, x, xs, T, y, ys, m0, m1, first);                                     \
	}
MICRO(1) MICRO(2) MICRO(3) MICRO(4) MICRO(5) MICRO(6)

static const micro_fn micros[NR] = {micro_1, micro_2, micro_3, micro_4, micro_5, micro_6};

K256_INLINE void gemm_enc(coli_enc enc, const coli_mat *W, const float *X, int n, float *Y,
			  int64_t r0, int64_t r1)
{
	_Alignas(32) float wt[KC * MR];
	const uint8_t *sr[MR];
	const int64_t cols = W->cols, rows = W->rows;
	for (int64_t p = r0; p < r1; p += MR) {
		int nr = r1 - p < MR ? (int)(r1 - p) : MR;
		__m256i m0 = k256_first(nr), m1 = k256_first(nr - 8);
		for (int i = 0; i < nr; i++)
			sr[i] = k256_row_scales(W, p + i);
		for (int64_t k0 = 0; k0 < cols; k0 += KC) {
			int64_t kc = cols - k0 < KC ? cols - k0 : KC;
			build(enc, W, p, nr, k0, kc, sr, wt);
			for (int t0 = 0, left = n, blocks = (n + NR - 1) / NR; left > 0; blocks--) {
				int nt = (left + blocks - 1) / blocks;
				micros[nt - 1](wt, kc, X + t0 * cols + k0, cols, Y + t0 * rows + p, rows, m0, m1,
					       k0 == 0);
				t0 += nt, left -= nt;
			}
		}
	}
}

K256 void k256_gemm(const coli_mat *W, const float *X, int n, float *Y, int64_t r0, int64_t r1)
{
	switch (W->enc) {
	case COLI_ENC_F32: gemm_enc(COLI_ENC_F32, W, X, n, Y, r0, r1); break;
	case COLI_ENC_BF16: gemm_enc(COLI_ENC_BF16, W, X, n, Y, r0, r1); break;
	case COLI_ENC_F16: gemm_enc(COLI_ENC_F16, W, X, n, Y, r0, r1); break;
	case COLI_ENC_FP8: gemm_enc(COLI_ENC_FP8, W, X, n, Y, r0, r1); break;
	case COLI_ENC_Q8: gemm_enc(COLI_ENC_Q8, W, X, n, Y, r0, r1); break;
	case COLI_ENC_Q4: gemm_enc(COLI_ENC_Q4, W, X, n, Y, r0, r1); break;
	default: break;
	}
}
