/* test_gdn.c: the Gated DeltaNet's delta rule (engine/nn/gdn.c) on random inputs of a real
 * model's scale: decode's one-pass step on the transposed state against the two-pass step of the
 * reference layout, the chunked form against the recurrent one (several chunk boundaries, lengths
 * off the chunk size, a non-zero starting state, strong and weak decays), both against a double
 * precision recurrence, and coli_gdn_rule's heads (key heads shared by value heads, threads). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "kernels.h"
#include "model.h"
#include "nn/gdn.h"
#include "t.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* Uniform in [0, 1). */
static double uni(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* Roughly N(0, 1): the sum of four uniforms, centred and scaled. */
static float gauss(void)
{
	return (float)((uni() + uni() + uni() + uni() - 2.0) * 1.7320508075688772);
}

/* n rows of d floats, rows `stride` apart: random, each L2-normalised and times scale (q, k). */
static void unit_rows(float *x, int n, int d, int64_t stride, float scale)
{
	for (int t = 0; t < n; t++) {
		float *r = x + t * stride, ss = 0;
		for (int i = 0; i < d; i++)
			r[i] = gauss(), ss += r[i] * r[i];
		for (int i = 0; i < d; i++)
			r[i] *= scale / sqrtf(ss + 1e-6f);
	}
}

/* One head's inputs over n tokens, as the model makes them, in rows [q | k | v] (a conv output's
 * layout): q, k unit (q / sqrt(dk)), v about N(0, 1), g = -exp(A_log) softplus(a + dt_bias)
 * mostly small with a few strong decays, beta in (0, 1); St a state as after many tokens. */
typedef struct seq {
	float *y, *q, *k, *v, *g, *beta, *St;
	int n, dk, dv, stride;
} seq;

static seq seq_make(int n, int dk, int dv)
{
	int w = 2 * dk + dv;
	seq s = {malloc((size_t)n * w * 4), NULL, NULL, NULL, malloc((size_t)n * 4), malloc((size_t)n * 4),
		 malloc((size_t)dk * dv * 4), n, dk, dv, w};
	s.q = s.y, s.k = s.y + dk, s.v = s.y + 2 * dk;
	unit_rows(s.q, n, dk, w, 1.0f / sqrtf((float)dk));
	unit_rows(s.k, n, dk, w, 1.0f);
	for (int t = 0; t < n; t++)
		for (int j = 0; j < dv; j++)
			s.v[t * w + j] = gauss();
	for (int t = 0; t < n; t++) {
		float a = 2.0f * gauss() - 4.0f; /* softplus(a) about 0.02 .. 1 */
		s.g[t] = -(float)(1.0 + 15.0 * uni()) * log1pf(expf(a)) * (t % 37 == 5 ? 40.0f : 1.0f);
		s.beta[t] = 1.0f / (1.0f + expf(-2.0f * gauss()));
	}
	for (int64_t i = 0; i < (int64_t)dk * dv; i++)
		s.St[i] = 0.3f * gauss();
	return s;
}

static void seq_free(seq *s)
{
	free(s->y), free(s->g), free(s->beta), free(s->St);
}

static gdn_seq view(const seq *s, float *o)
{
	return (gdn_seq){s->q, s->k, s->v, s->g, s->beta, o, s->stride, 1, s->dv, s->dk, s->dv};
}

/* The recurrence in double on S [dk][dv] (the reference's layout and order): outputs o[n][dv],
 * the final state transposed into St. */
static void reference(const seq *s, double *o, double *St)
{
	int dk = s->dk, dv = s->dv;
	double *S = malloc((size_t)dk * dv * sizeof(double)), *mem = malloc((size_t)dv * sizeof(double));
	for (int d = 0; d < dk; d++)
		for (int j = 0; j < dv; j++)
			S[d * dv + j] = s->St[j * dk + d];
	for (int t = 0; t < s->n; t++) {
		const float *q = s->q + t * s->stride, *k = s->k + t * s->stride, *v = s->v + t * s->stride;
		double decay = exp(s->g[t]);
		for (int j = 0; j < dv; j++)
			mem[j] = 0;
		for (int d = 0; d < dk; d++)
			for (int j = 0; j < dv; j++)
				mem[j] += (S[d * dv + j] *= decay) * k[d];
		for (int j = 0; j < dv; j++)
			mem[j] = (v[j] - mem[j]) * s->beta[t];
		for (int j = 0; j < dv; j++)
			o[t * dv + j] = 0;
		for (int d = 0; d < dk; d++)
			for (int j = 0; j < dv; j++)
				o[t * dv + j] += (S[d * dv + j] += k[d] * mem[j]) * q[d];
	}
	for (int d = 0; d < dk; d++)
		for (int j = 0; j < dv; j++)
			St[j * dk + d] = S[d * dv + j];
	free(S), free(mem);
}

/* max |a - b| / max(max |b|, 1e-30) over n values. */
static double rel_diff(const float *a, const double *b, int64_t n)
{
	double d = 0, m = 1e-30;
	for (int64_t i = 0; i < n; i++)
		d = fmax(d, fabs(a[i] - b[i])), m = fmax(m, fabs(b[i]));
	return d / m;
}

static double rel_diff_f(const float *a, const float *b, int64_t n)
{
	double d = 0, m = 1e-30;
	for (int64_t i = 0; i < n; i++)
		d = fmax(d, fabs((double)a[i] - b[i])), m = fmax(m, fabs(b[i]));
	return d / m;
}

/* The chunked form against the recurrent one and both against double precision. */
static void check_chunked(int n, int dk, int dv)
{
	seq s = seq_make(n, dk, dv);
	int64_t no = (int64_t)n * dv, ns = (int64_t)dk * dv;
	float *o1 = malloc((size_t)no * 4), *o2 = malloc((size_t)no * 4);
	float *S1 = malloc((size_t)ns * 4), *S2 = malloc((size_t)ns * 4);
	float *scratch = malloc(gdn_chunk_floats(dk, dv) * sizeof(float));
	double *ro = malloc((size_t)no * sizeof(double)), *rS = malloc((size_t)ns * sizeof(double));
	memcpy(S1, s.St, (size_t)ns * 4), memcpy(S2, s.St, (size_t)ns * 4);
	gdn_seq v1 = view(&s, o1), v2 = view(&s, o2);
	gdn_recurrent(S1, &v1, n);
	gdn_chunked(S2, &v2, n, scratch);
	reference(&s, ro, rS);
	double dout = rel_diff_f(o2, o1, no), dst = rel_diff_f(S2, S1, ns);
	double eo1 = rel_diff(o1, ro, no), eo2 = rel_diff(o2, ro, no), es1 = rel_diff(S1, rS, ns), es2 = rel_diff(S2, rS, ns);
	char name[160];
	snprintf(name, sizeof(name), "gdn: chunked = recurrent within 1e-4 (relative), %d tokens, dk %d, dv %d", n, dk, dv);
	T_CHECK(name, dout < 1e-4 && dst < 1e-4, "outputs %g, state %g", dout, dst);
	snprintf(name, sizeof(name), "gdn: both within 1e-4 of double precision, %d tokens, dk %d, dv %d", n, dk, dv);
	T_CHECK(name, fmax(fmax(eo1, eo2), fmax(es1, es2)) < 1e-4,
		"outputs: recurrent %g chunked %g; state: recurrent %g chunked %g", eo1, eo2, es1, es2);
	free(o1), free(o2), free(S1), free(S2), free(scratch), free(ro), free(rS);
	seq_free(&s);
}

/* decode's step against the two-pass step of the reference layout S [dk][dv] (float). */
static void check_step(int dk, int dv)
{
	seq s = seq_make(3, dk, dv);
	float *S = malloc((size_t)dk * dv * 4), *mem = malloc((size_t)dv * 4), *want = malloc((size_t)dv * 4);
	float *o = malloc((size_t)dv * 4);
	double worst = 0;
	for (int d = 0; d < dk; d++)
		for (int j = 0; j < dv; j++)
			S[d * dv + j] = s.St[j * dk + d];
	for (int t = 0; t < s.n; t++) {
		const float *q = s.q + t * s.stride, *k = s.k + t * s.stride, *v = s.v + t * s.stride;
		float decay = expf(s.g[t]);
		memset(mem, 0, (size_t)dv * 4), memset(want, 0, (size_t)dv * 4);
		for (int d = 0; d < dk; d++) /* pass 1: decay, S^T k */
			for (int j = 0; j < dv; j++)
				mem[j] += (S[d * dv + j] *= decay) * k[d];
		for (int j = 0; j < dv; j++)
			mem[j] = (v[j] - mem[j]) * s.beta[t];
		for (int d = 0; d < dk; d++) /* pass 2: the update, S^T q */
			for (int j = 0; j < dv; j++)
				want[j] += (S[d * dv + j] += k[d] * mem[j]) * q[d];
		gdn_step(s.St, q, k, v, s.g[t], s.beta[t], dk, dv, o);
		worst = fmax(worst, rel_diff_f(o, want, dv));
	}
	float *St = malloc((size_t)dk * dv * 4);
	for (int d = 0; d < dk; d++)
		for (int j = 0; j < dv; j++)
			St[j * dk + d] = S[d * dv + j];
	double ds = rel_diff_f(s.St, St, (int64_t)dk * dv);
	char name[128];
	snprintf(name, sizeof(name), "gdn: one-pass step = two-pass step within 1e-6 (relative), dk %d, dv %d", dk, dv);
	T_CHECK(name, worst < 1e-6 && ds < 1e-6, "outputs %g, state %g", worst, ds);
	free(S), free(mem), free(want), free(o), free(St);
	seq_free(&s);
}

/* coli_gdn_rule over the heads of a layer (4 value heads on 2 key heads): each head as
 * gdn_recurrent / gdn_chunked on its own columns gives, with 1 thread and with 2, the same bits. */
static void check_rule(int n, int chunked)
{
	coli_model c;
	memset(&c, 0, sizeof(c));
	c.lin_k_heads = 2, c.lin_v_heads = 4, c.lin_k_dim = 32, c.lin_v_dim = 48;
	int dk = 32, dv = 48, Hv = 4, kd = 2 * dk, C = 2 * kd + Hv * dv, vd = Hv * dv;
	float *Y = malloc((size_t)n * C * 4), *g = malloc((size_t)n * Hv * 4), *beta = malloc((size_t)n * Hv * 4);
	float *S[3], *O[3], *scratch = malloc(coli_gdn_scratch_floats(&c) * sizeof(float));
	for (int t = 0; t < n; t++) {
		unit_rows(Y + t * C, 2 * 2, dk, dk, 1.0f);
		for (int i = 2 * kd; i < C; i++)
			Y[t * C + i] = gauss();
		for (int h = 0; h < Hv; h++)
			g[t * Hv + h] = -0.1f * (float)uni(), beta[t * Hv + h] = (float)uni();
	}
	for (int i = 0; i < 3; i++) {
		S[i] = malloc((size_t)Hv * dk * dv * 4), O[i] = calloc((size_t)n * vd, 4);
		for (int64_t x = 0; x < (int64_t)Hv * dk * dv; x++)
			S[i][x] = i ? S[0][x] : 0.1f * gauss();
	}
	for (int h = 0; h < Hv; h++) { /* head by head: value head h reads key head h / 2 */
		const float *q = Y + h / 2 * dk;
		gdn_seq s = {q, q + kd, Y + 2 * kd + h * dv, g + h, beta + h, O[0] + h * dv, C, Hv, vd, dk, dv};
		if (chunked)
			gdn_chunked(S[0] + h * dk * dv, &s, n, scratch);
		else
			gdn_recurrent(S[0] + h * dk * dv, &s, n);
	}
	int same = 1;
	for (int threads = 1; threads <= 2; threads++) {
		coli_kernels *kc = NULL;
		if (coli_kernels_open(&kc, NULL, threads, NULL) < 0)
			same = 0;
		else
			coli_gdn_rule(kc, &c, S[threads], Y, g, beta, n, chunked ? scratch : NULL, O[threads]);
		same &= !memcmp(S[threads], S[0], (size_t)Hv * dk * dv * 4) && !memcmp(O[threads], O[0], (size_t)n * vd * 4);
		coli_kernels_close(kc);
	}
	char name[128];
	snprintf(name, sizeof(name), "gdn: coli_gdn_rule's heads (%s, %d tokens, 1 and 2 threads) are the per-head bits",
		 chunked ? "chunked" : "recurrent", n);
	T_CHECK(name, same, "differ");
	for (int i = 0; i < 3; i++)
		free(S[i]), free(O[i]);
	free(Y), free(g), free(beta), free(scratch);
}

int main(void)
{
	check_step(128, 128);
	check_step(24, 40);
	static const int lens[] = {1, 9, 31, 32, 33, 63, 64, 65, 200, 512};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		check_chunked(lens[i], 128, 128);
	check_chunked(150, 16, 16);
	check_chunked(150, 24, 40);
	check_rule(3, 0);
	check_rule(150, 1);
	T_EXIT();
}
