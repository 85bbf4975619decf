/* test_exact.c: the exactness bound of the float32 kernels (kernels.h), checked with the
 * activations real models have: a few channels 10^4 times the median (and some 10^-4 of it).
 *
 * The bound: for every output y[r] = sum_c W'[r][c] x[c] (W' the value the encoding defines,
 * coli_mat_row), every variant and product gives
 *     |y - y_exact| <= gamma(2k + 4) * sum_c m[r][c] |x[c]|,   gamma(j) = j u / (1 - j u), u = 2^-24,
 * with k the nonzero activations and m = |W'| (q4: |W'| + 8 |s|, since its prepared path sums
 * q x and 8 x apart before the group scale s): the worst case of float32 arithmetic over the
 * products and sums of a row, whatever their order (a zero adds nothing and rounds nothing; the
 * 4: a group's scale and q4's offset). y_exact is the sum in double precision. Two sets of
 * activations: dense ones with outlier channels (k = 4096: the bound is loose, about 2^-11 of the
 * magnitudes, and the kernels stay within a hundredth of it), and sparse ones, an outlier and
 * three ordinary values in each of two blocks of 64 (k = 8: the bound is about 2^-20 of the
 * magnitudes, so each product must carry its activation at float32 precision): there 8-bit
 * activations break it, which the test checks, so a kernel that rounded its activations so would
 * fail; the opt-in --precision q8 kernels break it too (checked: they are not exact). Variants the
 * CPU lacks print SKIP. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "layout.h"
#include "quant.h"
#include "t.h"

#define ROWS 48
#define COLS 4096
#define MAXT 64

static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng(void) { return t_rand(&rng_state); }

static float unit(void) { return (float)(rng() % 20001) / 10000.0f - 1.0f; }

/* Tokens of COLS activations: values in [-1, 1], every 61st channel x 10^4 (alternating sign), every
 * 97th x 10^-4: the outlier channels of real models' hidden states. */
static void dense(float *X, int n)
{
	for (int t = 0; t < n; t++)
		for (int c = 0; c < COLS; c++) {
			float v = unit();
			if (c % 61 == 7)
				v = (c / 61 % 2 ? -1e4f : 1e4f) * (0.5f + 0.5f * fabsf(v));
			else if (c % 97 == 11)
				v *= 1e-4f;
			X[(int64_t)t * COLS + c] = v;
		}
}

/* Tokens of 8 nonzero activations: in each of two blocks of 64 columns, an outlier (10^4) and three
 * values in [-1, 1] (distinct columns). */
static void sparse(float *X, int n)
{
	memset(X, 0, sizeof(float) * (size_t)n * COLS);
	for (int t = 0; t < n; t++) {
		float *x = X + (int64_t)t * COLS;
		int b0 = (int)(rng() % (COLS / 64)), b1 = (b0 + 1 + (int)(rng() % (COLS / 64 - 1))) % (COLS / 64);
		for (int j = 0; j < 8; j++) {
			int b = j < 4 ? b0 : b1, c;
			do
				c = b * 64 + (int)(rng() % 64);
			while (x[c] != 0);
			x[c] = j % 4 == 0 ? 1e4f * (rng() % 2 ? 1 : -1) : unit() + 2e-3f;
		}
	}
}

/* Weights of moderate size in the encoding: q4 and q8 rows quantized from floats in [-1, 1] by
 * coli's own quantizers (scales as a conversion makes them), fp8 and fp4 random codes (fp8 never
 * NaN) under random block scales, the element formats rounded from the floats. */
static void fill(const coli_blob *b, uint8_t *buf)
{
	coli_mat W = coli_mat_of(b, buf);
	float *w = malloc(sizeof(float) * COLS);
	int64_t groups = (COLS + 63) / 64;
	for (int64_t r = 0; r < ROWS; r++) {
		uint8_t *row = buf + r * W.row_bytes;
		uint16_t *sc = (uint16_t *)(buf + b->scales_off) + r * groups;
		for (int c = 0; c < COLS; c++)
			w[c] = unit();
		if (b->enc == COLI_ENC_Q4)
			coli_q4_quantize_row(w, COLS, row, sc);
		else if (b->enc == COLI_ENC_Q8)
			coli_q8_quantize_row(w, COLS, (int8_t *)row, sc);
		for (int c = 0; c < COLS && b->enc == COLI_ENC_FP8; c++)
			row[c] = (uint8_t)(rng() % 0x7F | (rng() % 2) << 7); /* 0x7F, 0xFF: NaN */
		for (int c = 0; c < COLS && b->enc == COLI_ENC_F32; c++)
			memcpy(row + 4 * c, &w[c], 4);
		for (int c = 0; c < COLS && (b->enc == COLI_ENC_BF16 || b->enc == COLI_ENC_F16); c++) {
			uint32_t u;
			memcpy(&u, &w[c], 4);
			uint16_t h = b->enc == COLI_ENC_BF16 ? (uint16_t)(u >> 16) : coli_f32_to_f16(w[c]);
			memcpy(row + 2 * c, &h, 2);
		}
	}
	for (uint64_t i = 0; b->enc == COLI_ENC_FP4 && i < ROWS * (uint64_t)W.row_bytes; i++)
		buf[i] = (uint8_t)rng(); /* every e2m1 code is a number */
	for (uint64_t i = 0; b->enc == COLI_ENC_FP4 && i < b->scales_bytes; i++)
		buf[b->scales_off + i] = (uint8_t)(118 + rng() % 8); /* 2^-9 .. 2^-2 */
	for (uint64_t i = 0; b->enc == COLI_ENC_FP8 && i < b->scales_bytes / 4; i++) {
		float sc = 0.001f * (float)(1 + rng() % 100);
		memcpy(buf + b->scales_off + 4 * i, &sc, 4);
	}
	free(w);
}

/* Row r's magnitudes m[c] (the bound's terms) from its decoded values w. */
static void magnitudes(const coli_mat *W, int64_t r, const float *w, double *m)
{
	for (int64_t c = 0; c < W->cols; c++) {
		m[c] = fabs((double)w[c]);
		if (W->enc == COLI_ENC_Q4) {
			uint16_t h;
			memcpy(&h, W->scales + 2 * (r * ((W->cols + 63) / 64) + c / 64), 2);
			m[c] += 8.0 * fabs((double)coli_f16_to_f32(h));
		}
	}
}

static double gamma_of(int64_t j)
{
	double u = ldexp(1.0, -24);
	return (double)j * u / (1 - (double)j * u);
}

/* The worst ratio |y - exact| / bound over the rows and tokens of Y (each token's x in X). */
static double worst(const coli_mat *W, const float *Wd, const float *X, const float *Y, int n)
{
	double *m = malloc(sizeof(double) * COLS), r_worst = 0;
	for (int64_t r = 0; r < W->rows; r++) {
		magnitudes(W, r, Wd + r * COLS, m);
		for (int t = 0; t < n; t++) {
			const float *x = X + (int64_t)t * COLS;
			double exact = 0, mag = 0;
			int64_t k = 0;
			for (int c = 0; c < COLS; c++) {
				exact += (double)Wd[r * COLS + c] * (double)x[c];
				mag += m[c] * fabs((double)x[c]);
				k += x[c] != 0;
			}
			double ratio = fabs((double)Y[(int64_t)t * W->rows + r] - exact) / (gamma_of(2 * k + 4) * mag);
			r_worst = ratio > r_worst ? ratio : r_worst;
		}
	}
	free(m);
	return r_worst;
}

/* x as 8-bit activations carry it: per block of 64, int8 codes of max |x| / 127 (what q8 does,
 * kernels/q8.h, float32 scales). */
static void to_q8(const float *x, float *out)
{
	for (int b = 0; b < COLS; b += 64) {
		float mx = 0;
		for (int c = b; c < b + 64; c++)
			mx = fabsf(x[c]) > mx ? fabsf(x[c]) : mx;
		float d = mx / 127;
		for (int c = b; c < b + 64; c++)
			out[c] = d > 0 ? d * nearbyintf(x[c] / d) : 0;
	}
}

static const int tokens[] = {1, 3, 17, 64}; /* matrix-vector, the few-token kernels, the GEMM */

/* The worst ratio to the bound of k's products of W over 1, 3, 17 and 64 tokens of X. */
static double products_worst(coli_kernels *k, const coli_mat *W, const float *Wd, const float *X, float *Y)
{
	double w = 0;
	for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
		if (tokens[i] == 1)
			coli_mat_vec(k, W, X, Y);
		else
			coli_mat_mul(k, W, X, tokens[i], Y);
		double got = worst(W, Wd, X, Y, tokens[i]);
		w = got > w ? got : w;
	}
	return w;
}

static const char *const encs[] = {"f32", "bf16", "f16", "fp8", "q8", "q4", "fp4"};
static const char *const isas[] = {"scalar", "avx2", "avx512", "amx"};
static void check_enc(const char *name)
{
	coli_err e = {0, ""};
	coli_blob b;
	coli_enc enc = (coli_enc)coli_enc_parse(name);
	int64_t block[2] = {enc == COLI_ENC_FP8 ? 128 : 0, enc == COLI_ENC_FP8 ? 128 : 0};
	int ok = (int)enc >= 0 && coli_blob_init(&b, enc, ROWS, COLS, block, &e) == 0;
	T_CHECK(name, ok, "encoding %s: %s", name, e.msg);
	if (!ok)
		return;
	uint8_t *buf = aligned_alloc(64, (b.nbytes + 63) / 64 * 64);
	float *Wd = malloc(sizeof(float) * ROWS * COLS), *X = malloc(sizeof(float) * MAXT * COLS);
	float *Y = malloc(sizeof(float) * MAXT * ROWS);
	fill(&b, buf);
	coli_mat W = coli_mat_of(&b, buf);
	coli_kernels *ref = NULL;
	if (coli_kernels_open(&ref, "scalar", 1, &e) == 0)
		for (int64_t r = 0; r < ROWS; r++)
			coli_mat_row(ref, &W, r, Wd + r * COLS);
	coli_kernels_close(ref);
	for (size_t v = 0; v < sizeof(isas) / sizeof(isas[0]); v++) {
		coli_kernels *k = NULL;
		char what[160];
		if (coli_kernels_open(&k, isas[v], 1, &e) < 0 || coli_kernels_reserve(k, COLS, &e) < 0) {
			printf("SKIP exact bound %s %s: %s\n", isas[v], name, e.msg);
			coli_kernels_close(k);
			continue;
		}
		for (int set = 0; set < 2; set++) {
			(set ? sparse : dense)(X, MAXT);
			double w = products_worst(k, &W, Wd, X, Y);
			snprintf(what, sizeof(what), "exact bound %s %s: 1, 3, 17 and 64 tokens of %s activations, every output "
				 "within gamma(2k + 4) sum m|x| of the exact sum", isas[v], name,
				 set ? "sparse (8 nonzero, 2 outliers)" : "dense (outlier channels)");
			T_CHECK(what, w <= 1.0, "worst error %.3g of the bound", w);
			if (getenv("COLI_EXACT_SHOW"))
				printf("  %s %s %s: worst error %.3g of the bound\n", isas[v], name, set ? "sparse" : "dense", w);
		}
		coli_kernels_close(k);
	}
	/* The opt-in 8-bit activations (--precision q8, the int4 and int8 products) are outside it. */
	coli_kernels *q8 = NULL;
	if ((enc == COLI_ENC_Q4 || enc == COLI_ENC_Q8) && coli_kernels_open(&q8, NULL, 1, &e) == 0 &&
	    coli_kernels_reserve(q8, COLS, &e) == 0) {
		char what[160];
		coli_kernels_set_precision(q8, COLI_PREC_Q8);
		sparse(X, MAXT);
		double w = products_worst(q8, &W, Wd, X, Y);
		snprintf(what, sizeof(what), "exact bound %s: --precision q8 (%s) breaks it on sparse activations (opt-in, "
			 "not exact)", name, coli_kernels_isa(q8));
		T_CHECK(what, w > 1.0, "worst error %.3g of the bound", w);
	}
	coli_kernels_close(q8);
	/* The control: the exact sum over the sparse activations made 8-bit breaks the bound, so a
	 * kernel that rounded its activations so would fail above. */
	sparse(X, MAXT);
	float *xq = malloc(sizeof(float) * COLS);
	for (int t = 0; t < MAXT; t++) {
		to_q8(X + (int64_t)t * COLS, xq);
		for (int64_t r = 0; r < ROWS; r++) {
			double s = 0;
			for (int c = 0; c < COLS; c++)
				s += (double)Wd[r * COLS + c] * (double)xq[c];
			Y[(int64_t)t * ROWS + r] = (float)s;
		}
	}
	free(xq);
	char what[160];
	double w = worst(&W, Wd, X, Y, MAXT);
	snprintf(what, sizeof(what), "exact bound %s: 8-bit sparse activations break it (the check can fail)", name);
	T_CHECK(what, w > 1.0, "worst error %.3g of the bound", w);
	free(buf), free(Wd), free(X), free(Y);
}

int main(void)
{
	__builtin_cpu_init();
	for (size_t i = 0; i < sizeof(encs) / sizeof(encs[0]); i++)
		check_enc(encs[i]);
	T_EXIT();
}
