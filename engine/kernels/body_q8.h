/* body_q8.h: the q8 products (kernels/q8.h), written once over an ISA mapping's kq_* operations
 * (a pair of 64-column groups at a time); internal. Included by body.h (avx2.c, avx512.c) and
 * alone by avx512vnni.c (the same body over vpdpbusd).
 *
 * Rows one after another, each read whole, its codes decoded once per pair for up to KQ_T tokens
 * (the mapping's, 4 on both: their prepared x stays in L1); more tokens go in passes of KQ_T over
 * blocks of Q8_RB rows (the block stays in L1/L2). Every (row, token) sum is q8.h's order,
 * whatever the pass: the same bits for 1 or n tokens.
 */
#ifndef KV_Q8_OPS
#error "body_q8.h: include an ISA mapping (kernels/isa_*.h) first"
#endif

#define Q8_RB 16          /* rows per block when tokens take several passes */
#define Q8_PF_AHEAD 4096  /* bytes of codes fetched ahead of the pair being read */

/* y[t * ys + r - r0] = W[r] . x_t for T (<= KQ_T) tokens xs bytes apart, r in [r0, r1). */
KV_INLINE void q8_rows(coli_enc enc, const coli_mat *W, const uint8_t *xp, int64_t xs, int T, float *y,
		       int64_t ys, int64_t r0, int64_t r1)
{
	const int64_t G = kern_enc_blocks(enc, W->cols), G2 = kern_q8_groups(W->cols), pair = enc == COLI_ENC_Q4 ? 64 : 128;
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *c = W->codes + r * W->row_bytes, *sr = kern_enc_row_scales(enc, W, r);
		kq_acc acc[KQ_T];
		_mm_prefetch((const char *)(kern_enc_row_scales(enc, W, r + 4) + 0), _MM_HINT_T0);
#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			acc[t] = kq_zero();
		for (int64_t P = 0; P < G2 / 2; P++) {
			for (int64_t o = 0; o < pair; o += 64)
				_mm_prefetch((const char *)((uintptr_t)c + (uintptr_t)(pair * P + o + Q8_PF_AHEAD)), _MM_HINT_T0);
			kq_w w = kq_codes(enc, c, P, G);
			kq_sw sw = kq_scales(sr, P, G);
#pragma GCC unroll 8
			for (int t = 0; t < T; t++)
				acc[t] = kq_step(enc, &w, sw, xp + t * xs, G2, P, acc[t]);
		}
#pragma GCC unroll 8
		for (int t = 0; t < T; t++)
			y[t * ys + r - r0] = kq_reduce(acc[t]);
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
#if KQ_T > 4
#define Q8_ROWS(E)                                                                                  \
	Q8_ROWS_T(E, 1) Q8_ROWS_T(E, 2) Q8_ROWS_T(E, 3) Q8_ROWS_T(E, 4) Q8_ROWS_T(E, 5) Q8_ROWS_T(E, 6)  \
	Q8_ROWS_T(E, 7) Q8_ROWS_T(E, 8)                                                             \
	static const q8_rows_fn q8_##E[KQ_T] = {q8_##E##_1, q8_##E##_2, q8_##E##_3, q8_##E##_4,         \
					       q8_##E##_5, q8_##E##_6, q8_##E##_7, q8_##E##_8};
#else
#define Q8_ROWS(E)                                                                                  \
	Q8_ROWS_T(E, 1) Q8_ROWS_T(E, 2) Q8_ROWS_T(E, 3) Q8_ROWS_T(E, 4)                             \
	static const q8_rows_fn q8_##E[KQ_T] = {q8_##E##_1, q8_##E##_2, q8_##E##_3, q8_##E##_4};
#endif
#define Q8_ENTRY(E) [COLI_ENC_##E] = q8_##E,
KERN_Q8_ENCS(Q8_ROWS)
static const q8_rows_fn *const q8_rows_of[COLI_ENC_COUNT] = {KERN_Q8_ENCS(Q8_ENTRY)};

/* n tokens: passes of up to KQ_T over blocks of Q8_RB rows (one pass over all rows when n <= KQ_T),
 * the tokens in passes of even size (a small last pass keeps too few chains in flight). */
static void q8_mul(const coli_mat *W, const kern_x *xp, int n, float *y, int64_t ys, int64_t r0, int64_t r1)
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

const kern_q8_ops KV_Q8_OPS = {KV_Q8_ISA, q8_mul};
