/* locality.c: the routing the planner predicts a run without usage on: a model of real routing's
 * locality, its parameters fitted to a route trace (the defaults: the real Qwen3-30B-A3B trace).
 *
 * The model, per MoE layer of E experts, top_k k (docs/coli-plan.md):
 *   popularity  each expert's weight w_i drawn from Gamma(skew) (so w / sum(w) is Dirichlet(skew):
 *               a small skew concentrates the routing on a few experts, a large one is near
 *               uniform; the shape does not depend on E);
 *   drift       before each token, each w_i is drawn anew with probability drift (the hot set
 *               moves: what a count-based policy cannot follow and recency can);
 *   reuse       each of the token's k slots is, with probability reuse, one of the previous token's
 *               experts not chosen yet (uniformly), else drawn from w among those not chosen yet.
 * Three numbers, each per expert, per slot or per token, so they carry over to other expert
 * counts and top_k. The fit: the parameters whose simulated routing gives the trace's pins-free
 * LRU and LFU hit rates (at caches of k, 2k, 4k and 10, 20, 30, 50% of E) and its overlap with the
 * previous token closest in squares, by coordinate descent over grids of each parameter, the
 * model's routing drawn with fixed seeds (the same draws for every candidate). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "planner.h"

/* Fitted by plan_locality_fit on tests/data/traces/qwen3-30b-a3b.route.csv (48 layers x 128
 * experts, top-6, prompt 28 positions + 128 decode): tests/unit/test_plan_locality.c refits them. */
const plan_locality plan_locality_default = {.skew = 0.2, .reuse = 0.25, .drift = 0.005, .top_k = 6,
					     .source = "fitted on a real Qwen3-30B-A3B trace (48 layers x 128 experts, top-6)"};

static const double skews[] = {0.02, 0.03, 0.04, 0.05, 0.07, 0.1, 0.14, 0.2, 0.28, 0.4, 0.56, 0.8, 1.1, 1.6, 2.2, 3.2,
			       4.5, 6.4, 9, 13, 18, 25, 36, 50, 70, 100};
static const double reuses[] = {0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7,
				0.75, 0.8, 0.85, 0.9};
static const double drifts[] = {0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2};
/* How skew and reuse scale with top_k: x(k) = x(top_k fitted) x (k / top_k)^exponent; the
 * exponents from the fits on the top-1 .. top-6 of each position of the Qwen3 trace (skew 0.1 at
 * top-1, 0.14 at top-2 to 4, 0.2 at top-5 and 6; reuse 0.15 to 0.25). */
#define SKEW_EXP 0.35
#define REUSE_EXP 0.25
/* The first MoE layers route less locally (the first one's input is little more than the token's
 * embedding, which changes every token): MoE layer i < RAMP_LAYERS has skew x RAMP_SKEW^(RAMP_LAYERS
 * - i) (x RAMP_FIRST more for the first), reuse and drift x (i + 1) / (RAMP_LAYERS + 1). From the fits of the Qwen3 trace's layers 0
 * to 5 one by one: skew 2.2, 0.8, 0.56, 0.4, 0.28, 0.2 (x1.4 a layer after the first), reuse 0.05,
 * 0.15, 0.1, 0.2, 0.2, 0.25, drift 0.001, 0, 0.002, 0.005, 0.005, 0.01. */
#define RAMP_LAYERS PLAN_RAMP_LAYERS
#define RAMP_SKEW 1.42
#define RAMP_FIRST 2 /* the first layer's skew, twice again */
#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define FIT_ROUNDS 3
#define FIT_TOKENS 16384 /* the model's tokens per candidate, over its draws */

uint64_t plan_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double plan_uniform(uint64_t *s)
{
	return ((double)(plan_rand(s) >> 11) + 0.5) / 9007199254740992.0;
}

/* A Gamma(a, 1) draw (Marsaglia and Tsang; a < 1 by Gamma(a + 1) x U^(1/a)). */
static double gamma_draw(double a, uint64_t *s)
{
	if (a < 1)
		return gamma_draw(a + 1, s) * pow(plan_uniform(s), 1 / a);
	double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
	for (;;) {
		double x = sqrt(-2 * log(plan_uniform(s))) * cos(6.283185307179586 * plan_uniform(s));
		double v = 1 + c * x;
		if (v <= 0)
			continue;
		v = v * v * v;
		double u = plan_uniform(s);
		if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
			return d * v;
	}
}

static int chosen(const int32_t *S, int n, int32_t x)
{
	for (int i = 0; i < n; i++)
		if (S[i] == x)
			return 1;
	return 0;
}

/* A previous-token expert not in S[0..j), uniformly; -1 when none is left. */
static int32_t reuse_one(const int32_t *prev, int k, const int32_t *S, int j, uint64_t *s)
{
	int n = 0;
	for (int i = 0; i < k; i++)
		n += !chosen(S, j, prev[i]);
	int pick = n ? (int)(plan_uniform(s) * n) % n : -1;
	for (int i = 0; i < k; i++)
		if (!chosen(S, j, prev[i]) && pick-- == 0)
			return prev[i];
	return -1;
}

/* An expert drawn from w among those not in S[0..j): by the prefix sums cum[0..E) of w,
 * drawing again when the draw is chosen already; by a scan of what is left after 16 such draws. */
static int32_t draw_one(const double *w, const double *cum, int E, const int32_t *S, int j, uint64_t *s)
{
	for (int tries = 0; tries < 16; tries++) {
		double u = plan_uniform(s) * cum[E - 1];
		int lo = 0, hi = E - 1;
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			if (cum[mid] > u)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (!chosen(S, j, lo))
			return lo;
	}
	double total = 0;
	for (int i = 0; i < E; i++)
		total += chosen(S, j, i) ? 0 : w[i];
	double u = plan_uniform(s) * total;
	int32_t last = -1;
	for (int i = 0; i < E; i++) {
		if (chosen(S, j, i))
			continue;
		last = i;
		if ((u -= w[i]) < 0)
			return i;
	}
	return last;
}

/* Redraws each w[i] with probability m->drift (geometric skips between the redrawn ones); the
 * prefix sums cum[] rebuilt. */
static void drift(const plan_locality *m, double *w, double *cum, int E, uint64_t *s)
{
	if (m->drift > 0) {
		double step = m->drift >= 1 ? 0 : log1p(-m->drift);
		for (double i = step < 0 ? floor(log(plan_uniform(s)) / step) : 0; i < E;
		     i += 1 + (step < 0 ? floor(log(plan_uniform(s)) / step) : 0))
			w[(int)i] = gamma_draw(m->skew, s) + 1e-300;
	}
	double c = 0;
	for (int i = 0; i < E; i++)
		cum[i] = c += w[i];
}

plan_locality plan_locality_at(const plan_locality *m, int layer, int k)
{
	plan_locality x = *m;
	if (m->top_k > 0 && k != m->top_k) {
		x.skew = m->skew * pow((double)k / m->top_k, SKEW_EXP);
		x.reuse = fmin(1, m->reuse * pow((double)k / m->top_k, REUSE_EXP));
		x.top_k = k;
	}
	if (layer >= 0 && layer < RAMP_LAYERS) {
		x.skew *= pow(RAMP_SKEW, RAMP_LAYERS - layer) * (layer == 0 ? RAMP_FIRST : 1);
		x.reuse *= (layer + 1.0) / (RAMP_LAYERS + 1);
		x.drift *= (layer + 1.0) / (RAMP_LAYERS + 1);
	}
	return x;
}

int plan_locality_ramp(int layer)
{
	return layer >= 0 && layer < RAMP_LAYERS ? layer : RAMP_LAYERS;
}

int plan_locality_sample(const plan_locality *model, int E, int k, int tokens, uint64_t seed, int32_t *ids)
{
	plan_locality at = plan_locality_at(model, -1, k);
	const plan_locality *m = &at;
	double *w = malloc(2 * (size_t)E * sizeof(*w)), *cum = w + E;
	if (!w)
		return -1;
	uint64_t s = 0x6c6f63616cull ^ (seed * 0x9e3779b97f4a7c15ull);
	for (int i = 0; i < E; i++)
		w[i] = gamma_draw(m->skew, &s) + 1e-300;
	plan_locality still = *m;
	still.drift = 0;
	drift(&still, w, cum, E, &s);
	for (int t = 0; t < tokens; t++) {
		int32_t *S = ids + (size_t)t * (size_t)k;
		if (t > 0 && m->drift > 0)
			drift(m, w, cum, E, &s);
		for (int j = 0; j < k; j++) {
			S[j] = t > 0 && plan_uniform(&s) < m->reuse ? reuse_one(S - k, k, S, j, &s) : -1;
			if (S[j] < 0)
				S[j] = draw_one(w, cum, E, S, j, &s);
		}
	}
	free(w);
	return 0;
}
int plan_seq_hits(const plan_seq *q, int E, int k, int policy, const double *counts, int pins, int cache, double h[2])
{
	coli_sim_opts so = {.policy = policy, .n_layers = 1, .n_experts = E, .capacity = cache - pins, .max_batch = k,
			    .max_batches = q->n};
	coli_sim *s = NULL;
	coli_err e = {0, ""};
	coli_sim_batch *seq = malloc((size_t)q->n * sizeof(*seq));
	if (!seq || q->n < 1 || coli_sim_open(&s, &so, &e) < 0) {
		free(seq);
		return -1;
	}
	for (int t = 0; t < q->n; t++)
		seq[t] = (coli_sim_batch){.layer = 0, .n = k, .experts = q->ids + (size_t)t * (size_t)k};
	coli_sim_start(s, counts, pins);
	int rc = coli_sim_run(s, seq, q->warm, &e);
	coli_sim_stats w = coli_sim_stats_of(s, 0);
	rc = rc < 0 ? rc : coli_sim_run(s, seq + q->warm, q->n - q->warm, &e);
	coli_sim_stats all = coli_sim_stats_of(s, 0);
	coli_sim_close(s);
	free(seq);
	h[0] += (double)(all.hits - w.hits), h[1] += (double)(all.hits + all.misses - w.hits - w.misses);
	return rc;
}

/* The cache sizes a fit compares at: k, 2k, 4k, and 10, 20, 30, 50% of E, each in [k, E), distinct. */
static int fit_caches(int E, int k, int *c)
{
	int want[] = {k, 2 * k, 4 * k, E / 10, E / 5, 3 * E / 10, E / 2}, n = 0;
	for (int i = 0; i < N_OF(want); i++) {
		int x = want[i] < k ? k : want[i];
		int dup = 0;
		for (int j = 0; j < n; j++)
			dup |= c[j] == x;
		if (x < E && !dup)
			c[n++] = x;
	}
	return n;
}

/* The share of a token's experts that the previous token also chose, over the counted tokens. */
static double seq_overlap(const plan_seq *q, int k)
{
	double same = 0, all = 0;
	for (int t = q->warm > 1 ? q->warm : 1; t < q->n; t++, all += k)
		for (int j = 0; j < k; j++)
			same += chosen(q->ids + (size_t)(t - 1) * (size_t)k, k, q->ids[(size_t)t * (size_t)k + (size_t)j]);
	return all > 0 ? same / all : 0;
}

int plan_locality_curve(const plan_seq *q, int n_seqs, int E, int k, plan_curve *out)
{
	memset(out, 0, sizeof(*out));
	out->n = fit_caches(E, k, out->cache);
	double ov = 0, h[2][PLAN_CURVE_MAX][2] = {{{0}}};
	for (int i = 0; i < n_seqs; i++) {
		ov += seq_overlap(&q[i], k);
		for (int c = 0; c < out->n; c++)
			if (plan_seq_hits(&q[i], E, k, COLI_SIM_LRU, NULL, 0, out->cache[c], h[0][c]) < 0 ||
			    plan_seq_hits(&q[i], E, k, COLI_SIM_LFU, NULL, 0, out->cache[c], h[1][c]) < 0)
				return -1;
	}
	for (int c = 0; c < out->n; c++)
		out->lru[c] = h[0][c][1] > 0 ? h[0][c][0] / h[0][c][1] : 0,
		out->lfu[c] = h[1][c][1] > 0 ? h[1][c][0] / h[1][c][1] : 0;
	out->overlap = n_seqs > 0 ? ov / n_seqs : 0;
	return 0;
}

/* The curve of the model m on draws of `tokens` tokens (the first warm not counted). */
static int model_curve(const plan_locality *m, int E, int k, int tokens, int warm, plan_curve *out)
{
	int draws = FIT_TOKENS / tokens;
	draws = draws < 4 ? 4 : draws > 16 ? 16 : draws;
	int32_t *ids = malloc((size_t)draws * (size_t)tokens * (size_t)k * sizeof(*ids));
	plan_seq *q = malloc((size_t)draws * sizeof(*q));
	int rc = ids && q ? 0 : -1;
	for (int d = 0; rc == 0 && d < draws; d++) {
		q[d] = (plan_seq){ids + (size_t)d * (size_t)tokens * (size_t)k, tokens, warm};
		rc = plan_locality_sample(m, E, k, tokens, (uint64_t)d + 1, ids + (size_t)d * (size_t)tokens * (size_t)k);
	}
	rc = rc < 0 ? rc : plan_locality_curve(q, draws, E, k, out);
	free(ids), free(q);
	return rc;
}

static double loss(const plan_curve *a, const plan_curve *b)
{
	double l = (a->overlap - b->overlap) * (a->overlap - b->overlap);
	for (int c = 0; c < a->n; c++)
		l += (a->lru[c] - b->lru[c]) * (a->lru[c] - b->lru[c]) + (a->lfu[c] - b->lfu[c]) * (a->lfu[c] - b->lfu[c]);
	return l;
}

/* The best value of grid g[0..n) for the parameter *x of m (others fixed); its loss into *best. */
static int line_search(plan_locality *m, double *x, const double *g, int n, const plan_curve *target, int E, int k,
		       int tokens, int warm, double *best)
{
	double keep = *x;
	for (int i = 0; i < n; i++) {
		plan_curve c;
		*x = g[i];
		if (model_curve(m, E, k, tokens, warm, &c) < 0)
			return -1;
		double l = loss(&c, target);
		if (l < *best)
			*best = l, keep = g[i];
	}
	*x = keep;
	return 0;
}

int plan_route_seqs(const coli_route *r, const plan_view *v, plan_seq **out, int32_t **ids, int *n_seqs, coli_err *e)
{
	int k = v->k, n = 0;
	*out = NULL, *ids = NULL, *n_seqs = 0;
	if (k < 1 || k > r->top_k || v->pos1 <= v->pos0 || v->layer_step < 1)
		return coli_errf(e, COLI_EUSAGE, "%s: no routing in positions %d..%d, top_k %d of %d", r->name, v->pos0,
				 v->pos1 - 1, k, r->top_k);
	if (!(*out = coli_calloc((size_t)r->n_layers, sizeof(**out), e)) ||
	    !(*ids = coli_malloc((size_t)r->n_layers * (size_t)(v->pos1 - v->pos0) * (size_t)k * sizeof(**ids), e)))
		return free(*out), *out = NULL, -1;
	int32_t *at = *ids;
	for (int l = v->layer0; l < v->layer1 && l < r->n_layers; l += v->layer_step) {
		plan_seq *q = &(*out)[n];
		q->ids = at;
		for (int pos = v->pos0; pos < v->pos1 && pos < r->n_positions; pos++) {
			const int32_t *x = coli_route_at(r, pos, l, NULL);
			if (!x)
				continue;
			memcpy(at, x, (size_t)k * sizeof(*x));
			at += k, q->n++, q->warm += pos < v->warm_to;
		}
		if (q->n > q->warm)
			n++;
		else
			*q = (plan_seq){0};
	}
	*n_seqs = n;
	return 0;
}

int plan_locality_fit(plan_locality *m, const plan_seq *q, int n_seqs, int E, int k, coli_err *e)
{
	plan_curve target;
	if (n_seqs < 1 || q[0].n - q[0].warm < 1)
		return coli_errf(e, COLI_EDATA, "no routed positions to fit the routing model on");
	if (plan_locality_curve(q, n_seqs, E, k, &target) < 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory replaying the routing to fit");
	*m = plan_locality_at(&plan_locality_default, -1, k);
	double best = INFINITY;
	for (int r = 0; r < FIT_ROUNDS; r++) { /* until a round changes nothing */
		double was = best;
		if (line_search(m, &m->skew, skews, N_OF(skews), &target, E, k, q[0].n, q[0].warm, &best) < 0 ||
		    line_search(m, &m->reuse, reuses, N_OF(reuses), &target, E, k, q[0].n, q[0].warm, &best) < 0 ||
		    line_search(m, &m->drift, drifts, N_OF(drifts), &target, E, k, q[0].n, q[0].warm, &best) < 0)
			return coli_errf(e, COLI_ENOMEM, "out of memory drawing routing to fit");
		if (!(best < was))
			break;
	}
	m->loss = best;
	return 0;
}
