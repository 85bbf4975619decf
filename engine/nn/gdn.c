/* gdn.c: the Gated DeltaNet block: projections, the causal depthwise conv with its state, the
 * gated delta rule on a per-layer recurrent state (decode's one-pass step, prefill's chunked
 * form), the gated RMSNorm and the output projection. */
#include "nn/gdn.h"

#include <math.h>
#include <string.h>

#include "hot.h"
#include "kernels/pool.h"
#include "nn/blocks.h"
#include "nn/kv.h"
#include "nn/weights.h"
#include "nn/ws.h"

/* torch.nn.functional.softplus (beta 1, threshold 20). */
static float softplusf(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

/* x * rsqrt(sum(x^2) + 1e-6), as the reference's l2norm (float32). */
static void l2norm(float *x, int n)
{
	float ss = 0;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	float r = 1.0f / sqrtf(ss + 1e-6f);
	for (int i = 0; i < n; i++)
		x[i] *= r;
}

/* The conv state after n more raw rows R[n][C]: the last K - 1 inputs of state + R. */
static void conv_slide(float *state, const float *R, int n, int C, int K)
{
	int keep = K - 1;
	for (int s = 0; s < keep; s++) {
		int t = n - keep + s; /* its index in R, or < 0: in the old state */
		const float *src = t >= 0 ? R + (int64_t)t * C : state + (int64_t)(t + keep) * C;
		memmove(state + (int64_t)s * C, src, (size_t)C * sizeof(float));
	}
}

/* The causal depthwise conv over the batch's raw rows R[n][C] with the state's last K - 1
 * inputs before them, SiLU: into Y[n][C]; then the state keeps the last K - 1 inputs. */
static void conv(const float *taps, float *state, const float *R, int n, int C, int K, float *Y)
{
	for (int i = 0; i < n; i++)
		for (int c = 0; c < C; c++) {
			float acc = 0;
			for (int j = 0; j < K; j++) {
				int t = i - (K - 1) + j; /* the input j taps back; < 0: in the state */
				float x = t >= 0 ? R[(int64_t)t * C + c] : state[(int64_t)(t + K - 1) * C + c];
				acc += taps[(int64_t)c * K + j] * x;
			}
			Y[(int64_t)i * C + c] = silu(acc);
		}
	conv_slide(state, R, n, C, K);
}

/* ---- vectors -------------------------------------------------------------------------------- */

/* Vectors of 4, 8 and 16 floats (GCC vector extensions): vector code in the baseline build too,
 * and the same additions in the same order in every build and every COLI_HOT clone, so no result
 * depends on the CPU (as attention.c). Helpers are macros or always inlined: they are built per
 * clone. */
typedef float v4 __attribute__((vector_size(16)));
typedef float v8 __attribute__((vector_size(32)));
typedef float v16 __attribute__((vector_size(64)));
#define INL static inline __attribute__((always_inline))
#define load4(p) ({ v4 v_; memcpy(&v_, (p), sizeof(v_)); v_; })
#define load8(p) ({ v8 v_; memcpy(&v_, (p), sizeof(v_)); v_; })
#define load16(p) ({ v16 v_; memcpy(&v_, (p), sizeof(v_)); v_; })
#define store8(p, x) ({ v8 st_ = (x); memcpy((p), &st_, sizeof(st_)); })

/* The sum of 16 lanes held as halves lo, hi, as a tree. */
#define SUM16(lo, hi)                                                                                       \
	({                                                                                                  \
		v8 h_ = (lo) + (hi);                                                                        \
		v4 f_ = __builtin_shufflevector(h_, h_, 0, 1, 2, 3) + __builtin_shufflevector(h_, h_, 4, 5, 6, 7); \
		(f_[0] + f_[2]) + (f_[1] + f_[3]);                                                          \
	})

/* ---- decode's step: one pass over the transposed state --------------------------------------- */

/* Row r of S^T (dk floats) decayed, its delta from vj, updated; returns o_j = row . q. The row is
 * read from memory once: its second loop finds it in L1. */
INL float step_row(float *r, const float *q, const float *k, float vj, float decay, float beta, int dk)
{
	v8 m0 = {0}, m1 = {0}, o0 = {0}, o1 = {0};
	int d = 0;
	for (; d + 16 <= dk; d += 16) { /* row *= decay; mem = row . k */
		v8 x0 = load8(r + d) * decay, x1 = load8(r + d + 8) * decay;
		store8(r + d, x0), store8(r + d + 8, x1);
		m0 += x0 * load8(k + d), m1 += x1 * load8(k + d + 8);
	}
	float mem = SUM16(m0, m1);
	for (int t = d; t < dk; t++)
		mem += (r[t] *= decay) * k[t];
	float delta = (vj - mem) * beta;
	for (d = 0; d + 16 <= dk; d += 16) { /* row += delta k; o = row . q */
		v8 x0 = load8(r + d) + delta * load8(k + d), x1 = load8(r + d + 8) + delta * load8(k + d + 8);
		store8(r + d, x0), store8(r + d + 8, x1);
		o0 += x0 * load8(q + d), o1 += x1 * load8(q + d + 8);
	}
	float o = SUM16(o0, o1);
	for (int t = d; t < dk; t++)
		o += (r[t] += delta * k[t]) * q[t];
	return o;
}

/* step_row on rows a and b = a + dk at once (dk a multiple of 16): the same operations row by row,
 * two independent chains in flight. */
INL void step_rows2(float *a, const float *q, const float *k, const float *v, float decay, float beta, int dk, float *o)
{
	float *b = a + dk;
	v8 ma0 = {0}, ma1 = {0}, mb0 = {0}, mb1 = {0};
	for (int d = 0; d < dk; d += 16) {
		v8 k0 = load8(k + d), k1 = load8(k + d + 8);
		v8 a0 = load8(a + d) * decay, a1 = load8(a + d + 8) * decay;
		v8 b0 = load8(b + d) * decay, b1 = load8(b + d + 8) * decay;
		store8(a + d, a0), store8(a + d + 8, a1), store8(b + d, b0), store8(b + d + 8, b1);
		ma0 += a0 * k0, ma1 += a1 * k1, mb0 += b0 * k0, mb1 += b1 * k1;
	}
	float da = (v[0] - SUM16(ma0, ma1)) * beta, db = (v[1] - SUM16(mb0, mb1)) * beta;
	v8 oa0 = {0}, oa1 = {0}, ob0 = {0}, ob1 = {0};
	for (int d = 0; d < dk; d += 16) {
		v8 k0 = load8(k + d), k1 = load8(k + d + 8), q0 = load8(q + d), q1 = load8(q + d + 8);
		v8 a0 = load8(a + d) + da * k0, a1 = load8(a + d + 8) + da * k1;
		v8 b0 = load8(b + d) + db * k0, b1 = load8(b + d + 8) + db * k1;
		store8(a + d, a0), store8(a + d + 8, a1), store8(b + d, b0), store8(b + d + 8, b1);
		oa0 += a0 * q0, oa1 += a1 * q1, ob0 += b0 * q0, ob1 += b1 * q1;
	}
	o[0] = SUM16(oa0, oa1), o[1] = SUM16(ob0, ob1);
}

INL void step(float *St, const float *q, const float *k, const float *v, float g, float beta, int dk, int dv, float *o)
{
	float decay = expf(g);
	int j = 0;
	for (; dk % 16 == 0 && j + 2 <= dv; j += 2) {
		for (int d = 0; d < 2 * dk; d += 16) /* the rows 8 KiB on: the state streams from memory */
			__builtin_prefetch(St + (int64_t)j * dk + 2048 + d, 1);
		step_rows2(St + (int64_t)j * dk, q, k, v + j, decay, beta, dk, o + j);
	}
	for (; j < dv; j++)
		o[j] = step_row(St + (int64_t)j * dk, q, k, v[j], decay, beta, dk);
}

COLI_HOT void gdn_step(float *St, const float *q, const float *k, const float *v, float g, float beta, int dk, int dv,
		       float *o)
{
	step(St, q, k, v, g, beta, dk, dv, o);
}

COLI_HOT void gdn_recurrent(float *St, const gdn_seq *s, int n)
{
	for (int64_t t = 0; t < n; t++)
		step(St, s->q + t * s->stride, s->k + t * s->stride, s->v + t * s->stride, s->g[t * s->gstride],
		     s->beta[t * s->gstride], s->dk, s->dv, s->o + t * s->ostride);
}

/* ---- the chunked form's products ------------------------------------------------------------- */

/* C = keep C + s_r (A B) over rows x cols, A [rows][depth] and B [depth][cols] read through
 * strides; each element's sum runs over k in order (the same bits in every build). */
typedef struct mm {
	const float *A;            /* A(r, k) = A[r ar + k ak] */
	const float *B;            /* B(k, c) = B[k bk + c] */
	float *C;                  /* C(r, c) = C[r cr + c] */
	int64_t ar, ak, bk, cr;
	int rows, cols, depth;
	int tri;                   /* A lower-triangular: row r's sum stops at k = r (A is 0 past it) */
	int lower;                 /* only C's lower triangle wanted (c <= r): tiles above it skipped */
	float keep;                /* 0: C is not read */
	const float *s;            /* s_r, or NULL: 1 */
} mm;

/* C(r, c .. c + n - 1) from the sums acc[0 .. n). */
INL void mm_put(const mm *p, int r, int c, const float *acc, int n)
{
	float *y = p->C + r * p->cr + c, s = p->s ? p->s[r] : 1.0f;
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		v8 x = s * load8(acc + i);
		store8(y + i, p->keep != 0 ? x + p->keep * load8(y + i) : x);
	}
	for (; i < n; i++)
		y[i] = p->keep != 0 ? s * acc[i] + p->keep * y[i] : s * acc[i];
}

/* How far the rows r0 .. r0 + R - 1 sum (A lower-triangular: to the last row's diagonal). */
INL int mm_depth(const mm *p, int r0, int R)
{
	return p->tri && r0 + R < p->depth ? r0 + R : p->depth;
}

/* The tiles: rows r .. r + R - 1 by columns c .. c + 15, each B row block read once for the R
 * rows, the sums into acc[R][16]. One per vector width, as many rows as the clone's registers
 * hold without spilling (16 floats x 8 rows on AVX-512, 8 x 4 on AVX2, 4 x 2 in the baseline
 * build): each sum is the same over k in order, so they agree bit for bit. */
INL void tile16x8(const mm *p, int r, int c, float acc[][16])
{
	const float *a = p->A + r * p->ar, *b = p->B + c;
	int64_t ar = p->ar;
	v16 c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0}, c4 = {0}, c5 = {0}, c6 = {0}, c7 = {0};
	for (int k = 0, K = mm_depth(p, r, 8); k < K; k++, a += p->ak, b += p->bk) {
		v16 x = load16(b);
		c0 += a[0] * x, c1 += a[ar] * x, c2 += a[2 * ar] * x, c3 += a[3 * ar] * x;
		c4 += a[4 * ar] * x, c5 += a[5 * ar] * x, c6 += a[6 * ar] * x, c7 += a[7 * ar] * x;
	}
	memcpy(acc[0], &c0, 64), memcpy(acc[1], &c1, 64), memcpy(acc[2], &c2, 64), memcpy(acc[3], &c3, 64);
	memcpy(acc[4], &c4, 64), memcpy(acc[5], &c5, 64), memcpy(acc[6], &c6, 64), memcpy(acc[7], &c7, 64);
}

INL void tile8x4(const mm *p, int r, int c, float acc[][16])
{
	const float *a = p->A + r * p->ar, *b = p->B + c;
	int64_t ar = p->ar;
	v8 c0 = {0}, d0 = {0}, c1 = {0}, d1 = {0}, c2 = {0}, d2 = {0}, c3 = {0}, d3 = {0};
	for (int k = 0, K = mm_depth(p, r, 4); k < K; k++, a += p->ak, b += p->bk) {
		v8 x = load8(b), y = load8(b + 8);
		float s0 = a[0], s1 = a[ar], s2 = a[2 * ar], s3 = a[3 * ar];
		c0 += s0 * x, d0 += s0 * y, c1 += s1 * x, d1 += s1 * y;
		c2 += s2 * x, d2 += s2 * y, c3 += s3 * x, d3 += s3 * y;
	}
	memcpy(acc[0], &c0, 32), memcpy(acc[0] + 8, &d0, 32), memcpy(acc[1], &c1, 32), memcpy(acc[1] + 8, &d1, 32);
	memcpy(acc[2], &c2, 32), memcpy(acc[2] + 8, &d2, 32), memcpy(acc[3], &c3, 32), memcpy(acc[3] + 8, &d3, 32);
}

INL void tile4x2(const mm *p, int r, int c, float acc[][16])
{
	const float *a = p->A + r * p->ar, *b = p->B + c;
	v4 c0 = {0}, d0 = {0}, e0 = {0}, f0 = {0}, c1 = {0}, d1 = {0}, e1 = {0}, f1 = {0};
	for (int k = 0, K = mm_depth(p, r, 2); k < K; k++, a += p->ak, b += p->bk) {
		v4 w = load4(b), x = load4(b + 4), y = load4(b + 8), z = load4(b + 12);
		float s0 = a[0], s1 = a[p->ar];
		c0 += s0 * w, d0 += s0 * x, e0 += s0 * y, f0 += s0 * z;
		c1 += s1 * w, d1 += s1 * x, e1 += s1 * y, f1 += s1 * z;
	}
	memcpy(acc[0], &c0, 16), memcpy(acc[0] + 4, &d0, 16), memcpy(acc[0] + 8, &e0, 16), memcpy(acc[0] + 12, &f0, 16);
	memcpy(acc[1], &c1, 16), memcpy(acc[1] + 4, &d1, 16), memcpy(acc[1] + 8, &e1, 16), memcpy(acc[1] + 12, &f1, 16);
}

/* Row r alone, columns c .. c + n - 1 (n <= 16): the rows and columns past the tiles. */
INL void tile_row(const mm *p, int r, int c, int n, float *acc)
{
	memset(acc, 0, 16 * sizeof(float));
	for (int k = 0, K = mm_depth(p, r, 1); k < K; k++) {
		float a = p->A[r * p->ar + k * p->ak];
		const float *b = p->B + k * p->bk + c;
		for (int i = 0; i < n; i++)
			acc[i] += a * b[i];
	}
}

#define STR_(x) #x
#define STR(x) STR_(x)

/* The tiles' vector width: in a COLI_HOT clone, the widest the CPU has (the clone is built for
 * it); without clones (sanitizers, clang: COLI_HOT is empty) the baseline's. */
INL int tile_width(void)
{
	if (sizeof(STR(COLI_HOT)) == 1)
		return 4;
	return __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") ? 8 : 4;
}

static COLI_HOT void mm_run(const mm *p)
{
	int wide = tile_width(), R = wide == 16 ? 8 : wide == 8 ? 4 : 2;
	float acc[8][16];
	for (int c = 0; c < p->cols; c += 16) {
		int n = p->cols - c < 16 ? p->cols - c : 16, r = p->lower && c > R - 1 ? (c - R + 1) / R * R : 0;
		for (; n == 16 && r + R <= p->rows; r += R) {
			if (wide == 16)
				tile16x8(p, r, c, acc);
			else if (wide == 8)
				tile8x4(p, r, c, acc);
			else
				tile4x2(p, r, c, acc);
			for (int i = 0; i < R; i++)
				mm_put(p, r + i, c, acc[i], 16);
		}
		for (; r < p->rows; r++) {
			tile_row(p, r, c, n, acc[0]);
			mm_put(p, r, c, acc[0], n);
		}
	}
}

/* ---- the chunked form ------------------------------------------------------------------------ */

/* b[c][r] = a[r][c] for an 8 x 8 block (rows of a as apart, of b bs apart), through shuffles. */
INL void transpose8(const float *a, int64_t as, float *b, int64_t bs)
{
	v8 r0 = load8(a), r1 = load8(a + as), r2 = load8(a + 2 * as), r3 = load8(a + 3 * as);
	v8 r4 = load8(a + 4 * as), r5 = load8(a + 5 * as), r6 = load8(a + 6 * as), r7 = load8(a + 7 * as);
#define LO(x, y) __builtin_shufflevector(x, y, 0, 8, 1, 9, 4, 12, 5, 13)
#define HI(x, y) __builtin_shufflevector(x, y, 2, 10, 3, 11, 6, 14, 7, 15)
	v8 t0 = LO(r0, r1), t1 = HI(r0, r1), t2 = LO(r2, r3), t3 = HI(r2, r3);
	v8 t4 = LO(r4, r5), t5 = HI(r4, r5), t6 = LO(r6, r7), t7 = HI(r6, r7);
#undef LO
#undef HI
#define LO(x, y) __builtin_shufflevector(x, y, 0, 1, 8, 9, 4, 5, 12, 13)
#define HI(x, y) __builtin_shufflevector(x, y, 2, 3, 10, 11, 6, 7, 14, 15)
	v8 s0 = LO(t0, t2), s1 = HI(t0, t2), s2 = LO(t1, t3), s3 = HI(t1, t3);
	v8 s4 = LO(t4, t6), s5 = HI(t4, t6), s6 = LO(t5, t7), s7 = HI(t5, t7);
#undef LO
#undef HI
#define LO(x, y) __builtin_shufflevector(x, y, 0, 1, 2, 3, 8, 9, 10, 11)
#define HI(x, y) __builtin_shufflevector(x, y, 4, 5, 6, 7, 12, 13, 14, 15)
	store8(b, LO(s0, s4)), store8(b + bs, LO(s1, s5)), store8(b + 2 * bs, LO(s2, s6)), store8(b + 3 * bs, LO(s3, s7));
	store8(b + 4 * bs, HI(s0, s4)), store8(b + 5 * bs, HI(s1, s5)), store8(b + 6 * bs, HI(s2, s6));
	store8(b + 7 * bs, HI(s3, s7));
#undef LO
#undef HI
}

/* y[c][r] = x[r][c] for r < rows, c < cols (rows of x xs apart, of y ys apart): 8 x 8 blocks,
 * the edges one by one. */
static COLI_HOT void transpose(const float *x, int64_t xs, float *y, int64_t ys, int rows, int cols)
{
	int r = 0, c;
	for (; r + 8 <= rows; r += 8)
		for (c = 0; c + 8 <= cols; c += 8)
			transpose8(x + r * xs + c, xs, y + c * ys + r, ys);
	for (int i = 0; i < rows; i++) /* the edges: rows past r, columns past the last block */
		for (c = i < r ? cols & ~7 : 0; c < cols; c++)
			y[c * ys + i] = x[i * xs + c];
}

/* One chunk of L <= GDN_CHUNK tokens of one head, and its working memory (every buffer 64-byte
 * aligned). */
typedef struct chunk {
	const float *g, *beta;     /* the chunk's first token's (the gdn_seq's stride) */
	float *o;                  /* the same */
	int64_t gstride, ostride;
	int dk, dv, L;
	float *q, *k, *v;          /* [GDN_CHUNK][dk], [GDN_CHUNK][dk], [GDN_CHUNK][dv]: the chunk's rows packed
				    * (a batch's rows are a conv row apart: 32 KiB at real widths, one L1 set) */
	int fast;                  /* exp(c_i - c_j) as exp(c_i) / exp(c_j) (every exp(c_i) a normal float) */
	float *cum, *ec, *el, *inv; /* [GDN_CHUNK] c_i = g_0 + .. + g_i, exp(c_i), exp(c_last - c_i), 1 / exp(c_i) */
	float *Kt;                 /* [dk][GDN_CHUNK] the keys transposed */
	float *A;                  /* [GDN_CHUNK]^2 beta_i (k_i . k_j) exp(c_i - c_j) for j < i, else 0; then T diag(beta) */
	float *P;                  /* [GDN_CHUNK]^2 (q_i . k_j) exp(c_i - c_j) for j <= i, else 0 */
	float *T;                  /* [GDN_CHUNK]^2 (I + A)^-1; then -T diag(beta exp(c)) */
	float *U;                  /* [GDN_CHUNK][dv] T (beta v); v_new; v_new exp(c_last - c_j) */
	float *W;                  /* [GDN_CHUNK][dk] -T (beta exp(c) k) */
	float *S;                  /* [dk][dv] the state at the chunk's start, untransposed */
} chunk;

/* A chunk's buffers in scratch, each 16 floats (64 bytes) aligned (gdn_chunk_floats counts them). */
static size_t chunk_layout(chunk *ch, float *scratch, int dk, int dv)
{
	size_t G = GDN_CHUNK, at = scratch ? (size_t)(-(uintptr_t)scratch / sizeof(float) % 16) : 15;
	size_t len[] = {G, G, G, G, G * dk, G * G, G * G, G * G, G * dv, G * dk, (size_t)dk * dv, G * dk, G * dk, G * dv};
	float **buf[] = {&ch->cum, &ch->ec, &ch->el, &ch->inv, &ch->Kt, &ch->A, &ch->P, &ch->T, &ch->U, &ch->W, &ch->S,
			 &ch->q, &ch->k, &ch->v};
	for (size_t i = 0; i < sizeof(len) / sizeof(len[0]); i++) {
		if (scratch)
			*buf[i] = scratch + at;
		at += (len[i] + 15) & ~(size_t)15;
	}
	return at;
}

size_t gdn_chunk_floats(int dk, int dv)
{
	chunk ch;
	return chunk_layout(&ch, NULL, dk, dv);
}

/* n rows of d floats from x (rows xs apart) into y (rows d apart). */
static void pack(const float *x, int64_t xs, int n, int d, float *y)
{
	for (int i = 0; i < n; i++)
		memcpy(y + (int64_t)i * d, x + i * xs, (size_t)d * sizeof(float));
}

/* The chunk's cumulative decays (the reference's g.cumsum) and their exponentials. */
static void chunk_decays(chunk *ch)
{
	float c = 0, lo = 0, hi = 0;
	for (int i = 0; i < ch->L; i++) {
		c += ch->g[i * ch->gstride];
		ch->cum[i] = c;
		ch->ec[i] = expf(c);
		lo = c < lo ? c : lo, hi = c > hi ? c : hi;
	}
	ch->fast = lo > -80.0f && hi < 80.0f; /* (g <= 0 in a model: hi is 0) */
	for (int i = 0; i < ch->L; i++) {
		ch->el[i] = expf(c - ch->cum[i]);
		ch->inv[i] = ch->fast ? 1.0f / ch->ec[i] : 0;
	}
}

/* exp(c_i - c_j) for j <= i. */
INL float decay_ij(const chunk *ch, int i, int j)
{
	return ch->fast ? ch->ec[i] * ch->inv[j] : expf(ch->cum[i] - ch->cum[j]);
}

/* A and P: the key and query products of the pairs (lower triangles of K K^T and Q K^T), decayed
 * from j to i. */
static void chunk_pairs(chunk *ch)
{
	int L = ch->L, G = GDN_CHUNK;
	transpose(ch->k, ch->dk, ch->Kt, G, L, ch->dk);
	mm_run(&(mm){.A = ch->k, .ar = ch->dk, .ak = 1, .B = ch->Kt, .bk = G, .C = ch->A, .cr = G, .rows = L,
		     .cols = L, .depth = ch->dk, .lower = 1});
	mm_run(&(mm){.A = ch->q, .ar = ch->dk, .ak = 1, .B = ch->Kt, .bk = G, .C = ch->P, .cr = G, .rows = L,
		     .cols = L, .depth = ch->dk, .lower = 1});
	for (int i = 0; i < L; i++) {
		float b = ch->beta[i * ch->gstride], *a = ch->A + i * G, *p = ch->P + i * G;
		for (int j = 0; j <= i; j++) {
			float e = decay_ij(ch, i, j);
			a[j] = j < i ? b * a[j] * e : 0;
			p[j] *= e;
		}
		for (int j = i + 1; j < L; j++)
			a[j] = p[j] = 0;
	}
}

/* T = (I + A)^-1 (unit lower-triangular) by forward substitution, row i = e_i - sum_{j < i}
 * A[i][j] T[j]; then A = T diag(beta), T = -T diag(beta exp(c)). */
static COLI_HOT void chunk_inverse(chunk *ch)
{
	int L = ch->L, G = GDN_CHUNK;
	for (int i = 0; i < L; i++) {
		float *t = ch->T + i * G;
		memset(t, 0, (size_t)L * sizeof(float));
		t[i] = 1;
		for (int j = 0; j < i; j++) {
			float a = -ch->A[i * G + j];
			const float *tj = ch->T + j * G;
			int m = 0;
			for (; m + 8 <= j + 1; m += 8)
				store8(t + m, load8(t + m) + a * load8(tj + m));
			for (; m <= j; m++)
				t[m] += a * tj[m];
		}
	}
	for (int i = 0; i < L; i++)
		for (int j = 0; j <= i; j++) {
			float b = ch->beta[j * ch->gstride], t = ch->T[i * G + j];
			ch->A[i * G + j] = t * b;
			ch->T[i * G + j] = -t * (b * ch->ec[j]);
		}
}

/* U = T (beta v), W = -T (beta exp(c) k); v_new = U - W S; o_i = exp(c_i) q_i S + sum_{j <= i}
 * P[i][j] v_new_j; S = exp(c_last) S + sum_j exp(c_last - c_j) k_j v_new_j^T (on St). */
static void chunk_run(float *St, chunk *ch)
{
	int L = ch->L, dk = ch->dk, dv = ch->dv, G = GDN_CHUNK;
	chunk_decays(ch);
	chunk_pairs(ch);
	chunk_inverse(ch);
	mm_run(&(mm){.A = ch->A, .ar = G, .ak = 1, .B = ch->v, .bk = dv, .C = ch->U, .cr = dv, .rows = L, .cols = dv,
		     .depth = L, .tri = 1}); /* U */
	mm_run(&(mm){.A = ch->T, .ar = G, .ak = 1, .B = ch->k, .bk = dk, .C = ch->W, .cr = dk, .rows = L, .cols = dk,
		     .depth = L, .tri = 1}); /* W */
	transpose(St, dk, ch->S, dv, dv, dk);
	mm_run(&(mm){.A = ch->W, .ar = dk, .ak = 1, .B = ch->S, .bk = dv, .C = ch->U, .cr = dv, /* U += W S */
		     .rows = L, .cols = dv, .depth = dk, .keep = 1});
	mm_run(&(mm){.A = ch->q, .ar = dk, .ak = 1, .B = ch->S, .bk = dv, .C = ch->o, .cr = ch->ostride,
		     .rows = L, .cols = dv, .depth = dk, .s = ch->ec}); /* o = exp(c) q S */
	mm_run(&(mm){.A = ch->P, .ar = G, .ak = 1, .B = ch->U, .bk = dv, .C = ch->o, .cr = ch->ostride,
		     .rows = L, .cols = dv, .depth = L, .tri = 1, .keep = 1}); /* o += P v_new */
	for (int j = 0; j < L; j++) { /* v_new_j exp(c_last - c_j) */
		float *u = ch->U + j * dv;
		int d = 0;
		for (; d + 8 <= dv; d += 8)
			store8(u + d, load8(u + d) * ch->el[j]);
		for (; d < dv; d++)
			u[d] *= ch->el[j];
	}
	mm_run(&(mm){.A = ch->U, .ar = 1, .ak = dv, .B = ch->k, .bk = dk, .C = St, .cr = dk, /* the update */
		     .rows = dv, .cols = dk, .depth = L, .keep = ch->ec[L - 1]});
}

void gdn_chunked(float *St, const gdn_seq *s, int n, float *scratch)
{
	chunk ch = {.gstride = s->gstride, .ostride = s->ostride, .dk = s->dk, .dv = s->dv};
	chunk_layout(&ch, scratch, s->dk, s->dv);
	for (int64_t t = 0; t < n; t += GDN_CHUNK) {
		ch.L = n - t < GDN_CHUNK ? (int)(n - t) : GDN_CHUNK;
		pack(s->q + t * s->stride, s->stride, ch.L, s->dk, ch.q);
		pack(s->k + t * s->stride, s->stride, ch.L, s->dk, ch.k);
		pack(s->v + t * s->stride, s->stride, ch.L, s->dv, ch.v);
		ch.g = s->g + t * s->gstride, ch.beta = s->beta + t * s->gstride, ch.o = s->o + t * s->ostride;
		chunk_run(St, &ch);
	}
}

/* ---- the block --------------------------------------------------------------------------------- */

/* The delta rule of n tokens, shared out over the kernels' threads by value head. */
typedef struct rule_job {
	const coli_model *c;
	float *S;                  /* [v_heads][dv][dk] */
	const float *Y, *g, *beta; /* [n][conv_dim] q, k, v; [n][v_heads] decays and betas */
	float *O;                  /* [n][v_heads x dv] */
	float *scratch;            /* NULL: one token at a time; else chunked, [v_heads][gdn_chunk_floats] */
	int n;
} rule_job;

static void rule_heads(void *arg, int64_t begin, int64_t end)
{
	const rule_job *j = arg;
	const coli_model *c = j->c;
	int dk = c->lin_k_dim, dv = c->lin_v_dim, Hv = c->lin_v_heads, per = Hv / c->lin_k_heads;
	int64_t kd = (int64_t)c->lin_k_heads * dk, C = 2 * kd + (int64_t)Hv * dv;
	for (int64_t h = begin; h < end; h++) {
		const float *q = j->Y + h / per * dk; /* value head h reads key head h / per */
		gdn_seq s = {q, q + kd, j->Y + 2 * kd + h * dv, j->g + h, j->beta + h, j->O + h * dv, C, Hv,
			     (int64_t)Hv * dv, dk, dv};
		float *St = j->S + h * dk * dv;
		if (j->scratch)
			gdn_chunked(St, &s, j->n, j->scratch + h * gdn_chunk_floats(dk, dv));
		else
			gdn_recurrent(St, &s, j->n);
	}
}

size_t coli_gdn_scratch_floats(const coli_model *c)
{
	return (size_t)c->lin_v_heads * gdn_chunk_floats(c->lin_k_dim, c->lin_v_dim);
}

void coli_gdn_rule(coli_kernels *kc, const coli_model *c, float *S, const float *Y, const float *g, const float *beta,
		   int n, float *scratch, float *O)
{
	rule_job j = {c, S, Y, g, beta, O, scratch, n};
	int Hv = c->lin_v_heads, threads = coli_kernels_threads(kc);
	if (threads < 2 || (int64_t)Hv * c->lin_k_dim * c->lin_v_dim * n < (1 << 18))
		rule_heads(&j, 0, Hv);
	else /* four runs of consecutive heads per thread (one state's prefetch runs on into the next) */
		coli_kernels_for(kc, Hv, (Hv + 4 * threads - 1) / (4 * threads), rule_heads, &j);
}

/* The a and b rows [n][v_heads] into the decays g = -exp(A_log) softplus(a + dt_bias) and the
 * betas sigmoid(b), in place. */
static void gates(const coli_model *c, const layer_w *L, float *A, float *B, int n)
{
	int Hv = c->lin_v_heads;
	for (int64_t i = 0; i < (int64_t)n * Hv; i++) {
		int h = (int)(i % Hv);
		A[i] = -expf(L->lin_a_log[h]) * softplusf(A[i] + L->lin_dt_bias[h]);
		B[i] = sigmoid(B[i]);
	}
}

/* q and k of each key head L2-normalised, q scaled by 1/sqrt(dk), in the conv output Y[C]. */
static void norm_qk(const coli_model *c, float *Y)
{
	int dk = c->lin_k_dim, kd = c->lin_k_heads * dk;
	float scale = 1.0f / sqrtf((float)dk);
	for (int h = 0; h < c->lin_k_heads; h++) {
		float *q = Y + h * dk, *k = Y + kd + h * dk;
		l2norm(q, dk);
		l2norm(k, dk);
		for (int i = 0; i < dk; i++)
			q[i] *= scale;
	}
}

/* The gated RMSNorm of each value head of O[v_heads][dv]: weight x rmsnorm(o) x silu(z). */
static void gated_norm(const coli_model *c, const float *w, float *O, const float *Z)
{
	int dv = c->lin_v_dim;
	for (int h = 0; h < c->lin_v_heads; h++) {
		float *o = O + (int64_t)h * dv;
		const float *z = Z + (int64_t)h * dv;
		rmsnorm(o, o, w, dv, (float)c->rms_norm_eps);
		for (int i = 0; i < dv; i++)
			o[i] *= silu(z[i]);
	}
}

int attn_gdn(const coli_engine *m, int l, coli_kv *kv, const float *X, int n, float *out, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[l];
	fwd_ws *w = m->ws;
	int Hv = c->lin_v_heads, vd = Hv * c->lin_v_dim;
	int64_t C = 2 * c->lin_k_heads * c->lin_k_dim + vd;
	(void)e;
	coli_mat_mul(m->kc, &L->lin_qkv, X, n, w->LR);
	coli_mat_mul(m->kc, &L->lin_z, X, n, w->LZ);
	coli_mat_mul(m->kc, &L->lin_b, X, n, w->LB);
	coli_mat_mul(m->kc, &L->lin_a, X, n, w->LA);
	conv((const float *)(const void *)L->lin_conv.codes, kv->conv[l], w->LR, n, (int)C, c->lin_conv, w->LY);
	for (int i = 0; i < n; i++) {
		norm_qk(c, w->LY + i * C);
		kv_keep_rows(kv, c, l, i, w->LR + i * C, w->LY + i * C, w->LB + (int64_t)i * Hv, w->LA + (int64_t)i * Hv);
	}
	gates(c, L, w->LA, w->LB, n);
	coli_gdn_rule(m->kc, c, kv->rec[l], w->LY, w->LA, w->LB, n, n > COLI_EXACT_N ? w->LC : NULL, w->LO);
	for (int i = 0; i < n; i++)
		gated_norm(c, L->lin_norm, w->LO + (int64_t)i * vd, w->LZ + (int64_t)i * vd);
	coli_mat_mul(m->kc, &L->lin_out, w->LO, n, out);
	return 0;
}

void gdn_replay(const coli_engine *m, coli_kv *kv, int l, int steps)
{
	const coli_model *c = m->cfg;
	kv_keep *k = kv->keep;
	fwd_ws *w = m->ws;
	int Hv = c->lin_v_heads, C = 2 * c->lin_k_heads * c->lin_k_dim + Hv * c->lin_v_dim;
	conv_slide(kv->conv[l], k->R[l], steps, C, c->lin_conv);
	for (int i = 0; i < steps; i++) { /* one token at a time, as decode; the outputs are scratch */
		memcpy(w->LA, k->A[l] + (int64_t)i * Hv, (size_t)Hv * sizeof(float));
		memcpy(w->LB, k->B[l] + (int64_t)i * Hv, (size_t)Hv * sizeof(float));
		gates(c, &m->w->layers[l], w->LA, w->LB, 1);
		coli_gdn_rule(m->kc, c, kv->rec[l], k->Y[l] + (int64_t)i * C, w->LA, w->LB, 1, NULL, w->LO);
	}
}
