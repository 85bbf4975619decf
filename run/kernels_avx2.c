/* kernels_avx2.c: AVX2 matrix-vector kernels (one row at a time, 1-4 tokens), the transposed
 * product and row decoding; the batched product's GEMM is kernels_avx2_gemm.c.
 *
 * q4 matvec: a group's 32 bytes are loaded whole; nibble j of every dword (bits 4j .. 4j+3)
 * is masked in place and given the exponent of 2^(23-4j), which makes the float 2^(23-4j) + n;
 * subtracting 2^(23-4j) + 8 leaves n - 8 exactly. The high half-word's nibbles go the same way
 * after one shift by 16. x is prepared once per product in that order (prep).
 */
#include "kernels_avx2.h"

#define PF_BYTES 4096 /* prefetch distance in the code stream */
#define SMALL_N 4     /* mat_mul up to this many tokens uses the matvec kernels */
#define ROW_BLOCK 16  /* rows a token loop revisits while they are in cache */

K256_INLINE void prefetch(const uint8_t *p, int64_t ahead)
{
	_mm_prefetch((const char *)((uintptr_t)p + (uintptr_t)ahead), _MM_HINT_T0);
}

/* ---- q4 in the nibble order ---- */

static int64_t prep_floats(const coli_mat *W)
{
	return W->enc == COLI_ENC_Q4 ? kern_groups(W) * 64 : 0;
}

/* xp[64g + 8j + d] = x at the column of nibble j of dword d of group g; zero past cols. */
static void prep(const coli_mat *W, const float *x, float *xp)
{
	for (int64_t g = 0; g < kern_groups(W); g++)
		for (int j = 0; j < 8; j++)
			for (int d = 0; d < 8; d++) {
				int64_t col = 64 * g + 32 * (j & 1) + 4 * d + (j >> 1);
				xp[64 * g + 8 * j + d] = col < W->cols ? x[col] : 0.0f;
			}
}

/* n - 8 for nibble j (0..3) of each dword of u, as floats. */
K256_INLINE __m256 nib(__m256i u, int j)
{
	__m256i f = _mm256_or_si256(_mm256_and_si256(u, _mm256_set1_epi32(15 << (4 * j))),
				    _mm256_set1_epi32((150 - 4 * j) << 23));
	return _mm256_sub_ps(_mm256_castsi256_ps(f), _mm256_set1_ps((float)(1 << (23 - 4 * j)) + 8.0f));
}

/* acc[t] += (sum over the group's 64 weights of q * xp_t) * s, for T tokens xs apart. */
K256_INLINE void q4_group(__m256i v, __m256 s, const float *xp, int64_t xs, int T, __m256 *acc)
{
	__m256i h = _mm256_srli_epi32(v, 16);
	__m256 w[8] = {nib(v, 0), nib(v, 1), nib(v, 2), nib(v, 3), nib(h, 0), nib(h, 1), nib(h, 2), nib(h, 3)};
#pragma GCC unroll 4
	for (int t = 0; t < T; t++) {
		const float *x = xp + t * xs;
		__m256 a = _mm256_mul_ps(w[0], _mm256_load_ps(x));
#pragma GCC unroll 8
		for (int j = 1; j < 8; j++)
			a = _mm256_fmadd_ps(w[j], _mm256_load_ps(x + 8 * j), a);
		acc[t] = _mm256_fmadd_ps(a, s, acc[t]);
	}
}

K256_INLINE float hsum(__m256 a)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* y[t * ys + r - r0] = W[r] . x_t for T tokens of prepared x (xs floats apart), r in [r0, r1). */
K256_INLINE void q4_rows(const coli_mat *W, const float *xp, int64_t xs, int T, float *y, int64_t ys,
			 int64_t r0, int64_t r1)
{
	const int64_t G = kern_groups(W);
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *c = W->codes + r * W->row_bytes, *sr = W->scales + 2 * r * G;
		__m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
				 _mm256_setzero_ps()};
		for (int64_t g = 0; g < G; g++) {
			uint16_t h;
			memcpy(&h, sr + 2 * g, 2);
			prefetch(c + 32 * g, PF_BYTES);
			q4_group(_mm256_loadu_si256((const void *)(c + 32 * g)), _mm256_set1_ps(_cvtsh_ss(h)),
				 xp + 64 * g, xs, T, acc);
		}
		for (int t = 0; t < T; t++)
			y[t * ys + r - r0] = hsum(acc[t]);
	}
}

/* ---- every encoding through k256_d8 (q4 too, when x is not prepared) ---- */

K256_INLINE __m256 load_x_part(const float *x, int64_t n)
{
	return _mm256_maskload_ps(x, k256_first(n));
}

/* The same for T tokens of plain x: 32 columns per step into four accumulators per token,
 * one scale group at a time, partial slices through k256_d8_part. */
K256_INLINE void gen_rows(coli_enc enc, const coli_mat *W, const float *x, int64_t xs, int T, float *y,
			  int64_t ys, int64_t r0, int64_t r1)
{
	const int64_t cols = W->cols, sw = kern_scale_width(W), bpc = k256_bpc(enc);
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *c = W->codes + r * W->row_bytes, *sr = k256_row_scales(W, r);
		__m256 acc[4][4];
		for (int t = 0; t < T; t++)
			for (int u = 0; u < 4; u++)
				acc[t][u] = _mm256_setzero_ps();
		for (int64_t b0 = 0, b = 0; b0 < cols; b0 += sw, b++) {
			__m256 s = k256_scale(enc, sr, b);
			int64_t b1 = b0 + sw < cols ? b0 + sw : cols, k = b0;
			for (; k + 32 <= b1; k += 32) {
				prefetch(c + k * bpc, PF_BYTES);
#pragma GCC unroll 4
				for (int u = 0; u < 4; u++) {
					__m256 w = k256_d8(enc, c, k + 8 * u, s);
#pragma GCC unroll 4
					for (int t = 0; t < T; t++)
						acc[t][u] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + t * xs + k + 8 * u),
									    acc[t][u]);
				}
			}
			for (; k < b1; k += 8) {
				int64_t n = b1 - k;
				__m256 w = n >= 8 ? k256_d8(enc, c, k, s) : k256_d8_part(enc, c, k, n, s);
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					acc[t][0] = _mm256_fmadd_ps(w, load_x_part(x + t * xs + k, n), acc[t][0]);
			}
		}
		for (int t = 0; t < T; t++) {
			__m256 a = _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3]));
			y[t * ys + r - r0] = hsum(a);
		}
	}
}

typedef void (*rows_fn)(const coli_mat *W, const float *x, int64_t xs, float *y, int64_t ys,
			int64_t r0, int64_t r1);

#define ROWS_T(name, call, T)                                                                 \
	static K256 void name##_##T(const coli_mat *W, const float *x, int64_t xs, float *y,   \
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

static void mul(const coli_mat *W, const float *X, const float *XP, int n, float *Y, int64_t r0,
		int64_t r1)
{
	if (n > SMALL_N) {
		if (k256_slices_ok(W))
			k256_gemm(W, X, n, Y, r0, r1);
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

/* y[k0 .. k0+64) += sum_r a[r] W[r][...]: eight accumulators over every row of the range. */
K256_INLINE void vec_t_enc(coli_enc enc, const coli_mat *W, int64_t r0, int64_t nr, const float *a,
			   float *y, int64_t c0, int64_t c1)
{
	const int64_t sw = kern_scale_width(W);
	for (int64_t k0 = c0; k0 < c1; k0 += 64) {
		__m256 acc[8];
		__m256i m[8];
		int64_t b[8], n[8];
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			int64_t k = k0 + 8 * i < c1 ? k0 + 8 * i : c1 - 1; /* empty slices: a valid group */
			n[i] = c1 - k0 - 8 * i;
			m[i] = k256_first(n[i]);
			acc[i] = _mm256_maskload_ps(y + k0 + 8 * i, m[i]);
			b[i] = k / sw;
		}
		for (int64_t r = r0; r < r0 + nr; r++) {
			const uint8_t *c = W->codes + r * W->row_bytes, *sr = k256_row_scales(W, r);
			__m256 ar = _mm256_set1_ps(a[r - r0]);
#pragma GCC unroll 8
			for (int i = 0; i < 8; i++) {
				if (n[i] <= 0)
					break;
				__m256 s = k256_scale(enc, sr, b[i]);
				__m256 w = n[i] >= 8 ? k256_d8(enc, c, k0 + 8 * i, s)
						     : k256_d8_part(enc, c, k0 + 8 * i, n[i], s);
				acc[i] = _mm256_fmadd_ps(w, ar, acc[i]);
			}
		}
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++)
			_mm256_maskstore_ps(y + k0 + 8 * i, m[i], acc[i]);
	}
}

static K256 void vec_t(const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y,
		       int64_t c0, int64_t c1)
{
	switch (k256_slices_ok(W) ? W->enc : COLI_ENC_COUNT) {
	case COLI_ENC_F32: vec_t_enc(COLI_ENC_F32, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_BF16: vec_t_enc(COLI_ENC_BF16, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_F16: vec_t_enc(COLI_ENC_F16, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_FP8: vec_t_enc(COLI_ENC_FP8, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_Q8: vec_t_enc(COLI_ENC_Q8, W, r0, nr, a, y, c0, c1); break;
	case COLI_ENC_Q4: vec_t_enc(COLI_ENC_Q4, W, r0, nr, a, y, c0, c1); break;
	default: kern_scalar.vec_t(W, r0, nr, a, y, c0, c1); break;
	}
}

static K256 void row(const coli_mat *W, int64_t r, float *out)
{
	const uint8_t *c = W->codes + r * W->row_bytes, *sr = k256_row_scales(W, r);
	const int64_t sw = kern_scale_width(W);
	if (!k256_slices_ok(W)) {
		kern_scalar.row(W, r, out);
		return;
	}
	for (int64_t k = 0; k < W->cols; k += 8) {
		int64_t n = W->cols - k;
		__m256 s = k256_scale(W->enc, sr, k / sw);
		__m256 w = n >= 8 ? k256_d8(W->enc, c, k, s) : k256_d8_part(W->enc, c, k, n, s);
		_mm256_maskstore_ps(out + k, k256_first(n), w);
	}
}

const kern_ops kern_avx2 = {
	.name = "avx2",
	.prep_floats = prep_floats,
	.prep = prep,
	.vec = vec,
	.mul = mul,
	.vec_t = vec_t,
	.row = row,
	.small_n = SMALL_N,
};
