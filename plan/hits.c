/* hits.c: each MoE layer's routing distribution from the usage counts, and the hit rate of a
 * cache of pins + LRU slots predicted by the policy module's simulator (engine/policy.h) on
 * routing sampled from that distribution.
 *
 * The distribution is the layer's counts with half a routing added to every expert (Jeffreys'
 * prior: an expert never seen in a short history is not certain never to come), or uniform
 * without usage. Tokens are drawn independently, each choosing top_k distinct experts with
 * probabilities in proportion (Gumbel top-k), so the prediction has no recency beyond
 * popularity: what real routing adds (a token's experts overlap the previous token's a little
 * more than chance) is a gain the prediction leaves out. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "planner.h"

#define PRIOR 0.5
#define WARMUP_TOKENS 128  /* replayed before the hit rate is counted: the steady state */
#define MEASURED_TOKENS 768

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A uniform double in (0, 1). */
static double uniform(uint64_t *s)
{
	return ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
}

/* Layer L's counts row in the usage table, or NULL. */
static const double *counts_of(const plan *p, const plan_layer *L)
{
	return p->usage.counts ? p->usage.counts + (size_t)L->layer * (size_t)p->usage.n_experts : NULL;
}

/* The share of the counts the top 10% of experts take (0 without counts). */
static double top10_share(const double *c, int n)
{
	if (!c)
		return 0;
	int top = n / 10 > 0 ? n / 10 : 1, prev = -1;
	double sum = 0, top_sum = 0;
	for (int i = 0; i < n; i++)
		sum += c[i] > 0 ? c[i] : 0;
	for (int i = 0; i < top && (prev = coli_pin_next(c, n, prev)) >= 0; i++)
		top_sum += c[prev];
	return sum > 0 ? top_sum / sum : 0;
}

static int layer_distribution(const plan *p, plan_layer *L, coli_err *e)
{
	const double *c = counts_of(p, L);
	if (!(L->p = coli_malloc((size_t)L->n_experts * sizeof(*L->p), e)))
		return -1;
	double sum = 0;
	for (int i = 0; i < L->n_experts; i++)
		sum += L->p[i] = (c && c[i] > 0 ? c[i] : 0) + PRIOR;
	for (int i = 0; i < L->n_experts; i++)
		L->p[i] /= sum;
	L->top10 = top10_share(c, L->n_experts);
	return 0;
}

/* One token's top_k distinct experts drawn from p (Gumbel top-k), into out[0..k). */
static void draw_token(const double *prob, int n, int k, uint64_t *rng, int32_t *out, double *key)
{
	for (int i = 0; i < n; i++)
		key[i] = log(prob[i]) - log(-log(uniform(rng)));
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int i = 0; i < n; i++)
			if (key[i] > -INFINITY && (best < 0 || key[i] > key[best]))
				best = i;
		out[j] = best, key[best] = -INFINITY;
	}
}

/* The sampled routing of layer L: tokens x top_k, the same for every cache tried (a seed per
 * layer: a plan is reproducible). */
static int32_t *sample_layer(const plan *p, const plan_layer *L, int tokens)
{
	int k = p->top_k < L->n_experts ? p->top_k : L->n_experts;
	int32_t *ids = malloc((size_t)tokens * (size_t)k * sizeof(*ids));
	double *key = malloc((size_t)L->n_experts * sizeof(*key));
	uint64_t rng = 0x636f6c69ull + (uint64_t)L->layer;
	for (int t = 0; ids && key && t < tokens; t++)
		draw_token(L->p, L->n_experts, k, &rng, ids + (size_t)t * (size_t)k, key);
	free(key);
	return key ? ids : (free(ids), NULL);
}

int plan_distributions(plan *p, coli_err *e)
{
	if (!(p->layers = coli_calloc((size_t)p->n_moe, sizeof(*p->layers), e)))
		return -1;
	for (int i = 0; i < p->n_moe; i++) {
		const coli_lexperts *x = &p->ct->layout.elayers[i];
		plan_layer *L = &p->layers[i];
		L->layer = x->layer, L->n_experts = x->n_experts, L->record = (double)x->record_size;
		if (layer_distribution(p, L, e) < 0)
			return -1;
		if (!(L->ids = sample_layer(p, L, WARMUP_TOKENS + MEASURED_TOKENS)))
			return coli_errf(e, COLI_ENOMEM, "out of memory sampling layer %d's routing", L->layer);
	}
	return 0;
}

/* The expected share of routings the layer's first `pins` experts of the pin order take. */
static double pinned_share(const plan *p, const plan_layer *L, int pins)
{
	const double *c = counts_of(p, L);
	double share = 0;
	for (int i = 0, e = -1; c && i < pins && (e = coli_pin_next(c, L->n_experts, e)) >= 0; i++)
		share += L->p[e];
	return share;
}

/* Hits over the measured tokens of ids through pins + LRU (cache - pins slots). */
static double simulate(const plan *p, const plan_layer *L, const int32_t *ids, int pins, int cache)
{
	int k = p->top_k < L->n_experts ? p->top_k : L->n_experts, tokens = WARMUP_TOKENS + MEASURED_TOKENS;
	coli_sim_opts so = {.policy = COLI_SIM_LRU, .n_layers = 1, .n_experts = L->n_experts,
			    .capacity = cache - pins, .max_batch = k, .max_batches = tokens};
	coli_sim *s = NULL;
	coli_err e = {0, ""};
	coli_sim_batch *seq = malloc((size_t)tokens * sizeof(*seq));
	if (!seq || coli_sim_open(&s, &so, &e) < 0) {
		free(seq);
		return 0;
	}
	for (int t = 0; t < tokens; t++)
		seq[t] = (coli_sim_batch){.layer = 0, .n = k, .experts = ids + (size_t)t * (size_t)k};
	coli_sim_start(s, counts_of(p, L), pins);
	coli_sim_run(s, seq, WARMUP_TOKENS, &e);
	coli_sim_stats w = coli_sim_stats_of(s, 0);
	coli_sim_run(s, seq + WARMUP_TOKENS, MEASURED_TOKENS, &e);
	coli_sim_stats all = coli_sim_stats_of(s, 0);
	coli_sim_close(s);
	free(seq);
	double n = (double)(all.hits + all.misses - w.hits - w.misses);
	return n > 0 ? (double)(all.hits - w.hits) / n : 0;
}

double plan_layer_hit(const plan *p, const plan_layer *L, int pins, int cache, double *pin_share)
{
	if (pin_share)
		*pin_share = pinned_share(p, L, pins);
	if (cache >= L->n_experts)
		return 1;
	return simulate(p, L, L->ids, pins, cache);
}
