/* avx512.c: AVX-512 matrix-vector kernels (1 to 4 tokens per pass), the transposed
 * product and row decoding; the batched product's GEMM is avx512_gemm.c.
 *
 * q4 matvec: a 64-byte chunk (two groups) is loaded whole; shifting its dwords right by 4j
 * brings nibble j of every dword to bits 0..3, where vpermps reads it as an index into the
 * table -8..7: 8 shifts-and-permutes give 128 weights. x is prepared once per product in the
 * matching order (prep), so the weights are never reordered. Lanes 0-7 come from the first
 * group, 8-15 from the second; the chunk's sum is scaled by [s0 x8, s1 x8].
 *
 * Rows go in blocks of RB, read one after another (interleaving rows defeats the hardware
 * prefetcher): whole when the tokens' x fits in L1 (XL1 floats), else in column blocks, so x
 * never streams from L2 (that halved the speed). From RAM two more things mattered on Zen 5:
 * the scales are prefetched like the codes, and a code chunk is loaded once (q4_chunk).
 */
#include "kernels/avx512.h"

#define RB 16        /* rows per block (the next block is prefetched meanwhile) */
#define XL1 8192     /* floats of x kept in L1: a block has XL1 / T columns */
#define SMALL_N 16   /* coli_mat_mul up to small_n(enc) <= SMALL_N tokens uses the matvec kernels */

#define PF_AHEAD 8192 /* bytes, when rows are read whole: one stream */

/* The scales of row r (q4/q8: 2 bytes per group), fetched a block of rows ahead: a scale
 * that misses in the cache stalls everything that depends on it (measured: -25% from RAM). */
K512_INLINE void prefetch_scales(const coli_mat *W, int64_t r)
{
	uintptr_t s = (uintptr_t)W->scales + (uintptr_t)(2 * r * kern_groups(W));
	for (int64_t o = 0; o < 2 * kern_groups(W); o += 64)
		_mm_prefetch((const char *)(s + (uintptr_t)o), _MM_HINT_T0);
}

/* The code stream's prefetch for the 64 bytes at c. Rows read whole make one stream: fetch
 * PF_AHEAD bytes ahead of c (an address derived from the load's own pointer: a separately
 * advanced pointer halved the speed from RAM on Zen 5). Rows read in column blocks: fetch the
 * next row block (its rows are contiguous) in address order through pf, spread over this
 * block's work. Addresses may lie past the matrix: a prefetch never faults. */
K512_INLINE void prefetch_next(const uint8_t *c, uintptr_t *pf, int whole)
{
	if (whole) {
		_mm_prefetch((const char *)((uintptr_t)c + PF_AHEAD), _MM_HINT_T0);
	} else {
		_mm_prefetch((const char *)*pf, _MM_HINT_T1);
		*pf += 64;
	}
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
	/* Keeps v in a register: folded into the shifts as memory operands, the chunk is loaded
	 * eight times, and from RAM that halved the speed on Zen 5. */
	__asm__("" : "+v"(v));
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
 * Blocks of RB rows x XL1 / T columns: the tokens' x block stays in L1 while the rows pass, the
 * accumulators wait in acc between column blocks (each row's sum keeps its order), and the
 * next row block is prefetched into L2 one cache line per chunk, in address order. Scales are
 * widened 16 at a time; vpermps spreads chunk p's pair over the two half-vectors. */
K512_INLINE void q4_rows(const coli_mat *W, const float *xp, int64_t xs, int T, float *y, int64_t ys,
			 int64_t r0, int64_t r1)
{
	const int64_t G = kern_groups(W), P = (G + 1) / 2, full = G / 2;
	const __m512i two = _mm512_set1_epi32(2);
	__m512 acc[RB][4];
	for (int64_t b0 = r0; b0 < r1; b0 += RB) {
		int nr = r1 - b0 < RB ? (int)(r1 - b0) : RB, whole = P <= XL1 / 128 / T;
		uintptr_t pf = (uintptr_t)W->codes + (uintptr_t)((b0 + RB) * W->row_bytes);
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				acc[i][t] = _mm512_setzero_ps();
		for (int64_t p0 = 0; p0 < P; p0 += XL1 / 128 / T) {
			int64_t p1 = P - p0 < XL1 / 128 / T ? P : p0 + XL1 / 128 / T;
			for (int i = 0; i < nr; i++) {
				const uint8_t *c = W->codes + (b0 + i) * W->row_bytes, *sr = W->scales + 2 * (b0 + i) * G;
				__m512 s16 = _mm512_setzero_ps();
				if (p0 == 0)
					prefetch_scales(W, b0 + i + RB);
				__m512i idx = _mm512_setzero_si512();
				__m512 a[4];
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					a[t] = acc[i][t];
				for (int64_t p = p0; p < p1; p++) {
					if ((p - p0) % 8 == 0) {
						s16 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k512_first(G - 2 * p), sr + 4 * p));
						idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
					}
					/* a last group alone: its upper half is zero codes, x and scale */
					__m512i v = p < full ? _mm512_loadu_si512(c + 64 * p)
							     : _mm512_maskz_loadu_epi32(0x00FF, c + 64 * p);
					prefetch_next(c + 64 * p, &pf, whole);
					q4_chunk(v, _mm512_permutexvar_ps(idx, s16), xp + 128 * p, xs, T, a);
					idx = _mm512_add_epi32(idx, two);
				}
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					acc[i][t] = a[t];
			}
		}
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				y[t * ys + b0 + i - r0] = _mm512_reduce_add_ps(acc[i][t]);
	}
}

/* ---- every encoding through k512_d16 (q4 too, when x is not prepared) ---- */

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

/* The same for T tokens of plain x, in the same blocks: 64 columns per step into four
 * accumulators per token, one scale group at a time, partial slices masked; the four are
 * summed at the end of each column block. */
K512_INLINE void gen_rows(coli_enc enc, const coli_mat *W, const float *x, int64_t xs, int T, float *y,
			  int64_t ys, int64_t r0, int64_t r1)
{
	const int64_t cols = W->cols, sw = scale_width(W), bw = block_width(W, T);
	const int64_t bpc = enc == COLI_ENC_F32 ? 4 : enc == COLI_ENC_BF16 || enc == COLI_ENC_F16 ? 2 : 1;
	__m512 acc[RB][4];
	for (int64_t b0 = r0; b0 < r1; b0 += RB) {
		int nr = r1 - b0 < RB ? (int)(r1 - b0) : RB, whole = bw >= cols;
		uintptr_t pf = (uintptr_t)W->codes + (uintptr_t)((b0 + RB) * W->row_bytes);
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				acc[i][t] = _mm512_setzero_ps();
		for (int64_t c0 = 0; c0 < cols; c0 += bw) {
			int64_t c1 = cols - c0 < bw ? cols : c0 + bw;
			for (int i = 0; i < nr; i++) {
				const uint8_t *c = W->codes + (b0 + i) * W->row_bytes, *sr = k512_row_scales(W, b0 + i);
				__m512 a[4][4];
				if (c0 == 0 && enc == COLI_ENC_Q8)
					prefetch_scales(W, b0 + i + RB);
#pragma GCC unroll 4
				for (int t = 0; t < T; t++) {
					a[t][0] = acc[i][t];
					a[t][1] = a[t][2] = a[t][3] = _mm512_setzero_ps();
				}
				for (int64_t g0 = c0, g = c0 / sw; g0 < c1; g0 += sw, g++) {
					__m512 s = k512_scale(enc, sr, g);
					int64_t g1 = c1 - g0 < sw ? c1 : g0 + sw, k = g0;
					for (; k + 64 <= g1; k += 64) {
						for (int64_t o = 0; o < 64 * bpc; o += 64)
							prefetch_next(c + k * bpc + o, &pf, whole);
						int clean = enc == COLI_ENC_FP8 && k512_fp8_clean(c + k);
#pragma GCC unroll 4
						for (int u = 0; u < 4; u++) {
							__m512 w = clean ? k512_fp8_16(c + k + 16 * u, s)
									 : k512_d16(enc, c, k + 16 * u, 0xFFFF, s);
#pragma GCC unroll 4
							for (int t = 0; t < T; t++)
								a[t][u] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + t * xs + k + 16 * u),
											  a[t][u]);
						}
					}
					for (; k < g1; k += 16) {
						__mmask16 m = k512_first(g1 - k);
						__m512 w = k512_d16(enc, c, k, m, s);
#pragma GCC unroll 4
						for (int t = 0; t < T; t++)
							a[t][0] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m, x + t * xs + k), a[t][0]);
					}
				}
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					acc[i][t] = _mm512_add_ps(_mm512_add_ps(a[t][0], a[t][1]), _mm512_add_ps(a[t][2], a[t][3]));
			}
		}
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				y[t * ys + b0 + i - r0] = _mm512_reduce_add_ps(acc[i][t]);
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
		if (k512_slices_ok(W))
			k512_gemm(W, X, n, Y, r0, r1);
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

/* y[k0 .. k0+128) += sum_r a[r] W[r][...]: eight accumulators over every row of the range,
 * then stored. A row's scale is widened once per scale group (newg), not per slice. */
K512_INLINE void vec_t_enc(coli_enc enc, const coli_mat *W, int64_t r0, int64_t nr, const float *a,
			   float *y, int64_t c0, int64_t c1)
{
	const int64_t sw = kern_scale_width(W);
	for (int64_t k0 = c0; k0 < c1; k0 += 128) {
		__m512 acc[8];
		__mmask16 m[8];
		int64_t b[8];
		int newg[8];
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			int64_t k = k0 + 16 * i < c1 ? k0 + 16 * i : c1 - 1; /* empty slices: a valid group */
			m[i] = k512_first(c1 - k0 - 16 * i);
			acc[i] = _mm512_maskz_loadu_ps(m[i], y + k0 + 16 * i);
			b[i] = k / sw;
			newg[i] = i == 0 || b[i] != b[i - 1];
		}
		for (int64_t r = r0; r < r0 + nr; r++) {
			const uint8_t *c = W->codes + r * W->row_bytes, *sr = k512_row_scales(W, r);
			__m512 ar = _mm512_set1_ps(a[r - r0]), s = ar;
#pragma GCC unroll 8
			for (int i = 0; i < 8; i++) {
				if (newg[i])
					s = k512_scale(enc, sr, b[i]);
				acc[i] = _mm512_fmadd_ps(k512_d16(enc, c, k0 + 16 * i, m[i], s), ar, acc[i]);
			}
		}
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++)
			_mm512_mask_storeu_ps(y + k0 + 16 * i, m[i], acc[i]);
	}
}

/* q4: per row and group the table -8..7 is scaled by a[r] * s once, so 16 weights cost a
 * permute and an add. k0 is a multiple of 64 (the pool splits at multiples of 128). */
K512_INLINE void q4_vec_t(const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y,
			  int64_t c0, int64_t c1)
{
	const __m512 tbl = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
	const int64_t G = kern_groups(W);
	for (int64_t k0 = c0; k0 < c1; k0 += 128) {
		const int64_t g0 = k0 / 64, ng = g0 + 1 < G && k0 + 64 < c1 ? 2 : 1;
		__m512 acc[8];
		__mmask16 m[8];
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			m[i] = k512_first(c1 - k0 - 16 * i);
			acc[i] = _mm512_maskz_loadu_ps(m[i], y + k0 + 16 * i);
		}
		for (int64_t r = r0; r < r0 + nr; r++) {
			const uint8_t *c = W->codes + r * W->row_bytes + 32 * g0, *sr = W->scales + 2 * (r * G + g0);
			for (int h = 0; h < ng; h++) {
				uint16_t sh;
				memcpy(&sh, sr + 2 * h, 2);
				__m512 t = _mm512_mul_ps(tbl, _mm512_set1_ps(a[r - r0] * _cvtsh_ss(sh)));
				__m512i d0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const void *)(c + 32 * h)));
				__m512i d1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const void *)(c + 32 * h + 16)));
				acc[4 * h] = _mm512_add_ps(acc[4 * h], _mm512_permutexvar_ps(d0, t));
				acc[4 * h + 1] = _mm512_add_ps(acc[4 * h + 1], _mm512_permutexvar_ps(d1, t));
				acc[4 * h + 2] = _mm512_add_ps(acc[4 * h + 2], _mm512_permutexvar_ps(_mm512_srli_epi32(d0, 4), t));
				acc[4 * h + 3] = _mm512_add_ps(acc[4 * h + 3], _mm512_permutexvar_ps(_mm512_srli_epi32(d1, 4), t));
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
	case COLI_ENC_Q4: q4_vec_t(W, r0, nr, a, y, c0, c1); break;
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
