/* test_plan_locality.c: coli-plan's no-usage routing model (plan/locality.c) against the real
 * Qwen3-30B-A3B routing (tests/data/traces): the defaults are what the fit gives on the whole
 * trace; fitted on one part of the trace, the model's pins-free LRU and LFU hit rates (the
 * policy module's simulator, engine/policy/cachesim.c; LRU judged, LFU printed) come within 10 points of the simulator's
 * replay of another part (the later half of the decode; the odd layers; the top-2 and top-3 of
 * each position, a different top_k); the uniform routing the planner used before is far off. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"
#include "route.h"
#include "t.h"

#define REAL "tests/data/traces/qwen3-30b-a3b.route.csv"
#define BOUND 0.10 /* hit-rate points, the goal of issue 24 */

/* The model m's curve on draws shaped like q[0] (tokens, warm), k of E. */
static int model_curve(const plan_locality *m, const plan_seq *q, int E, int k, plan_curve *c)
{
	int draws = 16, n = q[0].n;
	int32_t *ids = malloc((size_t)draws * (size_t)n * (size_t)k * sizeof(*ids));
	plan_seq s[16];
	for (int d = 0; ids && d < draws; d++) {
		s[d] = (plan_seq){ids + (size_t)d * (size_t)n * (size_t)k, n, q[0].warm};
		plan_locality_sample(m, E, k, n, 1000 + (uint64_t)d, ids + (size_t)d * (size_t)n * (size_t)k);
	}
	int rc = ids ? plan_locality_curve(s, draws, E, k, c) : -1;
	free(ids);
	return rc;
}

/* The largest difference between two curves' LRU hit rates (every cache; the plan without usage
 * chooses LRU: on the model's longer runs its drift leaves LFU behind), the LFU's printed. */
static double worst(const plan_curve *a, const plan_curve *b, const char *what)
{
	double w = 0, wf = 0;
	printf("# %s: overlap %.3f vs %.3f\n", what, a->overlap, b->overlap);
	for (int c = 0; c < a->n; c++) {
		printf("#   cache %3d: LRU %.3f vs %.3f, LFU %.3f vs %.3f\n", a->cache[c], a->lru[c], b->lru[c], a->lfu[c],
		       b->lfu[c]);
		w = fmax(w, fabs(a->lru[c] - b->lru[c])), wf = fmax(wf, fabs(a->lfu[c] - b->lfu[c]));
	}
	printf("# %s: worst difference %.1f points (LFU's: %.1f)\n", what, w * 100, wf * 100);
	return w;
}

/* Fits on the part `fit` of r, checks the model against the part `check`: the worst difference. */
static double held_out(const coli_route *r, const plan_view *fit, const plan_view *check, const char *what,
		       plan_locality *m)
{
	plan_seq *q;
	int32_t *ids;
	int n;
	coli_err e = {0, ""};
	if (plan_route_seqs(r, fit, &q, &ids, &n, &e) < 0 || plan_locality_fit(m, q, n, r->n_experts, fit->k, &e) < 0)
		return printf("# %s: %s\n", what, e.msg), 1;
	free(q), free(ids);
	printf("# %s: fitted skew %g reuse %g drift %g (loss %.4f)\n", what, m->skew, m->reuse, m->drift, m->loss);
	plan_curve real, model;
	if (plan_route_seqs(r, check, &q, &ids, &n, &e) < 0 || plan_locality_curve(q, n, r->n_experts, check->k, &real) < 0 ||
	    model_curve(m, q, r->n_experts, check->k, &model) < 0)
		return 1;
	free(q), free(ids);
	return worst(&model, &real, what);
}

/* The step of grid values around x that y is within (factor f for the skew). */
static int near(double x, double y, double f, double d)
{
	return (y <= x * f + d) && (y >= x / f - d);
}

int main(void)
{
	coli_route *r;
	coli_err e = {0, ""};
	T_CHECK("open", coli_route_open(&r, REAL, &e) == 0, "%s", e.msg);
	if (!r)
		T_EXIT();
	int P = r->n_positions, pre = r->n_prefill, half = pre + (P - pre) / 2, L = r->n_layers, K = r->top_k;
	plan_locality m;

	/* The defaults: the fit on the whole trace. */
	int R = PLAN_RAMP_LAYERS; /* the first layers are the ramp's; the parameters are fitted after them */
	plan_view all = {R, L, 1, 0, P, pre, K};
	double w = held_out(r, &all, &all, "whole trace", &m);
	T_CHECK("defaults are the whole trace's fit",
		near(m.skew, plan_locality_default.skew, 1.45, 0) && near(m.reuse, plan_locality_default.reuse, 1, 0.051) &&
			near(m.drift, plan_locality_default.drift, 2.1, 0.0011),
		"fit skew %g reuse %g drift %g, defaults %g %g %g", m.skew, m.reuse, m.drift, plan_locality_default.skew,
		plan_locality_default.reuse, plan_locality_default.drift);
	T_CHECK("in-sample fit", w < BOUND / 2, "worst difference %.3f", w);

	/* Held out: the first half of the decode fits, the second is checked (warmed by the first). */
	plan_view first = {R, L, 1, 0, half, pre, K}, second = {R, L, 1, 0, P, half, K};
	w = held_out(r, &first, &second, "fit on positions < half, check on the later half", &m);
	T_CHECK("later half within 10 points", w < BOUND, "worst difference %.3f", w);

	/* Held out: even layers fit, odd ones checked. */
	plan_view even = {R, L, 2, 0, P, pre, K}, odd = {R + 1, L, 2, 0, P, pre, K};
	w = held_out(r, &even, &odd, "fit on even layers, check on odd", &m);
	T_CHECK("odd layers within 10 points", w < BOUND, "worst difference %.3f", w);

	/* Another top_k: fitted on top-6 (the first half), checked on the top-2 and top-3 of the later half. */
	for (int k = 2; k <= 3; k++) {
		plan_view sub = {R, L, 1, 0, P, half, k};
		char what[64];
		snprintf(what, sizeof(what), "fit on top-6 first half, check on top-%d later half", k);
		w = held_out(r, &first, &sub, what, &m);
		T_CHECK(what, w < BOUND, "worst difference %.3f", w);
	}

	/* The ramp: the first layers against the defaults at their places, each printed, their mean
	 * judged (in sample: the ramp's constants come from these layers; one layer's 156 positions
	 * are noisy). */
	plan_curve mean_real = {0}, mean_model = {0};
	for (int l = 0; l < R; l++) {
		plan_view one = {l, l + 1, 1, 0, P, pre, K};
		plan_locality at = plan_locality_at(&plan_locality_default, l, K);
		plan_seq *q1;
		int32_t *ids1;
		int n1;
		plan_curve real1, model1;
		char what[64];
		snprintf(what, sizeof(what), "layer %d against the ramp", l);
		if (plan_route_seqs(r, &one, &q1, &ids1, &n1, &e) == 0 &&
		    plan_locality_curve(q1, n1, r->n_experts, K, &real1) == 0 &&
		    model_curve(&at, q1, r->n_experts, K, &model1) == 0) {
			worst(&model1, &real1, what);
			mean_real.n = mean_model.n = real1.n;
			for (int c = 0; c < real1.n; c++) {
				mean_real.cache[c] = mean_model.cache[c] = real1.cache[c];
				mean_real.lru[c] += real1.lru[c] / R, mean_real.lfu[c] += real1.lfu[c] / R;
				mean_model.lru[c] += model1.lru[c] / R, mean_model.lfu[c] += model1.lfu[c] / R;
			}
			mean_real.overlap += real1.overlap / R, mean_model.overlap += model1.overlap / R;
		}
		free(q1), free(ids1);
	}
	w = worst(&mean_model, &mean_real, "the ramp's layers, mean");
	T_CHECK("the ramp's layers within 10 points", w < BOUND, "worst difference %.3f", w);

	/* Uniform routing (what coli-plan modelled before): far below the real hit rates. */
	plan_locality uni = {.skew = 1e6, .reuse = 0, .drift = 0};
	plan_seq *q;
	int32_t *ids;
	int n;
	plan_curve real, model;
	if (plan_route_seqs(r, &all, &q, &ids, &n, &e) == 0 && plan_locality_curve(q, n, r->n_experts, K, &real) == 0 &&
	    model_curve(&uni, q, r->n_experts, K, &model) == 0) {
		w = worst(&model, &real, "uniform routing");
		T_CHECK("uniform is far off", w > 0.25, "worst difference %.3f", w);
	}
	free(q), free(ids);
	coli_route_close(r);
	T_EXIT();
}
