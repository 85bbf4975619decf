/* body_amx.h: the amx variant's exact GEMM over AMX's bfloat16 tiles; internal. Included by body.h
 * where the mapping is built with KV_AMX (amx.c); every other product of the variant is
 * body.h's, over the AVX-512 mapping.
 *
 * Exactness (kernels.h's contract, not a looser one): each float32 activation is split into three
 * bfloat16 parts, h = bf16(x), m = bf16(x - h), l = bf16(x - h - m) (round to nearest; each
 * difference is exact in float32), and x = h + m + l exactly: x's 24-bit significand leaves at
 * most 16 bits below h's 8 and 8 below m's. Every weight this GEMM takes is a bfloat16 exactly
 * before its scale (bf16; q4's and q8's integers; e2m1; e4m3 as value / 256, its scale times
 * 256), so each tile product is exact, and TDPBF16PS sums them in float32, per scale group (q4
 * and q8 64 columns, FP4 32, fp8 its block's width; bf16, unscaled, the whole row); each group's
 * sum times its scale is added to a float32 accumulator. That is a float32 sum of the products in
 * another order, the one thing the variants may differ in (kernels.h), over three terms a
 * product (a priori gamma(3k + 4) where one term a product gives gamma(2k + 4); test_exact
 * measures the tighter one). Checked over 2 x 10^7 random float32 bit patterns: h + m + l = x
 * for every |x| from 2^-100 up. The departures, all below float32's reach or caught: the tiles and
 * the conversion to bfloat16 take subnormal inputs as zero (a part below 2^-126: x itself, or the
 * last parts of an x below about 2^-100, an error under 2^-126 |w| a product); an x within half a
 * bfloat16 step of float32's largest rounds h to infinity and its products to NaN; and a group's
 * sum of unscaled codes times x can overflow where the scaled products would not (x near
 * float32's end). Every output that is not finite is computed again by the plain path
 * (redo_nonfinite), as the nibble paths do.
 *
 * Layout. The weights are the tiles' A: a panel of 32 rows decoded once into bfloat16 for all its
 * columns (amx_stage: per chunk of 32 columns two 1 KiB tiles of 16 rows), with its scales; the
 * activations are their B: per block of 16 tokens, per chunk, per part a 1 KiB tile whose row j
 * holds columns 2j and 2j + 1 of the 16 tokens (kern_x KX_BF16X3, prepared once per product over
 * the pool: amx_prep). C[row][token] lives in four tiles, 2 row tiles x 2 token tiles; per chunk
 * two A loads, per part two B loads and four TDPBF16PS; per group the four are stored, scaled and
 * added (amx_fold), and the panel's 32 x 32 results go to Y transposed (kv_transpose).
 */
#ifndef KV_AMX
#error "body_amx.h: include isa_avx512.h with KV_AMX first"
#endif

#include <pthread.h>

/* The tile configuration: palette 1, tiles 0-7 each 16 rows of 64 bytes: C 0-3, A 4-5, B 6-7. */
typedef struct amx_cfg {
	uint8_t palette, start;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} amx_cfg;

static void amx_config(void)
{
	amx_cfg c;
	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int i = 0; i < 8; i++) {
		c.colsb[i] = 64;
		c.rows[i] = 16;
	}
	/* GCC's _tile_loadconfig tells the compiler it reads one byte of c: without this barrier the
	 * other stores may be dropped as dead (fmapeak.c faulted so) */
	__asm__ volatile("" : : "r"(&c) : "memory");
	_tile_loadconfig(&c);
}

#define AMX_TILE 1024 /* bytes of a tile: 16 rows of 64 */
#define AMX_PANEL 32  /* rows a panel: two tiles of 16 */
#define AMX_AHEAD 2   /* chunks of the panel decoded ahead of the tiles that read them */

/* Whether the GEMM takes W: every code a bfloat16 before a scale that spans whole chunks of 32
 * columns. */
static int amx_takes(const coli_mat *W)
{
	switch (W->enc) {
	case COLI_ENC_BF16:
	case COLI_ENC_Q4:
	case COLI_ENC_Q8:
	case COLI_ENC_FP4: return 1;
	case COLI_ENC_FP8: return W->block[1] % 32 == 0;
	default: return 0;
	}
}

/* Chunks of 32 columns a scale group spans (unscaled: the whole row). */
static int64_t amx_group_chunks(coli_enc enc, const coli_mat *W)
{
	return kern_encs[enc].scale == KS_NONE ? (W->cols + 31) / 32 : kern_enc_scale_width(enc, W) / 32;
}

/* ---- the activations (B) ---- */

static int64_t amx_bytes(const coli_mat *W)
{
	return amx_takes(W) ? (W->cols + 31) / 32 * 3 * AMX_TILE : 0;
}

/* bfloat16 (the upper halves) of 32 floats back to float32: lanes of the low (half 0) or high half. */
KV_INLINE __m512 amx_widen(__m512i b, int half)
{
	__m256i h = half ? _mm512_extracti64x4_epi64(b, 1) : _mm512_castsi512_si256(b);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

KV_INLINE __m512i amx_bf16(__m512 lo, __m512 hi)
{
	return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* Token blocks [b, e) of X's n tokens: per chunk of 32 columns, the three parts of the 16 tokens'
 * columns, transposed into the B tiles' pairs. */
static void amx_prep(const coli_mat *W, const float *X, int n, int64_t b, int64_t e, void *out)
{
	const int64_t cols = W->cols, NK = (cols + 31) / 32;
	for (int64_t tb = b; tb < e; tb++)
		for (int64_t kc = 0; kc < NK; kc++) {
			__m512 part[3][16];
			const int64_t left = cols - 32 * kc;
			const __mmask16 m0 = kv_first(left), m1 = kv_first(left - 16);
			for (int i = 0; i < 16; i++) {
				int64_t t = 16 * tb + i;
				__m512 x0 = _mm512_setzero_ps(), x1 = x0;
				if (t < n) {
					x0 = _mm512_maskz_loadu_ps(m0, X + t * cols + 32 * kc);
					x1 = _mm512_maskz_loadu_ps(m1, X + t * cols + 32 * kc + 16);
				}
				for (int s = 0; s < 3; s++) {
					__m512i h = amx_bf16(x0, x1);
					part[s][i] = _mm512_castsi512_ps(h);
					x0 = _mm512_sub_ps(x0, amx_widen(h, 0));
					x1 = _mm512_sub_ps(x1, amx_widen(h, 1));
				}
			}
			uint8_t *tile = (uint8_t *)out + (tb * NK + kc) * 3 * AMX_TILE;
			for (int s = 0; s < 3; s++) {
				kv_transpose(part[s]);
				for (int j = 0; j < 16; j++)
					_mm512_store_ps((float *)(void *)(tile + s * AMX_TILE + 64 * j), part[s][j]);
			}
		}
}

/* ---- the weights (A) ---- */

/* The bfloat16 bits of a 4-bit encoding's table, words 0-15 (16-31 repeat them). */
KV_INLINE __m512i amx_lut(coli_enc enc)
{
	uint16_t w[32];
	for (int i = 0; i < 32; i++) {
		uint32_t u;
		memcpy(&u, &kern_encs[enc].lut[i % 16], 4);
		w[i] = (uint16_t)(u >> 16);
	}
	return _mm512_loadu_si512(w);
}

/* Columns [k, k + 32) of the row whose codes start at c, as bfloat16 before the scale (k a
 * multiple of 32); columns past cols zero. */
KV_INLINE __m512i amx_chunk(coli_enc enc, const uint8_t *c, int64_t k, int64_t cols, __m512i lut)
{
	const __mmask32 m = cols - k >= 32 ? ~0u : (1u << (cols - k)) - 1;
	__m512i w;
	switch (enc) {
	case COLI_ENC_BF16: return _mm512_maskz_loadu_epi16(m, c + 2 * k);
	case COLI_ENC_Q4: { /* rows hold whole groups: byte 32g + b: column 64g + b low, 64g + 32 + b high */
		__m512i u = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const void *)(c + k / 64 * 32)));
		w = _mm512_permutexvar_epi16(k % 64 ? _mm512_srli_epi16(u, 4) : u, lut); /* 5-bit index: 16-31 repeat */
		break;
	}
	case COLI_ENC_FP4: { /* rows hold whole blocks: byte b: column 2b low, 2b + 1 high */
		__m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const void *)(c + k / 2)));
		w = _mm512_permutexvar_epi16(_mm512_or_si512(_mm512_and_si512(d, _mm512_set1_epi32(15)),
							     _mm512_slli_epi32(_mm512_srli_epi32(d, 4), 16)),
					     lut);
		break;
	}
	case COLI_ENC_Q8: { /* rows hold whole groups of 64 */
		__m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)(c + k))));
		__m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)(c + k + 16))));
		w = amx_bf16(lo, hi);
		break;
	}
	default: { /* fp8: a byte a column, nothing past cols; value / 256 (amx_scales takes the 256) as
		    * kv_e4m3 makes it, a binary16 of the code's bits shifted; 0x7F and 0xFF NaN */
		const __m256i b = _mm256_maskz_loadu_epi8(m, c + k);
		const __m512i h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(b), 7), _mm512_set1_epi16((short)0xBFFF));
		w = amx_bf16(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)));
		w = _mm512_mask_mov_epi16(w, _mm256_cmpeq_epi8_mask(_mm256_and_si256(b, _mm256_set1_epi8(0x7F)), _mm256_set1_epi8(0x7F)),
					  _mm512_set1_epi16(0x7FC0));
		break;
	}
	}
	return _mm512_maskz_mov_epi16(m, w);
}

/* Chunk kc of the panel of rows [p0, p0 + nr) as its two A tiles at wst (rows past nr zero). */
KV_INLINE void amx_stage(coli_enc enc, const coli_mat *W, int64_t p0, int nr, int64_t kc, __m512i lut, uint8_t *wst)
{
	for (int i = 0; i < AMX_PANEL; i++)
		_mm512_store_si512(wst + i * 64, i < nr ? amx_chunk(enc, W->codes + (p0 + i) * W->row_bytes, 32 * kc, W->cols, lut)
						     : _mm512_setzero_si512());
}

/* The panel's scales: sst[G i + g], row p0 + i, group g (rows past nr 0); binary16 ones 16 at a
 * time (one conversion call a scale cost a quarter of a q4 GEMM's time). */
static void amx_scales(const coli_mat *W, int64_t p0, int nr, int64_t G, float *sst)
{
	for (int i = 0; i < AMX_PANEL; i++) {
		float *s = sst + i * G;
		if (i >= nr) {
			memset(s, 0, (size_t)G * sizeof(float));
		} else if (kern_encs[W->enc].scale == KS_F16_BLOCK) {
			const uint8_t *sr = kern_row_scales(W, p0 + i);
			for (int64_t g = 0; g < G; g += 16) {
				const __mmask16 m = kv_first(G - g);
				_mm512_mask_storeu_ps(s + g, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, sr + 2 * g)));
			}
		} else { /* fp8's chunks are value / 256 (amx_chunk): 256 x its scale, as exact */
			const uint8_t *sr = kern_row_scales(W, p0 + i);
			const float u = W->enc == COLI_ENC_FP8 ? 256.0f : 1.0f;
			for (int64_t g = 0; g < G; g++)
				s[g] = kern_group_scale(W->enc, sr, g) * u;
		}
	}
}

/* ---- the product ---- */

/* A thread's scratch (the panel's tiles and scales), kept for its next product: a product's
 * pieces are many and each fresh one over 128 KiB was mapped and faulted in anew (768x2048 q4,
 * 32 tokens, 2 threads: 1.3x the AVX-512 GEMM's speed where kept 1.9x). Freed when the thread
 * exits. */
static pthread_key_t amx_key;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_key_ok;

static void amx_key_make(void)
{
	amx_key_ok = pthread_key_create(&amx_key, free) == 0;
}

/* At least n bytes, 64-byte aligned; NULL when they cannot be had (then the caller's AVX-512
 * GEMM runs). A 64-byte header holds the size. */
static uint8_t *amx_scratch(size_t n)
{
	pthread_once(&amx_once, amx_key_make);
	if (!amx_key_ok)
		return NULL;
	uint8_t *b = pthread_getspecific(amx_key);
	if (b && *(size_t *)(void *)b >= n)
		return b + 64;
	free(b);
	b = aligned_alloc(64, 64 + (n + 63) / 64 * 64);
	if (b)
		*(size_t *)(void *)b = n;
	pthread_setspecific(amx_key, b);
	return b ? b + 64 : NULL;
}

/* The C tiles (tt token tiles; tile 2 a + b: row tile a, token tile b) to ct (32 rows x 32
 * tokens, 128 bytes a row). */
KV_INLINE void amx_store_c(int tt, float *ct)
{
	_tile_stored(0, ct, 128);
	_tile_stored(2, ct + 16 * 32, 128);
	if (tt == 2) {
		_tile_stored(1, ct + 16, 128);
		_tile_stored(3, ct + 16 * 32 + 16, 128);
	}
}

/* acc (as ct) += a group's C tiles stored in ct, each row times its scale sc[G i]; first: acc =. */
KV_INLINE void amx_fold(int tt, const float *sc, int64_t G, const float *ct, float *acc, int first)
{
	for (int i = 0; i < AMX_PANEL; i++) {
		const __m512 s = _mm512_set1_ps(sc[G * i]);
		for (int b = 0; b < tt; b++) {
			float *a = acc + 32 * i + 16 * b;
			const __m512 c = _mm512_load_ps(ct + 32 * i + 16 * b);
			_mm512_store_ps(a, first ? _mm512_mul_ps(c, s) : _mm512_fmadd_ps(c, s, _mm512_load_ps(a)));
		}
	}
}

/* Y[t][p0 + i] = acc[i][t - t0] for tokens [t0, t0 + nt), rows i < nr. */
KV_INLINE void amx_put(const float *acc, int64_t t0, int nt, int nr, float *Y, int64_t ys, int64_t p0)
{
	for (int a = 0; a < 2 && 16 * a < nr; a++)
		for (int b = 0; 16 * b < nt; b++) {
			kv_f r[16];
			for (int i = 0; i < 16; i++)
				r[i] = _mm512_load_ps(acc + 32 * (16 * a + i) + 16 * b);
			kv_transpose(r);
			for (int j = 0; j < 16 && 16 * b + j < nt; j++)
				kv_store_m(Y + (t0 + 16 * b + j) * ys + p0 + 16 * a, kv_first(nr - 16 * a), r[j]);
		}
}

/* Rows [r0, r1) of Y for the n tokens of XP (KX_BF16X3; X as given, for redo_nonfinite); 0 when the
 * panel's memory cannot be had (nothing computed then). */
KV_INLINE int amx_gemm_enc(coli_enc enc, const coli_mat *W, const float *X, const kern_x *XP, int n, float *Y,
			   int64_t r0, int64_t r1)
{
	const int64_t NK = (W->cols + 31) / 32, gw = amx_group_chunks(enc, W), G = (NK + gw - 1) / gw;
	const int64_t NB = (n + 15) / 16;
	const int scaled = kern_encs[enc].scale != KS_NONE;
	const size_t wb = (size_t)NK * 2 * AMX_TILE, sb = (size_t)G * AMX_PANEL * sizeof(float);
	uint8_t *mem = amx_scratch(wb + (sb + 63) / 64 * 64 + 3 * 32 * 32 * sizeof(float));
	if (!mem)
		return 0;
	uint8_t *wst = mem;
	float *sst = (float *)(void *)(mem + wb), *acc = (float *)(void *)(mem + wb + (sb + 63) / 64 * 64);
	float *ct[2] = {acc + 32 * 32, acc + 2 * 32 * 32};
	const uint8_t *xb = XP->data;
	const __m512i lut = amx_lut(enc);
	/* the next panel's codes are fetched meanwhile, spread over this one's chunks (from RAM the
	 * panel's reads would otherwise stall the tiles) */
	const int64_t pf_step = (AMX_PANEL * W->row_bytes / 64 + (NB + 1) / 2 * NK - 1) / ((NB + 1) / 2 * NK) * 64;
	amx_config();
	for (int64_t p0 = r0; p0 < r1; p0 += AMX_PANEL) {
		const int nr = r1 - p0 < AMX_PANEL ? (int)(r1 - p0) : AMX_PANEL;
		const uint8_t *pf = W->codes + (p0 + AMX_PANEL) * W->row_bytes, *pf_end = pf + AMX_PANEL * W->row_bytes;
		int64_t staged = 0;
		if (scaled)
			amx_scales(W, p0, nr, G, sst);
		for (int64_t tb = 0; tb < NB; tb += 2) {
			const int tt = tb + 1 < NB ? 2 : 1;
			const uint8_t *b0 = xb + tb * NK * 3 * AMX_TILE, *b1 = b0 + NK * 3 * AMX_TILE;
			for (int64_t g = 0; g < G; g++) {
				_tile_zero(0);
				_tile_zero(1);
				_tile_zero(2);
				_tile_zero(3);
				for (int64_t kc = g * gw; kc < NK && kc < (g + 1) * gw; kc++) {
					/* the panel decoded AMX_AHEAD chunks ahead of the tiles that read it (a tile
					 * load of what was just stored waits for the stores), kept for the other
					 * token blocks */
					for (; staged < NK && staged <= kc + AMX_AHEAD; staged++)
						amx_stage(enc, W, p0, nr, staged, lut, wst + 2 * staged * AMX_TILE);
					for (int64_t o = 0; o < pf_step && pf < pf_end && p0 + AMX_PANEL < r1; o += 64, pf += 64)
						_mm_prefetch((const char *)pf, _MM_HINT_T1);
					_tile_loadd(4, wst + 2 * kc * AMX_TILE, 64);
					_tile_loadd(5, wst + (2 * kc + 1) * AMX_TILE, 64);
					for (int s = 0; s < 3; s++) {
						_tile_loadd(6, b0 + (3 * kc + s) * AMX_TILE, 64);
						_tile_dpbf16ps(0, 4, 6);
						_tile_dpbf16ps(2, 5, 6);
						if (tt == 2) {
							_tile_loadd(7, b1 + (3 * kc + s) * AMX_TILE, 64);
							_tile_dpbf16ps(1, 4, 7);
							_tile_dpbf16ps(3, 5, 7);
						}
					}
				}
				if (!scaled) { /* one group: the row */
					amx_store_c(tt, acc);
					continue;
				}
				/* a group's tiles are folded while the next group's run (from the other ct) */
				amx_store_c(tt, ct[g % 2]);
				if (g > 0)
					amx_fold(tt, sst + g - 1, G, ct[(g - 1) % 2], acc, g == 1);
			}
			if (scaled)
				amx_fold(tt, sst + G - 1, G, ct[(G - 1) % 2], acc, G == 1);
			const int nt = n - 16 * tb < 32 ? (int)(n - 16 * tb) : 32;
			amx_put(acc, 16 * tb, nt, nr, Y, W->rows, p0);
		}
	}
	_tile_release();
	redo_nonfinite(W, X, W->cols, n, Y + r0, W->rows, r0, r1);
	return 1;
}

static int amx_gemm(const coli_mat *W, const float *X, const kern_x *XP, int n, float *Y, int64_t r0, int64_t r1)
{
	switch (W->enc) {
	case COLI_ENC_BF16: return amx_gemm_enc(COLI_ENC_BF16, W, X, XP, n, Y, r0, r1);
	case COLI_ENC_Q4: return amx_gemm_enc(COLI_ENC_Q4, W, X, XP, n, Y, r0, r1);
	case COLI_ENC_Q8: return amx_gemm_enc(COLI_ENC_Q8, W, X, XP, n, Y, r0, r1);
	case COLI_ENC_FP4: return amx_gemm_enc(COLI_ENC_FP4, W, X, XP, n, Y, r0, r1);
	case COLI_ENC_FP8: return amx_gemm_enc(COLI_ENC_FP8, W, X, XP, n, Y, r0, r1);
	default: return 0;
	}
}

/* ---- the q8 products' GEMM (kernels/q8.h) over AMX's int8 tiles ----
 *
 * The same bits as q8.h's reference: a group's sum p_g is an exact integer (TDPBSSD: signed codes
 * times signed q, summed in int32), then each (row, token) takes q8.h's float steps in order,
 * acc[g mod 8] = fmaf(p_g, sw_g x d_g, acc[g mod 8]), and its tree. The activations are
 * kern_q8_prep's bytes placed for the tiles (KX_Q8T, amx_q8_prep): per block of 16 tokens, per
 * group a 1 KiB tile whose row k holds columns 4k .. 4k+3 of the 16 tokens, then the groups' d as
 * [G][16] floats. The weights are the tiles' A, a group of 32 rows a pair of tiles (q4's codes
 * less 8, q8's as stored), a panel decoded once for its token blocks; the integer C tiles (2 row
 * tiles x 2 token tiles) go to memory per group and take the float steps 16 tokens a vector. */

static int64_t amx_q8_bytes(int64_t cols)
{
	return (cols + 63) / 64 * (AMX_TILE + 16 * (int64_t)sizeof(float));
}

/* Token blocks [b, e) of X's n tokens, each group through kern_q8_group (kern_q8_prep's bytes);
 * tokens past n: q 0, d 0. */
static void amx_q8_prep(int64_t cols, const float *X, int n, int64_t b, int64_t e, void *out)
{
	const int64_t G = (cols + 63) / 64, per = amx_q8_bytes(cols);
	for (int64_t tb = b; tb < e; tb++) {
		uint8_t *tiles = (uint8_t *)out + tb * per;
		float *d = (float *)(void *)(tiles + G * AMX_TILE);
		for (int i = 0; i < 16; i++) {
			const int64_t t = 16 * tb + i;
			for (int64_t g = 0; g < G; g++) {
				int8_t q[64] = {0};
				const int64_t left = cols - 64 * g;
				d[16 * g + i] = t < n ? kern_q8_group(X + t * cols + 64 * g, left > 64 ? 64 : (int)left, q) : 0.0f;
				for (int k = 0; k < 16; k++)
					memcpy(tiles + g * AMX_TILE + 64 * k + 4 * i, q + 4 * k, 4);
			}
		}
	}
}

/* Group g of the row whose codes start at c as 64 signed bytes in column order (q4: code - 8). */
KV_INLINE __m512i amx_q8_codes(coli_enc enc, const uint8_t *c, int64_t g)
{
	if (enc == COLI_ENC_Q8)
		return _mm512_loadu_si512(c + 64 * g);
	const __m256i b = _mm256_loadu_si256((const void *)(c + 32 * g)), m = _mm256_set1_epi8(15);
	const __m256i lo = _mm256_and_si256(b, m), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m);
	return _mm512_sub_epi8(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(8));
}

/* q8.h's product read from the tiles' layout, one (row, token) at a time: where the GEMM's
 * scratch cannot be had (impl.h; test_kernels checks its bits). */
void kern_amx_q8_slow(const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys, int64_t r0, int64_t r1)
{
	const int64_t G = kern_blocks(W);
	for (int t = 0; t < n; t++) {
		const uint8_t *tiles = (const uint8_t *)xp->data + t / 16 * xp->stride;
		const float *d = (const float *)(const void *)(tiles + G * AMX_TILE);
		for (int64_t r = r0; r < r1; r++) {
			const uint8_t *c = W->codes + r * W->row_bytes;
			float acc[8] = {0};
			for (int64_t g = 0; g < G; g++) {
				int32_t p = 0;
				for (int k = 0; k < 64; k++) {
					int w = W->enc == COLI_ENC_Q8 ? (int8_t)c[64 * g + k]
								      : ((k & 32 ? c[32 * g + (k & 31)] >> 4 : c[32 * g + k] & 15) - 8);
					p += w * (int8_t)tiles[g * AMX_TILE + 64 * (k / 4) + 4 * (t % 16) + k % 4];
				}
				acc[g % 8] = fmaf((float)p, kern_scale(W, r, g) * d[16 * g + t % 16], acc[g % 8]);
			}
			y[t * ys + r - r0] = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
		}
	}
}

/* y[t * ys + r - r0] = W[r] . x_t for the n tokens of xp (KX_Q8T), r in [r0, r1). */
KV_INLINE void amx_q8_gemm_enc(coli_enc enc, const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys,
			       int64_t r0, int64_t r1)
{
	const int64_t G = kern_blocks(W), NB = (n + 15) / 16;
	const size_t wb = (size_t)G * 2 * AMX_TILE, sb = (size_t)G * AMX_PANEL * sizeof(float);
	uint8_t *mem = amx_scratch(wb + sb + 10 * 32 * 32 * sizeof(float));
	if (!mem) {
		kern_amx_q8_slow(W, xp, n, y, ys, r0, r1);
		return;
	}
	float *sst = (float *)(void *)(mem + wb), *acc = sst + G * AMX_PANEL, *res = acc + 8 * 32 * 32;
	int32_t *ct = (int32_t *)(void *)(res + 32 * 32);
	amx_config();
	for (int64_t p0 = r0; p0 < r1; p0 += AMX_PANEL) {
		const int nr = r1 - p0 < AMX_PANEL ? (int)(r1 - p0) : AMX_PANEL;
		for (int i = 0; i < AMX_PANEL; i++) {
			const uint8_t *c = W->codes + (p0 + i) * W->row_bytes;
			for (int64_t g = 0; g < G; g++)
				_mm512_store_si512(mem + g * 2 * AMX_TILE + (i / 16) * AMX_TILE + (i % 16) * 64,
						   i < nr ? amx_q8_codes(enc, c, g) : _mm512_setzero_si512());
		}
		amx_scales(W, p0, nr, G, sst);
		for (int64_t tb = 0; tb < NB; tb += 2) {
			const int tt = tb + 1 < NB ? 2 : 1;
			const uint8_t *b0 = (const uint8_t *)xp->data + tb * xp->stride, *b1 = b0 + xp->stride;
			const float *d[2] = {(const float *)(const void *)(b0 + G * AMX_TILE),
					     (const float *)(const void *)(b1 + G * AMX_TILE)};
			if (G < 8) /* chains no group starts */
				memset(acc + G * 32 * 32, 0, (size_t)(8 - G) * 32 * 32 * sizeof(float));
			for (int64_t g = 0; g < G; g++) {
				_tile_loadd(4, mem + g * 2 * AMX_TILE, 64);
				_tile_loadd(5, mem + (g * 2 + 1) * AMX_TILE, 64);
				_tile_loadd(6, b0 + g * AMX_TILE, 64);
				_tile_zero(0);
				_tile_zero(2);
				_tile_dpbssd(0, 4, 6);
				_tile_dpbssd(2, 5, 6);
				_tile_stored(0, ct, 128);
				_tile_stored(2, ct + 16 * 32, 128);
				if (tt == 2) {
					_tile_loadd(7, b1 + g * AMX_TILE, 64);
					_tile_zero(1);
					_tile_zero(3);
					_tile_dpbssd(1, 4, 7);
					_tile_dpbssd(3, 5, 7);
					_tile_stored(1, ct + 16, 128);
					_tile_stored(3, ct + 16 * 32 + 16, 128);
				}
				float *a = acc + (g % 8) * 32 * 32;
				for (int b = 0; b < tt; b++) {
					const __m512 dv = _mm512_loadu_ps(d[b] + 16 * g);
					for (int i = 0; i < AMX_PANEL; i++) {
						const __m512 p = _mm512_cvtepi32_ps(_mm512_load_si512(ct + 32 * i + 16 * b));
						const __m512 m = _mm512_mul_ps(_mm512_set1_ps(sst[G * i + g]), dv);
						float *ai = a + 32 * i + 16 * b;
						_mm512_store_ps(ai, _mm512_fmadd_ps(p, m, g < 8 ? _mm512_setzero_ps() : _mm512_load_ps(ai)));
					}
				}
			}
			for (int i = 0; i < AMX_PANEL; i++) /* q8.h's tree over the 8 chains */
				for (int b = 0; b < tt; b++) {
					const float *a = acc + 32 * i + 16 * b;
					__m512 c[8];
					for (int j = 0; j < 8; j++)
						c[j] = _mm512_load_ps(a + j * 32 * 32);
					const __m512 s0 = _mm512_add_ps(_mm512_add_ps(c[0], c[4]), _mm512_add_ps(c[2], c[6]));
					const __m512 s1 = _mm512_add_ps(_mm512_add_ps(c[1], c[5]), _mm512_add_ps(c[3], c[7]));
					_mm512_store_ps(res + 32 * i + 16 * b, _mm512_add_ps(s0, s1));
				}
			const int nt = n - 16 * tb < 32 ? (int)(n - 16 * tb) : 32;
			amx_put(res, 16 * tb, nt, nr, y, ys, p0 - r0);
		}
	}
	_tile_release();
}

static void amx_q8_gemm(const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys, int64_t r0, int64_t r1)
{
	if (W->enc == COLI_ENC_Q8)
		amx_q8_gemm_enc(COLI_ENC_Q8, W, xp, n, y, ys, r0, r1);
	else
		amx_q8_gemm_enc(COLI_ENC_Q4, W, xp, n, y, ys, r0, r1);
}
