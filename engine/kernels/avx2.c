/* avx2.c: AVX2 matrix-vector kernels (1 to 4 tokens per pass), the transposed product
 * and row decoding; the batched product's GEMM is avx2_gemm.c.
 *
 * q4 matvec: a group's 32 bytes are loaded whole; nibble j of every dword (bits 4j .. 4j+3)
 * is masked in place and given the exponent of 2^(23-4j), which makes the float 2^(23-4j) + n;
 * subtracting 2^(23-4j) + 8 leaves n - 8 exactly. The high half-word's nibbles go the same way
 * after one shift by 16. x is prepared once per product in that order (prep). Row and column
 * blocks and prefetching follow avx512.c.
 */
#include "kernels/avx2.h"

#define RB 16        /* rows per block (the next block is prefetched meanwhile) */
#define XL1 8192     /* floats of x kept in L1: a block has XL1 / T columns */
#define SMALL_N 16   /* coli_mat_mul up to small_n(enc) <= SMALL_N tokens uses the matvec kernels */
#define PF_AHEAD 8192 /* bytes, when rows are read whole: one stream */

/* The scales of row r (q4/q8), fetched a block of rows ahead (see avx512.c). */
K256_INLINE void prefetch_scales(const coli_mat *W, int64_t r)
{
	uintptr_t s = (uintptr_t)W->scales + (uintptr_t)(2 * r * kern_groups(W));
	for (int64_t o = 0; o < 2 * kern_groups(W); o += 64)
		_mm_prefetch((const char *)(s + (uintptr_t)o), _MM_HINT_T0);
}

/* The code stream's prefetch for the 64 bytes at c: PF_AHEAD ahead of c when rows are read
 * whole, else the next row block in address order through pf (see avx512.c). */
K256_INLINE void prefetch_next(const uint8_t *c, uintptr_t *pf, int whole)
{
	if (whole) {
		_mm_prefetch((const char *)((uintptr_t)c + PF_AHEAD), _MM_HINT_T0);
	} else {
		_mm_prefetch((const char *)*pf, _MM_HINT_T1);
		*pf += 64;
	}
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
	__asm__("" : "+x"(v)); /* one load, not one per nibble (avx512.c q4_chunk) */
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

/* y[t * ys + r - r0] = W[r] . x_t for T tokens of prepared x (xs floats apart), r in [r0, r1),
 * in blocks of RB rows x XL1 / T columns as in avx512.c. */
K256_INLINE void q4_rows(const coli_mat *W, const float *xp, int64_t xs, int T, float *y, int64_t ys,
			 int64_t r0, int64_t r1)
{
	const int64_t G = kern_groups(W), gb = XL1 / 64 / T;
	__m256 acc[RB][4];
	for (int64_t b0 = r0; b0 < r1; b0 += RB) {
		int nr = r1 - b0 < RB ? (int)(r1 - b0) : RB, whole = G <= gb;
		uintptr_t pf = (uintptr_t)W->codes + (uintptr_t)((b0 + RB) * W->row_bytes);
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				acc[i][t] = _mm256_setzero_ps();
		for (int64_t g0 = 0; g0 < G; g0 += gb) {
			int64_t g1 = G - g0 < gb ? G : g0 + gb;
			for (int i = 0; i < nr; i++) {
				const uint8_t *c = W->codes + (b0 + i) * W->row_bytes, *sr = W->scales + 2 * (b0 + i) * G;
				__m256 a[4];
				if (g0 == 0)
					prefetch_scales(W, b0 + i + RB);
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					a[t] = acc[i][t];
				for (int64_t g = g0; g < g1; g++) {
					uint16_t h;
					memcpy(&h, sr + 2 * g, 2);
					if ((g & 1) == 0)
						prefetch_next(c + 32 * g, &pf, whole);
					q4_group(_mm256_loadu_si256((const void *)(c + 32 * g)), _mm256_set1_ps(_cvtsh_ss(h)),
						 xp + 64 * g, xs, T, a);
				}
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					acc[i][t] = a[t];
			}
		}
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				y[t * ys + b0 + i - r0] = hsum(acc[i][t]);
	}
}

/* ---- every encoding through k256_d8 (q4 too, when x is not prepared) ---- */

K256_INLINE __m256 load_x_part(const float *x, int64_t n)
{
	return _mm256_maskload_ps(x, k256_first(n));
}

/* Columns sharing one scale (unscaled encodings: 1024), and columns per block for any T tokens:
 * whole scale groups, about XL1 / 4. */
static inline int64_t scale_width(const coli_mat *W)
{
	int q = W->enc == COLI_ENC_Q4 || W->enc == COLI_ENC_Q8 || W->enc == COLI_ENC_FP8;
	return q ? kern_scale_width(W) : 1024;
}

static inline int64_t block_width(const coli_mat *W, int T)
{
	int64_t sw = scale_width(W), cb = XL1 / 4; /* not XL1 / T: the sums' order is T's alone (kernels.h) */
	(void)T;
	return sw >= cb ? sw : cb / sw * sw;
}

/* The same for T tokens of plain x, in the same blocks: 32 columns per step into four
 * accumulators per token, one scale group at a time, partial slices through k256_d8_part;
 * the four are summed at the end of each column block. */
K256_INLINE void gen_rows(coli_enc enc, const coli_mat *W, const float *x, int64_t xs, int T, float *y,
			  int64_t ys, int64_t r0, int64_t r1)
{
	const int64_t cols = W->cols, sw = scale_width(W), bw = block_width(W, T), bpc = k256_bpc(enc);
	__m256 acc[RB][4];
	for (int64_t b0 = r0; b0 < r1; b0 += RB) {
		int nr = r1 - b0 < RB ? (int)(r1 - b0) : RB, whole = bw >= cols;
		uintptr_t pf = (uintptr_t)W->codes + (uintptr_t)((b0 + RB) * W->row_bytes);
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				acc[i][t] = _mm256_setzero_ps();
		for (int64_t c0 = 0; c0 < cols; c0 += bw) {
			int64_t c1 = cols - c0 < bw ? cols : c0 + bw;
			for (int i = 0; i < nr; i++) {
				const uint8_t *c = W->codes + (b0 + i) * W->row_bytes, *sr = k256_row_scales(W, b0 + i);
				__m256 a[4][4];
				if (c0 == 0 && enc == COLI_ENC_Q8)
					prefetch_scales(W, b0 + i + RB);
#pragma GCC unroll 4
				for (int t = 0; t < T; t++) {
					a[t][0] = acc[i][t];
					a[t][1] = a[t][2] = a[t][3] = _mm256_setzero_ps();
				}
				for (int64_t g0 = c0, g = c0 / sw; g0 < c1; g0 += sw, g++) {
					__m256 s = k256_scale(enc, sr, g);
					int64_t g1 = c1 - g0 < sw ? c1 : g0 + sw, k = g0;
					for (; k + 32 <= g1; k += 32) {
						for (int64_t o = 0; o < 32 * bpc; o += 64) /* a line per 64 bytes */
							if (bpc > 1 || (k & 32) == 0)
								prefetch_next(c + k * bpc + o, &pf, whole);
						int clean = enc == COLI_ENC_FP8 && k256_fp8_clean(c + k);
#pragma GCC unroll 4
						for (int u = 0; u < 4; u++) {
							__m256 w = clean ? k256_fp8_8(c + k + 8 * u, s) : k256_d8(enc, c, k + 8 * u, s);
#pragma GCC unroll 4
							for (int t = 0; t < T; t++)
								a[t][u] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + t * xs + k + 8 * u),
											  a[t][u]);
						}
					}
					for (; k < g1; k += 8) {
						int64_t n = g1 - k;
						__m256 w = n >= 8 ? k256_d8(enc, c, k, s) : k256_d8_part(enc, c, k, n, s);
#pragma GCC unroll 4
						for (int t = 0; t < T; t++)
							a[t][0] = _mm256_fmadd_ps(w, load_x_part(x + t * xs + k, n), a[t][0]);
					}
				}
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					acc[i][t] = _mm256_add_ps(_mm256_add_ps(a[t][0], a[t][1]), _mm256_add_ps(a[t][2], a[t][3]));
			}
		}
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				y[t * ys + b0 + i - r0] = hsum(acc[i][t]);
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

/* Tokens up to which passes of the matvec kernels beat the GEMM's decoding and transposing
 * (measured on 2048x7168 matrices, Zen 5). */
static int small_n(coli_enc enc)
{
	return enc == COLI_ENC_Q4 ? 16 : 8; /* at least COLI_EXACT_N (kernels.h) */
}

/* Up to small_n tokens: the matvec kernels, up to 4 tokens per pass, the passes over one block
 * of RB rows after another (the block stays in L2); more tokens: the GEMM. */
static void mul(const coli_mat *W, const float *X, const float *XP, int n, float *Y, int64_t r0,
		int64_t r1)
{
	if (n > small_n(W->enc)) {
		if (k256_slices_ok(W))
			k256_gemm(W, X, n, Y, r0, r1);
		else
			kern_scalar.mul(W, X, XP, n, Y, r0, r1);
		return;
	}
	int q4p = W->enc == COLI_ENC_Q4 && XP;
	const rows_fn *f = q4p ? q4p_rows : plain_rows[W->enc];
	const float *x = q4p ? XP : X;
	int64_t xs = q4p ? prep_floats(W) : W->cols;
	for (int64_t b0 = r0; b0 < r1; b0 += n > 4 ? RB : r1 - r0) {
		int64_t b1 = n <= 4 || r1 - b0 < RB ? r1 : b0 + RB;
		for (int t0 = 0; t0 < n; t0 += 4) {
			int nt = n - t0 < 4 ? n - t0 : 4;
			f[nt - 1](W, x + t0 * xs, xs, Y + t0 * W->rows + b0, W->rows, b0, b1);
		}
	}
}

/* ---- transposed product and rows ---- */

/* y[k0 .. k0+64) += sum_r a[r] W[r][...]: eight accumulators over every row of the range; a
 * row's scale is widened once per scale group (newg). */
K256_INLINE void vec_t_enc(coli_enc enc, const coli_mat *W, int64_t r0, int64_t nr, const float *a,
			   float *y, int64_t c0, int64_t c1)
{
	const int64_t sw = kern_scale_width(W);
	for (int64_t k0 = c0; k0 < c1; k0 += 64) {
		__m256 acc[8];
		__m256i m[8];
		int64_t b[8], n[8];
		int newg[8];
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			int64_t k = k0 + 8 * i < c1 ? k0 + 8 * i : c1 - 1; /* empty slices: a valid group */
			n[i] = c1 - k0 - 8 * i;
			m[i] = k256_first(n[i]);
			acc[i] = _mm256_maskload_ps(y + k0 + 8 * i, m[i]);
			b[i] = k / sw;
			newg[i] = i == 0 || b[i] != b[i - 1];
		}
		for (int64_t r = r0; r < r0 + nr; r++) {
			const uint8_t *c = W->codes + r * W->row_bytes, *sr = k256_row_scales(W, r);
			__m256 ar = _mm256_set1_ps(a[r - r0]), s = ar;
#pragma GCC unroll 8
			for (int i = 0; i < 8; i++) {
				if (n[i] <= 0)
					break;
				if (newg[i])
					s = k256_scale(enc, sr, b[i]);
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
