/* hits.c: each MoE layer's routing distribution from the usage counts, and the hit rate of a
 * cache of pins + LRU slots predicted by the policy module's simulator (engine/policy.h) on
 * routing sampled from that distribution, or without usage from the locality model (locality.c).
 *
 * The distribution is the layer's posterior mean under a symmetric Dirichlet prior whose
 * strength is estimated from the counts themselves (empirical Bayes: the alpha that maximises the
 * Dirichlet-multinomial likelihood of the layer's counts): a short history of a near-uniform
 * layer is mostly noise and is shrunk toward uniform, a long or strongly skewed one is kept.
 * With usage, tokens are drawn independently, each choosing top_k distinct experts with
 * probabilities in proportion (Gumbel top-k), so the prediction has no recency beyond
 * popularity: what real routing adds (a token's experts overlap the previous token's more than
 * chance) is a gain the prediction leaves out. Without usage (a layer without counts), the
 * locality model's routing: skew, drift and reuse of the previous token's experts, fitted on a
 * real trace. With --routing of this model's shape each main MoE layer replays that routing
 * instead, recency and all. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "planner.h"
#include "store.h"

#define ALPHA_STEPS 240     /* the alpha searched on a log grid from 1e-3 to 1e5 */
#define WARMUP_TOKENS 128  /* replayed before the hit rate is counted: the steady state */
#define MEASURED_TOKENS 768
/* The locality model (no usage): 4 runs of 128 + 192 tokens, each from its own draw (a chat
 * turn's length, near the 156 positions the defaults were fitted on: the model's drift is not
 * extrapolated far beyond what a trace showed). */
#define MODEL_RUNS 4
#define MODEL_TOKENS 320

/* Layer L's counts row in the usage table, or NULL. */
static const double *counts_of(const plan *p, const plan_layer *L)
{
	return p->usage.counts ? p->usage.counts + (size_t)L->layer * (size_t)p->usage.n_experts : NULL;
}

/* The share of the routings the top 10% of experts take (n / 10 experts, the last one counted
 * in part: a uniform layer's share is 0.10): by the counts c, or the distribution p without. */
static double top10_share(const double *c, const double *p, int n)
{
	const double *w = c ? c : p;
	double top = n / 10.0, sum = 0, top_sum = 0;
	int prev = -1;
	for (int i = 0; i < n; i++)
		sum += w[i] > 0 ? w[i] : 0;
	for (int i = 0; i < top && (prev = coli_pin_next(w, n, prev)) >= 0; i++)
		top_sum += w[prev] * (top - i < 1 ? top - i : 1);
	return sum > 0 ? top_sum / sum : 0;
}

/* log P(counts | symmetric Dirichlet(alpha)) up to the multinomial's constant. */
static double dm_loglik(const double *c, int n, double sum, double alpha)
{
	double l = lgamma(n * alpha) - lgamma(sum + n * alpha);
	for (int i = 0; i < n; i++)
		l += lgamma((c[i] > 0 ? c[i] : 0) + alpha) - lgamma(alpha);
	return l;
}

/* The prior strength that makes the counts most likely (its largest when they look uniform). */
static double fit_alpha(const double *c, int n, double sum)
{
	double best = 1e5, best_l = -INFINITY;
	for (int i = 0; i <= ALPHA_STEPS; i++) {
		double a = pow(10, -3 + 8.0 * i / ALPHA_STEPS), l = dm_loglik(c, n, sum, a);
		if (l > best_l)
			best = a, best_l = l;
	}
	return best;
}

static int layer_distribution(const plan *p, plan_layer *L, coli_err *e)
{
	const double *c = counts_of(p, L);
	if (!(L->p = coli_malloc((size_t)L->n_experts * sizeof(*L->p), e)))
		return -1;
	double sum = 0, total = 0;
	for (int i = 0; c && i < L->n_experts; i++)
		sum += c[i] > 0 ? c[i] : 0;
	L->alpha = sum > 0 ? fit_alpha(c, L->n_experts, sum) : 1;
	L->modeled = !(sum > 0);
	for (int i = 0; i < L->n_experts; i++)
		total += L->p[i] = (c && c[i] > 0 ? c[i] : 0) + L->alpha;
	for (int i = 0; i < L->n_experts; i++)
		L->p[i] /= total;
	L->top10 = top10_share(c, L->p, L->n_experts);
	return 0;
}

/* One token's top_k distinct experts drawn from p (Gumbel top-k), into out[0..k). */
static void draw_token(const double *prob, int n, int k, uint64_t *rng, int32_t *out, double *key)
{
	for (int i = 0; i < n; i++)
		key[i] = log(prob[i]) - log(-log(plan_uniform(rng)));
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int i = 0; i < n; i++)
			if (key[i] > -INFINITY && (best < 0 || key[i] > key[best]))
				best = i;
		out[j] = best, key[best] = -INFINITY;
	}
}

/* The sampled routing of layer L: tokens x top_k, the same for every cache tried (a seed per
 * layer, seed_layer's: a plan is reproducible). A layer with usage counts: tokens drawn
 * independently from its distribution; without: the locality model p->loc (locality.c). */
static int32_t *sample_layer(const plan *p, const plan_layer *L, int tokens, int seed_layer)
{
	int k = p->top_k < L->n_experts ? p->top_k : L->n_experts, len = tokens / L->runs;
	int32_t *ids = malloc((size_t)tokens * (size_t)k * sizeof(*ids));
	plan_locality m = plan_locality_at(&p->loc, (int)(L - p->layers), k);
	for (int d = 0; ids && L->modeled && d < L->runs; d++)
		if (plan_locality_sample(&m, L->n_experts, k, len, (uint64_t)seed_layer * MODEL_RUNS + (uint64_t)d,
					 ids + (size_t)d * (size_t)len * (size_t)k) < 0)
			return free(ids), NULL;
	if (L->modeled)
		return ids;
	double *key = malloc((size_t)L->n_experts * sizeof(*key));
	uint64_t rng = 0x636f6c69ull + (uint64_t)seed_layer;
	for (int t = 0; ids && key && t < tokens; t++)
		draw_token(L->p, L->n_experts, k, &rng, ids + (size_t)t * (size_t)k, key);
	free(key);
	return key ? ids : (free(ids), NULL);
}

/* Layer L's routing from --routing (its MoE layer i there): every position that has it, in
 * order; the first eighth replayed before the hits are counted. */
static int replayed_layer(const plan *p, plan_layer *L, int i, coli_err *e)
{
	const coli_route *r = p->routing;
	if (!(L->ids = coli_malloc((size_t)r->n_positions * (size_t)r->top_k * sizeof(*L->ids), e)))
		return -1;
	for (int pos = 0; pos < r->n_positions; pos++) {
		const int32_t *x = coli_route_at(r, pos, i, NULL);
		if (x)
			memcpy(L->ids + (size_t)L->n_tokens++ * (size_t)r->top_k, x, (size_t)r->top_k * sizeof(*x));
	}
	L->warmup = L->n_tokens / 8, L->runs = 1;
	if (L->n_tokens - L->warmup < 1)
		return coli_errf(e, COLI_EDATA, "%s: MoE layer %d: no positions to replay", r->name, i);
	return 0;
}

static void count_ids(const plan *p, const plan_layer *L, int from, int to, double *c);

/* Whether sampled layers a and b are alike: the same experts, record size, distribution and
 * usage counts, and without them the same parameters of the locality model (every layer after
 * the first PLAN_RAMP_LAYERS). */
static int alike(const plan *p, const plan_layer *a, const plan_layer *b)
{
	const double *ca = counts_of(p, a), *cb = counts_of(p, b);
	size_t n = (size_t)a->n_experts * sizeof(double);
	return a->n_experts == b->n_experts && a->record == b->record && !memcmp(a->p, b->p, n) &&
	       (ca ? !memcmp(ca, cb, n) : 1) && a->modeled == b->modeled &&
	       (!a->modeled || plan_locality_ramp((int)(a - p->layers)) == plan_locality_ramp((int)(b - p->layers)));
}

/* Whether MoE layer i replays --routing. */
static int replayed(const plan *p, int i)
{
	return p->replay && !p->ct->layout.elayers[i].mtp && i < p->routing->n_layers;
}

/* L (layer i) sampled: with the seed of the first layer alike (L->twin), whose plan it shares. */
static int sampled_layer(plan *p, plan_layer *L, int i, coli_err *e)
{
	L->twin = i;
	for (int j = 0; j < i && L->twin == i; j++)
		if (p->layers[j].twin == j && !replayed(p, j) && alike(p, L, &p->layers[j]))
			L->twin = j;
	L->n_tokens = WARMUP_TOKENS + MEASURED_TOKENS, L->warmup = WARMUP_TOKENS, L->runs = 1;
	if (L->modeled)
		L->n_tokens = MODEL_RUNS * MODEL_TOKENS, L->warmup = WARMUP_TOKENS, L->runs = MODEL_RUNS;
	if (!(L->ids = sample_layer(p, L, L->n_tokens, p->layers[L->twin].layer)))
		return coli_errf(e, COLI_ENOMEM, "out of memory sampling layer %d's routing", L->layer);
	if (L->modeled) { /* the model's skew, as the explanation reports it */
		double *c = coli_calloc((size_t)L->n_experts, sizeof(*c), e);
		if (!c)
			return -1;
		count_ids(p, L, 0, L->n_tokens, c);
		L->top10 = top10_share(c, NULL, L->n_experts);
		free(c);
	}
	return 0;
}

int plan_distributions(plan *p, coli_err *e)
{
	if (!(p->layers = coli_calloc((size_t)p->n_moe, sizeof(*p->layers), e)))
		return -1;
	for (int i = 0; i < p->n_moe; i++) {
		const coli_lexperts *x = &p->ct->layout.elayers[i];
		plan_layer *L = &p->layers[i];
		L->layer = x->layer, L->n_experts = x->n_experts, L->record = (double)x->record_size, L->twin = i;
		if (layer_distribution(p, L, e) < 0)
			return -1;
		if (replayed(p, i)) {
			if (replayed_layer(p, L, i, e) < 0)
				return -1;
			continue;
		}
		if (sampled_layer(p, L, i, e) < 0)
			return -1;
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

/* Replays tokens [from, to) of L's ids through pins (the first `pins` of counts' order) + the
 * planned policy's slots (cache - pins), counting from token warm on: hits and lookups added to
 * h[0], h[1]. */
static void replay(const plan *p, const plan_layer *L, const double *counts, int pins, int cache, int from,
		   int warm, int to, double h[2])
{
	int k = p->top_k < L->n_experts ? p->top_k : L->n_experts;
	plan_seq q = {L->ids + (size_t)from * (size_t)k, to - from, warm - from};
	plan_seq_hits(&q, L->n_experts, k, p->cache_policy == STORE_CACHE_LFU ? COLI_SIM_LFU : COLI_SIM_LRU, counts, pins,
		      cache, h);
}

/* The routing counts of L's ids [from, to) into c[n_experts]. */
static void count_ids(const plan *p, const plan_layer *L, int from, int to, double *c)
{
	int k = p->top_k < L->n_experts ? p->top_k : L->n_experts;
	memset(c, 0, (size_t)L->n_experts * sizeof(*c));
	for (size_t i = (size_t)from * (size_t)k; i < (size_t)to * (size_t)k; i++)
		c[L->ids[i]] += 1;
}

/* The hit rate of pins + LRU on L's routing. Sampled routing: pins from the usage counts, as
 * the store chooses them. Replayed routing (--routing) with pins: two-fold, pins chosen from the
 * counts of one half replayed on the other, so pins are never judged on the routing that chose
 * them (in-sample they would look better than a run's future will be). */
static double simulate(const plan *p, const plan_layer *L, int pins, int cache)
{
	double h[2] = {0, 0};
	int n = L->n_tokens, mid = n / 2;
	double *c = pins > 0 && replayed(p, (int)(L - p->layers)) ? malloc((size_t)L->n_experts * sizeof(*c)) : NULL;
	if (!c) {
		for (int d = 0, len = n / L->runs; d < L->runs; d++)
			replay(p, L, counts_of(p, L), pins, cache, d * len, d * len + L->warmup, (d + 1) * len, h);
		return h[1] > 0 ? h[0] / h[1] : 0;
	}
	count_ids(p, L, mid, n, c);
	replay(p, L, c, pins, cache, 0, (mid + 7) / 8, mid, h);
	count_ids(p, L, 0, mid, c);
	replay(p, L, c, pins, cache, mid, mid + (n - mid + 7) / 8, n, h);
	free(c);
	return h[1] > 0 ? h[0] / h[1] : 0;
}

double plan_layer_hit(const plan *p, const plan_layer *L, int pins, int cache, double *pin_share)
{
	if (pin_share)
		*pin_share = pinned_share(p, L, pins);
	if (cache >= L->n_experts)
		return 1;
	return simulate(p, L, pins, cache);
}

double plan_miss_prob(int k, double miss, int m)
{
	if (m < 0 || m > k)
		return 0;
	if (miss <= 0 || miss >= 1)
		return m == (miss <= 0 ? 0 : k);
	return exp(lgamma(k + 1.0) - lgamma(m + 1.0) - lgamma(k - m + 1.0) + m * log(miss) + (k - m) * log1p(-miss));
}
