/* cache.c: how many records each MoE layer keeps in RAM and how many of them are pinned.
 *
 * Each layer's options are caches of C records (top_k <= C <= its experts, in steps of half a
 * top_k) of which P are pins: none, half, or all but top_k (pins only with usage, as the store
 * pins). The simulator predicts each option's hit rate (hits.c); the best P for each C gives
 * the layer's curve h(C). The budget left beyond the fixed part goes where it saves the most
 * bytes read per byte of RAM: starting from top_k records everywhere, the layer whose next step
 * up its curve has the steepest slope (hits x top_k x record per record added) takes it, until
 * nothing more fits. Layers whose routing is skewed get more records than near-uniform ones. */
#include <stdio.h>
#include <stdlib.h>

#include "fileio.h"
#include "planner.h"
#include "store.h"

#define GIB 1073741824.0

/* One layer's curve: for each cache size, its best pins and hit rate. */
typedef struct curve {
	int n;
	int *cache, *pins;
	double *hit;
	int at;                   /* the point chosen so far */
} curve;

static int cache_step(int top_k)
{
	return top_k / 2 > 0 ? top_k / 2 : 1;
}

/* The best pins for a cache of c records in layer L: the option of highest predicted hits. */
static void best_pins(const plan *p, const plan_layer *L, int c, int *pins, double *hit)
{
	int opts[3] = {0, c / 2, c - p->top_k}, n = p->usage.counts ? 3 : 1;
	*pins = 0, *hit = -1;
	for (int i = 0; i < n; i++) {
		if (opts[i] < 0 || c - opts[i] < p->top_k || (i && opts[i] == opts[i - 1]))
			continue;
		double h = plan_layer_hit(p, L, opts[i], c, NULL);
		if (h > *hit)
			*pins = opts[i], *hit = h;
	}
}

static int make_curve(const plan *p, const plan_layer *L, curve *cv, coli_err *e)
{
	int step = cache_step(p->top_k), most = (L->n_experts - p->top_k) / step + 2;
	cv->cache = coli_malloc((size_t)most * sizeof(int), e);
	cv->pins = coli_malloc((size_t)most * sizeof(int), e);
	cv->hit = coli_malloc((size_t)most * sizeof(double), e);
	if (!cv->cache || !cv->pins || !cv->hit)
		return -1;
	for (int c = p->top_k; c <= L->n_experts; c = c + step > L->n_experts && c < L->n_experts ? L->n_experts : c + step) {
		cv->cache[cv->n] = c;
		best_pins(p, L, c, &cv->pins[cv->n], &cv->hit[cv->n]);
		cv->n++;
	}
	return 0;
}

/* The steepest step up layer i's curve that fits in left bytes: its point, and the bytes read
 * saved per byte of RAM; -1 when none fits. */
static int next_step(const plan *p, const curve *cv, int i, double left, double *slope)
{
	const plan_layer *L = &p->layers[i];
	int best = -1, a = cv->at;
	for (int j = a + 1; j < cv->n; j++) {
		double cost = (cv->cache[j] - cv->cache[a]) * L->record;
		double s = (cv->hit[j] - cv->hit[a]) * p->top_k * L->record / cost;
		if (cost <= left && (best < 0 || s > *slope))
			best = j, *slope = s;
	}
	return best;
}

/* Layers alike (plan_layer.twin) with layer i: how many. */
static int twins(const plan *p, int i)
{
	int n = 0;
	for (int k = 0; k < p->n_moe; k++)
		n += p->layers[k].twin == i;
	return n;
}

/* Water-filling: the steepest step of all layers, while one fits. Layers alike share one curve
 * and step together, so identical layers (uniform routing, no usage) keep identical caches:
 * on their near-linear curves a layer at a time would take everything and starve the others.
 * What is left when no such step fits goes one step to each of them in turn, while it fits
 * (they end at most one step apart). */
static void allocate(plan *p, curve *cv, double left)
{
	for (;;) {
		int layer = -1, point = -1;
		double best = 0;
		for (int i = 0; i < p->n_moe; i++) {
			double s = 0;
			int n = p->layers[i].twin == i ? twins(p, i) : 0, j = n ? next_step(p, &cv[i], i, left / n, &s) : -1;
			if (j >= 0 && s > best)
				layer = i, point = j, best = s;
		}
		if (layer < 0)
			break;
		for (int k = 0, from = cv[layer].at; k < p->n_moe; k++)
			if (p->layers[k].twin == layer) {
				left -= (cv[k].cache[point] - cv[k].cache[from]) * p->layers[k].record;
				cv[k].at = point;
			}
	}
	for (int k = 0; k < p->n_moe; k++) {
		const curve *c = &cv[k];
		double cost = c->at + 1 < c->n ? (c->cache[c->at + 1] - c->cache[c->at]) * p->layers[k].record : 0;
		if (cost > 0 && cost <= left && c->hit[c->at + 1] > c->hit[c->at] && twins(p, p->layers[k].twin) > 1)
			left -= cost, cv[k].at++;
	}
}

/* Every expert fits beside the fixed part: the RAM store, no streaming. */
static int all_fit(plan *p)
{
	double all = 0;
	for (int i = 0; i < p->n_moe; i++)
		all += p->layers[i].record * p->layers[i].n_experts;
	if (p->fixed.left < all)
		return 0;
	for (int i = 0; i < p->n_moe; i++)
		p->layers[i].cache = p->layers[i].n_experts, p->layers[i].hit = 1;
	p->hit = 1;
	plan_note_add(p, "stream", "off", "every expert (%.2f GiB) fits in the %.2f GiB the budget leaves beyond the "
		      "dense part, KV cache and buffers (%.2f GiB): all in RAM, nothing streamed", all / GIB,
		      p->fixed.left / GIB, p->fixed.fixed / GIB);
	return 1;
}

static void take_choice(plan *p, const curve *cv)
{
	double hits = 0;
	for (int i = 0; i < p->n_moe; i++) {
		plan_layer *L = &p->layers[i];
		L->cache = cv[i].cache[cv[i].at], L->pins = cv[i].pins[cv[i].at], L->hit = cv[i].hit[cv[i].at];
		plan_layer_hit(p, L, L->pins, L->cache, &L->hit_pins);
		hits += L->hit;
	}
	p->hit = p->n_moe ? hits / p->n_moe : 1;
	double pinned = 0;
	for (int i = 0; i < p->n_moe; i++)
		pinned += p->layers[i].hit_pins;
	p->hit_pins = p->n_moe ? pinned / p->n_moe : 0;
}

/* The decision in words: the range of cache sizes and pins, and what skew bought them. */
static void describe(plan *p)
{
	int lo = p->layers[0].cache, hi = lo, most = 0, fewest = 0, pins = 0;
	for (int i = 0; i < p->n_moe; i++) {
		const plan_layer *L = &p->layers[i];
		lo = L->cache < lo ? L->cache : lo, hi = L->cache > hi ? L->cache : hi, pins += L->pins;
		most = L->cache > p->layers[most].cache ? i : most;
		fewest = L->cache < p->layers[fewest].cache ? i : fewest;
	}
	char v[64], who[256];
	const plan_layer *M = &p->layers[most], *F = &p->layers[fewest];
	snprintf(v, sizeof(v), lo == hi ? "%d" : "%d..%d", lo, hi);
	if (lo == hi)
		snprintf(who, sizeof(who), "every layer keeps %d records (layer %d: top-10%% share %.2f, hit %.1f%%)", lo,
			 M->layer, M->top10, M->hit * 100);
	else
		snprintf(who, sizeof(who), "layer %d keeps %d records (top-10%% share %.2f, hit %.1f%%), layer %d keeps %d "
			 "(top-10%% share %.2f, hit %.1f%%)", M->layer, M->cache, M->top10, M->hit * 100, F->layer, F->cache,
			 F->top10, F->hit * 100);
	plan_note_add(p, "cache-slots", v, "%.2f GiB of expert cache over %d MoE layers: predicted hit rate %.1f%% (the "
		      "simulator on routing %s); %s", p->fixed.left / GIB, p->n_moe, p->hit * 100,
		      p->replay ? "replayed from --routing" : p->usage.counts ? "drawn from the usage counts" :
		      "drawn from the locality model: no usage given", who);
	if (!p->replay && !p->usage.counts) {
		plan_locality m = plan_locality_at(&p->loc, -1, p->top_k);
		plan_note_add(p, "routing-model", "locality", "no usage: each layer routed by the locality model, %s: "
			      "popularity Gamma(%.3g), redrawn with probability %.3g a token, %.3g of the slots one of the "
			      "previous token's experts (at top_k %d; the first MoE layers less local: docs/coli-plan.md)",
			      p->loc.source, m.skew, m.drift, m.reuse, p->top_k);
	}
	snprintf(v, sizeof(v), "%d", pins);
	if (p->usage.counts)
		plan_note_add(p, "pins", v, "%d pins in all, the most used experts of each layer where pinning them beat "
			      "LRU slots in the simulation; they alone give %.1f%% hits (the cold hit rate)", pins,
			      p->hit_pins * 100);
	else
		plan_note_add(p, "pins", "0", "no --usage: nothing to choose pins by; the whole cache is LRU (run "
			      "coli-run --usage FILE, then plan again)");
	snprintf(who, sizeof(who), lo == hi ? "every layer keeps" : "layer %d keeps", F->layer);
	if (lo < 2 * p->top_k)
		plan_warn(p, "%s only %d records, fewer than two tokens' experts (top_k %d): its hits come almost only "
			  "from the previous token, and the hit rate collapses; more RAM or a shorter --ctx helps", who, lo,
			  p->top_k);
}

/* The cache of every layer under the current policy (p->cache_policy): the curves, the budget
 * allocated along them, the choice taken; its bytes read per token saved into *saved. */
static int plan_policy(plan *p, double *saved, coli_err *e)
{
	curve *cv = coli_calloc((size_t)p->n_moe, sizeof(*cv), e);
	int rc = cv ? 0 : -1;
	double left = p->fixed.left;
	for (int i = 0; rc == 0 && i < p->n_moe; i++) {
		rc = make_curve(p, &p->layers[i], &cv[i], e);
		left -= p->top_k * p->layers[i].record;
	}
	if (rc == 0) {
		allocate(p, cv, left);
		take_choice(p, cv);
		*saved = 0;
		for (int i = 0; i < p->n_moe; i++)
			*saved += p->layers[i].hit * p->top_k * p->layers[i].record;
	}
	for (int i = 0; cv && i < p->n_moe; i++)
		free(cv[i].cache), free(cv[i].pins), free(cv[i].hit);
	free(cv);
	return rc;
}

/* Both eviction policies planned; the one that saves more reads kept (LRU on a tie). */
int plan_cache(plan *p, coli_err *e)
{
	if (plan_distributions(p, e) < 0)
		return -1;
	if (all_fit(p))
		return 0;
	p->stream = 1;
	double lru, lfu;
	p->cache_policy = STORE_CACHE_LFU;
	if (plan_policy(p, &lfu, e) < 0)
		return -1;
	double lfu_hit = p->hit;
	p->cache_policy = STORE_CACHE_LRU;
	if (plan_policy(p, &lru, e) < 0)
		return -1;
	double lru_hit = p->hit;
	if (lfu > lru * 1.005) {
		p->cache_policy = STORE_CACHE_LFU;
		if (plan_policy(p, &lfu, e) < 0)
			return -1;
	}
	plan_note_add(p, "cache-policy", p->cache_policy == STORE_CACHE_LFU ? "lfu" : "lru", "the simulator's hit rate "
		      "with the caches planned for each: %.1f%% evicting the least used (lfu), %.1f%% the least "
		      "recently used (lru)", lfu_hit * 100, lru_hit * 100);
	describe(p);
	return 0;
}
