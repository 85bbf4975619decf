/* body.h: the SIMD kernel bodies, written once over an ISA mapping (isa_avx2.h, isa_avx512.h: KV_N
 * lanes, kv_* operations) and the encoding table (enc.h); internal. A variant's file includes its
 * mapping, then this: avx2.c and avx512.c are the same bodies compiled for two ISAs, each summing
 * in the order its vector width gives (kernels.h: variants differ only in summation order).
 *
 * Matrix-vector (1 to 4 tokens per pass): rows go in blocks of RB, read one after another
 * (interleaving rows defeats the hardware prefetcher): whole when the tokens' x fits in L1 (XL1
 * floats), else in column blocks, so x never streams from L2 (that halved the speed). From RAM two
 * more things mattered on Zen 5: the scales are prefetched like the codes, and a code chunk is
 * loaded once (nib_chunk).
 *
 * 4-bit codes with x prepared (KX_F32_NIB): quant.h's packing (q4, groups of 64) or FP4's pairs
 * (blocks of 32, two consecutive columns a byte): a chunk of KV_N dwords (8 KV_N columns: nib_gpc
 * groups) is loaded whole; nibble j of every dword (bits 4j .. 4j+3) becomes floats through the
 * mapping's kv_nibbles (a 16-entry lookup, arithmetic for an affine table, an 8-entry lookup and
 * the sign for a sign-magnitude one), and x is prepared once per product in the matching order
 * (prep), so the weights are never reordered. Lane i of a chunk belongs to its group
 * i / (KV_N / nib_gpc); the chunk's sum is scaled by the groups' scales spread over the lanes (q4:
 * a vector of KV_N of them loaded once per KV_N / nib_gpc chunks, then permuted; FP4: the chunk's
 * own UE8M0 bytes, kv_e8_spread), or by the group's scale broadcast where a chunk is one group (q4
 * at KV_N 8: two more live registers cost AVX2 spills). FP4's scales are powers of two, so scaling
 * the sum is the same as scaling each weight but for range: redo_nonfinite.
 *
 * Every other encoding (and q4 when x is not prepared) decodes KV_N columns at a time (kdec) under
 * one scale: 4 x KV_N columns per step into four accumulators per token, one scale group at a
 * time, the four summed at the end of each column block.
 *
 * GEMM (many tokens: prefill, verify): panels of MR = KV_GEMM_MV x KV_N rows; a chunk of KC
 * columns of the panel is decoded once into wt[k][MR] (KV_N x KV_N at a time, transposed in
 * registers; q4 from its code dwords transposed, build_nib), then every block of tokens runs the
 * micro-kernel: KV_GEMM_MV vectors of weights times a broadcast x, KV_GEMM_MV x KV_GEMM_NR
 * accumulators, no horizontal sums. Y's tile is the accumulator between chunks, so each Y[t][r]
 * is one in-order chain of fused multiply-adds over the columns: the same bits for any split of
 * rows, columns or tokens. The tokens go in blocks of even size (29 = 8 + 7 + 7 + 7, not
 * 8 + 8 + 8 + 5): a small block keeps fewer chains in flight than two 4-5-cycle FMA pipes need.
 * Few tokens a block, more rows: a block's x rows lie a row of X apart, 8 KiB at 2048 columns,
 * all in one set of the 8-way L1, so more than 8 of them evict each other (Zen 4, q4 768x2048:
 * 32 rows x 12 tokens 0.70 of the FMA peak at 29 tokens, 48 x 8 0.82).
 * Whole panels move their tile with plain loads and stores (Zen 3's masked ones are microcoded).
 */
#ifndef KV_N
#error "body.h: include an ISA mapping (kernels/isa_*.h) first"
#endif
#ifndef KV_AMX
#define KV_AMX 0 /* isa_avx512.h sets it for amx.c */
#endif

#define RB 16         /* rows per block (the next block is prefetched meanwhile) */
#define XL1 8192      /* floats of x kept in L1: a block has XL1 / T columns */
#define SMALL_N 16    /* coli_mat_mul up to small_n(enc) <= SMALL_N tokens uses the matvec kernels */
#define PF_AHEAD 8192 /* bytes, when rows are read whole: one stream */
#define MV KV_GEMM_MV    /* GEMM: vectors of rows of a panel */
#define MR (MV * KV_N)   /* GEMM: rows of a panel */
#define NR KV_GEMM_NR    /* GEMM: tokens per micro-kernel call */
#define KC (MR > 32 ? 128 : 256) /* GEMM: columns per decoded chunk (the tile: at most 32 KiB) */

/* ---- prefetching ---- */

/* The scales of row r (a scale per block), fetched a block of rows ahead: a scale that misses in
 * the cache stalls everything that depends on it (measured: -25% from RAM). */
KV_INLINE void prefetch_scales(coli_enc enc, const coli_mat *W, int64_t r)
{
	const int64_t n = kern_enc_blocks(enc, W->cols) * kern_scale_bytes(enc);
	uintptr_t s = (uintptr_t)W->scales + (uintptr_t)(r * n);
	for (int64_t o = 0; o < n; o += 64)
		_mm_prefetch((const char *)(s + (uintptr_t)o), _MM_HINT_T0);
}

/* The code stream's prefetch for the 64 bytes at c. Rows read whole make one stream: fetch
 * PF_AHEAD bytes ahead of c (an address derived from the load's own pointer: a separately
 * advanced pointer halved the speed from RAM on Zen 5). Rows read in column blocks: fetch the
 * next row block (its rows are contiguous) in address order through pf, spread over this
 * block's work. Addresses may lie past the matrix: a prefetch never faults. */
KV_INLINE void prefetch_next(const uint8_t *c, uintptr_t *pf, int whole)
{
	if (whole) {
		_mm_prefetch((const char *)((uintptr_t)c + PF_AHEAD), _MM_HINT_T0);
	} else {
		_mm_prefetch((const char *)*pf, _MM_HINT_T1);
		*pf += 64;
	}
}

/* ---- decoding KV_N columns ---- */

/* A row's multiplier in one scale group: s (fp8: scale_inv x 256, kv_e4m3 giving value / 256),
 * m = s x lut_bias (affine 4-bit tables), f the scale itself (the table's decode). */
typedef struct kgrp {
	kv_f s, m;
	float f;
} kgrp;

KV_INLINE kgrp kgroup(coli_enc enc, const uint8_t *sr, int64_t b)
{
	const kern_enc *e = kern_enc_of(enc);
	kgrp g;
	uint16_t h;
	switch (e->scale) {
	case KS_F16_BLOCK: memcpy(&h, sr + 2 * b, 2); g.f = kv_f16(h); break;
	case KS_F32_TILE: memcpy(&g.f, sr + 4 * b, 4); break;
	case KS_E8_BLOCK: g.f = kern_e8(sr[b]); break;
	default: g.f = 1.0f; break;
	}
	g.s = kv_set1(e->code == KC_E4M3 ? g.f * 256.0f : g.f);
	g.m = kv_mul(g.s, kv_set1((float)e->lut_bias));
	return g;
}

static const kgrp kgrp_zero; /* a panel's rows past the matrix */

/* Whether every KV_N-column slice lies in one scale group (else: the scalar kernels). */
static inline int slices_ok(const coli_mat *W)
{
	return kern_enc_of(W->enc)->scale != KS_F32_TILE || W->block[1] % KV_N == 0;
}

/* W'[k .. k+KV_N) of the row whose codes start at c, a whole slice (k a multiple of KV_N). An
 * encoding whose code type has no vector decode here goes through its row's decode. */
KV_INLINE kv_f kdec(coli_enc enc, const uint8_t *c, int64_t k, const kgrp *g)
{
	const kern_enc *e = kern_enc_of(enc);
	switch (e->code) {
	case KC_F32: return kv_load((const float *)(const void *)(c + 4 * k));
	case KC_BF16: return kv_bf16(c + 2 * k);
	case KC_F16: return kv_f16x(c + 2 * k);
	case KC_E4M3: return kv_mul(kv_e4m3_nan(c + k), g->s);
	case KC_I8: return kv_mul(kv_i8(c + k), g->s);
	case KC_U4_LUT: {
		kv_i d = kv_u8(c + (k / 64) * 32 + (k & 31));
		if (k & 32)
			d = kv_srli(d, 4);
#if KV_LUT16
		return kv_mul(kv_lut(d, kv_lut_of(e)), g->s);
#else
		if (e->lut_affine)
			return kv_u4_affine(d, g->s, g->m);
		break;
#endif
	}
	case KC_U4_PAIRS: {
		kv_i d = kv_u4pairs(c + k / 2);
#if KV_LUT16
		return kv_mul(kv_lut(d, kv_lut_of(e)), g->s);
#else
		if (e->lut_signmag)
			return kv_mul(kv_lut_sm(d, 0, e), g->s);
		break;
#endif
	}
	default: break;
	}
	float w[KV_N];
	e->decode(c, k, k + KV_N, g->f, w);
	return kv_load(w);
}

/* The first n (< KV_N; <= 0: none) columns of the slice at k, the rest zero. Rows padded to whole
 * blocks (q4/q8, with zero codes) decode in place and lose the lanes past n; an unpadded row's
 * codes are copied into a zeroed buffer first. */
KV_INLINE kv_f kdec_part(coli_enc enc, const uint8_t *c, int64_t k, int64_t n, const kgrp *g)
{
	const kern_enc *e = kern_enc_of(enc);
	if (e->block > 1)
		return kv_keep(kdec(enc, c, k, g), kv_first(n));
	uint8_t buf[4 * KV_N] = {0};
	if (n > 0)
		memcpy(buf, c + k * e->block_bytes, (size_t)(n * e->block_bytes));
	return kdec(enc, buf, 0, g);
}

/* ---- 4-bit codes in the nibble order (x prepared) ---- */

/* Encodings that take the nibble-order paths: 4-bit codes in quant.h's packing with fp16 scales
 * per 64-column block, or in pairs (FP4) with UE8M0 scales per 32, and a table the mapping can
 * turn into floats. */
static inline int nib_enc(coli_enc enc)
{
	const kern_enc *e = kern_enc_of(enc);
	return ((e->code == KC_U4_LUT && e->scale == KS_F16_BLOCK && e->block == 64) ||
		(e->code == KC_U4_PAIRS && e->scale == KS_E8_BLOCK && e->block == 32)) &&
	       (KV_LUT16 || e->lut_affine || e->lut_signmag);
}

/* Groups (blocks) of a nibble-order encoding per chunk of KV_N dwords (8 KV_N columns). */
static inline int64_t nib_gpc(coli_enc enc)
{
	return 8 * KV_N / kern_enc_of(enc)->block;
}

static int64_t nib_chunks(const coli_mat *W)
{
	return (kern_blocks(W) + nib_gpc(W->enc) - 1) / nib_gpc(W->enc);
}

/* The column of nibble j of dword d of chunk p (pairs: in the mapping's order, kv_pairs_col). */
static int64_t nib_col(coli_enc enc, int64_t p, int d, int j)
{
	int64_t byte = 4 * KV_N * p + 4 * d + (j >> 1);
	if (kern_enc_of(enc)->code == KC_U4_PAIRS)
		return 8 * KV_N * p + kv_pairs_col(d, j);
	return 64 * (byte / 32) + 32 * (j & 1) + byte % 32;
}

static kern_xtype xtype(const coli_mat *W)
{
	return nib_enc(W->enc) ? KX_F32_NIB : KX_F32;
}

static int64_t prep_bytes(const coli_mat *W)
{
	return nib_enc(W->enc) ? nib_chunks(W) * 8 * KV_N * (int64_t)sizeof(float) : 0;
}

/* xp[8 KV_N p + KV_N j + d] = x at the column of nibble j of dword d of chunk p; zero past cols. */
static void prep(const coli_mat *W, const float *x, void *out)
{
	float *xp = out;
	for (int64_t p = 0; p < nib_chunks(W); p++)
		for (int j = 0; j < 8; j++)
			for (int d = 0; d < KV_N; d++) {
				int64_t col = nib_col(W->enc, p, d, j);
				xp[8 * KV_N * p + KV_N * j + d] = col < W->cols ? x[col] : 0.0f;
			}
}

/* acc[t] += (sum over the chunk's 8 KV_N weights of w * xp_t) * sv, for T tokens xs apart. */
KV_INLINE void nib_chunk(const kern_enc *e, kv_i v, kv_f sv, const float *xp, int64_t xs, int T, kv_f *acc)
{
	kv_f w[8];
	KV_PIN(v); /* folded into each nibble's shift as a memory operand, the chunk is loaded eight
		    * times, and from RAM that halved the speed on Zen 5 */
	kv_nibbles(v, e, w);
#pragma GCC unroll 4
	for (int t = 0; t < T; t++) {
		const float *x = xp + t * xs;
		kv_f s = kv_mul(w[0], kv_load_a(x)), s1;
		if (e->code == KC_U4_PAIRS) { /* two chains (FP4): half the latency a chunk */
			s1 = kv_mul(w[1], kv_load_a(x + KV_N));
#pragma GCC unroll 4
			for (int j = 2; j < 8; j += 2) {
				s = kv_fma(w[j], kv_load_a(x + KV_N * j), s);
				s1 = kv_fma(w[j + 1], kv_load_a(x + KV_N * (j + 1)), s1);
			}
			s = kv_add(s, s1);
		} else {
#pragma GCC unroll 8
			for (int j = 1; j < 8; j++)
				s = kv_fma(w[j], kv_load_a(x + KV_N * j), s);
		}
		acc[t] = kv_fma(s, sv, acc[t]);
	}
}

/* y[t * ys + r - r0] = W[r] . x_t for T tokens of prepared x (xs floats apart), r in [r0, r1):
 * blocks of RB rows x XL1 / T columns; the accumulators wait in acc between column blocks (each
 * row's sum keeps its order), the next row block is prefetched one cache line per 64 bytes. */
KV_INLINE void nib_rows(coli_enc enc, const coli_mat *W, const float *xp, int64_t xs, int T, float *y,
			int64_t ys, int64_t r0, int64_t r1)
{
	const kern_enc *e = kern_enc_of(enc);
	const int64_t GPC = nib_gpc(enc), LPG = KV_N / GPC; /* groups per chunk, lanes per group */
	const int64_t G = kern_enc_blocks(enc, W->cols), P = (G + GPC - 1) / GPC, full = G / GPC, cb = XL1 / (8 * KV_N) / T;
	const kv_i step = kv_iset1((int)GPC);
	kv_f acc[RB][4];
	for (int64_t b0 = r0; b0 < r1; b0 += RB) {
		int nr = r1 - b0 < RB ? (int)(r1 - b0) : RB, whole = P <= cb;
		uintptr_t pf = (uintptr_t)W->codes + (uintptr_t)((b0 + RB) * W->row_bytes);
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				acc[i][t] = kv_zero();
		for (int64_t p0 = 0; p0 < P; p0 += cb) {
			int64_t p1 = P - p0 < cb ? P : p0 + cb;
			for (int i = 0; i < nr; i++) {
				const uint8_t *c = W->codes + (b0 + i) * W->row_bytes, *sr = kern_enc_row_scales(enc, W, b0 + i);
				kv_f s8 = kv_zero(), a[4];
				kv_i idx = kv_lanes_by((int)LPG);
				if (p0 == 0)
					prefetch_scales(enc, W, b0 + i + RB);
				/* UE8M0 bytes 0 and 255 looked for once a column block (then set apart in it) */
				int odd = e->scale == KS_E8_BLOCK && kv_e8_odd(sr + GPC * p0, (GPC * p1 < G ? GPC * p1 : G) - GPC * p0);
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					a[t] = acc[i][t];
				for (int64_t p = p0; p < p1; p++) {
					kv_f sv;
					if (GPC == 1) { /* a chunk is one group: its scale broadcast */
						uint16_t h;
						memcpy(&h, sr + 2 * p, 2);
						sv = kv_set1(kv_f16(h));
					} else if (e->scale == KS_E8_BLOCK) { /* FP4: its own bytes, spread */
						sv = !odd && p < full ? kv_e8_spread(sr + GPC * p)
								      : kv_perm(kv_lanes_by((int)LPG), kv_e8(sr + GPC * p, G - GPC * p, odd));
					} else {
						if ((p - p0) % LPG == 0) {
							s8 = kv_f16n(sr + 2 * GPC * p, G - GPC * p);
							idx = kv_lanes_by((int)LPG);
						}
						sv = kv_perm(idx, s8);
						idx = kv_iadd(idx, step);
					}
					/* a last chunk of fewer groups: its upper dwords are zero codes, x and scale */
					kv_i v = GPC == 1 || p < full ? kv_iload(c + 4 * KV_N * p)
								      : kv_iload_m(c + 4 * KV_N * p, kv_first(e->block_bytes / 4 * (G - GPC * p)));
					if (((4 * KV_N * p) & 63) == 0)
						prefetch_next(c + 4 * KV_N * p, &pf, whole);
					nib_chunk(e, v, sv, xp + 8 * KV_N * p, xs, T, a);
				}
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					acc[i][t] = a[t];
			}
		}
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				y[t * ys + b0 + i - r0] = kv_reduce(acc[i][t]);
	}
}

/* ---- every encoding through kdec ---- */

/* Columns sharing one scale (unscaled encodings: 1024), and columns per block for any T tokens:
 * whole scale groups, about XL1 / 4 (not XL1 / T: the sums' order is T's alone, kernels.h). */
KV_INLINE int64_t gen_scale_width(coli_enc enc, const coli_mat *W)
{
	return kern_enc_of(enc)->scale == KS_NONE ? 1024 : kern_enc_scale_width(enc, W);
}

KV_INLINE int64_t gen_block_width(coli_enc enc, const coli_mat *W)
{
	int64_t sw = gen_scale_width(enc, W), cb = XL1 / 4;
	return sw >= cb ? sw : cb / sw * sw;
}

/* y[t * ys + r - r0] = W[r] . x_t for T tokens of plain x (xs floats apart), r in [r0, r1), in the
 * blocks of nib_rows; partial slices through kdec_part. */
KV_INLINE void gen_rows(coli_enc enc, const coli_mat *W, const float *x, int64_t xs, int T, float *y,
			int64_t ys, int64_t r0, int64_t r1)
{
	const kern_enc *e = kern_enc_of(enc);
	const int64_t cols = W->cols, sw = gen_scale_width(enc, W), bw = gen_block_width(enc, W);
	const int64_t bpc = e->block_bytes >= e->block ? e->block_bytes / e->block : 1, step = 4 * KV_N * bpc;
	kv_f acc[RB][4];
	for (int64_t b0 = r0; b0 < r1; b0 += RB) {
		int nr = r1 - b0 < RB ? (int)(r1 - b0) : RB, whole = bw >= cols;
		uintptr_t pf = (uintptr_t)W->codes + (uintptr_t)((b0 + RB) * W->row_bytes);
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				acc[i][t] = kv_zero();
		for (int64_t c0 = 0; c0 < cols; c0 += bw) {
			int64_t c1 = cols - c0 < bw ? cols : c0 + bw;
			for (int i = 0; i < nr; i++) {
				const uint8_t *c = W->codes + (b0 + i) * W->row_bytes, *sr = kern_enc_row_scales(enc, W, b0 + i);
				kv_f a[4][4];
				if (c0 == 0 && (e->scale == KS_F16_BLOCK || e->scale == KS_E8_BLOCK))
					prefetch_scales(enc, W, b0 + i + RB);
#pragma GCC unroll 4
				for (int t = 0; t < T; t++) {
					a[t][0] = acc[i][t];
					a[t][1] = a[t][2] = a[t][3] = kv_zero();
				}
				for (int64_t g0 = c0, g = c0 / sw; g0 < c1; g0 += sw, g++) {
					kgrp s = kgroup(enc, sr, g);
					int64_t g1 = c1 - g0 < sw ? c1 : g0 + sw, k = g0;
					for (; k + 4 * KV_N <= g1; k += 4 * KV_N) {
						for (int64_t o = 0; o < step; o += 64) /* a line per 64 bytes */
							if (step >= 64 || ((k * bpc) & 32) == 0)
								prefetch_next(c + k * bpc + o, &pf, whole);
						int clean = e->code == KC_E4M3 && kv_e4m3_clean4(c + k);
#pragma GCC unroll 4
						for (int u = 0; u < 4; u++) {
							kv_f w = clean ? kv_mul(kv_e4m3(c + k + KV_N * u), s.s) : kdec(enc, c, k + KV_N * u, &s);
#pragma GCC unroll 4
							for (int t = 0; t < T; t++)
								a[t][u] = kv_fma(w, kv_load(x + t * xs + k + KV_N * u), a[t][u]);
						}
					}
					for (; k < g1; k += KV_N) {
						int64_t n = g1 - k;
						kv_f w = n >= KV_N ? kdec(enc, c, k, &s) : kdec_part(enc, c, k, n, &s);
#pragma GCC unroll 4
						for (int t = 0; t < T; t++)
							a[t][0] = kv_fma(w, kv_load_m(x + t * xs + k, kv_first(n)), a[t][0]);
					}
				}
#pragma GCC unroll 4
				for (int t = 0; t < T; t++)
					acc[i][t] = kv_add(kv_add(a[t][0], a[t][1]), kv_add(a[t][2], a[t][3]));
			}
		}
		for (int i = 0; i < nr; i++)
			for (int t = 0; t < T; t++)
				y[t * ys + b0 + i - r0] = kv_reduce(acc[i][t]);
	}
}

/* One function per (encoding, token count), so the decoder and the token loop are constants. */
typedef void (*rows_fn)(const coli_mat *W, const float *x, int64_t xs, float *y, int64_t ys,
			int64_t r0, int64_t r1);

#define ROWS_T(kind, E, T)                                                                          \
	static void kind##_##E##_##T(const coli_mat *W, const float *x, int64_t xs, float *y, int64_t ys, \
				     int64_t r0, int64_t r1)                                        \
	{                                                                                           \
		kind##_rows(COLI_ENC_##E, W, x, xs, T, y, ys, r0, r1);                               \
	}
#define ROWS(kind, E)                                                                              \
	ROWS_T(kind, E, 1) ROWS_T(kind, E, 2) ROWS_T(kind, E, 3) ROWS_T(kind, E, 4)                 \
	static const rows_fn kind##_##E[4] = {kind##_##E##_1, kind##_##E##_2, kind##_##E##_3, kind##_##E##_4};
#define GEN_ROWS(E) ROWS(gen, E)
#define GEN_ENTRY(E) [COLI_ENC_##E] = gen_##E,
#define NIB_ROWS(E) ROWS(nib, E)
#define NIB_ENTRY(E) [COLI_ENC_##E] = nib_##E,
KERN_ENCS(GEN_ROWS)
KERN_NIB_ENCS(NIB_ROWS)
static const rows_fn *const plain_rows[COLI_ENC_COUNT] = {KERN_ENCS(GEN_ENTRY)};
static const rows_fn *const nib_rows_of[COLI_ENC_COUNT] = {KERN_NIB_ENCS(NIB_ENTRY)};

/* x as the rows functions read it: prepared (nibble order) when xp says so. */
static const rows_fn *rows_for(const coli_mat *W, const kern_x *xp)
{
	return xp && xp->type == KX_F32_NIB && nib_rows_of[W->enc] ? nib_rows_of[W->enc] : plain_rows[W->enc];
}

/* The nibble-order paths (and amx's GEMM, body_amx.h) sum codes times x before the scale (q4's
 * fp16, FP4's power of two), so with x near float32's end such a sum can overflow where the
 * weights' products would not: the rows of T tokens (plain x, xs floats apart) whose result is
 * not finite are done again through the plain path, which scales each weight first (kdec), so that only what float32 itself
 * overflows does (a NaN scale's row stays NaN). The same rows for any split: a row's bits are
 * still its own. */
static void redo_nonfinite(const coli_mat *W, const float *x, int64_t xs, int T, float *y, int64_t ys, int64_t r0, int64_t r1)
{
	for (int t = 0; t < T; t++) {
		int any = 0; /* a token's rows looked at KV_N at a time first: almost always all finite */
		for (int64_t r = r0; r < r1 && !any; r += KV_N)
			any = kv_nonfinite(y + t * ys + r - r0, r1 - r);
		for (int64_t r = r0; any && r < r1; r++)
			if (!isfinite(y[t * ys + r - r0]))
				plain_rows[W->enc][0](W, x + t * xs, xs, y + t * ys + r - r0, ys, r, r + 1);
	}
}

static void vec(const coli_mat *W, const float *x, const kern_x *xp, float *y, int64_t r0, int64_t r1)
{
	const rows_fn *f = rows_for(W, xp);
	if (f == plain_rows[W->enc]) {
		f[0](W, x, 0, y, 0, r0, r1);
		return;
	}
	f[0](W, (const float *)xp->data, 0, y, 0, r0, r1);
	redo_nonfinite(W, x, W->cols, 1, y, 0, r0, r1);
}

/* ---- GEMM ---- */

/* The next chunk of the panel's rows, fetched while this one is decoded: a panel reads its rows
 * piecewise, which the hardware prefetcher alone serves poorly from RAM. */
KV_INLINE void prefetch_panel(coli_enc enc, const coli_mat *W, int64_t p, int nr, int64_t k0)
{
	const int64_t next = kern_code_bytes(enc, k0 + KC), nb = kern_code_bytes(enc, KC);
	for (int i = 0; i < nr && k0 + KC < W->cols; i++)
		for (int64_t o = 0; o < nb; o += 64)
			_mm_prefetch((const char *)((uintptr_t)W->codes + (uintptr_t)((p + i) * W->row_bytes + next + o)),
				     _MM_HINT_T0);
}

/* wt[k][i] = W'[p + i][k0 + k] for k < kc (rounded up to KV_N), i < MR; zero for i >= nr: KV_N
 * columns of a row at a time (kdec), KV_N rows transposed in registers. A row's scale is widened
 * once per scale group. */
KV_INLINE void build(coli_enc enc, const coli_mat *W, int64_t p, int nr, int64_t k0, int64_t kc,
		     const uint8_t *const *sr, float *wt)
{
	const int64_t sw = kern_enc_scale_width(enc, W);
	prefetch_panel(enc, W, p, nr, k0);
	for (int h = 0; h < MV; h++) {
		kgrp s[KV_N];
		int64_t gb = -1;
		for (int64_t kb = 0; kb < kc; kb += KV_N) {
			int64_t n = kc - kb, b = (k0 + kb) / sw;
			kv_f v[KV_N];
			if (b != gb) {
				gb = b;
				for (int i = 0; i < KV_N; i++)
					s[i] = KV_N * h + i < nr ? kgroup(enc, sr[KV_N * h + i], b) : kgrp_zero;
			}
#pragma GCC unroll 16
			for (int i = 0; i < KV_N; i++) {
				v[i] = kv_zero();
				if (KV_N * h + i >= nr)
					continue;
				const uint8_t *c = W->codes + (p + KV_N * h + i) * W->row_bytes;
				v[i] = n >= KV_N ? kdec(enc, c, k0 + kb, &s[i]) : kdec_part(enc, c, k0 + kb, n, &s[i]);
			}
			kv_transpose(v);
#pragma GCC unroll 16
			for (int j = 0; j < KV_N; j++)
				kv_store_a(wt + (kb + j) * MR + KV_N * h, v[j]);
		}
	}
}

/* build for q4 (nib_enc, a 16-entry table in quant.h's packing): a step of 8 KV_N columns (nib_gpc
 * groups) of KV_N rows loads each row's KV_N code dwords, transposes them (the float transpose on
 * the same bits), so that vector d holds dword d of every row, and turns nibble j of each into the
 * column of KV_N rows it is (kv_nibbles: 8 KV_N weights in about 16 operations at KV_N 16, where a
 * row at a time took 4 a vector and a float transpose), times the rows' scales of its group: the
 * same product of the table's value and the scale as kdec, so the same bits. Rows past nr are not
 * read (their lanes hold zero codes; the micro-kernel masks them); a step past the last group
 * reads its codes masked. */
KV_INLINE void build_nib(coli_enc enc, const coli_mat *W, int64_t p, int nr, int64_t k0, int64_t kc,
			 const uint8_t *const *sr, float *wt)
{
	const kern_enc *e = kern_enc_of(enc);
	const int64_t GPC = nib_gpc(enc), G = kern_enc_blocks(enc, W->cols), S = 8 * KV_N;
	prefetch_panel(enc, W, p, nr, k0);
	for (int h = 0; h < MV; h++)
		for (int64_t kb = 0; kb < kc; kb += S) {
			const int64_t g0 = (k0 + kb) / 64, ng = G - g0 < GPC ? G - g0 : GPC;
			kv_f v[KV_N], s[KV_N / 8];
#pragma GCC unroll 16
			for (int i = 0; i < KV_N; i++) {
				const uint8_t *c = W->codes + (p + KV_N * h + i) * W->row_bytes + 32 * g0;
				v[i] = KV_N * h + i >= nr ? kv_zero()
				       : ng == GPC	  ? kv_as_f(kv_iload(c))
							  : kv_as_f(kv_iload_m(c, kv_first(8 * ng)));
			}
			kv_transpose(v);
#pragma GCC unroll 2
			for (int g = 0; g < KV_N / 8; g++) {
				uint16_t hs[KV_N] = {0};
				for (int i = 0; i < KV_N && KV_N * h + i < nr && g < ng; i++)
					memcpy(hs + i, sr[KV_N * h + i] + 2 * (g0 + g), 2);
				s[g] = kv_f16x((const uint8_t *)hs);
			}
#pragma GCC unroll 16
			for (int d = 0; d < KV_N; d++) {
				kv_f w[8];
				kv_nibbles(kv_as_i(v[d]), e, w);
#pragma GCC unroll 8
				for (int j = 0; j < 8; j++) {
					int64_t col = 64 * (d / 8) + 32 * (j & 1) + 4 * (d % 8) + (j >> 1);
					kv_store_a(wt + (kb + col) * MR + KV_N * h, kv_mul(w[j], s[d / 8]));
				}
			}
		}
}

/* Y[t][p .. p+MR) (+)= sum over k < kc of wt[k] * x[t][k] for T tokens; m[v] masks the panel's
 * rows v KV_N .. (v + 1) KV_N; `first` starts from zero instead of Y. */
KV_INLINE void micro(const float *wt, int64_t kc, const float *x, int64_t xs, int T, float *y,
		     int64_t ys, const kv_m *m, int first)
{
	kv_f a[MV][NR];
	int whole = kv_all(m[MV - 1]);
#pragma GCC unroll 12
	for (int t = 0; t < T; t++)
#pragma GCC unroll 4
		for (int v = 0; v < MV; v++)
			a[v][t] = first ? kv_zero() : whole ? kv_load(y + t * ys + KV_N * v) : kv_load_m(y + t * ys + KV_N * v, m[v]);
	for (int64_t k = 0; k < kc; k++) {
		kv_f w[MV];
#pragma GCC unroll 4
		for (int v = 0; v < MV; v++)
			w[v] = kv_load_a(wt + k * MR + KV_N * v);
#pragma GCC unroll 12
		for (int t = 0; t < T; t++) {
			kv_f b = kv_bcast(x + t * xs + k);
#pragma GCC unroll 4
			for (int v = 0; v < MV; v++)
				a[v][t] = kv_fma(w[v], b, a[v][t]);
		}
	}
#pragma GCC unroll 12
	for (int t = 0; t < T; t++)
#pragma GCC unroll 4
		for (int v = 0; v < MV; v++) {
			if (whole)
				kv_store(y + t * ys + KV_N * v, a[v][t]);
			else
				kv_store_m(y + t * ys + KV_N * v, m[v], a[v][t]);
		}
}

typedef void (*micro_fn)(const float *wt, int64_t kc, const float *x, int64_t xs, float *y,
			 int64_t ys, const kv_m *m, int first);

#define MICRO(T)                                                                                  \
	static void micro_##T(const float *wt, int64_t kc, const float *x, int64_t xs, float *y,       \
			      int64_t ys, const kv_m *m, int first)                                   \
	{                                                                                         \
		micro(wt, kc, x, xs, T, y, ys, m, first);                                          \
	}
MICRO(1) MICRO(2) MICRO(3) MICRO(4)
#if NR > 4
MICRO(5) MICRO(6)
#endif
#if NR > 6
MICRO(7) MICRO(8)
#endif
#if NR > 8
MICRO(9) MICRO(10) MICRO(11) MICRO(12)
#endif

static const micro_fn micros[NR] = {micro_1, micro_2, micro_3, micro_4,
#if NR > 4
				    micro_5, micro_6,
#endif
#if NR > 6
				    micro_7, micro_8,
#endif
#if NR > 8
				    micro_9, micro_10, micro_11, micro_12,
#endif
};

KV_INLINE void gemm_enc(coli_enc enc, const coli_mat *W, const float *X, int n, float *Y, int64_t r0,
			int64_t r1)
{
	_Alignas(64) float wt[KC * MR];
	const uint8_t *sr[MR];
	const int64_t cols = W->cols, rows = W->rows;
	for (int64_t p = r0; p < r1; p += MR) {
		int nr = r1 - p < MR ? (int)(r1 - p) : MR;
		kv_m m[MV];
		for (int v = 0; v < MV; v++)
			m[v] = kv_first(nr - KV_N * v);
		for (int i = 0; i < nr; i++)
			sr[i] = kern_enc_row_scales(enc, W, p + i);
		for (int64_t k0 = 0; k0 < cols; k0 += KC) {
			int64_t kc = cols - k0 < KC ? cols - k0 : KC;
			if (nib_enc(enc) && kern_enc_of(enc)->code == KC_U4_LUT)
				build_nib(enc, W, p, nr, k0, kc, sr, wt);
			else
				build(enc, W, p, nr, k0, kc, sr, wt);
			for (int t0 = 0, left = n, blocks = (n + NR - 1) / NR; left > 0; blocks--) {
				int nt = (left + blocks - 1) / blocks;
				micros[nt - 1](wt, kc, X + t0 * cols + k0, cols, Y + t0 * rows + p, rows, m, k0 == 0);
				t0 += nt, left -= nt;
			}
		}
	}
}

/* Y[t][r] for r in [r0, r1), any n. */
static void gemm(const coli_mat *W, const float *X, int n, float *Y, int64_t r0, int64_t r1)
{
#define GEMM_CASE(E)                                                                              \
	case COLI_ENC_##E: gemm_enc(COLI_ENC_##E, W, X, n, Y, r0, r1); break;
	switch (W->enc) {
	KERN_ENCS(GEMM_CASE)
	default: break;
	}
#undef GEMM_CASE
}

/* Tokens up to which passes of the matvec kernels beat the GEMM's decoding and transposing
 * (measured on 2048x7168 matrices, Zen 5); at least COLI_EXACT_N (kernels.h). */
static int small_n(coli_enc enc)
{
	return nib_enc(enc) ? SMALL_N : COLI_EXACT_N;
}

#if KV_AMX
#include "kernels/body_amx.h"
#endif

/* Up to small_n tokens: the matvec kernels, up to 4 tokens per pass, the passes over one block
 * of RB rows after another (the block stays in L2); more tokens: the GEMM (amx's over its
 * prepared activations when kernels.c made them). */
static void mul(const coli_mat *W, const float *X, const kern_x *XP, int n, float *Y, int64_t r0, int64_t r1)
{
#if KV_AMX
	if (XP && XP->type == KX_BF16X3 && amx_gemm(W, X, XP, n, Y, r0, r1))
		return;
#endif
	if (n > small_n(W->enc)) {
		if (slices_ok(W))
			gemm(W, X, n, Y, r0, r1);
		else
			kern_scalar.mul(W, X, XP, n, Y, r0, r1);
		return;
	}
	const rows_fn *f = rows_for(W, XP);
	int plain = f == plain_rows[W->enc];
	const float *x = plain ? X : (const float *)XP->data;
	int64_t xs = plain ? W->cols : XP->stride / (int64_t)sizeof(float);
	for (int64_t b0 = r0; b0 < r1; b0 += n > 4 ? RB : r1 - r0) {
		int64_t b1 = n <= 4 || r1 - b0 < RB ? r1 : b0 + RB;
		for (int t0 = 0; t0 < n; t0 += 4) {
			int nt = n - t0 < 4 ? n - t0 : 4;
			f[nt - 1](W, x + t0 * xs, xs, Y + t0 * W->rows + b0, W->rows, b0, b1);
			if (!plain)
				redo_nonfinite(W, X + t0 * W->cols, W->cols, nt, Y + t0 * W->rows + b0, W->rows, b0, b1);
		}
	}
}

/* ---- transposed product and rows ---- */

/* y[k0 .. k0 + 8 KV_N) += sum_r a[r] W[r][...]: eight accumulators over every row of the range,
 * then stored. A row's scale is widened once per scale group (newg), not per slice. */
KV_INLINE void gen_vec_t(coli_enc enc, const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y,
			 int64_t c0, int64_t c1)
{
	const int64_t sw = kern_enc_scale_width(enc, W);
	for (int64_t k0 = c0; k0 < c1; k0 += 8 * KV_N) {
		kv_f acc[8];
		kv_m m[8];
		int64_t b[8], n[8];
		int newg[8];
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++) {
			int64_t k = k0 + KV_N * i < c1 ? k0 + KV_N * i : c1 - 1; /* empty slices: a valid group */
			n[i] = c1 - k0 - KV_N * i;
			m[i] = kv_first(n[i]);
			acc[i] = kv_load_m(y + k0 + KV_N * i, m[i]);
			b[i] = k / sw;
			newg[i] = i == 0 || b[i] != b[i - 1];
		}
		for (int64_t r = r0; r < r0 + nr; r++) {
			const uint8_t *c = W->codes + r * W->row_bytes, *sr = kern_enc_row_scales(enc, W, r);
			kv_f ar = kv_set1(a[r - r0]);
			kgrp s = kgroup(enc, sr, b[0]);
#pragma GCC unroll 8
			for (int i = 0; i < 8; i++) {
				if (n[i] <= 0)
					break;
				if (i > 0 && newg[i])
					s = kgroup(enc, sr, b[i]);
				kv_f w = n[i] >= KV_N ? kdec(enc, c, k0 + KV_N * i, &s) : kdec_part(enc, c, k0 + KV_N * i, n[i], &s);
				acc[i] = kv_fma(w, ar, acc[i]);
			}
		}
#pragma GCC unroll 8
		for (int i = 0; i < 8; i++)
			kv_store_m(y + k0 + KV_N * i, m[i], acc[i]);
	}
}

#if KV_LUT16
/* 4-bit codes with a 16-entry lookup: per row and group the table is scaled by a[r] * s once, so
 * KV_N weights cost a lookup and an add. k0 is a multiple of 64 (the pool splits at multiples of
 * 128): a step covers two groups, 128 / KV_N vectors, 32 / KV_N loads of KV_N codes per half. */
KV_INLINE void nib_vec_t(coli_enc enc, const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y,
			 int64_t c0, int64_t c1)
{
	enum { V = 128 / KV_N, L = 32 / KV_N };
	const kv_f lut = kv_lut_of(kern_enc_of(enc));
	const int64_t G = kern_enc_blocks(enc, W->cols);
	for (int64_t k0 = c0; k0 < c1; k0 += 128) {
		const int64_t g0 = k0 / 64, ng = g0 + 1 < G && k0 + 64 < c1 ? 2 : 1;
		kv_f acc[V];
		kv_m m[V];
#pragma GCC unroll 8
		for (int i = 0; i < V; i++) {
			m[i] = kv_first(c1 - k0 - KV_N * i);
			acc[i] = kv_load_m(y + k0 + KV_N * i, m[i]);
		}
		for (int64_t r = r0; r < r0 + nr; r++) {
			const uint8_t *c = W->codes + r * W->row_bytes + 32 * g0, *sr = kern_enc_row_scales(enc, W, r) + 2 * g0;
			for (int h = 0; h < ng; h++) {
				uint16_t sh;
				memcpy(&sh, sr + 2 * h, 2);
				kv_f t = kv_mul(lut, kv_set1(a[r - r0] * kv_f16(sh)));
				kv_i d[L];
#pragma GCC unroll 4
				for (int q = 0; q < L; q++)
					d[q] = kv_u8(c + 32 * h + KV_N * q);
#pragma GCC unroll 4
				for (int q = 0; q < L; q++)
					acc[2 * L * h + q] = kv_add(acc[2 * L * h + q], kv_lut(d[q], t));
#pragma GCC unroll 4
				for (int q = 0; q < L; q++)
					acc[2 * L * h + L + q] = kv_add(acc[2 * L * h + L + q], kv_lut(kv_srli(d[q], 4), t));
			}
		}
#pragma GCC unroll 8
		for (int i = 0; i < V; i++)
			kv_store_m(y + k0 + KV_N * i, m[i], acc[i]);
	}
}
#define VEC_T_OF(E) (nib_enc(COLI_ENC_##E) && kern_enc_of(COLI_ENC_##E)->code == KC_U4_LUT ? nib_vec_t : gen_vec_t)
#else
#define VEC_T_OF(E) gen_vec_t
#endif

static void vec_t(const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y, int64_t c0, int64_t c1)
{
#define VEC_T_CASE(E)                                                                             \
	case COLI_ENC_##E: VEC_T_OF(E)(COLI_ENC_##E, W, r0, nr, a, y, c0, c1); break;
	switch (slices_ok(W) ? W->enc : COLI_ENC_COUNT) {
	KERN_ENCS(VEC_T_CASE)
	default: kern_scalar.vec_t(W, r0, nr, a, y, c0, c1); break;
	}
#undef VEC_T_CASE
}

static void row(const coli_mat *W, int64_t r, float *out)
{
	const uint8_t *c = W->codes + r * W->row_bytes, *sr = kern_row_scales(W, r);
	const int64_t sw = kern_scale_width(W);
	if (!slices_ok(W)) {
		kern_scalar.row(W, r, out);
		return;
	}
	for (int64_t k = 0; k < W->cols; k += KV_N) {
		int64_t n = W->cols - k;
		kgrp s = kgroup(W->enc, sr, k / sw);
		kv_f w = n >= KV_N ? kdec(W->enc, c, k, &s) : kdec_part(W->enc, c, k, n, &s);
		kv_store_m(out + k, kv_first(n), w);
	}
}

#include "kernels/body_q8.h"

const kern_ops KV_OPS = {
	.name = KV_ISA,
	.q8 = &KV_Q8_OPS,
	.xtype = xtype,
	.prep_bytes = prep_bytes,
	.prep = prep,
	.vec = vec,
	.mul = mul,
	.vec_t = vec_t,
	.row = row,
	.small_n = KV_AMX ? COLI_EXACT_N : SMALL_N, /* amx: its GEMM from 9 tokens (2.8-3.1x the matvec kernels at 16) */
#if KV_AMX
	.gemm_bytes = amx_bytes,
	.gemm_prep = amx_prep,
#endif
};

#ifdef __clang__
#pragma clang attribute pop
#endif
