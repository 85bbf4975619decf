/* more_cache.c: the run's own expert cache replayed on its trace, at its size and at 25% more
 * (more_cache.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "more_cache.h"
#include "policy.h"

/* One MoE layer's routing as the store got it, and what the replay needs of the layer. */
typedef struct seq {
	coli_sim_batch *b;       /* [n] */
	int32_t *ids;            /* [n_ids]: the batches' experts, in order */
	char *decode;            /* [n]: the batch is a decode step's (its hits count) */
	int n, n_ids, max_batch, last_call;
	int32_t *pinned;         /* [n_pinned]: experts the trace shows pinned in the layer */
	int n_pinned;
} seq;

/* The value of option name on the run's command line ("--name V" or "--name=V", the last), or NULL. */
static const char *argv_value(const prof_trace *t, const char *name)
{
	json_t *argv = json_object_get(t->meta, "argv");
	size_t n = strlen(name), k = json_array_size(argv);
	const char *found = NULL;
	for (size_t i = 0; i < k; i++) {
		const char *a = json_string_value(json_array_get(argv, i));
		if (a && !strcmp(a, name) && i + 1 < k)
			found = json_string_value(json_array_get(argv, i + 1));
		else if (a && !strncmp(a, name, n) && a[n] == '=')
			found = a + n + 1;
	}
	return found;
}

/* The run's eviction policy: the metadata's (coli-run records it), its command line's, or the default. */
static void run_policy(const prof_trace *t, json_t *st, prof_cache_est *c)
{
	const char *p = json_string_value(json_object_get(st, "cache_policy"));
	c->policy_from = "the trace's metadata";
	if (!p && (p = argv_value(t, "--cache-policy")))
		c->policy_from = "the run's command line";
	if (!p)
		p = "lfu", c->policy_from = "coli-run's default: the trace does not record the policy";
	snprintf(c->policy, sizeof(c->policy), "%s", strcmp(p, "lru") == 0 ? "LRU" : "LFU");
	c->usage = json_is_true(json_object_get(st, "usage")) || argv_value(t, "--usage") != NULL;
}

/* The per-layer list named key of the metadata into v[0..n): 1; 0 when absent; -1 (why) when its
 * length is not the MoE layers'. */
static int meta_list(json_t *st, const char *key, int n, int *v, prof_cache_est *c)
{
	json_t *a = json_object_get(st, key);
	if (!json_is_array(a))
		return 0;
	if ((int)json_array_size(a) != n) {
		snprintf(c->why, sizeof(c->why), "the run's %s has %zu entries for the trace's %d MoE layers", key,
			 json_array_size(a), n);
		return -1;
	}
	for (int j = 0; j < n; j++)
		v[j] = (int)json_integer_value(json_array_get(a, (size_t)j));
	return 1;
}

/* Each MoE layer's cache (records, pins included) as the run sized it: 0, or -1 with why when the
 * trace does not say. */
static int layer_cache(const prof_trace *t, json_t *st, int n_moe, int *cache, prof_cache_est *c)
{
	int got = meta_list(st, "cache_slots_list", n_moe, cache, c);
	json_int_t slots = json_integer_value(json_object_get(st, "cache_slots"));
	const char *arg = argv_value(t, "--cache-slots");
	int recorded = json_object_get(st, "cache_policy") != NULL; /* a trace that would record a list */
	if (got)
		return got < 0 ? -1 : 0;
	if (slots <= 0 && json_number_value(json_object_get(st, "ram_gib")) > 0) {
		snprintf(c->why, sizeof(c->why), "--ram sized the run's cache, which the trace does not record");
		return -1;
	}
	if (slots <= 0 && !recorded && ((arg && strchr(arg, ',')) || argv_value(t, "--plan"))) {
		snprintf(c->why, sizeof(c->why), "the run's per-layer cache (a list, or a plan's) is not in this trace");
		return -1;
	}
	for (int j = 0; j < n_moe; j++)
		cache[j] = slots > 0 ? (int)slots : t->top_k * COLI_CACHE_PER_TOP_K;
	return 0;
}

/* Each MoE layer's pins: the metadata's list or figure, else those the trace shows used. */
static int layer_pins(json_t *st, int n_moe, int *pins, const seq *q, prof_cache_est *c)
{
	int got = meta_list(st, "pins_list", n_moe, pins, c);
	json_t *per = json_object_get(st, "pins_per_layer");
	if (got)
		return got < 0 ? -1 : 0;
	for (int j = 0; j < n_moe; j++)
		pins[j] = json_is_integer(per) ? (int)json_integer_value(per) : q[j].n_pinned;
	return 0;
}

static void add_pinned(seq *q, int32_t x)
{
	for (int i = 0; i < q->n_pinned; i++)
		if (q->pinned[i] == x)
			return;
	q->pinned[q->n_pinned++] = x;
}

/* A batch's experts ascending: the order of the store's request (moe.c asks for a decode step's
 * experts ascending, and the store's recency follows the request); the trace has them in the
 * order their reads completed. */
static void sort_batch(coli_sim_batch *b)
{
	int32_t *x = (int32_t *)b->experts;
	for (int a = 1; a < b->n; a++)
		for (int j = a; j > 0 && x[j] < x[j - 1]; j--) {
			int32_t t = x[j];
			x[j] = x[j - 1], x[j - 1] = t;
		}
}

/* Each MoE layer's batches: a call of one position (a decode step) one batch, a longer call (a
 * prompt, a verify: the store gets their experts one at a time) one batch per expert, in the
 * trace's order; and the experts it shows pinned. */
static void layer_seqs(const prof_trace *t, const int *moe_of, seq *q, int n)
{
	for (size_t i = 0; i < t->n_routes; i++) {
		const prof_route *r = &t->routes[i];
		const prof_call *pc = &t->calls[r->call];
		seq *s = &q[moe_of[r->layer]];
		if (pc->n != 1 || s->n == 0 || s->last_call != r->call) {
			s->decode[s->n] = pc->phase == COLI_PHASE_DECODE && pc->n == 1;
			s->b[s->n++] = (coli_sim_batch){0, 0, s->ids + s->n_ids};
		}
		s->last_call = r->call;
		s->ids[s->n_ids++] = r->expert;
		coli_sim_batch *b = &s->b[s->n - 1];
		b->n++;
		s->max_batch = b->n > s->max_batch ? b->n : s->max_batch;
		if (r->outcome == COLI_X_PIN)
			add_pinned(s, r->expert);
	}
	for (int j = 0; j < n; j++)
		for (int i = 0; i < q[j].n; i++)
			sort_batch(&q[j].b[i]);
}

/* The decode hits and gets of q replayed through policy at slots (beside its pins). */
static int replay(const prof_trace *t, const seq *q, int policy, int slots, uint64_t *hits, uint64_t *gets, coli_err *e)
{
	coli_sim_opts o = {.policy = policy, .n_layers = 1, .n_experts = t->n_experts, .capacity = slots,
			   .max_batch = q->max_batch > 0 ? q->max_batch : 1};
	double *counts = coli_calloc((size_t)t->n_experts, sizeof(*counts), e);
	coli_sim *s = NULL;
	int rc = counts ? coli_sim_open(&s, &o, e) : -1;
	for (int i = 0; rc == 0 && i < q->n_pinned; i++)
		counts[q->pinned[i]] = 1; /* the pins: the only experts of count > 0 */
	if (rc == 0)
		coli_sim_start(s, counts, q->n_pinned);
	for (int i = 0; rc == 0 && i < q->n; i++) {
		coli_sim_stats a = coli_sim_stats_of(s, -1), b;
		rc = coli_sim_run(s, &q->b[i], 1, e);
		b = coli_sim_stats_of(s, -1);
		if (q->decode[i])
			*hits += b.hits - a.hits, *gets += b.hits + b.misses - a.hits - a.misses;
	}
	coli_sim_close(s);
	free(counts);
	return rc;
}

/* The MoE layers (those with routed experts): moe_of[layer] their index, -1 for the others; how many. */
static int moe_layers(const prof_trace *t, int *moe_of)
{
	int n = 0;
	for (int l = 0; l < t->n_layers; l++)
		moe_of[l] = -1;
	for (size_t i = 0; i < t->n_routes; i++)
		moe_of[t->routes[i].layer] = 0;
	for (int l = 0; l < t->n_layers; l++)
		if (moe_of[l] == 0)
			moe_of[l] = n++;
	return n;
}

static int alloc_seqs(const prof_trace *t, const int *moe_of, seq *q, int n, coli_err *e)
{
	int *cnt = coli_calloc((size_t)n + 1, sizeof(*cnt), e);
	if (!cnt)
		return -1;
	for (size_t i = 0; i < t->n_routes; i++)
		cnt[moe_of[t->routes[i].layer]]++;
	int rc = 0;
	for (int j = 0; rc == 0 && j < n; j++) {
		size_t k = (size_t)cnt[j] + 1;
		q[j].b = coli_calloc(k, sizeof(*q[j].b), e), q[j].ids = coli_calloc(k, sizeof(*q[j].ids), e);
		q[j].decode = coli_calloc(k, 1, e), q[j].pinned = coli_calloc(k, sizeof(*q[j].pinned), e);
		rc = q[j].b && q[j].ids && q[j].decode && q[j].pinned ? 0 : -1;
	}
	free(cnt);
	return rc;
}

/* Every layer replayed at each one's slots beside its pins (cache - pins, at least top_k): the
 * decode hit rate; -2 when a layer's decode steps need more slots at once than it has. */
static int replay_all(const prof_trace *t, const seq *q, int n, const int *cache, const int *pins, int policy,
		      double *rate, coli_err *e)
{
	uint64_t hits = 0, gets = 0;
	for (int j = 0; j < n; j++) {
		int slots = cache[j] - pins[j] > t->top_k ? cache[j] - pins[j] : t->top_k;
		if (slots < q[j].max_batch)
			return -2;
		if (replay(t, &q[j], policy, slots, &hits, &gets, e) < 0)
			return -1;
	}
	*rate = gets ? (double)hits / (double)gets : -1;
	return 0;
}

/* The sizes, the sequences, the two replays. */
static int estimate(const prof_trace *t, json_t *st, seq *q, int n, int *sizes, prof_cache_est *c, coli_err *e)
{
	int *cache = sizes, *pins = sizes + n, *more = sizes + 2 * n, policy = 0, grows = 0, rc;
	if (n == 0)
		return snprintf(c->why, sizeof(c->why), "no routed expert in the trace"), 0;
	if (layer_cache(t, st, n, cache, c) < 0 || layer_pins(st, n, pins, q, c) < 0)
		return 0;
	policy = strcmp(c->policy, "LRU") == 0 ? COLI_SIM_LRU : COLI_SIM_LFU;
	for (int j = 0; j < n; j++) {
		cache[j] = cache[j] > t->n_experts ? t->n_experts : cache[j];
		more[j] = cache[j] + (cache[j] + 3) / 4;
		more[j] = more[j] > t->n_experts ? t->n_experts : more[j];
		grows |= more[j] > cache[j];
		c->cache = cache[j] > c->cache ? cache[j] : c->cache, c->more = more[j] > c->more ? more[j] : c->more;
		c->pins = pins[j] > c->pins ? pins[j] : c->pins;
	}
	if (!grows)
		return snprintf(c->why, sizeof(c->why), "the run's cache holds every expert already"), 0;
	if ((rc = replay_all(t, q, n, cache, pins, policy, &c->base_hit, e)) == 0)
		rc = replay_all(t, q, n, more, pins, policy, &c->more_hit, e);
	if (rc == -2)
		return snprintf(c->why, sizeof(c->why), "a step got more experts at once than the cache holds"), 0;
	if (rc == 0 && c->base_hit < 0)
		return snprintf(c->why, sizeof(c->why), "no decode step got an expert"), 0;
	c->ok = rc == 0;
	return rc;
}

int prof_cache_estimate(const prof_trace *t, prof_cache_est *c, coli_err *e)
{
	json_t *st = json_object_get(t->meta, "store");
	const char *kind = json_string_value(json_object_get(st, "kind"));
	memset(c, 0, sizeof(*c));
	run_policy(t, st, c);
	if (!kind || strcmp(kind, "stream") != 0)
		return snprintf(c->why, sizeof(c->why), "the run did not stream its experts"), 0;
	int *moe_of = coli_calloc((size_t)t->n_layers, sizeof(*moe_of), e);
	int n = moe_of ? moe_layers(t, moe_of) : 0, rc = moe_of ? 0 : -1;
	seq *q = rc == 0 ? coli_calloc((size_t)n + 1, sizeof(*q), e) : NULL;
	int *sizes = q ? coli_calloc(3 * (size_t)n + 1, sizeof(*sizes), e) : NULL;
	rc = sizes ? alloc_seqs(t, moe_of, q, n, e) : -1;
	if (rc == 0) {
		layer_seqs(t, moe_of, q, n);
		rc = estimate(t, st, q, n, sizes, c, e);
	}
	for (int j = 0; q && j < n; j++)
		free(q[j].b), free(q[j].ids), free(q[j].decode), free(q[j].pinned);
	free(q), free(sizes), free(moe_of);
	return rc;
}
