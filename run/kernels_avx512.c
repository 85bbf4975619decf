/* kernels_avx512.c: AVX-512 matrix-vector kernels (one row at a time, 1-4 tokens), the
 * transposed product and row decoding; the batched product's GEMM is kernels_avx512_gemm.c.
 *
 * q4 matvec: a 64-byte chunk (two groups) is loaded whole; shifting its dwords right by 4j
 * brings nibble j of every dword to bits 0..3, where vpermps reads it as an index into the
 * table -8..7: 8 shifts-and-permutes give 128 weights. x is prepared once per product in the
 * matching order (prep), so the weights are never reordered. Lanes 0-7 come from the first
 * group, 8-15 from the second; the chunk's sum is scaled by [s0 x8, s1 x8]. Rows are read one
 * after another (several interleaved rows defeat the hardware prefetcher) with a software
 * prefetch ahead in the code stream.
 */
#include "kernels_avx512.h"

#define PF_BYTES 8192 /* prefetch distance in the code stream (measured on Zen 5) */
#define SMALL_N 4     /* mat_mul up to this many tokens uses the matvec kernels */
#define ROW_BLOCK 16  /* rows a token loop revisits while they are in cache */

K512_INLINE void prefetch(const uint8_t *p, int64_t ahead)
{
	_mm_prefetch((const char *)((uintptr_t)p + (uintptr_t)ahead), _MM_HINT_T0);
}

/* ---- q4 in the nibble-chunk order ---- */

static int64_t q4_chunks(const coli_mat *W)
{
	return (kern_groups(W) + 1) / 2;
}

static int64_t prep_floats(const coli_mat *W)
{
	return W->enc == COLI_ENC_Q4 ? q4_chunks(W) * 128 : 0;
}

/* xp[128p + 16j + d] = x at the column of nibble j of dword d of chunk p; zero past cols. */
static void prep(const coli_mat *W, const float *x, float *xp)
{
	for (int64_t p = 0; p < q4_chunks(W); p++)
		for (int j = 0; j < 8; j++)
			for (int d = 0; d < 16; d++) {
				int64_t col = 128 * p + 64 * (d >= 8) + 32 * (j & 1) + ((4 * d + (j >> 1)) & 31);
				xp[128 * p + 16 * j + d] = col < W->cols ? x[col] : 0.0f;
			}
}

/* acc[t] += (sum over the chunk's 128 weights of q * xp_t) * sv, for T tokens xs apart. */
K512_INLINE void q4_chunk(__m512i v, __m512 sv, const float *xp, int64_t xs, int T, __m512 *acc)
{
	const __m512 tbl = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
	__m512 w[8];
	w[0] = _mm512_permutexvar_ps(v, tbl);
	w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tbl);
	w[2] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 8), tbl);
	w[3] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 12), tbl);
	w[4] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 16), tbl);
	w[5] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 20), tbl);
	w[6] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 24), tbl);
	w[7] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 28), tbl);
#pragma GCC unroll 4
	for (int t = 0; t < T; t++) {
		const float *x = xp + t * xs;
		__m512 s = _mm512_mul_ps(w[0], _mm512_load_ps(x));
#pragma GCC unroll 8
		for (int j = 1; j < 8; j++)
			s = _mm512_fmadd_ps(w[j], _mm512_load_ps(x + 16 * j), s);
		acc[t] = _mm512_fmadd_ps(s, sv, acc[t]);
	}
}

/* y[t * ys + r - r0] = W[r] . x_t for T tokens of prepared x (xs floats apart), r in [r0, r1).
 * Scales are widened 16 at a time; vpermps spreads chunk p's pair over the two half-vectors. */
K512_INLINE void q4_rows(const coli_mat *W, const float *xp, int64_t xs, int T, float *y, int64_t ys,
			 int64_t r0, int64_t r1)
{
	const int64_t G = kern_groups(W), full = G / 2;
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *c = W->codes + r * W->row_bytes, *sr = W->scales + 2 * r * G;
		__m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
				 _mm512_setzero_ps()};
		for (int64_t p0 = 0; p0 < full; p0 += 8) {
			int64_t np = full - p0 < 8 ? full - p0 : 8;
			__m512 s16 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k512_first(2 * np), sr + 4 * p0));
			__m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
			for (int64_t p = p0; p < p0 + np; p++) {
				prefetch(c + 64 * p, PF_BYTES);
				q4_chunk(_mm512_loadu_si512(c + 64 * p), _mm512_permutexvar_ps(idx, s16),
					 xp + 128 * p, xs, T, acc);
				idx = _mm512_add_epi32(idx, _mm512_set1_epi32(2));
			}
		}
		if (G & 1) { /* a last group alone: the upper half is zero codes against zero x */
			uint16_t h;
			memcpy(&h, sr + 2 * (G - 1), 2);
			__m512i v = _mm512_maskz_loadu_epi32(0x00FF, c + 64 * full);
			__m512 sv = _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(_cvtsh_ss(h)));
			q4_chunk(v, sv, xp + 128 * full, xs, T, acc);
		}
		for (int t = 0; t < T; t++)
			y[t * ys + r - r0] = _mm512_reduce_add_ps(acc[t]);
	}
}

/* ---- every encoding through k512_d16 (q4 too, when x is not prepared) ---- */

/* The same for T tokens of plain x: 64 columns per step into four accumulators per token,
 * one scale group at a time, partial slices masked. */
K512_INLINE void gen_rows(coli_enc enc, const coli_mat *W, const float *x, int64_t xs, int T, float *y,
			  int64_t ys, int64_t r0, int64_t r1)
{
	const int64_t cols = W->cols, sw = kern_scale_width(W);
	const int64_t bpc = enc == COLI_ENC_F32 ? 4 : enc == COLI_ENC_BF16 || enc == COLI_ENC_F16 ? 2 : 1;
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *c = W->codes + r * W->row_bytes, *sr = k512_row_scales(W, r);
		__m512 acc[4][4];
		for (int t = 0; t < T; t++)
			for (int u = 0; u < 4; u++)
				acc[t][u] = _mm512_setzero_ps();
		for (int64_t b0 = 0, b = 0; b0 < cols; b0 += sw, b++) {
			__m512 s = k512_scale(enc, sr, b);
			int64_t b1 = b0 + sw < cols ? b0 + sw : cols, k = b0;
			for (; k + 64 <= b1; k += 64) {
				for (int64_t o = 0; o < 64 * bpc; o += 64)
					prefetch(c + k * bpc + o, PF_BYTES);
#pragma GCC unroll 4
				for (int u = 0; u < 4; u++) {
					__m512 w = k512_d16(enc, c, k + 16 * u, 0xFFFF, s);
#pragma GCC unroll 4
					for (int t = 0; t < T; t++)
						acc[t][u] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + t * xs + k + 16 * u),
									    acc[t][u]);
				}
			}
			for (; k < b1; k += 16) {
				__mmask16 m = k512_first(b1 - k);
				__m512 w = k512_d16(enc, c, k, m, s);
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					acc[t][0] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m, x + t * xs + k), acc[t][0]);
			}
		}
		for (int t = 0; t < T; t++) {
			__m512 a = _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3]));
			y[t * ys + r - r0] = _mm512_reduce_add_ps(a);
		}
	}
}

/* One function per (encoding, token count), so the decoder and the token loop are constants. */
typedef void (*rows_fn)(const coli_mat *W, const float *x, int64_t xs, float *y, int64_t ys,
			int64_t r0, int64_t r1);

#define ROWS_T(name, call, T)                                                                 \
	static K512 void name##_##T(const coli_mat *W, const float *x, int64_t xs, float *y,   \
				    int64_t ys, int64_t r0, int64_t r1)                        \
	{                                                                                     \
		call;                                                                         \
	}
#define ROWS(name, call)                                                                      \
	ROWS_T(name, call(1), 1) ROWS_T(name, call(2), 2) ROWS_T(name, call(3), 3)             \
	ROWS_T(name, call(4), 4)                                                              \
	static const rows_fn name[4] = {name##_1, name##_2, name##_3, name##_4};

#define Q4P(T) q4_rows(W, x, xs, T, y, ys, r0, r1)
#define F32_(T) gen_rows(COLI_ENC_F32, W, x, xs, T, y, ys, r0, r1)
#define BF16_(T) gen_rows(COLI_ENC_BF16, W, x, xs, T, y, ys, r0, r1)
#define F16_(T) gen_rows(COLI_ENC_F16, W, x, xs, T, y, ys, r0, r1)
#define FP8_(T) gen_rows(COLI_ENC_FP8, W, x, xs, T, y, ys, r0, r1)
#define Q8_(T) gen_rows(COLI_ENC_Q8, W, x, xs, T, y, ys, r0, r1)
#define Q4_(T) gen_rows(COLI_ENC_Q4, W, x, xs, T, y, ys, r0, r1)
ROWS(q4p_rows, Q4P)
ROWS(f32_rows, F32_)
ROWS(bf16_rows, BF16_)
ROWS(f16_rows, F16_)
ROWS(fp8_rows, FP8_)
ROWS(q8_rows, Q8_)
ROWS(q4_plain_rows, Q4_)

static const rows_fn *plain_rows[COLI_ENC_COUNT] = {
	[COLI_ENC_F32] = f32_rows, [COLI_ENC_BF16] = bf16_rows, [COLI_ENC_F16] = f16_rows,
	[COLI_ENC_FP8] = fp8_rows, [COLI_ENC_Q8] = q8_rows,     [COLI_ENC_Q4] = q4_plain_rows,
};

static void vec(const coli_mat *W, const float *x, const float *xp, float *y, int64_t r0, int64_t r1)
{
	if (W->enc == COLI_ENC_Q4 && xp)
		q4p_rows[0](W, xp, 0, y, 0, r0, r1);
	else
		plain_rows[W->enc][0](W, x, 0, y, 0, r0, r1);
}

/* Up to SMALL_N tokens: blocks of ROW_BLOCK rows, each visited by every token block while it
 * is in cache; more tokens: the GEMM. */
static void mul(const coli_mat *W, const float *X, const float *XP, int n, float *Y, int64_t r0,
		int64_t r1)
{
	if (n > SMALL_N) {
		if (k512_slices_ok(W))
			k512_gemm(W, X, n, Y, r0, r1);
		else
			kern_scalar.mul(W, X, XP, n, Y, r0, r1);
		return;
	}
	int q4p = W->enc == COLI_ENC_Q4 && XP;
	int64_t xs = q4p ? prep_floats(W) : W->cols;
	const float *x = q4p ? XP : X;
	for (int64_t rb = r0; rb < r1; rb += ROW_BLOCK) {
		int64_t re = rb + ROW_BLOCK < r1 ? rb + ROW_BLOCK : r1;
		for (int t0 = 0; t0 < n; t0 += 4) {
			int nt = n - t0 < 4 ? n - t0 : 4;
			const rows_fn *f = q4p ? q4p_rows : plain_rows[W->enc];
			f[nt - 1](W, x + t0 * xs, xs, Y + t0 * W->rows + rb, W->rows, rb, re);
		}
	}
}

/* ---- transposed product and rows ---- */

/* y[k0 .. k0+128) += sum_r a[r] W[r][...]: eight accumulators over every row of the range,
 * then stored; the scale group of each 16-column slice is found once per block. */
K512_INLINE void vec_t_enc(coli_enc enc, const coli_mat *W, int64_t r0, int64_t nr, const float *a,
			   float *y, int64_t c0, int64_t c1)
{
	const int64_t sw = kern_scale_width(W);
	for (int64_t k0 = c0; k0 < c1; k0 += 128) {
		__m512 acc[8];
		__mmask16 m[8];
		int64_t b[8];
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			int64_t k = k0 + 16 * i < c1 ? k0 + 16 * i : c1 - 1; /* empty slices: a valid group */
			m[i] = k512_first(c1 - k0 - 16 * i);
			acc[i] = _mm512_maskz_loadu_ps(m[i], y + k0 + 16 * i);
			b[i] = k / sw;
		}
		for (int64_t r = r0; r < r0 + nr; r++) {
			const uint8_t *c = W->codes + r * W->row_bytes, *sr = k512_row_scales(W, r);
			__m512 ar = _mm512_set1_ps(a[r - r0]);
#pragma GCC unroll 8
			for (int i = 0; i < 8; i++) {
				__m512 w = k512_d16(enc, c, k0 + 16 * i, m[i], k512_scale(enc, sr, b[i]));
				acc[i] = _mm512_fmadd_ps(w, ar, acc[i]);
			}
		}
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++)
			_mm512_mask_storeu_ps(y + k0 + 16 * i, m[i], acc[i]);
	}
}

static K512 void vec_t(const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y,
		       int64_t c0, int64_t c1)
{
	switch (k512_slices_ok(W) ? W->enc : COLI_ENC_COUNT) {
	case COLI_ENC_F32: vec_t_enc(COLI_ENC_F32, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_BF16: vec_t_enc(COLI_ENC_BF16, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_F16: vec_t_enc(COLI_ENC_F16, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_FP8: vec_t_enc(COLI_ENC_FP8, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_Q8: vec_t_enc(COLI_ENC_Q8, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_Q4: vec_t_enc(COLI_ENC_Q4, W, r0, nr, a, y, c0, c1); break;
	default: kern_scalar.vec_t(W, r0, nr, a, y, c0, c1); break;
	}
}

static K512 void row(const coli_mat *W, int64_t r, float *out)
{
	const uint8_t *c = W->codes + r * W->row_bytes, *sr = k512_row_scales(W, r);
	const int64_t sw = kern_scale_width(W);
	if (!k512_slices_ok(W)) {
		kern_scalar.row(W, r, out);
		return;
	}
	for (int64_t k = 0; k < W->cols; k += 16) {
		__mmask16 m = k512_first(W->cols - k);
		__m512 w = k512_d16(W->enc, c, k, m, k512_scale(W->enc, sr, k / sw));
		_mm512_mask_storeu_ps(out + k, m, w);
	}
}

const kern_ops kern_avx512 = {
	.name = "avx512",
	.prep_floats = prep_floats,
	.prep = prep,
	.vec = vec,
	.mul = mul,
	.vec_t = vec_t,
	.row = row,
	.small_n = SMALL_N,
};
