/* routing.c: the routing knobs (--zipf, --predict) turned into per-layer scales and biases.
 *
 * Popularity: expert of popularity rank r (a random permutation per layer) gets a selection
 * bias b = gamma * ln(E / r) >= 0: sigmoid routers store it as e_score_correction_bias; softmax
 * routers have no bias tensor, so every embedding carries a fixed component c along a unit
 * vector u and router row e gets b_e * R_l / c along u, which adds ~b_e to its logit.
 * Predictability: the next router sees the current hidden state plus what layer l's MoE and
 * layer l+1's attention add. Those additions are kept small and random (s_out, s_down), and each
 * down projection of layer l also writes, column j, alpha * s_j * (unit row e_j of layer l+1's
 * router): a perturbation of layer l+1's logits that prediction from layer l cannot see, of a
 * relative size set by alpha without growing the residual stream much.
 * gamma and the logit noise r that give the targets are found by bisection on a Monte Carlo of
 * the router itself (Gaussian logits of sd 2, the real selection code); the per-layer scales
 * then follow from the expected norms. measure.c reports what the weights really do.
 */
#include "synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MC_N 4096
#define LOGIT_SD 2.0f   /* router rows N(0, 4/H) on an input of rms 1 */
#define U_C 4.0f        /* embedding component along u (softmax routers) */
#define R_MIN 1e-3
#define R_MAX 3.0

/* Monte Carlo of one router: N tokens of Gaussian logits. */
typedef struct mc {
	const coli_model *m;
	int N, E, k;
	float *Z, *D, *nn; /* [N x E] logits / sd, [N x E] perturbation, [N] u-projection noise */
	int *perm;         /* popularity rank -> expert */
	float eps;         /* relative sd of the u projection (softmax routers) */
	float *sw, *het;   /* [N] sum of squared weights; relative size of the perturbation */
	float *bias, *z, *tmp, *w;
	int *i0, *i1;
} mc;

/* ---- Monte Carlo -------------------------------------------------------------------------- */

static void perm_fill(int *perm, int E, uint64_t key)
{
	for (int i = 0; i < E; i++)
		perm[i] = i;
	for (int i = E - 1; i > 0; i--) {
		int j = (int)(synth_rand64(key, (uint64_t)i) % (uint64_t)(i + 1));
		int t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

static void bias_fill(float *bias, const int *perm, int E, double gamma)
{
	for (int r = 0; r < E; r++)
		bias[perm[r]] = (float)(gamma * log((double)E / (r + 1)));
}

static int mc_init(mc *c, const coli_model *m, uint64_t seed, coli_err *e)
{
	int E = m->n_experts;
	memset(c, 0, sizeof(*c));
	c->m = m;
	c->E = E;
	c->k = m->top_k;
	c->N = MC_N;
	size_t ne = (size_t)c->N * (size_t)E;
	c->Z = coli_malloc(ne * sizeof(float), e);
	c->D = c->Z ? coli_malloc(ne * sizeof(float), e) : NULL;
	c->nn = c->D ? coli_malloc((size_t)c->N * sizeof(float), e) : NULL;
	c->sw = c->nn ? coli_malloc((size_t)c->N * 2 * sizeof(float), e) : NULL;
	c->perm = c->sw ? coli_malloc((size_t)E * sizeof(int), e) : NULL;
	c->bias = c->perm ? coli_malloc((size_t)E * 5 * sizeof(float), e) : NULL;
	c->i0 = c->bias ? coli_malloc((size_t)E * 2 * sizeof(int), e) : NULL;
	if (!c->i0)
		return -1;
	c->z = c->bias + E;
	c->tmp = c->z + E;
	c->w = c->tmp + 2 * E;
	c->i1 = c->i0 + E;
	synth_gauss_fill(synth_key(seed, "synth.mc.logits"), 0, c->Z, (int64_t)ne);
	synth_gauss_fill(synth_key(seed, "synth.mc.perturb"), 0, c->D, (int64_t)ne);
	synth_gauss_fill(synth_key(seed, "synth.mc.u"), 0, c->nn, c->N);
	c->het = c->sw + c->N;
	for (int n = 0; n < c->N; n++)
		c->het[n] = 1;
	perm_fill(c->perm, E, synth_key(seed, "synth.mc.perm"));
	return 0;
}

static void mc_release(mc *c)
{
	free(c->Z);
	free(c->D);
	free(c->nn);
	free(c->sw);
	free(c->perm);
	free(c->bias);
	free(c->i0);
}

/* Routes token n with perturbation r (logit-sd units) into idx (and c->w when want_w). */
static void mc_route(mc *c, int n, double r, int *idx, int want_w)
{
	const float *Z = c->Z + (size_t)n * c->E, *D = c->D + (size_t)n * c->E;
	int sig = synth_biased(c->m);
	for (int i = 0; i < c->E; i++) {
		c->z[i] = LOGIT_SD * (Z[i] + (float)r * c->het[n] * D[i]);
		if (!sig)
			c->z[i] += c->bias[i] * (1.0f + c->eps * c->nn[n]);
	}
	synth_route(c->m, c->z, sig ? c->bias : NULL, idx, want_w ? c->w : NULL, c->tmp);
}

/* Per-expert counts and mean sum of squared routing weights of the routing a layer really
 * makes: its logits carry the perturbation r from the previous layer's output. */
static void mc_counts(mc *c, double gamma, double r, double *counts, double *sumw2)
{
	bias_fill(c->bias, c->perm, c->E, gamma);
	memset(counts, 0, (size_t)c->E * sizeof(*counts));
	double s2 = 0;
	for (int n = 0; n < c->N; n++) {
		mc_route(c, n, r, c->i0, sumw2 != NULL);
		c->sw[n] = 0;
		for (int j = 0; j < c->k; j++) {
			counts[c->i0[j]] += 1;
			c->sw[n] += sumw2 ? c->w[j] * c->w[j] : 0;
		}
		s2 += c->sw[n];
	}
	if (sumw2)
		*sumw2 = s2 / c->N;
}

/* The perturbation a token receives scales with what the previous layer's experts wrote for
 * it: sum_k w_k^2 F (+ F of the shared experts); another sample stands in for the previous
 * layer's routing of the token. */
static void mc_heterogeneity(mc *c, double sumw2)
{
	double F = c->m->moe_intermediate_size, Fsh = F * c->m->n_shared_experts;
	for (int n = 0; n < c->N; n++)
		c->het[n] = (float)sqrt((F * c->sw[(n + c->N / 2) % c->N] + Fsh) / (F * sumw2 + Fsh));
}

/* Mean fraction of the perturbed top-k that the unperturbed routing also picks. */
static double mc_recall(mc *c, double r)
{
	double hit = 0;
	for (int n = 0; n < c->N; n++) {
		mc_route(c, n, 0, c->i0, 0);
		mc_route(c, n, r, c->i1, 0);
		for (int a = 0; a < c->k; a++)
			for (int b = 0; b < c->k; b++)
				hit += c->i0[a] == c->i1[b];
	}
	return hit / ((double)c->N * c->k);
}

/* gamma whose routing (perturbed by r) has Zipf fit `target` (bisection; the fit grows with
 * gamma). */
static double fit_gamma(mc *c, double target, double r, double *counts, double *got)
{
	int sig = synth_biased(c->m);
	double lo = 0, hi = (sig ? 4.0 : 20.0) * sqrt(1 + r * r) / log((double)c->E);
	if (target <= 0) {
		mc_counts(c, 0, r, counts, NULL);
		*got = synth_zipf_fit(counts, c->E);
		return 0;
	}
	for (int it = 0; it < 18; it++) {
		double mid = 0.5 * (lo + hi);
		mc_counts(c, mid, r, counts, NULL);
		if (synth_zipf_fit(counts, c->E) < target)
			lo = mid;
		else
			hi = mid;
	}
	mc_counts(c, hi, r, counts, NULL);
	*got = synth_zipf_fit(counts, c->E);
	return hi;
}

/* Logit perturbation r (in logit-sd units) whose recall is `target`, searched in log space. */
static double fit_r(mc *c, double target, double *got, int *reachable)
{
	double lo = log(R_MIN), hi = log(R_MAX);
	*reachable = 1;
	if (mc_recall(c, R_MIN) <= target) {
		*got = mc_recall(c, R_MIN);
		return R_MIN;
	}
	if (mc_recall(c, R_MAX) >= target) {
		*reachable = 0;
		*got = mc_recall(c, R_MAX);
		return R_MAX;
	}
	for (int it = 0; it < 16; it++) {
		double mid = 0.5 * (lo + hi);
		if (mc_recall(c, exp(mid)) > target)
			lo = mid;
		else
			hi = mid;
	}
	*got = mc_recall(c, exp(0.5 * (lo + hi)));
	return exp(0.5 * (lo + hi));
}

/* ---- schedule ------------------------------------------------------------------------------ */

/* E[silu(g)^2] for g ~ N(0, var) (Simpson's rule). */
static double silu_sq(double var)
{
	int n = 4000;
	double sd = sqrt(var), a = -10 * sd, h = 20 * sd / n, s = 0;
	for (int i = 0; i <= n; i++) {
		double g = a + i * h, f = g / (1 + exp(-g));
		double v = f * f * exp(-g * g / (2 * var)) / sqrt(2 * M_PI * var);
		s += v * (i == 0 || i == n ? 1 : i % 2 ? 4 : 2);
	}
	return s * h / 3;
}

/* Per-layer scales from the calibrated logit perturbation r and sum of squared weights. */
typedef struct sched_in {
	double r2, sumw2, sumw2_0, ea2, c; /* sumw2_0: layers whose input is not perturbed */
} sched_in;

static int next_is_moe(const coli_model *m, int l)
{
	return l + 1 < m->n_layers && m->is_moe[l] && m->is_moe[l + 1];
}

/* Fills s_out, s_down, alpha and u_gain of every layer; returns the mean relative sd of the
 * u projection over MoE layers, which the Monte Carlo uses. R2 tracks the residual's mean
 * square; iso the part spread over all directions (the aligned part lies in router subspaces,
 * orthogonal to u). */
static double schedule(synth_plan *p, const sched_in *in)
{
	const coli_model *m = p->m;
	double H = m->hidden_size, E = m->n_experts, F = m->moe_intermediate_size;
	double Fsh = F * m->n_shared_experts, sh = m->n_shared_experts > 0;
	double R2 = 1 + in->c * in->c / H, iso = 1, u2 = 0.5 * fmin(in->r2, 0.05) * R2;
	double a2 = u2 / 2, m2 = u2 / 2, eps = 0, last_al = 0;
	int nm = 0, perturbed = 0;
	for (int l = 0; l < p->n_layers; l++) {
		synth_layer_plan *lp = &p->layer[l];
		double sw2 = perturbed ? in->sumw2 : in->sumw2_0;
		R2 += a2;
		iso += a2;
		lp->s_out = (float)sqrt(a2 / 1.01);
		lp->s_down = (float)sqrt(m2 / (in->ea2 * (lp->moe ? sw2 + sh : 1)));
		/* the bias must match the logits of everything but the aligned perturbation */
		lp->u_gain = in->c > 0 ? (float)(sqrt(R2 - last_al) / in->c) : 0;
		if (lp->moe && in->c > 0) {
			eps += sqrt(iso) / in->c;
			nm++;
		}
		double ral2 = next_is_moe(m, l) ? fmax(0, in->r2 - (m2 + a2) / R2) : 0;
		lp->alpha = (float)sqrt(ral2 * R2 / ((1 / E + 1 / H) * in->ea2 * (F * sw2 + Fsh)));
		last_al = ral2 * R2 * E / (H + E);
		R2 += m2 + last_al;
		iso += m2;
		perturbed = ral2 > 0;
	}
	return nm ? eps / nm : 1 / U_C;
}

/* ---- plan ----------------------------------------------------------------------------------- */

static const coli_tensor_spec *router_spec(const coli_tensor_spec *v, int n, int layer)
{
	for (int i = 0; i < n; i++)
		if (v[i].layer == layer && v[i].role == COLI_R_ROUTER)
			return &v[i];
	return NULL;
}

/* Unit rows of a router's random part, transposed into [H x E]. */
static int unit_rows(synth_plan *p, const coli_tensor_spec *rs, float **out, coli_err *e)
{
	int E = p->m->n_experts, H = p->m->hidden_size;
	float *row = coli_malloc((size_t)H * sizeof(*row), e);
	float *t = row ? coli_malloc((size_t)H * (size_t)E * sizeof(*t), e) : NULL;
	if (!t) {
		free(row);
		return -1;
	}
	uint64_t key = synth_key(p->seed, rs->name);
	for (int r = 0; r < E; r++) {
		double n2 = 0;
		synth_gauss_fill(key, (uint64_t)r * (uint64_t)H, row, H);
		if (p->u)
			synth_project_out_u(p, row, 1, H);
		for (int i = 0; i < H; i++)
			n2 += (double)row[i] * row[i];
		float inv = (float)(1 / sqrt(n2));
		for (int i = 0; i < H; i++)
			t[(size_t)i * E + r] = row[i] * inv;
	}
	free(row);
	*out = t;
	return 0;
}

static int layers_alloc(synth_plan *p, coli_err *e)
{
	p->layer = coli_calloc((size_t)p->n_layers, sizeof(*p->layer), e);
	if (!p->layer)
		return -1;
	for (int l = 0; l < p->n_layers; l++) {
		p->layer[l].moe = p->m->is_moe[l];
		p->layer[l].bias = coli_calloc((size_t)p->m->n_experts, sizeof(float), e);
		if (!p->layer[l].bias)
			return -1;
	}
	return 0;
}

/* The routers that layer l-1's down projections align to. */
static int alignment_targets(synth_plan *p, const coli_tensor_spec *v, int n, coli_err *e)
{
	for (int l = 1; l < p->n_layers; l++) {
		if (p->layer[l - 1].alpha == 0)
			continue;
		const coli_tensor_spec *rs = router_spec(v, n, l);
		if (!rs)
			p->layer[l - 1].alpha = 0;
		else if (unit_rows(p, rs, &p->layer[l].unit_t, e))
			return -1;
	}
	return 0;
}

static int biases(synth_plan *p, coli_err *e)
{
	int E = p->m->n_experts;
	int *perm = coli_malloc((size_t)E * sizeof(*perm), e);
	if (!perm)
		return -1;
	uint64_t key = synth_key(p->seed, "synth.popularity");
	for (int l = 0; l < p->n_layers; l++) {
		int perturbed = l > 0 && p->layer[l - 1].alpha != 0;
		perm_fill(perm, E, key + (uint64_t)l * 0x1000193u);
		bias_fill(p->layer[l].bias, perm, E, perturbed ? p->gamma : p->gamma0);
		if (l < p->m->n_hash_layers && l < p->m->n_layers) { /* deepseek_v4: rank^-zipf */
			if (!(p->layer[l].logw = coli_malloc((size_t)E * sizeof(float), e))) {
				free(perm);
				return -1;
			}
			for (int r = 0; r < E; r++)
				p->layer[l].logw[perm[r]] = (float)(-p->zipf * log(r + 1.0));
		}
	}
	free(perm);
	return 0;
}

static int unit_vector(synth_plan *p, coli_err *e)
{
	int H = p->m->hidden_size;
	double n2 = 0;
	p->u = coli_malloc((size_t)H * sizeof(float), e);
	if (!p->u)
		return -1;
	synth_gauss_fill(synth_key(p->seed, "synth.u"), 0, p->u, H);
	for (int i = 0; i < H; i++)
		n2 += (double)p->u[i] * p->u[i];
	for (int i = 0; i < H; i++)
		p->u[i] = (float)(p->u[i] / sqrt(n2));
	return 0;
}

/* The popularity scale and the perturbation depend on each other (and the u-projection noise
 * on the schedule): three rounds. The first MoE layer after a layer that does not align to it
 * sees no perturbation and gets its own popularity scale gamma0. */
static int calibrate(synth_plan *p, sched_in *in, coli_err *e)
{
	mc c;
	double *counts = coli_malloc((size_t)p->m->n_experts * sizeof(*counts), e), got;
	if (!counts || mc_init(&c, p->m, p->seed, e)) {
		free(counts);
		return -1;
	}
	c.eps = 1 / U_C;
	p->r_eff = 0;
	p->predict_reachable = 1;
	if (p->m->top_k >= p->m->n_experts) { /* every expert always runs: nothing to shape */
		mc_counts(&c, 0, 0, counts, &p->sumw2);
		in->sumw2 = in->sumw2_0 = p->sumw2;
		p->mc_recall = 1;
		schedule(p, in);
	}
	for (int round = 0; round < 3 && p->m->top_k < p->m->n_experts; round++) {
		p->gamma0 = fit_gamma(&c, p->zipf, 0, counts, &got);
		mc_counts(&c, p->gamma0, 0, counts, &in->sumw2_0);
		p->gamma = fit_gamma(&c, p->zipf, p->r_eff, counts, &p->mc_zipf);
		mc_counts(&c, p->gamma, p->r_eff, counts, &p->sumw2);
		mc_heterogeneity(&c, p->sumw2);
		p->r_eff = fit_r(&c, p->predict, &p->mc_recall, &p->predict_reachable);
		in->r2 = p->r_eff * p->r_eff;
		in->sumw2 = p->sumw2;
		double eps = schedule(p, in);
		if (in->c > 0)
			c.eps = (float)eps;
	}
	mc_release(&c);
	free(counts);
	return 0;
}

int synth_plan_build(synth_plan *p, const coli_model *m, const synth_opts *o,
		     const coli_tensor_spec *spec, int n_spec, coli_err *e)
{
	memset(p, 0, sizeof(*p));
	p->m = m;
	p->seed = o->seed;
	p->zipf = o->zipf;
	p->predict = o->predict;
	p->n_layers = m->n_layers + m->n_mtp_layers;
	p->router_std = LOGIT_SD / sqrtf((float)m->hidden_size);
	sched_in in = {.ea2 = silu_sq(1.01) * 1.01};
	if (!synth_biased(m)) {
		p->c = U_C;
		in.c = U_C;
		if (unit_vector(p, e))
			return -1;
	}
	if (layers_alloc(p, e) || calibrate(p, &in, e) || alignment_targets(p, spec, n_spec, e))
		return -1;
	return biases(p, e);
}

/* Gumbel top-k: the k largest logw[e] + Gumbel noise, a stream per layer, E values per token. */
void synth_hash_ids(const synth_plan *p, int l, int64_t tok, int64_t *ids)
{
	int E = p->m->n_experts, k = p->m->top_k, best[64];
	float g[4096];
	uint64_t key = synth_key(p->seed, "synth.hash") + (uint64_t)l * 0x1000193u;
	for (int e = 0; e < E; e++) {
		double u = ((double)(synth_rand64(key, (uint64_t)tok * (uint64_t)E + (uint64_t)e) >> 11) + 0.5) / 9007199254740992.0;
		g[e] = p->layer[l].logw[e] - (float)log(-log(u));
	}
	for (int j = 0; j < k; j++) {
		best[j] = -1;
		for (int e = 0; e < E; e++) {
			int taken = 0;
			for (int i = 0; i < j && !taken; i++)
				taken = best[i] == e;
			if (!taken && (best[j] < 0 || g[e] > g[best[j]]))
				best[j] = e;
		}
		ids[j] = best[j];
	}
}

void synth_plan_release(synth_plan *p)
{
	if (!p)
		return;
	for (int l = 0; p->layer && l < p->n_layers; l++) {
		free(p->layer[l].logw);
		free(p->layer[l].bias);
		free(p->layer[l].unit_t);
	}
	free(p->layer);
	free(p->u);
	memset(p, 0, sizeof(*p));
}
