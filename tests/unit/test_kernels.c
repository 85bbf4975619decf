/* test_kernels.c: every kernel variant (scalar, AVX2, AVX-512) against a double-precision
 * product of the dequantized matrix, for every encoding.
 *
 * Tolerance: for each output y[r] = sum_c W'[r][c] x[c],
 *   |y - ref| <= 1e-5 * sum_c |W'[r][c]| |x[c]|          (ref summed in double)
 * and for the transposed product the same with a[r] in place of x and |y0| added to the bound.
 * coli_mat_row must equal the dequantized row bit for bit. One variant gives the same bits with 1
 * and 2 threads. Variants the CPU lacks print "SKIP <name>" instead of PASS.
 *
 * q8 activations (kernels/q8.h): every variant's q8 products equal the reference's (kern_q8_scalar)
 * bit for bit, through the variant's entry point and the public calls (coli_mat_vec, _batch, _mul,
 * 1 and 2 threads); the reference lies within the quantization's own bound of the exact product:
 *   |y - ref| <= sum over groups g of (amax_g / 254) sum_{c in g} |W'[r][c]|  + 1e-5 sum_c |W'[r][c] x[c]|
 * (each q differs from x / d_g by at most 1/2, d_g = amax_g / 127); encodings without integer codes
 * keep their exact bits under q8.
 *
 * COLI_KERNEL_BENCH=1 also measures (not a test): q4 matvec GB/s of weight bytes and q4
 * coli_mat_mul GFLOP/s (64 tokens, and 29: about a 512-token prefill's batch per expert) per variant
 * and thread count, as a markdown table on stdout.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "kernels.h"
#include "kernels/impl.h"
#include "kernels/q8.h"
#include "quant.h"
#include "t.h"

static coli_kernels *K;  /* the context every product below runs in */
static const char *K_isa;

/* K becomes a context of variant isa on threads threads; -1 with e filled when unavailable. */
static int use(const char *isa, int threads, coli_err *e)
{
	coli_kernels_close(K);
	K = NULL, K_isa = isa;
	return coli_kernels_open(&K, isa, threads, e);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static float uniform(void) /* [-1, 1) */
{
	return (float)(rng() & 0xFFFFFF) / 8388608.0f - 1.0f;
}

static int same_bits(float a, float b)
{
	uint32_t u, v;
	memcpy(&u, &a, 4);
	memcpy(&v, &b, 4);
	return u == v;
}

/* ---- test matrices ---- */

typedef struct tmat {
	coli_blob blob;
	uint8_t *buf;   /* the blob's bytes */
	coli_mat m;
	float *w;       /* dequantized rows x cols */
	char name[64];  /* "q4 37x160" */
} tmat;

static uint16_t rand_bf16(void)
{
	uint16_t e = (uint16_t)(100 + rng() % 41); /* 2^-27 .. 2^13 */
	return (uint16_t)((rng() & 1) << 15 | e << 7 | (rng() & 0x7F));
}

static uint16_t rand_f16(void) /* anything but inf/NaN, subnormals included */
{
	uint16_t h;
	do
		h = (uint16_t)rng();
	while ((h & 0x7C00) == 0x7C00);
	return h;
}

static uint8_t rand_fp8(void) /* anything but NaN */
{
	uint8_t c;
	do
		c = (uint8_t)rng();
	while ((c & 0x7F) == 0x7F);
	return c;
}

/* FP4: random e2m1 codes in the row's columns (the padding's stay 0), UE8M0 scales 2^-7 .. 2^7. */
static void fill_fp4(tmat *t)
{
	const coli_blob *b = &t->blob;
	for (int64_t r = 0; r < b->rows; r++)
		for (int64_t c = 0; c < b->cols; c++)
			t->buf[r * (int64_t)b->row_bytes + c / 2] |= (uint8_t)((rng() & 15) << (4 * (c & 1)));
	for (uint64_t i = 0; i < b->scales_bytes; i++)
		t->buf[b->scales_off + i] = (uint8_t)(120 + rng() % 15);
}

static void fill_codes(tmat *t)
{
	if (t->blob.enc == COLI_ENC_FP4) {
		fill_fp4(t);
		return;
	}
	const coli_blob *b = &t->blob;
	int64_t pad = (b->cols + 63) / 64 * 64;
	float *src = calloc((size_t)pad, sizeof(float));
	for (int64_t r = 0; r < b->rows; r++) {
		uint8_t *row = t->buf + r * (int64_t)b->row_bytes;
		uint16_t *sc = (uint16_t *)(void *)(t->buf + b->scales_off) + r * (pad / 64);
		for (int64_t c = 0; c < b->cols; c++) {
			uint16_t h;
			float f;
			switch (b->enc) {
			case COLI_ENC_F32: f = uniform() * 2; memcpy(row + 4 * c, &f, 4); break;
			case COLI_ENC_BF16: h = rand_bf16(); memcpy(row + 2 * c, &h, 2); break;
			case COLI_ENC_F16: h = rand_f16(); memcpy(row + 2 * c, &h, 2); break;
			case COLI_ENC_FP8: row[c] = rand_fp8(); break;
			default: src[c] = uniform() * (float)(1 + rng() % 4); break; /* zero-padded */
			}
		}
		if (b->enc == COLI_ENC_Q4)
			coli_q4_quantize_row(src, (size_t)pad, row, sc);
		if (b->enc == COLI_ENC_Q8)
			coli_q8_quantize_row(src, (size_t)pad, (int8_t *)row, sc);
	}
	if (b->enc == COLI_ENC_FP8) {
		float *s = (float *)(void *)(t->buf + b->scales_off);
		for (uint64_t i = 0; i < b->scales_bytes / 4; i++)
			s[i] = ldexpf(1.0f + (float)(rng() % 1000) / 1000.0f, -(int)(rng() % 12));
	}
	free(src);
}

/* An FP4 matrix's W' through quant.h (its scales widened by coli_e8m0_to_f32), not the kernels'
 * table. */
static void dequantize_fp4(tmat *t)
{
	const coli_blob *b = &t->blob;
	int64_t nb = (b->cols + 31) / 32;
	float *s = malloc((size_t)nb * sizeof(float));
	for (int64_t r = 0; r < b->rows; r++) {
		for (int64_t i = 0; i < nb; i++)
			s[i] = coli_e8m0_to_f32(t->buf[b->scales_off + (uint64_t)(r * nb + i)]);
		coli_fp4_row_f32(t->buf + r * (int64_t)b->row_bytes, (size_t)b->cols, s, t->w + r * b->cols);
	}
	free(s);
}

/* W' from quant.h's own definitions, independent of the kernels. */
static void dequantize(tmat *t)
{
	const coli_blob *b = &t->blob;
	if (b->enc == COLI_ENC_FP4) {
		dequantize_fp4(t);
		return;
	}
	int64_t pad = (b->cols + 63) / 64 * 64, nb1 = b->block[1] ? (b->cols + b->block[1] - 1) / b->block[1] : 0;
	float *tmp = malloc((size_t)pad * sizeof(float));
	for (int64_t r = 0; r < b->rows; r++) {
		const uint8_t *row = t->buf + r * (int64_t)b->row_bytes;
		const uint16_t *sc = (const uint16_t *)(const void *)(t->buf + b->scales_off) + r * (pad / 64);
		float *w = t->w + r * b->cols;
		if (b->enc == COLI_ENC_Q4 || b->enc == COLI_ENC_Q8) {
			if (b->enc == COLI_ENC_Q4)
				coli_q4_dequantize_row(row, sc, (size_t)pad, tmp);
			else
				coli_q8_dequantize_row((const int8_t *)row, sc, (size_t)pad, tmp);
			memcpy(w, tmp, (size_t)b->cols * sizeof(float));
			continue;
		}
		for (int64_t c = 0; c < b->cols; c++) {
			uint16_t h;
			switch (b->enc) {
			case COLI_ENC_F32: memcpy(&w[c], row + 4 * c, 4); break;
			case COLI_ENC_BF16: memcpy(&h, row + 2 * c, 2); w[c] = coli_bf16_to_f32(h); break;
			case COLI_ENC_F16: memcpy(&h, row + 2 * c, 2); w[c] = coli_f16_to_f32(h); break;
			default: {
				const float *s = (const float *)(const void *)(t->buf + b->scales_off);
				w[c] = coli_fp8e4m3_to_f32(row[c]) * s[(r / b->block[0]) * nb1 + c / b->block[1]];
			}
			}
		}
	}
	free(tmp);
}

static int tmat_make(tmat *t, coli_enc enc, int64_t rows, int64_t cols, int64_t b0, int64_t b1)
{
	int64_t block[2] = {b0, b1};
	coli_err e;
	memset(t, 0, sizeof(*t));
	if (coli_blob_init(&t->blob, enc, rows, cols, block, &e) < 0)
		return -1;
	t->buf = aligned_alloc(64, (t->blob.nbytes + 63) / 64 * 64);
	t->w = malloc((size_t)(rows * cols) * sizeof(float));
	if (!t->buf || !t->w)
		return -1;
	memset(t->buf, 0, t->blob.nbytes);
	fill_codes(t);
	dequantize(t);
	t->m = coli_mat_of(&t->blob, t->buf);
	if (enc == COLI_ENC_FP8)
		snprintf(t->name, sizeof(t->name), "fp8[%lldx%lld] %lldx%lld", (long long)b0, (long long)b1,
			 (long long)rows, (long long)cols);
	else
		snprintf(t->name, sizeof(t->name), "%s %lldx%lld", coli_enc_name(enc), (long long)rows,
			 (long long)cols);
	return 0;
}

static void tmat_free(tmat *t)
{
	free(t->buf);
	free(t->w);
}

static float *rand_vec(int64_t n)
{
	float *v = malloc((size_t)n * sizeof(float));
	for (int64_t i = 0; i < n; i++)
		v[i] = uniform() * 3;
	return v;
}

/* ---- checks ---- */

/* Worst |y - ref| / bound over rows r of y[r] = W'[r] . x, in units of the tolerance. */
static double vec_err(const tmat *t, const float *x, const float *y, int64_t ystride, int64_t *worst)
{
	double e = 0;
	for (int64_t r = 0; r < t->m.rows; r++) {
		double ref = 0, bound = 0;
		for (int64_t c = 0; c < t->m.cols; c++) {
			ref += (double)t->w[r * t->m.cols + c] * x[c];
			bound += fabs((double)t->w[r * t->m.cols + c] * x[c]);
		}
		double d = fabs(y[r * ystride] - ref), q = bound > 0 ? d / (1e-5 * bound) : (d > 0 ? INFINITY : 0);
		if (!(q <= e)) {
			e = isnan(q) ? INFINITY : q;
			*worst = r;
		}
	}
	return e;
}

static void check_vec(const char *isa, const tmat *t, const float *x)
{
	char name[160];
	float *y = calloc((size_t)t->m.rows, sizeof(float));
	int64_t worst = 0;
	coli_mat_vec(K, &t->m, x, y);
	double e = vec_err(t, x, y, 1, &worst);
	snprintf(name, sizeof(name), "%s %s coli_mat_vec", isa, t->name);
	T_CHECK(name, e <= 1, "row %lld: error %.3g x tolerance", (long long)worst, e);
	free(y);
}

/* coli_mat_vec_range over rows [r0, r0 + nr): y[j] against row r0 + j's reference. */
static void check_range(const char *isa, const tmat *t, const float *x, int64_t r0, int64_t nr)
{
	char name[160];
	float *y = calloc((size_t)t->m.rows, sizeof(float));
	int64_t worst = 0;
	tmat band = *t;
	band.m.rows = nr;
	band.w = t->w + r0 * t->m.cols;
	coli_mat_vec_range(K, &t->m, r0, nr, x, y);
	double e = vec_err(&band, x, y, 1, &worst);
	snprintf(name, sizeof(name), "%s %s coli_mat_vec_range rows %lld+%lld", isa, t->name, (long long)r0,
		 (long long)nr);
	T_CHECK(name, e <= 1, "row %lld: error %.3g x tolerance", (long long)(r0 + worst), e);
	free(y);
}

/* Y[t][r]: each token against the reference; Y is [n][rows]. */
static void check_mul(const char *isa, const tmat *t, const float *X, int n)
{
	char name[160];
	float *Y = calloc((size_t)(n * t->m.rows), sizeof(float));
	double e = 0;
	int64_t worst = 0;
	int wt = 0;
	coli_mat_mul(K, &t->m, X, n, Y);
	for (int k = 0; k < n; k++) {
		int64_t w;
		double ek = vec_err(t, X + k * t->m.cols, Y + k * t->m.rows, 1, &w);
		if (ek > e || isnan(ek)) {
			e = ek;
			worst = w;
			wt = k;
		}
	}
	snprintf(name, sizeof(name), "%s %s coli_mat_mul n=%d", isa, t->name, n);
	T_CHECK(name, e <= 1, "token %d row %lld: error %.3g x tolerance", wt, (long long)worst, e);
	free(Y);
}

/* y[c] = y0[c] + sum over r in [r0, r0 + nr) of a[r - r0] W'[r][c]. */
static void check_vec_t(const char *isa, const tmat *t, int64_t r0, int64_t nr)
{
	char name[160];
	int64_t cols = t->m.cols, worst = 0;
	float *a = rand_vec(nr), *y0 = rand_vec(cols), *y = malloc((size_t)cols * sizeof(float));
	double e = 0;
	memcpy(y, y0, (size_t)cols * sizeof(float));
	coli_mat_vec_t_acc(K, &t->m, r0, nr, a, y);
	for (int64_t c = 0; c < cols; c++) {
		double ref = y0[c], bound = fabs(y0[c]);
		for (int64_t r = 0; r < nr; r++) {
			ref += (double)a[r] * t->w[(r0 + r) * cols + c];
			bound += fabs((double)a[r] * t->w[(r0 + r) * cols + c]);
		}
		double q = fabs(y[c] - ref) / (1e-5 * bound);
		if (!(q <= e)) {
			e = isnan(q) ? INFINITY : q;
			worst = c;
		}
	}
	snprintf(name, sizeof(name), "%s %s coli_mat_vec_t_acc rows %lld+%lld", isa, t->name, (long long)r0,
		 (long long)nr);
	T_CHECK(name, e <= 1, "column %lld: error %.3g x tolerance", (long long)worst, e);
	free(a);
	free(y0);
	free(y);
}

static void check_row(const char *isa, const tmat *t)
{
	char name[160];
	float *out = malloc((size_t)t->m.cols * sizeof(float));
	int64_t bad_r = -1, bad_c = -1;
	for (int64_t r = 0; r < t->m.rows && bad_r < 0; r++) {
		coli_mat_row(K, &t->m, r, out);
		for (int64_t c = 0; c < t->m.cols; c++)
			if (!same_bits(out[c], t->w[r * t->m.cols + c])) {
				bad_r = r;
				bad_c = c;
				break;
			}
	}
	snprintf(name, sizeof(name), "%s %s coli_mat_row", isa, t->name);
	T_CHECK(name, bad_r < 0, "row %lld column %lld: %.9g, expected %.9g", (long long)bad_r,
		(long long)bad_c, bad_r < 0 ? 0.0 : (double)out[bad_c],
		bad_r < 0 ? 0.0 : (double)t->w[bad_r * t->m.cols + bad_c]);
	free(out);
}

/* The same products with 1 and 2 threads: identical bits. */
static void check_threads(const char *isa, const tmat *t, const float *X)
{
	char name[160];
	int64_t rows = t->m.rows, cols = t->m.cols, n = 17;
	size_t ny = (size_t)(rows + (n + 3) * rows + cols);
	float *out[2];
	for (int k = 0; k < 2; k++) {
		out[k] = calloc(ny, sizeof(float));
		use(K_isa, k + 1, NULL);
		coli_mat_vec(K, &t->m, X, out[k]);
		coli_mat_mul(K, &t->m, X, (int)n, out[k] + rows);
		coli_mat_mul(K, &t->m, X, 3, out[k] + rows + n * rows);
		coli_mat_vec_t_acc(K, &t->m, 1, rows - 1, X, out[k] + rows + (n + 3) * rows);
	}
	size_t i = 0;
	while (i < ny && same_bits(out[0][i], out[1][i]))
		i++;
	snprintf(name, sizeof(name), "%s %s threads 1 and 2 identical", isa, t->name);
	T_CHECK(name, i == ny, "output %zu of %zu differs: %.9g vs %.9g", i, ny,
		i < ny ? (double)out[0][i] : 0.0, i < ny ? (double)out[1][i] : 0.0);
	free(out[0]);
	free(out[1]);
}

/* coli_mat_mul of n <= COLI_EXACT_N tokens: each token's row has coli_mat_vec's bits (kernels.h: what a
 * speculative verify relies on to compute what decode steps would). */
static void check_exact(const char *isa, const tmat *t, const float *X)
{
	char name[160];
	int64_t rows = t->m.rows, cols = t->m.cols, bad = -1;
	float *Y = calloc((size_t)(COLI_EXACT_N * rows), sizeof(float)), *y = calloc((size_t)rows, sizeof(float));
	for (int n = 1; n <= COLI_EXACT_N && bad < 0; n++) {
		coli_mat_mul(K, &t->m, X, n, Y);
		for (int i = 0; i < n && bad < 0; i++) {
			coli_mat_vec(K, &t->m, X + i * cols, y);
			for (int64_t r = 0; r < rows && bad < 0; r++)
				bad = same_bits(y[r], Y[i * rows + r]) ? -1 : n * 1000000 + i * 10000 + r;
		}
	}
	snprintf(name, sizeof(name), "%s %s coli_mat_mul of 1..%d tokens has coli_mat_vec's bits", isa, t->name, COLI_EXACT_N);
	T_CHECK(name, bad < 0, "n %lld, token %lld, row %lld differ", (long long)(bad / 1000000),
		(long long)(bad / 10000 % 100), (long long)(bad % 10000));
	free(Y);
	free(y);
}

static void check_matrix(const char *isa, coli_enc enc, int64_t rows, int64_t cols, int64_t b0, int64_t b1)
{
	tmat t;
	if (tmat_make(&t, enc, rows, cols, b0, b1) < 0) {
		T_CHECK("make test matrix", 0, "%s %lldx%lld", coli_enc_name(enc), (long long)rows, (long long)cols);
		return;
	}
	float *X = rand_vec(64 * cols);
	use(K_isa, 2, NULL);
	check_vec(isa, &t, X);
	check_range(isa, &t, X, rows / 3, rows - rows / 3 - 1);
	check_mul(isa, &t, X, 1);
	check_mul(isa, &t, X, 3);
	check_mul(isa, &t, X, 8);
	check_mul(isa, &t, X, 17);
	check_mul(isa, &t, X, 64);
	check_vec_t(isa, &t, 0, rows);
	check_vec_t(isa, &t, rows / 3, rows / 2 + 1);
	check_row(isa, &t);
	check_threads(isa, &t, X);
	check_exact(isa, &t, X);
	free(X);
	tmat_free(&t);
}

/* q4 or fp4 without prepared x (what a variant does when kernels.c cannot allocate the buffer):
 * the variant's own entry points, called with xp = NULL. */
static void check_unprepared(const char *isa, const kern_ops *k, coli_enc enc)
{
	char name[160];
	tmat t;
	if (tmat_make(&t, enc, 37, 1000, 0, 0) < 0)
		return;
	float *X = rand_vec(3 * 1000), *Y = calloc(3 * 37, sizeof(float));
	int64_t worst = 0;
	k->vec(&t.m, X, NULL, Y, 0, 37);
	double e = vec_err(&t, X, Y, 1, &worst);
	snprintf(name, sizeof(name), "%s %s matvec without prepared x", isa, coli_enc_name(enc));
	T_CHECK(name, e <= 1, "row %lld: error %.3g x tolerance", (long long)worst, e);
	k->mul(&t.m, X, NULL, 3, Y, 0, 37);
	e = 0;
	for (int n = 0; n < 3; n++) {
		double en = vec_err(&t, X + n * 1000, Y + n * 37, 1, &worst);
		e = en > e ? en : e;
	}
	snprintf(name, sizeof(name), "%s %s coli_mat_mul n=3 without prepared x", isa, coli_enc_name(enc));
	T_CHECK(name, e <= 1, "error %.3g x tolerance", e);
	free(X);
	free(Y);
	tmat_free(&t);
}

/* An fp8 NaN code (0x7F) makes its row's products NaN and decodes to NaN; others stay finite. */
static void check_fp8_nan(const char *isa)
{
	char name[160];
	tmat t;
	if (tmat_make(&t, COLI_ENC_FP8, 40, 200, 128, 128) < 0)
		return;
	t.buf[5 * t.blob.row_bytes + 150] = 0x7F;
	t.buf[9 * t.blob.row_bytes + 3] = 0xFF;
	float *x = rand_vec(200 * 5), y[40 * 5], out[200];
	coli_mat_vec(K, &t.m, x, y);
	int ok = 1;
	for (int r = 0; r < 40; r++)
		ok &= (r == 5 || r == 9) == (isnan(y[r]) != 0);
	snprintf(name, sizeof(name), "%s fp8 NaN code gives a NaN row in coli_mat_vec", isa);
	T_CHECK(name, ok, "y[5] %g y[9] %g y[0] %g", (double)y[5], (double)y[9], (double)y[0]);
	coli_mat_mul(K, &t.m, x, 5, y);
	ok = 1;
	for (int k = 0; k < 5; k++)
		for (int r = 0; r < 40; r++)
			ok &= (r == 5 || r == 9) == (isnan(y[k * 40 + r]) != 0);
	snprintf(name, sizeof(name), "%s fp8 NaN code gives a NaN row in coli_mat_mul", isa);
	T_CHECK(name, ok, "a NaN row is finite or a finite row is NaN");
	coli_mat_row(K, &t.m, 5, out);
	snprintf(name, sizeof(name), "%s fp8 NaN code decodes to NaN in coli_mat_row", isa);
	T_CHECK(name, isnan(out[150]) && !isnan(out[149]), "out[150] %g", (double)out[150]);
	free(x);
	tmat_free(&t);
}

/* FP4 at the ends of UE8M0's range: every scale byte of the matrix e (1 in 3 blocks e - 1, so
 * that one row mixes two scales), x times 2^xexp so that the products stay in float32's range:
 * 2^-127 (byte 0, a subnormal scale) and 2^125 against the reference; then a NaN scale (255)
 * makes its row NaN and only it. The nibble-order and table paths both run (1 and 64 tokens). */
static void check_fp4_scales(const char *isa)
{
	static const struct { int e, xexp; } ends[] = {{0, 0}, {1, 0}, {2, 20}, {252, -40}, {254, -60}};
	char name[160];
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
		tmat t;
		if (tmat_make(&t, COLI_ENC_FP4, 37, 1000, 0, 0) < 0)
			return;
		for (uint64_t k = 0; k < t.blob.scales_bytes; k++)
			t.buf[t.blob.scales_off + k] = (uint8_t)(ends[i].e - (k % 3 == 1 && ends[i].e > 0));
		for (uint64_t k = 0; ends[i].e == 254 && k < t.blob.codes_bytes; k++)
			t.buf[k] &= 0xBB; /* magnitudes 0 .. 1.5: 2^127 x 2 is past float32 */
		dequantize(&t);
		float *X = rand_vec(64 * 1000);
		for (int k = 0; k < 64 * 1000; k++)
			X[k] = ldexpf(X[k], ends[i].xexp);
		snprintf(t.name, sizeof(t.name), "fp4 scale byte %d", ends[i].e);
		check_vec(isa, &t, X);
		check_mul(isa, &t, X, 3);
		check_mul(isa, &t, X, 64);
		check_row(isa, &t);
		free(X);
		tmat_free(&t);
	}
	tmat t;
	if (tmat_make(&t, COLI_ENC_FP4, 40, 256, 0, 0) < 0)
		return;
	t.buf[t.blob.scales_off + 5 * 8 + 3] = 255;
	float *x = rand_vec(256 * 20), *y = malloc(40 * 20 * sizeof(float));
	int ok = 1;
	coli_mat_vec(K, &t.m, x, y);
	for (int r = 0; r < 40; r++)
		ok &= (r == 5) == (isnan(y[r]) != 0);
	coli_mat_mul(K, &t.m, x, 20, y);
	for (int k = 0; k < 20 * 40; k++)
		ok &= (k % 40 == 5) == (isnan(y[k]) != 0);
	snprintf(name, sizeof(name), "%s fp4 NaN scale (255) gives a NaN row in coli_mat_vec and coli_mat_mul", isa);
	T_CHECK(name, ok, "y[5] %g y[0] %g", (double)y[5], (double)y[0]);
	free(x);
	free(y);
	tmat_free(&t);
}

/* Activations near float32's end (outlier magnitudes) against small block scales: the reference
 * W'[r] . x is finite, and so must every product be (kernels.h: exact whatever x). Two sets, each
 * through coli_mat_vec and coli_mat_mul of 3 and 64 tokens:
 *   fp4 random codes under scales 2^-27 .. 2^-13, x about 2^100: a kernel that sums the codes at a
 *   unit of its own (e2m1 x 2^25) before the scale overflows;
 *   every code of one sign at its largest magnitude (fp4 6, q4 7) under scale 2^-20 (q4 2^-14), x
 *   all 2^123: any sum of a few codes x x taken before the scale overflows, where the weights'
 *   products do not. */
static void check_extreme(const char *isa)
{
	static const coli_enc encs[] = {COLI_ENC_FP4, COLI_ENC_FP4, COLI_ENC_Q4};
	for (int s = 0; s < 3; s++) {
		tmat t;
		if (tmat_make(&t, encs[s], 37, 1000, 0, 0) < 0)
			return;
		const coli_blob *b = &t.blob;
		for (uint64_t k = 0; s > 0 && k < b->codes_bytes; k++)
			t.buf[k] = s == 1 ? 0x77 : 0xFF; /* e2m1 6 and 6; q4 code 15: 7 */
		for (uint64_t k = 0; encs[s] == COLI_ENC_FP4 && k < b->scales_bytes; k++)
			t.buf[b->scales_off + k] = (uint8_t)(s == 0 ? 100 + rng() % 15 : 107);
		for (uint64_t k = 0; encs[s] == COLI_ENC_Q4 && k < b->scales_bytes; k += 2)
			t.buf[b->scales_off + k] = 0, t.buf[b->scales_off + k + 1] = 0x04; /* binary16 2^-14 */
		dequantize(&t);
		float *X = rand_vec(64 * 1000);
		for (int k = 0; k < 64 * 1000; k++)
			X[k] = s == 0 ? ldexpf(X[k], 100) : 0x1p123f;
		snprintf(t.name, sizeof(t.name), "%s %s x 2^%d", coli_enc_name(encs[s]), s == 0 ? "random codes" : "largest codes",
			 s == 0 ? 100 : 123);
		check_vec(isa, &t, X);
		check_mul(isa, &t, X, 3);
		check_mul(isa, &t, X, 64);
		free(X);
		tmat_free(&t);
	}
}

/* The encoding table (kernels/enc.h) against the container's geometry (formats/layout.c): every row's
 * blocks make the row_bytes coli_blob_init gives, its scales the scale bytes, and the scale width
 * and a row's scales address what the blob holds. */
static void check_table(void)
{
	static const int64_t shapes[][2] = {{1, 1}, {3, 64}, {5, 65}, {7, 1000}, {130, 300}};
	for (int enc = 0; enc < COLI_ENC_COUNT; enc++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			char name[96];
			int64_t rows = shapes[s][0], cols = shapes[s][1], block[2] = {128, 128};
			const kern_enc *k = kern_enc_of((coli_enc)enc);
			coli_blob b;
			coli_err e;
			if (coli_blob_init(&b, (coli_enc)enc, rows, cols, block, &e) < 0) {
				T_CHECK("blob geometry", 0, "%s", e.msg);
				continue;
			}
			uint8_t *buf = calloc(1, b.nbytes);
			if (!buf) {
				T_CHECK("encoding table: memory", 0, "%llu bytes", (unsigned long long)b.nbytes);
				continue;
			}
			coli_mat m = coli_mat_of(&b, buf);
			int64_t blocks = kern_blocks(&m), groups = (cols + kern_scale_width(&m) - 1) / kern_scale_width(&m);
			int64_t last = k->scale == KS_NONE ? 0 : kern_row_scales(&m, rows - 1) - m.scales;
			int64_t per = k->scale == KS_F16_BLOCK ? 2 : k->scale == KS_E8_BLOCK ? 1 : 4, end = k->scale == KS_NONE ? 0 : last + per * groups;
			snprintf(name, sizeof(name), "encoding table: %s %lldx%lld: row bytes and scales as the container's",
				 coli_enc_name((coli_enc)enc), (long long)rows, (long long)cols);
			T_CHECK(name,
				(uint64_t)(blocks * k->block_bytes) == b.row_bytes &&
					(uint64_t)kern_code_bytes((coli_enc)enc, blocks * k->block) == b.row_bytes &&
					(uint64_t)end == b.scales_bytes && (k->scale == KS_NONE) == (b.scales_bytes == 0) &&
					k->decode != NULL,
				"row bytes %lld (container %llu), scales end at %lld (container %llu bytes)",
				(long long)(blocks * k->block_bytes), (unsigned long long)b.row_bytes, (long long)end,
				(unsigned long long)b.scales_bytes);
			free(buf);
		}
}


/* ---- q8 activations ---- */

/* x with outlier channels: every 97th column 10^3 .. 10^4 times the others (real models' hidden
 * states), some zero groups when zeros is set. */
static float *outlier_vec(int64_t n, int zeros)
{
	float *v = rand_vec(n);
	for (int64_t i = 0; i < n; i++) {
		if (i % 97 == 13)
			v[i] *= (float)(1000 + rng() % 9000);
		if (zeros && i >= 64 && i < 192)
			v[i] = 0;
	}
	return v;
}

static const kern_q8_ops *const q8_variants[] = {&kern_q8_scalar, &kern_q8_avx2, &kern_q8_avx512, &kern_q8_avx512vnni,
						 &kern_q8_amx};

static int q8_runs(const kern_q8_ops *q)
{
	if (q == &kern_q8_avx512vnni)
		return coli_kernels_available("avx512") && __builtin_cpu_supports("avx512vnni");
	return coli_kernels_available(q->name);
}

/* n tokens of X in q's tile layout (KX_Q8T; caller frees), or data NULL where q has none. */
static kern_x q8_tiles_all(const kern_q8_ops *q, const tmat *t, const float *X, int n)
{
	if (!q->tiles_bytes)
		return (kern_x){KX_Q8T, 0, NULL};
	int64_t per = q->tiles_bytes(t->m.cols), blocks = (n + 15) / 16;
	uint8_t *buf = aligned_alloc(64, (size_t)(per * blocks));
	q->tiles_prep(t->m.cols, X, n, 0, blocks, buf);
	return (kern_x){KX_Q8T, per, buf};
}

/* q's rows over its tile layout (where it has one) against ref, bit for bit (NaN for NaN). */
static void check_q8_tiles(const kern_q8_ops *q, const tmat *t, const float *X, int n, const float *ref, const char *what)
{
	char name[200];
	const int64_t rows = t->m.rows, ny = rows * n;
	kern_x xt = q8_tiles_all(q, t, X, n);
	if (!xt.data)
		return;
	float *y = malloc((size_t)ny * sizeof(float));
	memset(y, 0xFF, (size_t)ny * sizeof(float));
	q->rows(&t->m, &xt, n, y, rows, 0, rows / 2);
	q->rows(&t->m, &xt, n, y + rows / 2, rows, rows / 2, rows);
	int64_t i = 0;
	while (i < ny && (isnan(ref[i]) ? isnan(y[i]) : same_bits(y[i], ref[i])))
		i++;
	snprintf(name, sizeof(name), "q8 %s tiles %s %s n=%d: the reference's bits", q->name, t->name, what, n);
	T_CHECK(name, i == ny, "token %lld row %lld: %.9g, reference %.9g", (long long)(i / rows), (long long)(i % rows),
		i < ny ? (double)y[i] : 0.0, i < ny ? (double)ref[i] : 0.0);
	if (q == &kern_q8_amx) { /* and without the GEMM's scratch */
		memset(y, 0xFF, (size_t)ny * sizeof(float));
		kern_amx_q8_slow(&t->m, &xt, n, y, rows, 0, rows);
		for (i = 0; i < ny && (isnan(ref[i]) ? isnan(y[i]) : same_bits(y[i], ref[i]));)
			i++;
		snprintf(name, sizeof(name), "q8 amx tiles without scratch %s %s n=%d: the reference's bits", t->name, what, n);
		T_CHECK(name, i == ny, "token %lld row %lld: %.9g, reference %.9g", (long long)(i / rows),
			(long long)(i % rows), i < ny ? (double)y[i] : 0.0, i < ny ? (double)ref[i] : 0.0);
	}
	free((void *)xt.data);
	free(y);
}

/* n tokens of X prepared (caller frees). */
static kern_x q8_prep_all(const tmat *t, const float *X, int n)
{
	int64_t per = kern_q8_bytes(t->m.cols);
	uint8_t *buf = aligned_alloc(64, (size_t)(per * n));
	for (int k = 0; k < n; k++)
		kern_q8_prep(t->m.cols, X + k * t->m.cols, buf + k * per);
	return (kern_x){KX_Q8, per, buf};
}

/* The reference against the quantization bound (header), worst ratio over rows and tokens. */
static double q8_bound_err(const tmat *t, const float *X, int n, const float *Y)
{
	double worst = 0;
	const int64_t cols = t->m.cols;
	for (int k = 0; k < n; k++)
		for (int64_t r = 0; r < t->m.rows; r++) {
			const float *x = X + k * cols, *w = t->w + r * cols;
			double ref = 0, bound = 0;
			for (int64_t g0 = 0; g0 < cols; g0 += 64) {
				double amax = 0, wsum = 0;
				for (int64_t c = g0; c < cols && c < g0 + 64; c++) {
					amax = fabs(x[c]) > amax ? fabs(x[c]) : amax;
					wsum += fabs(w[c]);
					ref += (double)w[c] * x[c];
					bound += 1e-5 * fabs((double)w[c] * x[c]);
				}
				bound += amax / 254 * wsum;
			}
			double d = fabs(Y[k * t->m.rows + r] - ref), q = bound > 0 ? d / bound : d > 0 ? INFINITY : 0;
			worst = q > worst || isnan(q) ? (isnan(q) ? INFINITY : q) : worst;
		}
	return worst;
}

/* Index of the first differing float of a and b (n of them), or n. */
static int64_t first_diff(const float *a, const float *b, int64_t n)
{
	int64_t i = 0;
	while (i < n && same_bits(a[i], b[i]))
		i++;
	return i;
}

/* Every variant's q8 rows of n tokens against the reference, bit for bit; the reference within
 * the bound. */
static void check_q8_variants(const tmat *t, const float *X, int n, const char *what)
{
	char name[200];
	const int64_t rows = t->m.rows, ny = rows * n;
	kern_x xp = q8_prep_all(t, X, n);
	float *ref = calloc((size_t)ny, sizeof(float)), *y = calloc((size_t)ny, sizeof(float));
	kern_q8_scalar.rows(&t->m, &xp, n, ref, rows, 0, rows);
	double e = q8_bound_err(t, X, n, ref);
	snprintf(name, sizeof(name), "q8 reference %s %s n=%d within the quantization bound", t->name, what, n);
	T_CHECK(name, e <= 1, "error %.3g x bound", e);
	for (size_t v = 1; v < sizeof(q8_variants) / sizeof(q8_variants[0]); v++) {
		const kern_q8_ops *q = q8_variants[v];
		if (!q8_runs(q))
			continue;
		memset(y, 0xFF, (size_t)ny * sizeof(float));
		q->rows(&t->m, &xp, n, y, rows, 0, rows / 2);
		q->rows(&t->m, &xp, n, y + rows / 2, rows, rows / 2, rows);
		int64_t i = first_diff(y, ref, ny);
		snprintf(name, sizeof(name), "q8 %s %s %s n=%d: the reference's bits", q->name, t->name, what, n);
		T_CHECK(name, i == ny, "token %lld row %lld: %.9g, reference %.9g", (long long)(i / rows),
			(long long)(i % rows), i < ny ? (double)y[i] : 0.0, i < ny ? (double)ref[i] : 0.0);
		check_q8_tiles(q, t, X, n, ref, what);
	}
	free((void *)xp.data);
	free(ref);
	free(y);
}

/* Tokens with a NaN or an infinite activation: every row's product is NaN (q8.h), in every variant
 * and for 1 or n tokens (the GEMM from 17); the finite tokens keep the reference's bits. */
static void check_q8_nonfinite(const tmat *t, int n)
{
	char name[200];
	const int64_t rows = t->m.rows, cols = t->m.cols, ny = rows * n;
	float *X = rand_vec(n * cols);
	for (int k = 0; k < n; k += 3)
		X[k * cols + (k * 37) % cols] = k % 2 ? INFINITY : NAN;
	kern_x xp = q8_prep_all(t, X, n);
	float *ref = calloc((size_t)ny, sizeof(float)), *y = calloc((size_t)ny, sizeof(float));
	kern_q8_scalar.rows(&t->m, &xp, n, ref, rows, 0, rows);
	int64_t bad = -1;
	for (int64_t i = 0; i < ny && bad < 0; i++)
		if (!isnan(ref[i]) != ((i / rows) % 3 != 0))
			bad = i;
	snprintf(name, sizeof(name), "q8 reference %s n=%d: NaN or inf in a token's x gives NaN, every row", t->name, n);
	T_CHECK(name, bad < 0, "token %lld row %lld: %g", (long long)(bad / rows), (long long)(bad % rows),
		bad < 0 ? 0.0 : (double)ref[bad]);
	for (size_t v = 1; v < sizeof(q8_variants) / sizeof(q8_variants[0]); v++) {
		const kern_q8_ops *q = q8_variants[v];
		if (!q8_runs(q))
			continue;
		memset(y, 0, (size_t)ny * sizeof(float));
		q->rows(&t->m, &xp, n, y, rows, 0, rows);
		int64_t i = 0;
		while (i < ny && (isnan(y[i]) ? isnan(ref[i]) : same_bits(y[i], ref[i])))
			i++;
		snprintf(name, sizeof(name), "q8 %s %s n=%d, NaN and inf in x: the reference's NaNs and bits", q->name, t->name, n);
		T_CHECK(name, i == ny, "token %lld row %lld: %.9g, reference %.9g", (long long)(i / rows),
			(long long)(i % rows), i < ny ? (double)y[i] : 0.0, i < ny ? (double)ref[i] : 0.0);
		check_q8_tiles(q, t, X, n, ref, "NaN and inf in x");
	}
	free((void *)xp.data);
	free(X);
	free(ref);
	free(y);
}

/* The public calls with precision q8 (the best variant, 1 and 2 threads) give the reference's
 * bits: coli_mat_vec, coli_mat_vec_batch, coli_mat_mul of 1 .. 40 tokens. */
static void check_q8_public(const tmat *t, const float *X)
{
	char name[200];
	const int64_t rows = t->m.rows;
	enum { N = 40 };
	kern_x xp = q8_prep_all(t, X, N);
	float *ref = calloc((size_t)(rows * N), sizeof(float)), *Y = calloc((size_t)(rows * N), sizeof(float));
	kern_q8_scalar.rows(&t->m, &xp, N, ref, rows, 0, rows);
	for (int th = 1; th <= 2; th++) {
		use(NULL, th, NULL);
		coli_kernels_set_precision(K, COLI_PREC_Q8);
		int64_t bad = -1;
		coli_mat_vec(K, &t->m, X, Y);
		bad = first_diff(Y, ref, rows) < rows ? 0 : -1;
		const coli_mat *W[2] = {&t->m, &t->m};
		const float *xs[2] = {X + t->m.cols, X + 2 * t->m.cols};
		float *ys[2] = {Y + rows, Y + 2 * rows};
		coli_mat_vec_batch(K, W, xs, ys, 2);
		if (bad < 0 && first_diff(Y + rows, ref + rows, 2 * rows) < 2 * rows)
			bad = 1;
		static const int ns[] = {1, 3, 8, 17, N};
		for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]) && bad < 0; k++) {
			coli_mat_mul(K, &t->m, X, ns[k], Y);
			if (first_diff(Y, ref, rows * ns[k]) < rows * ns[k])
				bad = 100 + ns[k];
		}
		snprintf(name, sizeof(name), "q8 %s (%s) %s: public calls, %d thread(s), the reference's bits",
			 coli_kernels_isa(K), coli_kernels_q8_isa(K), t->name, th);
		T_CHECK(name, bad < 0, "%s", bad == 0 ? "coli_mat_vec" : bad == 1 ? "coli_mat_vec_batch" : "coli_mat_mul");
	}
	free((void *)xp.data);
	free(ref);
	free(Y);
}

/* Encodings without integer codes keep their exact bits under q8, and say so. */
static void check_q8_exempt(coli_enc enc)
{
	char name[200];
	tmat t;
	if (tmat_make(&t, enc, 37, 300, 0, 0) < 0)
		return;
	float *X = rand_vec(4 * 300), *a = calloc(4 * 37, sizeof(float)), *b = calloc(4 * 37, sizeof(float));
	use(NULL, 2, NULL);
	coli_mat_mul(K, &t.m, X, 4, a);
	coli_kernels_set_precision(K, COLI_PREC_Q8);
	coli_mat_mul(K, &t.m, X, 4, b);
	snprintf(name, sizeof(name), "q8 leaves %s exact (coli_mat_takes_q8 0, the same bits)", t.name);
	T_CHECK(name, !coli_mat_takes_q8(K, &t.m) && first_diff(a, b, 4 * 37) == 4 * 37, "takes q8 %d",
		coli_mat_takes_q8(K, &t.m));
	free(X);
	free(a);
	free(b);
	tmat_free(&t);
}

/* kern_q8_prep's bytes are q8.h's formula (roundf of x / amax * 127, clamped; the group's sum of
 * q; amax / 127) for groups of random, half-way (x / amax * 127 = k + 1/2 exactly), outlier, zero,
 * NaN and infinite values, a tail group shorter than 64 and the zero groups past it. */
static void check_q8_prep(void)
{
	enum { COLS = 64 * 7 + 23 };
	const int64_t G16 = kern_q8_groups16(COLS);
	float x[COLS];
	uint8_t *xp = aligned_alloc(64, (size_t)kern_q8_bytes(COLS));
	int bad = 0;
	for (int c = 0; c < COLS; c++) {
		int g = c / 64;
		x[c] = g == 1 ? (float)(c % 64 - 32) + 0.5f : g == 2 ? 0.0f : (float)((int64_t)rng() % 20001 - 10000) / 1000;
		if (g == 3 && c % 64 == 5)
			x[c] = 4e4f;
		if (g == 4 && c % 64 == 9)
			x[c] = NAN;
		if (g == 5 && c % 64 == 1)
			x[c] = -INFINITY;
	}
	x[64 + 31] = 127; /* group 1: amax 127, so its halves stay halves */
	kern_q8_prep(COLS, x, xp);
	const int8_t *qs = kern_q8_qs(xp);
	const int32_t *sq = kern_q8_sq(xp, COLS);
	const float *dx = kern_q8_dx(xp, COLS);
	for (int64_t g = 0; g < G16 && !bad; g++) {
		float amax = 0;
		int8_t q[64] = {0};
		for (int c = 0; c < 64 && 64 * g + c < COLS; c++) {
			float a = fabsf(x[64 * g + c]);
			amax = a != a || amax != amax ? NAN : a > amax ? a : amax;
		}
		for (int c = 0; c < 64 && 64 * g + c < COLS && isfinite(amax) && amax > 0; c++) {
			float v = roundf(x[64 * g + c] / amax * 127.0f);
			q[c] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
		}
		int32_t sum = 0;
		for (int c = 0; c < 64; c++) {
			bad |= g < kern_q8_groups(COLS) && qs[kern_q8_at(g, c)] != q[c];
			sum += q[c];
		}
		float d = isfinite(amax) && amax > 0 ? amax / 127.0f : amax;
		bad |= sq[g] != sum || !(same_bits(dx[g], d) || (isnan(d) && isnan(dx[g])));
		if (bad)
			printf("  group %lld differs\n", (long long)g);
	}
	T_CHECK("q8 preparation: q8.h's formula, byte for byte (halves, outliers, zeros, NaN, inf, a tail)", !bad,
		"a group's bytes differ");
	free(xp);
}

/* A batch whose items share x (a decode token's gate and up products, q, k and v) shares its
 * preparation only between items of one encoding and width: every item gets coli_mat_vec's bits,
 * exact and q8, 1 and 2 threads, items of q4 and q8 on the same x interleaved. */
static void check_batch_shared_x(void)
{
	tmat a, b, c, d;
	if (tmat_make(&a, COLI_ENC_Q4, 37, 320, 0, 0) < 0 || tmat_make(&b, COLI_ENC_Q8, 21, 320, 0, 0) < 0 ||
	    tmat_make(&c, COLI_ENC_FP4, 19, 320, 0, 0) < 0 || tmat_make(&d, COLI_ENC_Q4, 23, 320, 0, 0) < 0)
		return;
	float *x = rand_vec(320), *x2 = rand_vec(320), ref[5][37], got[5][37];
	const coli_mat *W[5] = {&a.m, &b.m, &c.m, &d.m, &a.m};
	const float *xs[5] = {x, x, x, x, x2};
	float *ys[5] = {got[0], got[1], got[2], got[3], got[4]};
	for (int p = 0; p < 2; p++)
		for (int th = 1; th <= 2; th++) {
			char name[160];
			use(NULL, th, NULL);
			coli_kernels_set_precision(K, p ? COLI_PREC_Q8 : COLI_PREC_EXACT);
			for (int i = 0; i < 5; i++)
				coli_mat_vec(K, W[i], xs[i], ref[i]);
			int rc = coli_mat_vec_batch(K, W, xs, ys, 5), bad = -1;
			for (int i = 0; i < 5 && bad < 0; i++)
				if (first_diff(got[i], ref[i], W[i]->rows) < W[i]->rows)
					bad = i;
			snprintf(name, sizeof(name), "batch with a shared x, %s, %d thread(s): each item coli_mat_vec's bits",
				 p ? "q8" : "exact", th);
			T_CHECK(name, rc == 0 && bad < 0, "rc %d, item %d differs", rc, bad);
		}
	coli_kernels_set_precision(K, COLI_PREC_EXACT);
	free(x);
	free(x2);
	tmat_free(&a);
	tmat_free(&b);
	tmat_free(&c);
	tmat_free(&d);
}

/* Every variant against the reference: the matrix-vector body and the GEMM (from 17 tokens)
 * around their crossover, 1 .. 70 tokens, rows not a multiple of a GEMM panel, columns not a
 * multiple of 128; outlier, NaN and infinite activations; the public calls. */
static void check_q8(void)
{
	static const int64_t shapes[][2] = {{37, 160}, {19, 1000}, {5, 33},   {40, 128},  {9, 4200},
					    {3, 64},   {77, 200},  {45, 1000}, {33, 64},  {16, 1088}};
	static const int ns[] = {1, 2, 3, 5, 6, 7, 8, 9, 13, 16, 17, 29, 33, 64, 70};
	static const coli_enc encs[] = {COLI_ENC_Q4, COLI_ENC_Q8};
	for (size_t e = 0; e < 2; e++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			tmat t;
			if (tmat_make(&t, encs[e], shapes[s][0], shapes[s][1], 0, 0) < 0)
				continue;
			float *X = rand_vec(70 * t.m.cols), *O = outlier_vec(29 * t.m.cols, 1);
			for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
				check_q8_variants(&t, X, ns[k], "random x");
			check_q8_variants(&t, O, 7, "outlier x");
			check_q8_variants(&t, O, 29, "outlier x");
			check_q8_nonfinite(&t, 1);
			check_q8_nonfinite(&t, 20);
			check_q8_public(&t, X);
			free(X);
			free(O);
			tmat_free(&t);
		}
	check_q8_prep();
	check_batch_shared_x();
	check_q8_exempt(COLI_ENC_F32);
	check_q8_exempt(COLI_ENC_BF16);
	coli_precision p;
	T_CHECK("precision names", coli_precision_parse("q8", &p) == 0 && p == COLI_PREC_Q8 &&
		coli_precision_parse("exact", &p) == 0 && p == COLI_PREC_EXACT &&
		coli_precision_parse("fp16", &p) < 0 && strcmp(coli_precision_name(COLI_PREC_Q8), "q8") == 0, "parse or name wrong");
	for (size_t v = 0; v < sizeof(q8_variants) / sizeof(q8_variants[0]); v++)
		if (!q8_runs(q8_variants[v]))
			printf("SKIP q8 %s: this CPU lacks it\n", q8_variants[v]->name);
}

static const char *const isas[] = {"scalar", "avx2", "avx512", "amx"};

static void check_isa(const char *isa)
{
	static const int64_t shapes[][2] = {{37, 160}, {19, 1000}, {5, 33}, {300, 1000}, {9, 4200}};
	coli_err e;
	if (use(isa, 2, &e) < 0) {
		printf("SKIP %s kernels: %s\n", isa, e.msg);
		return;
	}
	for (int enc = 0; enc < COLI_ENC_COUNT; enc++) {
		if (enc == COLI_ENC_FP8)
			continue;
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			check_matrix(isa, (coli_enc)enc, shapes[s][0], shapes[s][1], 0, 0);
	}
	/* fp8: partial 128-blocks both ways, and block widths the SIMD slices may not divide */
	check_matrix(isa, COLI_ENC_FP8, 150, 300, 128, 128);
	check_matrix(isa, COLI_ENC_FP8, 300, 1000, 128, 128);
	check_matrix(isa, COLI_ENC_FP8, 37, 160, 64, 48);
	check_matrix(isa, COLI_ENC_FP8, 37, 160, 16, 40);
	check_matrix(isa, COLI_ENC_FP8, 21, 100, 7, 20);
	check_fp8_nan(isa);
	check_fp4_scales(isa);
	check_extreme(isa);
	const kern_ops *k = strcmp(isa, "amx") == 0      ? &kern_amx
			    : strcmp(isa, "avx512") == 0 ? &kern_avx512
			    : strcmp(isa, "avx2") == 0   ? &kern_avx2
							 : &kern_scalar;
	check_unprepared(isa, k, COLI_ENC_Q4);
	check_unprepared(isa, k, COLI_ENC_FP4);
}

/* Opens a context of isa (NULL: the best); its variant's name, or NULL with *rc -1. */
static const char *open_isa(const char *isa, int *rc, coli_err *e)
{
	coli_kernels *k = NULL;
	static char name[16];
	*rc = coli_kernels_open(&k, isa, 0, e);
	if (*rc == 0)
		snprintf(name, sizeof(name), "%s", coli_kernels_isa(k));
	int threads = *rc == 0 ? coli_kernels_threads(k) : 0;
	coli_kernels_close(k);
	return *rc == 0 && threads >= 1 ? name : NULL;
}

static void check_choice(void)
{
	coli_err e;
	int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		     __builtin_cpu_supports("avx512vl");
	int rc;
	const char *got = open_isa("bogus", &rc, &e);
	T_CHECK("ISA bogus is rejected", rc < 0 && strstr(e.msg, "'bogus'"), "rc %d: %s", rc, rc < 0 ? e.msg : "");
	got = open_isa("scalar", &rc, &e);
	T_CHECK("ISA scalar is used", got && strcmp(got, "scalar") == 0, "rc %d isa %s", rc, got ? got : "-");
	got = open_isa("avx512", &rc, &e);
	if (avx512)
		T_CHECK("ISA avx512 is used", got && strcmp(got, "avx512") == 0, "rc %d", rc);
	else
		T_CHECK("ISA avx512 without AVX-512 is an error",
			rc < 0 && strstr(e.msg, "'avx512': this CPU lacks AVX-512"), "rc %d: %s", rc, rc < 0 ? e.msg : "");
	got = open_isa("avx2", &rc, &e);
	if (coli_kernels_available("avx2"))
		T_CHECK("ISA avx2 is used", got && strcmp(got, "avx2") == 0, "rc %d", rc);
	got = open_isa(NULL, &rc, &e);
	const char *best = coli_kernels_available("amx")      ? "amx"
			   : coli_kernels_available("avx512") ? "avx512"
			   : coli_kernels_available("avx2")   ? "avx2"
							      : "scalar";
	T_CHECK("no ISA named picks the best variant, at least one thread", got && strcmp(got, best) == 0,
		"isa %s, expected %s", got ? got : "-", best);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median seconds of one call over `reps` calls, cycling through `ncopies` matrices. */
static double time_median(tmat *m, int ncopies, const float *X, float *Y, int n, int reps)
{
	double t[64];
	for (int i = 0; i < reps + 2; i++) {
		tmat *w = &m[i % ncopies];
		double t0 = coli_now();
		if (n == 0)
			coli_mat_vec(K, &w->m, X, Y);
		else
			coli_mat_mul(K, &w->m, X, n, Y);
		if (i >= 2)
			t[i - 2] = coli_now() - t0;
	}
	qsort(t, (size_t)reps, sizeof(double), cmp_double);
	return t[reps / 2];
}

/* Memory read bandwidth for comparison: glibc's vectorised memchr looking for a 0 in a buffer
 * of 1s (written, so every page is real memory, not the shared zero page). */
typedef struct mem_part {
	const char *p;
	size_t n;
} mem_part;

static void *mem_read(void *arg)
{
	const mem_part *m = arg;
	return memchr(m->p, 0, m->n);
}

static double mem_bandwidth(int threads)
{
	enum { MB = 512 };
	size_t n = (size_t)MB << 20;
	char *buf = malloc(n);
	double best = 0;
	pthread_t tid[2];
	mem_part part[2];
	if (!buf)
		return 0;
	memset(buf, 1, n);
	for (int rep = 0; rep < 5; rep++) {
		double t0 = coli_now();
		for (int i = 0; i < threads; i++) {
			part[i] = (mem_part){buf + n / (size_t)threads * (size_t)i, n / (size_t)threads};
			pthread_create(&tid[i], NULL, mem_read, &part[i]);
		}
		for (int i = 0; i < threads; i++)
			pthread_join(tid[i], NULL);
		double gbs = (double)n / (coli_now() - t0) / 1e9;
		best = gbs > best ? gbs : best;
	}
	free(buf);
	return best;
}

static void bench(void)
{
	static const int64_t shapes[][2] = {{4096, 4096}, {7168, 2048}};
	printf("\n| variant | threads | q4 matrix | matvec GB/s (in cache) | matvec GB/s (from RAM) | "
	       "coli_mat_mul n=64 GFLOP/s | coli_mat_mul n=29 GFLOP/s |\n|---|---|---|---|---|---|---|\n");
	for (size_t s = 0; s < 2; s++) {
		int64_t rows = shapes[s][1], cols = shapes[s][0];
		enum { COPIES = 24 }; /* 24 x 8.5 MB: well past the last-level cache */
		tmat m[COPIES];
		for (int i = 0; i < COPIES; i++)
			if (tmat_make(&m[i], COLI_ENC_Q4, rows, cols, 0, 0) < 0)
				return;
		float *X = rand_vec(64 * cols), *Y = malloc((size_t)(64 * rows) * sizeof(float));
		double bytes = (double)m[0].blob.nbytes;
		for (size_t v = 0; v < sizeof(isas) / sizeof(isas[0]); v++) {
			if (use(isas[v], 1, NULL) < 0)
				continue;
			for (int th = 1; th <= 2; th++) {
				use(isas[v], th, NULL);
				double hot = time_median(m, 1, X, Y, 0, 41), cold = time_median(m, COPIES, X, Y, 0, 41);
				double mm = time_median(m, 1, X, Y, 64, v == 0 ? 3 : 9);
				double m29 = time_median(m, 1, X, Y, 29, v == 0 ? 3 : 9); /* a prefill's expert batch */
				printf("| %s | %d | %lldx%lld | %.1f | %.1f | %.1f | %.1f |\n", isas[v], th, (long long)rows,
				       (long long)cols, bytes / hot / 1e9, bytes / cold / 1e9,
				       2.0 * (double)(rows * cols) * 64 / mm / 1e9, 2.0 * (double)(rows * cols) * 29 / m29 / 1e9);
				fflush(stdout);
			}
		}
		for (int i = 0; i < COPIES; i++)
			tmat_free(&m[i]);
		free(X);
		free(Y);
	}
	double m1 = mem_bandwidth(1), m2 = mem_bandwidth(2);
	printf("\nweight bytes = codes + scales; median of 41 calls (coli_mat_mul: 9, scalar 3); 'from RAM' "
	       "cycles through %d copies.\nmemory read (memchr, best of 5 x 512 MiB): %.1f GB/s with 1 "
	       "thread, %.1f GB/s with 2\n", 24, m1, m2);
}

int main(void)
{
	__builtin_cpu_init();
	check_choice();
	check_table();
	for (size_t v = 0; v < sizeof(isas) / sizeof(isas[0]); v++)
		check_isa(isas[v]);
	check_q8();
	const char *b = getenv("COLI_KERNEL_BENCH");
	if (b && strcmp(b, "1") == 0)
		bench();
	coli_kernels_close(K);
	T_EXIT();
}
