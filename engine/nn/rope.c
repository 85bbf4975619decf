/* rope.c: rotary frequencies (default, linear, YaRN) and their application. */
#include "nn/rope.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

static double yarn_mscale(double scale, double mscale)
{
	return scale <= 1 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

static double correction_dim(double rotations, int dim, double base, double max_pos)
{
	return (dim * log(max_pos / (rotations * 2 * M_PI))) / (2 * log(base));
}

/* YaRN (HF _compute_yarn_parameters): interpolated and extrapolated frequencies blended by a
 * linear ramp between the correction dims of beta_fast and beta_slow. */
static void yarn(rope *r, const coli_model *m, const coli_rope *p, const float *pos_freqs)
{
	double max_pos = p->original_max_position_embeddings > 0 ? p->original_max_position_embeddings
								 : m->max_position_embeddings;
	double lo = floor(correction_dim(p->beta_fast, r->dim, p->theta, max_pos));
	double hi = ceil(correction_dim(p->beta_slow, r->dim, p->theta, max_pos));
	lo = lo < 0 ? 0 : lo;
	hi = hi > r->dim - 1 ? r->dim - 1 : hi;
	if (lo == hi)
		hi += 0.001;
	for (int i = 0; i < r->dim / 2; i++) {
		float ramp = (float)(((float)i - (float)lo) / (float)(hi - lo));
		ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
		float extra = 1.0f - ramp;
		float inv_extra = 1.0f / pos_freqs[i], inv_inter = 1.0f / ((float)p->factor * pos_freqs[i]);
		r->inv_freq[i] = inv_inter * (1.0f - extra) + inv_extra * extra;
	}
	if (p->attn_factor > 0) /* given (deepseek_v4: 1) */
		r->attn_factor = (float)p->attn_factor;
	else if (p->mscale > 0 && p->mscale_all_dim > 0)
		r->attn_factor = (float)(yarn_mscale(p->factor, p->mscale) / yarn_mscale(p->factor, p->mscale_all_dim));
	else
		r->attn_factor = (float)yarn_mscale(p->factor, 1.0);
}

int rope_init(rope *r, const coli_model *m, coli_err *e)
{
	return rope_init_with(r, m, &m->rope, e);
}

int rope_init_with(rope *r, const coli_model *m, const coli_rope *p, coli_err *e)
{
	memset(r, 0, sizeof(*r));
	r->dim = p->rotary_dim;
	r->interleave = p->interleave;
	r->attn_factor = 1.0f;
	if (!(r->inv_freq = coli_calloc((size_t)(r->dim / 2 + 1), sizeof(float), e)))
		return -1;
	float pos_freqs[4096];
	if (r->dim / 2 > 4096)
		return coli_errf(e, COLI_EDATA, "rotary dim %d too large", r->dim);
	for (int i = 0; i < r->dim / 2; i++) {
		pos_freqs[i] = powf((float)p->theta, (float)(2 * i) / (float)r->dim);
		r->inv_freq[i] = 1.0f / pos_freqs[i];
	}
	if (p->scaling == COLI_ROPE_LINEAR)
		for (int i = 0; i < r->dim / 2; i++)
			r->inv_freq[i] /= (float)p->factor;
	if (p->scaling == COLI_ROPE_YARN)
		yarn(r, m, p, pos_freqs);
	return 0;
}

void rope_release(rope *r)
{
	free(r->inv_freq);
	r->inv_freq = NULL;
}

void rope_apply(const rope *r, float *x, int n_heads, int stride, int pos)
{
	int half = r->dim / 2;
	for (int i = 0; i < half; i++) {
		float f = r->inv_freq[i] * (float)pos;
		float c = cosf(f) * r->attn_factor, s = sinf(f) * r->attn_factor; /* once for all the heads */
		int ia = r->interleave ? 2 * i : i, ib = r->interleave ? 2 * i + 1 : i + half;
		for (int h = 0; h < n_heads; h++) {
			float *a = x + (int64_t)h * stride + ia, *b = x + (int64_t)h * stride + ib;
			float x0 = *a, x1 = *b;
			*a = x0 * c - x1 * s;
			*b = x1 * c + x0 * s;
		}
	}
}

double rope_mla_scale(const coli_model *m)
{
	if (m->rope.scaling != COLI_ROPE_YARN || m->rope.mscale_all_dim <= 0)
		return 1.0;
	double s = yarn_mscale(m->rope.factor, m->rope.mscale_all_dim);
	return s * s;
}
