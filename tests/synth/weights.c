/* weights.c: every weight value as a pure function of (seed, tensor, index), and its encoding.
 *
 * Element i of a tensor is splitmix64(key + i * golden) turned into a normal-like value (sum of
 * its four 16-bit parts, centred and scaled: mean 0, variance 1, |x| <= 3.46), so any row can
 * be produced by any thread in any order and the output does not depend on the thread count.
 * Distributions (zero mean everywhere; see routing.c for the scales):
 *   embeddings N(0,1) (+ c*u for softmax routers), norms 1 + 0.1 N, biases 0.02 N,
 *   linears N(0, 1/in), o_proj s_out N(0, 1/in), down projections s_down N(0, 1/in) plus the
 *   aligned part alpha * s_j * unit_row[next layer][e_j], routers 2/sqrt(H) N (+ bias_e u_gain u),
 *   lm_head 4/sqrt(H) N, e_score_correction_bias = the popularity bias.
 * Stored as BF16 (round to nearest even), F32, or F8_E4M3 with an F32 scale_inv per 128x128
 * block (amax / 448; codes = w x (1 / scale_inv), nearest even), as DeepSeek-V3 stores.
 */
#include "synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#define GOLDEN 0x9E3779B97F4A7C15ull
#define ALIGN_STREAM 0xA11A11A11A11A11Aull

static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint64_t synth_key(uint64_t seed, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (const unsigned char *s = (const unsigned char *)name; *s; s++)
		h = (h ^ *s) * 0x100000001b3ull;
	return mix64(h ^ mix64(seed + GOLDEN));
}

/* Sum of four uniform 16-bit values: mean 4 * 32767.5, sd 2 * sqrt((65536^2 - 1) / 12). */
static inline float ih4(uint64_t z)
{
	uint32_t s = (uint32_t)(z & 0xFFFF) + (uint32_t)((z >> 16) & 0xFFFF) +
		     (uint32_t)((z >> 32) & 0xFFFF) + (uint32_t)(z >> 48);
	return ((float)s - 131070.0f) * (1.0f / 37837.23f);
}

uint64_t synth_rand64(uint64_t key, uint64_t i)
{
	return mix64(key + i * GOLDEN);
}

float synth_gauss(uint64_t key, uint64_t i)
{
	return ih4(mix64(key + i * GOLDEN));
}

void synth_gauss_fill(uint64_t key, uint64_t i0, float *out, int64_t n)
{
	uint64_t x = key + i0 * GOLDEN;
	for (int64_t j = 0; j < n; j++, x += GOLDEN)
		out[j] = ih4(mix64(x));
}

/* ---- vector versions ---------------------------------------------------------------------
 * Eight lanes of exactly the scalar operations, in the same order and never contracted into
 * FMAs (GCC in ISO C mode does not contract; clang is told below), so the bytes do not depend
 * on which clone runs. The clones exist because AVX-512 has 64-bit vector multiplies. */

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

typedef uint64_t u64x8 __attribute__((vector_size(64)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));
typedef uint8_t u8x8 __attribute__((vector_size(8)));
typedef float f32x8 __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define CLONES
#endif

static inline void gauss8(const u64x8 *x, f32x8 *out)
{
	u64x8 z = (*x ^ (*x >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	u64x8 s = (z & 0xFFFF) + ((z >> 16) & 0xFFFF) + ((z >> 32) & 0xFFFF) + (z >> 48);
	f32x8 f = __builtin_convertvector(__builtin_convertvector(s, i32x8), f32x8);
	*out = (f - 131070.0f) * (1.0f / 37837.23f);
}

/* out[j] = add + std * gauss(key, i0 + j). */
CLONES static void gauss_affine(uint64_t key, uint64_t i0, float *out, int64_t n, float std,
				float add)
{
	uint64_t x0 = key + i0 * GOLDEN;
	int64_t j = 0;
	u64x8 lane = {0, 1, 2, 3, 4, 5, 6, 7}, x = x0 + lane * GOLDEN;
	for (; j + 8 <= n; j += 8, x += 8 * GOLDEN) {
		f32x8 g;
		gauss8(&x, &g);
		g = add + std * g;
		memcpy(out + j, &g, sizeof(g));
	}
	for (; j < n; j++)
		out[j] = add + std * ih4(mix64(x0 + (uint64_t)j * GOLDEN));
}

static inline void bf16x8(const f32x8 *v, u16x8 *out)
{
	u32x8 u;
	memcpy(&u, v, sizeof(u));
	u += 0x7FFFu + ((u >> 16) & 1u);
	*out = __builtin_convertvector(u >> 16, u16x8);
}

static inline uint16_t f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u += 0x7FFFu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* BF16 of add + std * gauss straight from the counter: the writer's hot loop. */
CLONES static void bf16_affine(uint64_t key, uint64_t i0, int64_t n, float std, float add,
			       uint8_t *out)
{
	uint64_t x0 = key + i0 * GOLDEN;
	int64_t j = 0;
	u64x8 lane = {0, 1, 2, 3, 4, 5, 6, 7}, x = x0 + lane * GOLDEN;
	for (; j + 8 <= n; j += 8, x += 8 * GOLDEN) {
		f32x8 g;
		u16x8 h;
		gauss8(&x, &g);
		g = add + std * g;
		bf16x8(&g, &h);
		memcpy(out + 2 * j, &h, sizeof(h));
	}
	for (; j < n; j++) {
		uint16_t h = f32_to_bf16(add + std * ih4(mix64(x0 + (uint64_t)j * GOLDEN)));
		memcpy(out + 2 * j, &h, 2);
	}
}

/* float -> e4m3fn, round to nearest even; |x| <= 448 here (x = w * 448 / block amax). */
static uint8_t f32_to_e4m3(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	uint8_t sign = (uint8_t)((u >> 24) & 0x80);
	float a = fabsf(x);
	if (a >= 448.0f)
		return sign | 0x7E;
	if (a < 0.015625f) /* subnormal: multiples of 2^-9; 8 * 2^-9 carries into 2^-6 */
		return sign | (uint8_t)((a * 512.0f + 8388608.0f) - 8388608.0f);
	u &= 0x7FFFFFFFu;
	u += 0x7FFFFu + ((u >> 20) & 1u);
	return sign | (uint8_t)((u >> 20) - (120u << 3));
}

/* Eight lanes of f32_to_e4m3 (branches become masks). */
static inline void e4m3x8(const f32x8 *x, u8x8 *out)
{
	u32x8 u, ua, sub;
	memcpy(&u, x, sizeof(u));
	u32x8 sign = (u >> 24) & 0x80;
	ua = u & 0x7FFFFFFFu;
	f32x8 a;
	memcpy(&a, &ua, sizeof(a));
	f32x8 sf = (a * 512.0f + 8388608.0f) - 8388608.0f;
	i32x8 si = __builtin_convertvector(sf, i32x8);
	memcpy(&sub, &si, sizeof(sub));
	u32x8 nr = ua + (0x7FFFFu + ((ua >> 20) & 1u));
	nr = (nr >> 20) - (120u << 3);
	u32x8 is_sub = (u32x8)(a < 0.015625f), is_max = (u32x8)(a >= 448.0f);
	u32x8 code = (sub & is_sub) | (nr & ~is_sub);
	code = (0x7Eu & is_max) | (code & ~is_max);
	*out = __builtin_convertvector(code | sign, u8x8);
}

/* out[j] = e4m3(w[j] * inv). */
CLONES static void e4m3_scale(const float *w, int64_t n, float inv, uint8_t *out)
{
	int64_t j = 0;
	for (; j + 8 <= n; j += 8) {
		f32x8 v;
		u8x8 c;
		memcpy(&v, w + j, sizeof(v));
		v *= inv;
		e4m3x8(&v, &c);
		memcpy(out + j, &c, sizeof(c));
	}
	for (; j < n; j++)
		out[j] = f32_to_e4m3(w[j] * inv);
}

/* max |w[j]|, as the largest bit pattern of the absolute values. */
CLONES static float amax_of(const float *w, int64_t n)
{
	u32x8 m = {0};
	int64_t j = 0;
	for (; j + 8 <= n; j += 8) {
		u32x8 u;
		memcpy(&u, w + j, sizeof(u));
		u &= 0x7FFFFFFFu;
		u32x8 gt = (u32x8)(u > m);
		m = (u & gt) | (m & ~gt);
	}
	uint32_t best = 0;
	for (int k = 0; k < 8; k++)
		best = m[k] > best ? m[k] : best;
	for (; j < n; j++) {
		uint32_t u;
		memcpy(&u, w + j, 4);
		u &= 0x7FFFFFFFu;
		best = u > best ? u : best;
	}
	float f;
	memcpy(&f, &best, 4);
	return f;
}

/* ---- values ----------------------------------------------------------------------------- */

/* Down projection with its aligned part: row i gets sj[j] * U[i][e_j] where sj = alpha * s_j
 * (synth_align_coefs), U = the next router's unit rows transposed [H x E], e_j = (j + off) % E. */
static void gen_down(const synth_plan *p, const synth_tensor *t, int64_t row0, int64_t nrows,
		     float *out)
{
	const float *U = p->layer[t->layer + 1].unit_t;
	int E = p->m->n_experts, off = (int)(t->key % (uint64_t)E);
	for (int64_t r = 0; r < nrows; r++) {
		float *o = out + r * t->cols;
		const float *u = U + (row0 + r) * E;
		int e = off;
		for (int64_t j = 0; j < t->cols; j++) {
			o[j] += t->sj[j] * u[e];
			if (++e == E)
				e = 0;
		}
	}
}

void synth_align_coefs(const synth_plan *p, const synth_tensor *t, float *sj)
{
	synth_gauss_fill(t->key ^ ALIGN_STREAM, 0, sj, t->cols);
	for (int64_t j = 0; j < t->cols; j++)
		sj[j] *= p->layer[t->layer].alpha;
}

/* Removes the component along u from each row (router rows: so that the mean direction of the
 * hidden states biases them only through the explicit popularity term). */
void synth_project_out_u(const synth_plan *p, float *rows, int64_t nrows, int64_t cols)
{
	for (int64_t r = 0; r < nrows; r++) {
		float *w = rows + r * cols, d = 0;
		for (int64_t j = 0; j < cols; j++)
			d += w[j] * p->u[j];
		for (int64_t j = 0; j < cols; j++)
			w[j] -= d * p->u[j];
	}
}

/* Adds g * u to every row: embeddings g = c; routers g = bias[e] * u_gain after projecting
 * their random part off u. */
static void add_u(const synth_plan *p, const synth_tensor *t, int64_t row0, int64_t nrows,
		  float *out)
{
	if (t->kind == SK_ROUTER)
		synth_project_out_u(p, out, nrows, t->cols);
	for (int64_t r = 0; r < nrows; r++) {
		float g = t->kind == SK_EMBED ? p->c
			: p->layer[t->layer].bias[row0 + r] * p->layer[t->layer].u_gain;
		if (g == 0)
			continue;
		for (int64_t j = 0; j < t->cols; j++)
			out[r * t->cols + j] += g * p->u[j];
	}
}

void synth_gen_rows(const synth_plan *p, const synth_tensor *t, int64_t row0, int64_t nrows,
		    float *out)
{
	int64_t n = nrows * t->cols;
	if (t->kind == SK_CORR) {
		memcpy(out, p->layer[t->layer].bias, (size_t)t->cols * sizeof(*out));
		return;
	}
	gauss_affine(t->key, (uint64_t)(row0 * t->cols), out, n, t->std,
		     t->kind == SK_NORM ? 1.0f : 0.0f);
	if ((t->kind == SK_EMBED || t->kind == SK_ROUTER) && p->u)
		add_u(p, t, row0, nrows, out);
	if (t->kind == SK_DOWN && t->sj)
		gen_down(p, t, row0, nrows, out);
}

/* ---- encoding ----------------------------------------------------------------------------- */

uint64_t synth_row_bytes(const synth_tensor *t)
{
	if (t->dtype == COLI_DT_I8) /* FP4: two codes a byte */
		return (uint64_t)t->cols / 2;
	return (uint64_t)t->cols * coli_dtype_size((coli_dtype)t->dtype);
}

int synth_row_align(const synth_tensor *t)
{
	return t->dtype == COLI_DT_F8_E4M3 ? SYNTH_FP8_BLOCK : 1;
}

int64_t synth_scratch_floats(const synth_tensor *t, int64_t nrows)
{
	if (t->weight) /* a .scale row: its weight's rows (a 128-row block, or one FP4 row) */
		return (t->weight->dtype == COLI_DT_I8 ? 1 : SYNTH_FP8_BLOCK) * t->weight->cols;
	int64_t r = t->dtype == COLI_DT_F8_E4M3 ? SYNTH_FP8_BLOCK : 1;
	return (nrows < r ? nrows : r) * t->cols;
}

/* ---- deepseek_v4's encodings: UE8M0 scales, FP4 e2m1 --------------------------------------- */

#define FP4_BLOCK 32

/* The UE8M0 byte of the smallest power of two s with amax / s <= top (amax 0: s = 1). */
static uint8_t ue8m0_of(float amax, float top)
{
	if (!(amax > 0))
		return 127;
	int ex;
	float m = frexpf(amax / top, &ex); /* amax / top = m 2^ex, m in [0.5, 1) */
	int p = m > 0.5f ? ex : ex - 1;
	return (uint8_t)(p < -127 ? 0 : p > 127 ? 254 : p + 127);
}

static float ue8m0_value(uint8_t b)
{
	return ldexpf(1.0f, (int)b - 127);
}

/* The e2m1 code (sign bit 3) nearest v, |v| <= 6: 0, 0.5, 1, 1.5, 2, 3, 4, 6. */
static uint8_t e2m1_of(float v)
{
	static const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
	float a = fabsf(v);
	uint8_t c = 0;
	while (c < 7 && a > mid[c])
		c++;
	return (uint8_t)(c | (v < 0 && c ? 8 : 0));
}

/* Block b (128 rows from row0, 128 columns) scale byte of an FP8 UE8M0 weight; w: its rows. */
static uint8_t fp8_block_byte(const synth_tensor *t, const float *w, int64_t nrows, int64_t cb)
{
	int64_t c0 = cb * SYNTH_FP8_BLOCK, c1 = c0 + SYNTH_FP8_BLOCK > t->cols ? t->cols : c0 + SYNTH_FP8_BLOCK;
	float amax = 0;
	for (int64_t r = 0; r < nrows; r++)
		amax = fmaxf(amax, amax_of(w + r * t->cols + c0, c1 - c0));
	return ue8m0_of(amax, 448.0f);
}

/* One 128-row block of an F8_E4M3 weight with UE8M0 scales: codes into out. */
static void fp8_ue8m0_block(const synth_plan *p, const synth_tensor *t, int64_t row0, int64_t nrows, float *w,
			    uint8_t *out)
{
	synth_gen_rows(p, t, row0, nrows, w);
	for (int64_t cb = 0; cb * SYNTH_FP8_BLOCK < t->cols; cb++) {
		int64_t c0 = cb * SYNTH_FP8_BLOCK, n = t->cols - c0 < SYNTH_FP8_BLOCK ? t->cols - c0 : SYNTH_FP8_BLOCK;
		float inv = 1.0f / ue8m0_value(fp8_block_byte(t, w, nrows, cb));
		for (int64_t r = 0; r < nrows; r++)
			e4m3_scale(w + r * t->cols + c0, n, inv, out + r * t->cols + c0);
	}
}

/* One FP4 row: codes two a byte, the even column in the low nibble; scale bytes into sc (or
 * NULL). w: the row's values. */
static void fp4_row(const synth_tensor *t, const float *w, uint8_t *out, uint8_t *sc)
{
	for (int64_t b = 0; b < t->cols / FP4_BLOCK; b++) {
		const float *x = w + b * FP4_BLOCK;
		uint8_t s = ue8m0_of(amax_of(x, FP4_BLOCK), 6.0f);
		float inv = 1.0f / ue8m0_value(s);
		if (sc)
			sc[b] = s;
		for (int j = 0; out && j < FP4_BLOCK; j += 2)
			out[(b * FP4_BLOCK + j) / 2] = (uint8_t)(e2m1_of(x[j] * inv) | e2m1_of(x[j + 1] * inv) << 4);
	}
}

/* Rows [row0, row0 + nrows) of a .scale tensor, from its weight's values. */
static void ue8m0_scale_rows(const synth_plan *p, const synth_tensor *s, int64_t row0, int64_t nrows, float *w,
			     uint8_t *out)
{
	const synth_tensor *t = s->weight;
	for (int64_t r = 0; r < nrows; r++) {
		if (t->dtype == COLI_DT_I8) {
			synth_gen_rows(p, t, row0 + r, 1, w);
			fp4_row(t, w, NULL, out + r * s->cols);
			continue;
		}
		int64_t w0 = (row0 + r) * SYNTH_FP8_BLOCK, n = t->rows - w0 < SYNTH_FP8_BLOCK ? t->rows - w0 : SYNTH_FP8_BLOCK;
		synth_gen_rows(p, t, w0, n, w);
		for (int64_t cb = 0; cb < s->cols; cb++)
			out[r * s->cols + cb] = fp8_block_byte(t, w, n, cb);
	}
}

/* A hash layer's tid2eid rows (I64). */
static void tid2eid_rows(const synth_plan *p, const synth_tensor *t, int64_t row0, int64_t nrows, uint8_t *out)
{
	int64_t ids[64];
	for (int64_t r = 0; r < nrows; r++) {
		synth_hash_ids(p, t->layer, row0 + r, ids);
		memcpy(out + r * t->cols * 8, ids, (size_t)t->cols * 8);
	}
}

void synth_fp8_block(const synth_plan *p, const synth_tensor *t, int64_t row0, int64_t nrows,
		     float *w, uint8_t *out, float *scale)
{
	int64_t ncb = (t->cols + SYNTH_FP8_BLOCK - 1) / SYNTH_FP8_BLOCK;
	synth_gen_rows(p, t, row0, nrows, w);
	for (int64_t cb = 0; cb < ncb; cb++) {
		int64_t c0 = cb * SYNTH_FP8_BLOCK, c1 = c0 + SYNTH_FP8_BLOCK;
		if (c1 > t->cols)
			c1 = t->cols;
		float amax = 0;
		for (int64_t r = 0; r < nrows; r++)
			amax = fmaxf(amax, amax_of(w + r * t->cols + c0, c1 - c0));
		float s = amax > 0 ? amax / 448.0f : 1.0f;
		scale[cb] = s;
		for (int64_t r = 0; r < nrows; r++)
			e4m3_scale(w + r * t->cols + c0, c1 - c0, 1.0f / s, out + r * t->cols + c0);
	}
}

/* Tensors whose values are add + std * N only. */
static int plain(const synth_plan *p, const synth_tensor *t)
{
	switch (t->kind) {
	case SK_EMBED: return p->c == 0;
	case SK_ROUTER: return p->u == NULL;
	case SK_DOWN: return t->sj == NULL;
	case SK_CORR: case SK_SCALE: case SK_TID2EID: return 0;
	default: return 1;
	}
}

static void encode_row(const synth_tensor *t, const float *w, uint8_t *out)
{
	if (t->dtype == COLI_DT_F32) {
		memcpy(out, w, (size_t)t->cols * 4);
		return;
	}
	for (int64_t c = 0; c < t->cols; c++) {
		uint16_t h = f32_to_bf16(w[c]);
		memcpy(out + 2 * c, &h, 2);
	}
}

void synth_encode_rows(const synth_plan *p, const synth_tensor *t, int64_t row0, int64_t nrows,
		       float *scratch, uint8_t *out)
{
	uint64_t rb = synth_row_bytes(t);
	if (t->weight) {
		ue8m0_scale_rows(p, t, row0, nrows, scratch, out);
		return;
	}
	if (t->kind == SK_TID2EID) {
		tid2eid_rows(p, t, row0, nrows, out);
		return;
	}
	if (t->dtype == COLI_DT_I8) {
		for (int64_t r = 0; r < nrows; r++) {
			synth_gen_rows(p, t, row0 + r, 1, scratch);
			fp4_row(t, scratch, out + (uint64_t)r * rb, NULL);
		}
		return;
	}
	if (t->ue8m0) {
		for (int64_t r = 0; r < nrows; r += SYNTH_FP8_BLOCK) {
			int64_t n = nrows - r < SYNTH_FP8_BLOCK ? nrows - r : SYNTH_FP8_BLOCK;
			fp8_ue8m0_block(p, t, row0 + r, n, scratch, out + (uint64_t)r * rb);
		}
		return;
	}
	if (t->dtype == COLI_DT_F8_E4M3) {
		for (int64_t r = 0; r < nrows; r += SYNTH_FP8_BLOCK) {
			int64_t n = nrows - r < SYNTH_FP8_BLOCK ? nrows - r : SYNTH_FP8_BLOCK;
			int64_t ncb = (t->cols + SYNTH_FP8_BLOCK - 1) / SYNTH_FP8_BLOCK;
			synth_fp8_block(p, t, row0 + r, n, scratch, out + (uint64_t)r * rb,
					t->scales + (row0 + r) / SYNTH_FP8_BLOCK * ncb);
		}
		return;
	}
	if (t->dtype == COLI_DT_BF16 && plain(p, t)) {
		bf16_affine(t->key, (uint64_t)(row0 * t->cols), nrows * t->cols, t->std,
			    t->kind == SK_NORM ? 1.0f : 0.0f, out);
		return;
	}
	for (int64_t r = 0; r < nrows; r++) {
		synth_gen_rows(p, t, row0 + r, 1, scratch);
		encode_row(t, scratch, out + (uint64_t)r * rb);
	}
}
