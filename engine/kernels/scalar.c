/* scalar.c: the reference kernels: plain C, exact weights, double-precision sums. */
#include "kernels/impl.h"

#define CHUNK 256 /* columns decoded at a time (a multiple of 64) */

/* W'[r][c] for c in [c0, c1), c1 - c0 <= CHUNK: the float32 value the encoding defines, one
 * scale group at a time through the encoding table's decode (enc.h). */
static void decode(const coli_mat *W, int64_t r, int64_t c0, int64_t c1, float *w)
{
	const uint8_t *row = W->codes + r * W->row_bytes, *sr = kern_row_scales(W, r);
	const int64_t sw = kern_scale_width(W);
	for (int64_t c = c0; c < c1;) {
		const int64_t b = c / sw, end = (b + 1) * sw < c1 ? (b + 1) * sw : c1;
		kern_enc_of(W->enc)->decode(row, c, end, kern_group_scale(W->enc, sr, b), w + (c - c0));
		c = end;
	}
}

/* Four chains, so the adds overlap; the products are exact in double. */
static double dot(const float *w, const float *x, int64_t n)
{
	double a[4] = {0, 0, 0, 0};
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		for (int j = 0; j < 4; j++)
			a[j] += (double)w[i + j] * x[i + j];
	for (; i < n; i++)
		a[0] += (double)w[i] * x[i];
	return (a[0] + a[1]) + (a[2] + a[3]);
}

static void vec(const coli_mat *W, const float *x, const kern_x *xp, float *y, int64_t r0, int64_t r1)
{
	float w[CHUNK];
	(void)xp;
	for (int64_t r = r0; r < r1; r++) {
		double acc = 0;
		for (int64_t c0 = 0; c0 < W->cols; c0 += CHUNK) {
			int64_t c1 = c0 + CHUNK < W->cols ? c0 + CHUNK : W->cols;
			decode(W, r, c0, c1, w);
			acc += dot(w, x + c0, c1 - c0);
		}
		y[r - r0] = (float)acc;
	}
}

/* Row by row, tokens in blocks of TB with a double accumulator each: a decoded chunk serves
 * every token of the block while the row stays in cache. */
#define TB 32
static void mul(const coli_mat *W, const float *X, const kern_x *XP, int n, float *Y, int64_t r0,
		int64_t r1)
{
	float w[CHUNK];
	double acc[TB];
	(void)XP;
	for (int64_t r = r0; r < r1; r++) {
		for (int t0 = 0; t0 < n; t0 += TB) {
			int nt = n - t0 < TB ? n - t0 : TB;
			for (int t = 0; t < nt; t++)
				acc[t] = 0;
			for (int64_t c0 = 0; c0 < W->cols; c0 += CHUNK) {
				int64_t c1 = c0 + CHUNK < W->cols ? c0 + CHUNK : W->cols;
				decode(W, r, c0, c1, w);
				for (int t = 0; t < nt; t++)
					acc[t] += dot(w, X + (int64_t)(t0 + t) * W->cols + c0, c1 - c0);
			}
			for (int t = 0; t < nt; t++)
				Y[(int64_t)(t0 + t) * W->rows + r] = (float)acc[t];
		}
	}
}

static void vec_t(const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y, int64_t c0,
		  int64_t c1)
{
	float w[CHUNK];
	double acc[CHUNK];
	for (int64_t k0 = c0; k0 < c1; k0 += CHUNK) {
		int64_t k1 = k0 + CHUNK < c1 ? k0 + CHUNK : c1;
		for (int64_t c = k0; c < k1; c++)
			acc[c - k0] = y[c];
		for (int64_t r = 0; r < nr; r++) {
			decode(W, r0 + r, k0, k1, w);
			for (int64_t c = k0; c < k1; c++)
				acc[c - k0] += (double)a[r] * w[c - k0];
		}
		for (int64_t c = k0; c < k1; c++)
			y[c] = (float)acc[c - k0];
	}
}

static void row(const coli_mat *W, int64_t r, float *out)
{
	for (int64_t c0 = 0; c0 < W->cols; c0 += CHUNK)
		decode(W, r, c0, c0 + CHUNK < W->cols ? c0 + CHUNK : W->cols, out + c0);
}

static kern_xtype xtype(const coli_mat *W)
{
	(void)W;
	return KX_F32;
}

static int64_t no_prep(const coli_mat *W)
{
	(void)W;
	return 0;
}

const kern_ops kern_scalar = {
	.name = "scalar",
	.q8 = &kern_q8_scalar,
	.xtype = xtype,
	.prep_bytes = no_prep,
	.prep = NULL,
	.vec = vec,
	.mul = mul,
	.vec_t = vec_t,
	.row = row,
	.small_n = 0,
};
