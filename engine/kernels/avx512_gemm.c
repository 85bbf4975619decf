/* avx512_gemm.c: AVX-512 batched product Y = X W^T for many tokens (prefill, verify).
 *
 * Panels of 32 rows: a chunk of KC columns of the panel is decoded once into wt[k][32]
 * (decoded 16x16 at a time and transposed), then every block of up to 12 tokens runs the
 * micro-kernel: two vectors of weights times a broadcast x, 24 accumulators in registers, no
 * horizontal sums. Y's tile is the accumulator between chunks, so each Y[t][r] is one chain of
 * fused multiply-adds over the columns in order: the same bits for any split of rows or tokens.
 */
#include "kernels/avx512.h"

#define MR 32  /* rows of a panel: two vectors */
#define NR 12  /* tokens per micro-kernel call: 24 accumulators */
#define KC 256 /* columns per decoded chunk: wt is 32 KiB, in L1 with a 12 KiB x tile */

/* In-register transpose of 16 vectors of 16 floats. */
K512_INLINE void transpose16(__m512 *r)
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

/* Bytes of a row's codes that hold n columns (n a multiple of 64 for q4). */
static inline int64_t code_bytes(coli_enc enc, int64_t n)
{
	return enc == COLI_ENC_Q4 ? n / 2 : enc == COLI_ENC_F32 ? 4 * n : enc == COLI_ENC_BF16 || enc == COLI_ENC_F16 ? 2 * n : n;
}

/* wt[k][i] = W'[p + i][k0 + k] for k < kc (rounded up to 16), i < 32; zero for i >= nr. The
 * rows' next chunk is prefetched meanwhile: a panel reads its rows piecewise, which the
 * hardware prefetcher alone serves poorly from RAM. */
K512_INLINE void build(coli_enc enc, const coli_mat *W, int64_t p, int nr, int64_t k0, int64_t kc,
		       const uint8_t *const *sr, float *wt)
{
	const int64_t sw = kern_scale_width(W), next = code_bytes(enc, k0 + KC), nb = code_bytes(enc, KC);
	for (int i = 0; i < nr && k0 + KC < W->cols; i++)
		for (int64_t o = 0; o < nb; o += 64)
			_mm_prefetch((const char *)((uintptr_t)W->codes + (uintptr_t)((p + i) * W->row_bytes + next + o)),
				     _MM_HINT_T0);
	for (int h = 0; h < 2; h++) {
		for (int64_t kb = 0; kb < kc; kb += 16) {
			__mmask16 m = k512_first(kc - kb);
			int64_t b = (k0 + kb) / sw;
			__m512 v[16];
#pragma GCC unroll 16
			for (int i = 0; i < 16; i++) {
				int64_t r = p + 16 * h + i;
				v[i] = 16 * h + i < nr ? k512_d16(enc, W->codes + r * W->row_bytes, k0 + kb, m,
								   k512_scale(enc, sr[16 * h + i], b))
						       : _mm512_setzero_ps();
			}
			transpose16(v);
#pragma GCC unroll 16
			for (int j = 0; j < 16; j++)
				_mm512_store_ps(wt + (kb + j) * MR + 16 * h, v[j]);
		}
	}
}

/* Y[t][p .. p+32) (+)= sum over k < kc of wt[k] * x[t][k] for T tokens; m0/m1 mask the
 * panel's rows; `first` starts from zero instead of Y. */
K512_INLINE void micro(const float *wt, int64_t kc, const float *x, int64_t xs, int T, float *y,
		       int64_t ys, __mmask16 m0, __mmask16 m1, int first)
{
	__m512 a0[NR], a1[NR];
#pragma GCC unroll 12
	for (int t = 0; t < T; t++) {
		a0[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, y + t * ys);
		a1[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, y + t * ys + 16);
	}
	for (int64_t k = 0; k < kc; k++) {
		__m512 w0 = _mm512_load_ps(wt + k * MR), w1 = _mm512_load_ps(wt + k * MR + 16);
#pragma GCC unroll 12
		for (int t = 0; t < T; t++) {
			__m512 b = _mm512_set1_ps(x[t * xs + k]);
			a0[t] = _mm512_fmadd_ps(w0, b, a0[t]);
			a1[t] = _mm512_fmadd_ps(w1, b, a1[t]);
		}
	}
#pragma GCC unroll 12
	for (int t = 0; t < T; t++) {
		_mm512_mask_storeu_ps(y + t * ys, m0, a0[t]);
		_mm512_mask_storeu_ps(y + t * ys + 16, m1, a1[t]);
	}
}

typedef void (*micro_fn)(const float *wt, int64_t kc, const float *x, int64_t xs, float *y,
			 int64_t ys, __mmask16 m0, __mmask16 m1, int first);

#define MICRO(T)                                                                                  \
	static K512 void micro_##T(const float *wt, int64_t kc, const float *x, int64_t xs, float *y,  \
				   int64_t ys, __mmask16 m0, __mmask16 m1, int first)              \
	{                                                                                         \
		micro(wt, kc, x, xs, T, y, ys, m0, m1, first);                                     \
	}
MICRO(1) MICRO(2) MICRO(3) MICRO(4) MICRO(5) MICRO(6)
MICRO(7) MICRO(8) MICRO(9) MICRO(10) MICRO(11) MICRO(12)

static const micro_fn micros[NR] = {micro_1, micro_2, micro_3, micro_4,  micro_5,  micro_6,
				    micro_7, micro_8, micro_9, micro_10, micro_11, micro_12};

K512_INLINE void gemm_enc(coli_enc enc, const coli_mat *W, const float *X, int n, float *Y,
			  int64_t r0, int64_t r1)
{
	_Alignas(64) float wt[KC * MR];
	const uint8_t *sr[MR];
	const int64_t cols = W->cols, rows = W->rows;
	for (int64_t p = r0; p < r1; p += MR) {
		int nr = r1 - p < MR ? (int)(r1 - p) : MR;
		__mmask16 m0 = k512_first(nr), m1 = k512_first(nr - 16);
		for (int i = 0; i < nr; i++)
			sr[i] = k512_row_scales(W, p + i);
		for (int64_t k0 = 0; k0 < cols; k0 += KC) {
			int64_t kc = cols - k0 < KC ? cols - k0 : KC;
			build(enc, W, p, nr, k0, kc, sr, wt);
			for (int t0 = 0; t0 < n; t0 += NR) {
				int nt = n - t0 < NR ? n - t0 : NR;
				micros[nt - 1](wt, kc, X + t0 * cols + k0, cols, Y + t0 * rows + p, rows, m0, m1,
					       k0 == 0);
			}
		}
	}
}

K512 void k512_gemm(const coli_mat *W, const float *X, int n, float *Y, int64_t r0, int64_t r1)
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
