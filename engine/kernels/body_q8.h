/* body_q8.h: the q8 products (kernels/q8.h), written once over an ISA mapping's kq_* operations;
 * internal. Included by body.h (avx2.c, avx512.c) and alone by avx512vnni.c (the same body over
 * vpdpbusd).
 *
 * Matrix-vector (up to Q8_GEMM_N - 1 tokens): rows one after another, each read whole, its codes
 * decoded once per pair of groups for up to KQ_T tokens (the mapping's, 4 on both: their prepared
 * x stays in L1); more tokens go in passes of KQ_T over blocks of Q8_RB rows (the block stays in
 * L1/L2). A pair's integer lanes are kept for four pairs, then summed into the 8 groups' p_g
 * (kq_sum8) and one float step takes the 8 chains of q8.h at once.
 *
 * GEMM (Q8_GEMM_N tokens or more: prefill, verify): panels of MR = KQ_GMV x KQ_RL rows, decoded
 * once, whole, into the rows-in-lanes layout (kq_panel: per group and step k, KQ_RL rows' codes of
 * columns 4k .. 4k+3, a 4-byte lane each; kq_pscales: per group the rows' scales as float), then
 * blocks of up to KQ_GNR tokens run the micro-kernel over it: per group, KQ_GMV x KQ_GNR integer
 * accumulators over the 16 steps (one 4-byte dot each, x broadcast: vpdpbusd, or maddubs whose
 * 16-bit sums q4 keeps for a half group), started at -offset x sum q (q4's codes are value + 8;
 * q8's w + KQ_Q8_OFF), then one convert and one fused multiply-add per accumulator into its chain
 * g mod 8. Every (row, token) sum is q8.h's order whatever the path: the same bits for 1 or n
 * tokens. Zen 4 (q4, 29 and 64 tokens): the GEMM 2.4-2.8x the exact one with VNNI, 1.2-1.4x with
 * AVX2 (docs/benchmarks.md).
 */
#ifndef KV_Q8_OPS
#error "body_q8.h: include an ISA mapping (kernels/isa_*.h) first"
#endif

#include <stdlib.h>

#define Q8_RB 16          /* rows per block when tokens take several passes */
#define Q8_PF_AHEAD 4096  /* bytes of codes fetched ahead of the pair being read */
#define Q8_PF_PANEL 512 /* bytes of a row's codes fetched ahead of the group a panel decodes */
#define Q8_GEMM_N 17      /* tokens from which the GEMM runs (Zen 4: at 16 the two are even) */
#define Q8_MR (KQ_GMV * KQ_RL)

/* The row's scales of the 8 groups from 8u (sr: binary16 per group), zero past its G groups. */
KV_INLINE __m256 q8_scales8(const uint8_t *sr, int64_t u, int64_t G)
{
	uint16_t h[8] = {0};
	if (G - 8 * u >= 8)
		return _mm256_cvtph_ps(_mm_loadu_si128((const void *)(sr + 16 * u)));
	memcpy(h, sr + 16 * u, (size_t)(2 * (G - 8 * u)));
	return _mm256_cvtph_ps(_mm_loadu_si128((const void *)h));
}

/* q8.h's tree over the 8 chains (lane i = chain i). */
KV_INLINE float q8_reduce8(__m256 a)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* y[t * ys + r - r0] = W[r] . x_t for T (<= KQ_T) tokens xs bytes apart, r in [r0, r1). */
KV_INLINE void q8_rows(coli_enc enc, const coli_mat *W, const uint8_t *xp, int64_t xs, int T, float *y,
		       int64_t ys, int64_t r0, int64_t r1)
{
	const int64_t G = kern_enc_blocks(enc, W->cols), NP = kern_q8_groups(W->cols) / 2, pair = enc == COLI_ENC_Q4 ? 64 : 128;
	const int32_t *sq[KQ_T];
	const float *dx[KQ_T];
#pragma GCC unroll 8
	for (int t = 0; t < T; t++) {
		sq[t] = kern_q8_sq(xp + t * xs, W->cols);
		dx[t] = kern_q8_dx(xp + t * xs, W->cols);
	}
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *c = W->codes + r * W->row_bytes, *sr = kern_enc_row_scales(enc, W, r);
		__m256 acc[KQ_T];
		_mm_prefetch((const char *)(kern_enc_row_scales(enc, W, r + 4) + 0), _MM_HINT_T0);
#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			acc[t] = _mm256_setzero_ps();
		for (int64_t u = 0; 4 * u < NP; u++) {
			kq_p p[KQ_T][4];
#pragma GCC unroll 4
			for (int i = 0; i < 4; i++) {
				const int64_t P = 4 * u + i;
				if (P < NP) {
					for (int64_t o = 0; o < pair; o += 64)
						_mm_prefetch((const char *)((uintptr_t)c + (uintptr_t)(pair * P + o + Q8_PF_AHEAD)), _MM_HINT_T0);
					kq_w w = kq_codes(enc, c, P, G);
#pragma GCC unroll 8
					for (int t = 0; t < T; t++)
						p[t][i] = kq_pair(enc, &w, xp + t * xs, P);
				} else {
#pragma GCC unroll 8
					for (int t = 0; t < T; t++)
						p[t][i] = kq_pzero();
				}
			}
			__m256 sw = q8_scales8(sr, u, G);
#pragma GCC unroll 8
			for (int t = 0; t < T; t++) {
				__m256i s = kq_sum8(p[t]);
				if (enc == COLI_ENC_Q4)
					s = _mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_load_si256((const void *)(sq[t] + 8 * u)), 3));
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(sw, _mm256_load_ps(dx[t] + 8 * u)), acc[t]);
			}
		}
#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			y[t * ys + r - r0] = q8_reduce8(acc[t]);
	}
}

typedef void (*q8_rows_fn)(const coli_mat *W, const uint8_t *xp, int64_t xs, float *y, int64_t ys,
			   int64_t r0, int64_t r1);

#define Q8_ROWS_T(E, T)                                                                             \
	static void q8_##E##_##T(const coli_mat *W, const uint8_t *xp, int64_t xs, float *y, int64_t ys,   \
				 int64_t r0, int64_t r1)                                                  \
	{                                                                                           \
		q8_rows(COLI_ENC_##E, W, xp, xs, T, y, ys, r0, r1);                                    \
	}
#define Q8_ROWS(E)                                                                                  \
	Q8_ROWS_T(E, 1) Q8_ROWS_T(E, 2) Q8_ROWS_T(E, 3) Q8_ROWS_T(E, 4)                             \
	static const q8_rows_fn q8_##E[KQ_T] = {q8_##E##_1, q8_##E##_2, q8_##E##_3, q8_##E##_4};
#define Q8_ENTRY(E) [COLI_ENC_##E] = q8_##E,
KERN_Q8_ENCS(Q8_ROWS)
static const q8_rows_fn *const q8_rows_of[COLI_ENC_COUNT] = {KERN_Q8_ENCS(Q8_ENTRY)};

/* n tokens by the matrix-vector body: passes of up to KQ_T over blocks of Q8_RB rows (one pass
 * over all rows when n <= KQ_T), the tokens in passes of even size (a small last pass keeps too few
 * chains in flight). */
static void q8_mv(const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys, int64_t r0, int64_t r1)
{
	const q8_rows_fn *f = q8_rows_of[W->enc];
	const uint8_t *x = xp->data;
	for (int64_t b0 = r0; b0 < r1; b0 += n > KQ_T ? Q8_RB : r1 - r0) {
		int64_t b1 = n <= KQ_T || r1 - b0 < Q8_RB ? r1 : b0 + Q8_RB;
		for (int t0 = 0, left = n, passes = (n + KQ_T - 1) / KQ_T; left > 0; passes--) {
			int nt = (left + passes - 1) / passes;
			f[nt - 1](W, x + t0 * xp->stride, xp->stride, y + t0 * ys + b0 - r0, ys, b0, b1);
			t0 += nt, left -= nt;
		}
	}
}

/* ---- GEMM ---- */

/* The micro-kernel: Y's rows [rb, rb + nr) (nr <= Q8_MR) of NT tokens (x: the first, xs bytes
 * apart), from the decoded panel (pan: per group and step, KQ_GMV vectors; psw: per group the
 * rows' scales as float). */
KV_INLINE void q8_tile(coli_enc enc, int NT, const uint8_t *pan, const float *psw, int64_t G, const uint8_t *x,
		       int64_t xs, int64_t cols, float *y, int64_t ys, int nr)
{
	const int32_t off = enc == COLI_ENC_Q4 ? 8 : KQ_Q8_OFF;
	kq_gf f[8][KQ_GMV][KQ_GNR];
	const int8_t *qs[KQ_GNR];
	const int32_t *sq[KQ_GNR];
	const float *dx[KQ_GNR];
#pragma GCC unroll 8
	for (int t = 0; t < NT; t++) {
		qs[t] = kern_q8_qs(x + t * xs);
		sq[t] = kern_q8_sq(x + t * xs, cols);
		dx[t] = kern_q8_dx(x + t * xs, cols);
	}
	for (int c = 0; c < 8; c++)
#pragma GCC unroll 4
		for (int v = 0; v < KQ_GMV; v++)
#pragma GCC unroll 8
			for (int t = 0; t < NT; t++)
				f[c][v][t] = kq_gzero();
	for (int64_t g = 0; g < G; g++) {
		kq_gi p[KQ_GMV][KQ_GNR];
		const int64_t at = kern_q8_at(g, 0);
#pragma GCC unroll 8
		for (int t = 0; t < NT; t++) {
			kq_gi s = kq_gset(-off * sq[t][g]);
#pragma GCC unroll 4
			for (int v = 0; v < KQ_GMV; v++)
				p[v][t] = s;
		}
		const uint8_t *pg = pan + g * 16 * KQ_GMV * 4 * KQ_RL;
#pragma GCC unroll 2
		for (int half = 0; half < 2; half++) {
			kq_gh h[KQ_GMV][KQ_GNR];
#pragma GCC unroll 8
			for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
				for (int v = 0; v < KQ_GMV; v++)
					h[v][t] = kq_ghalf(enc, p[v][t]);
#pragma GCC unroll 8
			for (int k = 8 * half; k < 8 * half + 8; k++) {
				kq_gw w[KQ_GMV];
#pragma GCC unroll 4
				for (int v = 0; v < KQ_GMV; v++)
					w[v] = kq_gload(enc, pg + (k * KQ_GMV + v) * 4 * KQ_RL);
#pragma GCC unroll 8
				for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
					for (int v = 0; v < KQ_GMV; v++)
						h[v][t] = kq_gdot(enc, h[v][t], &w[v], qs[t] + at + 64 * half + 4 * (k % 8));
			}
#pragma GCC unroll 8
			for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
				for (int v = 0; v < KQ_GMV; v++)
					p[v][t] = kq_gdone(enc, p[v][t], h[v][t]);
		}
#pragma GCC unroll 4
		for (int v = 0; v < KQ_GMV; v++)
#pragma GCC unroll 8
			for (int t = 0; t < NT; t++)
				f[g % 8][v][t] = kq_gstep(p[v][t], psw + g * Q8_MR + v * KQ_RL, dx[t][g], f[g % 8][v][t]);
	}
#pragma GCC unroll 4
	for (int v = 0; v < KQ_GMV; v++) {
		int n = nr - v * KQ_RL < KQ_RL ? nr - v * KQ_RL : KQ_RL;
		if (n <= 0)
			break;
#pragma GCC unroll 8
		for (int t = 0; t < NT; t++) {
			kq_gf s4[4], s2[2];
			for (int i = 0; i < 4; i++)
				s4[i] = kq_gadd(f[i][v][t], f[i + 4][v][t]);
			for (int i = 0; i < 2; i++)
				s2[i] = kq_gadd(s4[i], s4[i + 2]);
			kq_gstore(y + t * ys + v * KQ_RL, kq_gadd(s2[0], s2[1]), n);
		}
	}
}

typedef void (*q8_tile_fn)(const uint8_t *pan, const float *psw, int64_t G, const uint8_t *x, int64_t xs, int64_t cols,
			   float *y, int64_t ys, int nr);

#define Q8_TILE_T(E, T)                                                                                     \
	static void q8_tile_##E##_##T(const uint8_t *pan, const float *psw, int64_t G, const uint8_t *x,           \
				      int64_t xs, int64_t cols, float *y, int64_t ys, int nr)                      \
	{                                                                                                   \
		q8_tile(COLI_ENC_##E, T, pan, psw, G, x, xs, cols, y, ys, nr);                                   \
	}
#if KQ_GNR == 8
#define Q8_TILES(E)                                                                                         \
	Q8_TILE_T(E, 1) Q8_TILE_T(E, 2) Q8_TILE_T(E, 3) Q8_TILE_T(E, 4) Q8_TILE_T(E, 5) Q8_TILE_T(E, 6)          \
	Q8_TILE_T(E, 7) Q8_TILE_T(E, 8)                                                                     \
	static const q8_tile_fn q8_tile_##E[8] = {q8_tile_##E##_1, q8_tile_##E##_2, q8_tile_##E##_3,          \
						  q8_tile_##E##_4, q8_tile_##E##_5, q8_tile_##E##_6,          \
						  q8_tile_##E##_7, q8_tile_##E##_8};
#elif KQ_GNR == 2
#define Q8_TILES(E)                                                                                         \
	Q8_TILE_T(E, 1) Q8_TILE_T(E, 2) static const q8_tile_fn q8_tile_##E[2] = {q8_tile_##E##_1, q8_tile_##E##_2};
#else
#error "body_q8.h: KQ_GNR is 2 or 8"
#endif
#define Q8_TILE_ENTRY(E) [COLI_ENC_##E] = q8_tile_##E,
KERN_Q8_ENCS(Q8_TILES)
static const q8_tile_fn *const q8_tiles_of[COLI_ENC_COUNT] = {KERN_Q8_ENCS(Q8_TILE_ENTRY)};

/* Rows [p0, p0 + nr) (nr <= Q8_MR) decoded into the panel (pan, psw: q8_tile's layout); rows past
 * nr are zero. */
static void q8_panel(const coli_mat *W, int64_t p0, int nr, uint8_t *pan, float *psw)
{
	static const uint8_t zero[64] __attribute__((aligned(64)));
	const int64_t G = kern_blocks(W), gb = W->enc == COLI_ENC_Q4 ? 32 : 64;
	const uint8_t *rc[Q8_MR], *sr[Q8_MR];
	for (int r = 0; r < Q8_MR; r++) {
		rc[r] = r < nr ? W->codes + (p0 + r) * W->row_bytes : zero;
		sr[r] = r < nr ? kern_row_scales(W, p0 + r) : zero;
	}
	for (int64_t g0 = 0; g0 < G; g0 += KQ_RL) {
		int ng = G - g0 < KQ_RL ? (int)(G - g0) : KQ_RL;
		for (int v = 0; v < KQ_GMV; v++) {
			const uint8_t *s[KQ_RL];
			for (int i = 0; i < KQ_RL; i++)
				s[i] = sr[v * KQ_RL + i] == zero ? zero : sr[v * KQ_RL + i] + 2 * g0;
			kq_pscales(s, ng, psw + g0 * Q8_MR + v * KQ_RL, Q8_MR);
		}
	}
	for (int64_t g = 0; g < G; g++)
		for (int v = 0; v < KQ_GMV; v++) {
			const uint8_t *grp[KQ_RL];
			for (int i = 0; i < KQ_RL; i++) {
				const uint8_t *c = rc[v * KQ_RL + i];
				grp[i] = c == zero ? zero : c + gb * g;
				if ((gb * g) % 64 == 0)
					_mm_prefetch((const char *)(grp[i] + Q8_PF_PANEL), _MM_HINT_T0);
			}
			kq_panel(W->enc, grp, pan + (g * 16 * KQ_GMV + v) * 4 * KQ_RL, KQ_GMV * 4 * KQ_RL);
		}
}

/* n tokens by the GEMM; 0 when its panel's memory cannot be had (nothing computed then). The
 * tokens go in blocks of even size (29 = 8 + 7 + 7 + 7): a small block keeps too few chains in
 * flight. */
static int q8_gemm(const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys, int64_t r0, int64_t r1)
{
	const int64_t G = kern_blocks(W);
	const size_t pb = (size_t)(G * 16 * Q8_MR * 4), sb = (size_t)(G * Q8_MR) * sizeof(float);
	uint8_t *pan = aligned_alloc(64, pb + sb);
	if (!pan)
		return 0;
	float *psw = (float *)(void *)(pan + pb);
	const q8_tile_fn *tile = q8_tiles_of[W->enc];
	const uint8_t *x = xp->data;
	for (int64_t p0 = r0; p0 < r1; p0 += Q8_MR) {
		int nr = r1 - p0 < Q8_MR ? (int)(r1 - p0) : Q8_MR;
		q8_panel(W, p0, nr, pan, psw);
		for (int t0 = 0, left = n, blocks = (n + KQ_GNR - 1) / KQ_GNR; left > 0; blocks--) {
			int nt = (left + blocks - 1) / blocks;
			tile[nt - 1](pan, psw, G, x + t0 * xp->stride, xp->stride, W->cols, y + t0 * ys + p0 - r0, ys, nr);
			t0 += nt, left -= nt;
		}
	}
	free(pan);
	return 1;
}

static void q8_mul(const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys, int64_t r0, int64_t r1)
{
#if KV_AMX
	if (xp->type == KX_Q8T) {
		amx_q8_gemm(W, xp, n, y, ys, r0, r1);
		return;
	}
#endif
	if (n < Q8_GEMM_N || !q8_gemm(W, xp, n, y, ys, r0, r1))
		q8_mv(W, xp, n, y, ys, r0, r1);
}

const kern_q8_ops KV_Q8_OPS = {
	.name = KV_Q8_ISA,
	.rows = q8_mul,
#if KV_AMX
	.tiles_bytes = amx_q8_bytes,
	.tiles_prep = amx_q8_prep,
#endif
};
