/* policy/cachesim.c: the expert cache simulator: LRU, SLRU, LFU, ARC and Belady's MIN over
 * per-layer or global pools, with pins and warm starts (policy.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "arc.h"
#include "policy.h"

/* Experts are global ids g = layer x n_experts + expert. A pool is one layer's slots (or all
 * slots, global); pool p holds slots [p x cap, p x cap + n[p]), filled in order, never freed
 * (an eviction reuses the slot). */
struct coli_sim {
	coli_sim_opts o;
	int pools, cap;
	int *n;               /* [pools] slots in use */
	int *expert;          /* [pools x cap] its g */
	double *key;          /* [pools x cap] the policy's key (policy.h) */
	uint64_t *tick;       /* [pools x cap] last use */
	int *where;           /* [L x E] slot of g, -1 when not resident */
	char *pinned;         /* [L x E] */
	double *count;        /* [L x E] counts at start + uses so far */
	uint64_t *mark;       /* [L x E] the stamp of the batch that last listed g */
	int *first;           /* [L x E] BELADY: the next use while scanning, then the first */
	int *next;            /* [max_batches x max_batch] BELADY: the batch using member j next */
	double *score;        /* [L x E] warm: what the preload ranks by */
	int *list;            /* [max(E, L x E when global, cap)] chosen experts */
	double *used;         /* [pools] bytes mode: the costs of the residents */
	double *cost;         /* [L] bytes mode: an expert's cost per layer */
	coli_sim_stats *st;   /* [L] */
	int *each;            /* [L] coli_sim_start's pins of every layer */
	double *limit;        /* [pools] slots: each pool's capacity; bytes: its budget */
	double *limit0;       /* [pools] the same at start */
	coli_adapt *ad;       /* adaptive shares; NULL: none */
	sim_arc arc;          /* ARC: its lists (arc.h) */
	uint64_t now, stamp;
	int fresh;            /* started and not yet run: a warm preload is due */
};

/* SLRU's protected segment: at most this share of a pool's slots. */
#define SLRU_PROTECTED_NUM 4
#define SLRU_PROTECTED_DEN 5

/* Bytes mode: the budget, the costs, no warm start. */
static int check_bytes(const coli_sim_opts *o, coli_err *e)
{
	if (!(o->budget > 0 && o->budget < 1e300))
		return coli_errf(e, COLI_EUSAGE, "cache simulator: budget %g: expected > 0", o->budget);
	for (int l = 0; o->cost && l < o->n_layers; l++)
		if (!(o->cost[l] > 0 && o->cost[l] < 1e300))
			return coli_errf(e, COLI_EUSAGE, "cache simulator: cost[%d] %g: expected > 0", l, o->cost[l]);
	if (o->budgets && o->global)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: per-layer budgets with one global pool");
	for (int l = 0; o->budgets && l < o->n_layers; l++)
		if (!(o->budgets[l] > 0 && o->budgets[l] < 1e300))
			return coli_errf(e, COLI_EUSAGE, "cache simulator: budgets[%d] %g: expected > 0", l, o->budgets[l]);
	if (o->warm)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: a warm start is defined for slot capacities only");
	return 0;
}

/* A layer's budget in bytes mode. */
static double budget_of(const coli_sim_opts *o, int l)
{
	return o->budgets ? o->budgets[l] : o->budget;
}

/* Adaptive shares: bytes mode, per-layer LRU or LFU, least >= 1. */
static int check_adapt(const coli_sim_opts *o, coli_err *e)
{
	if (o->adapt < 0)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: adapt %d is negative", o->adapt);
	if (!o->adapt)
		return 0;
	if (!o->bytes || o->global || (o->policy != COLI_SIM_LRU && o->policy != COLI_SIM_LFU))
		return coli_errf(e, COLI_EUSAGE, "cache simulator: adaptive shares are defined for byte budgets of "
				 "per-layer LRU and LFU pools");
	if (o->adapt_least < 1)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: adapt_least %d: expected >= 1", o->adapt_least);
	return 0;
}

/* Bytes mode: the slots a pool may need, its largest budget (adaptive: COLI_ADAPT_MOST times it)
 * over its cheapest expert plus two batches (one left above the budget, one being played), at
 * most its experts. */
static long long bytes_room(const coli_sim_opts *o)
{
	double least = 1, most = 0;
	long long span = (long long)(o->global ? o->n_layers : 1) * o->n_experts;
	for (int l = 0; l < o->n_layers; l++) {
		least = o->cost && (l == 0 || o->cost[l] < least) ? o->cost[l] : least;
		most = budget_of(o, l) > most ? budget_of(o, l) : most;
	}
	double fit = most * (o->adapt ? COLI_ADAPT_MOST : 1) / least;
	long long room = fit > (double)span ? span : (long long)fit;
	room = (room > o->max_batch ? room : o->max_batch) + o->max_batch;
	return room < span ? room : span;
}

static int check_opts(const coli_sim_opts *o, coli_err *e)
{
	if (o->policy < COLI_SIM_LRU || o->policy > COLI_SIM_ARC)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: policy %d unknown", o->policy);
	if (o->n_layers < 1 || o->n_experts < 1 || (long long)o->n_layers * o->n_experts > INT_MAX)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: %d layers x %d experts: expected 1.. each, product <= %d",
				 o->n_layers, o->n_experts, INT_MAX);
	if (o->bytes && (o->max_batch < 1 || check_bytes(o, e) < 0))
		return o->max_batch < 1 ? coli_errf(e, COLI_EUSAGE, "cache simulator: max_batch %d: expected >= 1", o->max_batch)
					: -1;
	if (check_adapt(o, e) < 0)
		return -1;
	if (o->bytes)
		return o->policy == COLI_SIM_BELADY && o->max_batches < 0
			       ? coli_errf(e, COLI_EUSAGE, "cache simulator: max_batches %d is negative", o->max_batches) : 0;
	if (o->max_batch < 1 || o->capacity < o->max_batch)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: capacity %d: expected >= max_batch %d >= 1", o->capacity,
				 o->max_batch);
	if ((long long)(o->global ? 1 : o->n_layers) * o->capacity > INT_MAX)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: %d slots per layer x %d layers exceed %d", o->capacity,
				 o->n_layers, INT_MAX);
	if (o->warm && o->policy != COLI_SIM_LFU && o->policy != COLI_SIM_BELADY)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: a warm start is defined for LFU and Belady only");
	if (o->policy == COLI_SIM_BELADY && o->max_batches < 0)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: max_batches %d is negative", o->max_batches);
	return 0;
}

static int alloc_all(coli_sim *s, coli_err *e)
{
	size_t ge = (size_t)s->o.n_layers * (size_t)s->o.n_experts, slots = (size_t)s->pools * (size_t)s->cap;
	size_t nl = ge > slots ? ge : slots, nx = (size_t)s->o.max_batches * (size_t)s->o.max_batch;
	int belady = s->o.policy == COLI_SIM_BELADY;
	s->n = calloc((size_t)s->pools, sizeof(*s->n)), s->expert = calloc(slots, sizeof(*s->expert));
	s->key = calloc(slots, sizeof(*s->key)), s->tick = calloc(slots, sizeof(*s->tick));
	s->where = calloc(ge, sizeof(*s->where)), s->pinned = calloc(ge, 1), s->count = calloc(ge, sizeof(*s->count));
	s->mark = calloc(ge, sizeof(*s->mark)), s->first = calloc(ge, sizeof(*s->first));
	s->next = belady ? calloc(nx ? nx : 1, sizeof(*s->next)) : NULL, s->score = calloc(ge, sizeof(*s->score));
	s->list = calloc(nl, sizeof(*s->list)), s->st = calloc((size_t)s->o.n_layers, sizeof(*s->st));
	s->used = calloc((size_t)s->pools, sizeof(*s->used)), s->cost = calloc((size_t)s->o.n_layers, sizeof(*s->cost));
	s->each = calloc((size_t)s->o.n_layers, sizeof(*s->each));
	s->limit = calloc((size_t)s->pools, sizeof(*s->limit)), s->limit0 = calloc((size_t)s->pools, sizeof(*s->limit0));
	if (s->n && s->expert && s->key && s->tick && s->where && s->pinned && s->count && s->mark && s->first &&
	    (s->next || !belady) && s->score && s->list && s->st && s->used && s->cost && s->each && s->limit && s->limit0) {
		for (int l = 0; l < s->o.n_layers; l++)
			s->cost[l] = s->o.cost ? s->o.cost[l] : 1;
		s->o.cost = NULL, s->o.budgets = NULL; /* not kept: s->cost and s->limit hold them */
		return 0;
	}
	return coli_errf(e, COLI_ENOMEM, "out of memory for a cache simulator of %zu slots over %zu experts", slots, ge);
}

/* Each pool's capacity or budget, and the adaptive shares' object starting from them. */
static int limits(coli_sim *s, const coli_sim_opts *o, coli_err *e)
{
	int P = s->pools, *b = calloc(3 * (size_t)P, sizeof(int)), rc = 0;
	if (!b)
		return coli_errf(e, COLI_ENOMEM, "out of memory for a cache simulator's shares");
	int *start = b, *least = b + P, *most = b + 2 * P;
	for (int p = 0; p < P; p++) {
		s->limit0[p] = o->bytes ? budget_of(o, p) : o->capacity;
		double fit = o->bytes ? s->limit0[p] / s->cost[p] : s->limit0[p];
		start[p] = fit < o->n_experts ? (int)fit : o->n_experts;
		least[p] = start[p] < o->adapt_least ? start[p] : o->adapt_least;
		most[p] = start[p] * COLI_ADAPT_MOST < o->n_experts ? start[p] * COLI_ADAPT_MOST : o->n_experts;
	}
	coli_adapt_opts ao = {.n_pools = P, .n_experts = o->n_experts, .policy = o->policy, .period = o->adapt,
			      .cost = s->cost, .start = start, .least = least, .most = most};
	if (o->adapt)
		rc = coli_adapt_open(&s->ad, &ao, e);
	free(b);
	return rc;
}

int coli_sim_open(coli_sim **out, const coli_sim_opts *o, coli_err *e)
{
	*out = NULL;
	if (check_opts(o, e) < 0)
		return -1;
	coli_sim *s = calloc(1, sizeof(*s));
	if (!s)
		return coli_errf(e, COLI_ENOMEM, "out of memory for a cache simulator");
	s->o = *o;
	/* bytes mode: pools x room <= n_layers x n_experts <= INT_MAX (check_opts) */
	s->pools = o->global ? 1 : o->n_layers, s->cap = o->bytes ? (int)bytes_room(o) : o->capacity;
	if (alloc_all(s, e) < 0 || limits(s, o, e) < 0 ||
	    (o->policy == COLI_SIM_ARC &&
	     sim_arc_open(&s->arc, s->pools, (size_t)o->n_layers * (size_t)o->n_experts, o->bytes ? o->budget : o->capacity) < 0 &&
	     coli_errf(e, COLI_ENOMEM, "out of memory for a cache simulator's ARC lists") < 0)) {
		coli_sim_close(s);
		return -1;
	}
	coli_sim_start(s, NULL, 0);
	*out = s;
	return 0;
}

void coli_sim_close(coli_sim *s)
{
	if (!s)
		return;
	free(s->n), free(s->expert), free(s->key), free(s->tick), free(s->where), free(s->pinned);
	free(s->count), free(s->mark), free(s->first), free(s->next), free(s->score), free(s->list), free(s->st);
	free(s->used), free(s->cost), free(s->each), free(s->limit), free(s->limit0);
	coli_adapt_close(s->ad);
	if (s->arc.list)
		sim_arc_close(&s->arc);
	free(s);
}

void coli_sim_start(coli_sim *s, const double *counts, int pins)
{
	for (int l = 0; l < s->o.n_layers; l++)
		s->each[l] = pins;
	coli_sim_start_layers(s, counts, s->each);
}

void coli_sim_start_layers(coli_sim *s, const double *counts, const int *pins)
{
	int L = s->o.n_layers, E = s->o.n_experts;
	size_t ge = (size_t)L * (size_t)E;
	for (size_t g = 0; g < ge; g++)
		s->where[g] = -1, s->pinned[g] = 0, s->count[g] = counts ? counts[g] : 0;
	memset(s->n, 0, (size_t)s->pools * sizeof(*s->n));
	memset(s->used, 0, (size_t)s->pools * sizeof(*s->used));
	memset(s->st, 0, (size_t)L * sizeof(*s->st));
	memcpy(s->limit, s->limit0, (size_t)s->pools * sizeof(*s->limit));
	if (s->ad)
		coli_adapt_start(s->ad, counts);
	if (s->arc.list)
		sim_arc_reset(&s->arc);
	for (int l = 0; counts && pins && l < L; l++) {
		int got = coli_pins_choose(counts + (size_t)l * (size_t)E, E, pins[l] < E ? pins[l] : E, s->list);
		for (int j = 0; j < got; j++)
			s->pinned[(size_t)l * (size_t)E + (size_t)s->list[j]] = 1;
	}
	s->fresh = 1;
}

static int pool_of(const coli_sim *s, int layer) { return s->o.global ? 0 : layer; }

/* SLRU: slot i promoted to the protected segment; beyond its share of the pool the least recent
 * other member goes back to probation. */
static void slru_promote(coli_sim *s, int pool, int i)
{
	int prot = 0, lru = -1, lo = pool * s->cap, hi = lo + s->n[pool];
	s->key[i] = 1;
	for (int j = lo; j < hi; j++)
		if (s->key[j] == 1) {
			prot++;
			if (j != i && (lru < 0 || s->tick[j] < s->tick[lru]))
				lru = j;
		}
	int most = (s->o.bytes ? s->n[pool] : s->cap) * SLRU_PROTECTED_NUM / SLRU_PROTECTED_DEN;
	if (prot > most && lru >= 0)
		s->key[lru] = 0, s->tick[lru] = ++s->now;
}

/* A use of slot i holding g (hit: it was resident); next: g's next use (BELADY). */
static void touch(coli_sim *s, int pool, int i, int hit, int g, int next)
{
	s->tick[i] = ++s->now;
	if (s->o.policy == COLI_SIM_SLRU && hit)
		slru_promote(s, pool, i);
	else if (s->o.policy == COLI_SIM_ARC)
		s->key[i] = sim_arc_list(&s->arc, g) == ARC_T2;
	else if (s->o.policy == COLI_SIM_LFU)
		s->key[i] = s->count[g];
	else if (s->o.policy == COLI_SIM_BELADY)
		s->key[i] = -(double)next;
	else
		s->key[i] = 0;
}

/* The resident of the pool with the lowest (key, tick) not in the current batch; -1 when none.
 * ARC: the key is 0 in the list REPLACE takes from (T1 or T2), 1 in the other. */
static int victim(const coli_sim *s, int pool)
{
	int v = -1, lo = pool * s->cap, hi = lo + s->n[pool];
	double flip = s->o.policy == COLI_SIM_ARC && !sim_arc_take_t1(&s->arc, pool), kv = 0;
	if (s->o.policy == COLI_SIM_LRU || s->o.policy == COLI_SIM_LFU) { /* the store's order */
		for (int i = lo; i < hi; i++)
			if (s->mark[s->expert[i]] != s->stamp &&
			    (v < 0 || coli_evict_before(s->o.policy, s->count[s->expert[i]], s->tick[i], s->count[s->expert[v]],
							s->tick[v])))
				v = i;
		return v;
	}
	for (int i = lo; i < hi; i++) {
		double k = flip ? 1 - s->key[i] : s->key[i];
		if (s->mark[s->expert[i]] != s->stamp && (v < 0 || k < kv || (k == kv && s->tick[i] < s->tick[v])))
			v = i, kv = k;
	}
	return v;
}

/* ARC's bookkeeping of a resident g evicted from the pool; counted. */
static void evicted(coli_sim *s, int pool, int g)
{
	s->where[g] = -1;
	s->st[g / s->o.n_experts].evictions++;
	if (s->o.policy == COLI_SIM_ARC)
		sim_arc_evicted(&s->arc, pool, g);
}

/* A slot of the pool for g: a free one, else the victim's (never -1: capacity >= max_batch). */
static int place(coli_sim *s, int pool, int g)
{
	int i;
	if (s->n[pool] < (int)s->limit[pool]) {
		i = pool * s->cap + s->n[pool]++;
	} else {
		i = victim(s, pool);
		evicted(s, pool, s->expert[i]);
	}
	s->expert[i] = g, s->where[g] = i;
	return i;
}

/* ARC: a hit on g; a miss on g before its eviction (done 0) and after (done 1). */
static void arc_hit(coli_sim *s, int pool, int g)
{
	if (s->o.policy == COLI_SIM_ARC)
		sim_arc_hit(&s->arc, pool, g);
}

static void arc_miss(coli_sim *s, int pool, int g, int done)
{
	double w = s->o.bytes ? s->cost[g / s->o.n_experts] : 1;
	if (s->o.policy == COLI_SIM_ARC)
		(done ? sim_arc_insert : sim_arc_miss)(&s->arc, pool, g, w);
}

/* Every member of batch b (its layer's experts from base on) counted and marked as this batch's
 * (a new stamp): what eviction spares. */
static void mark_batch(coli_sim *s, const coli_sim_batch *b, int base)
{
	s->stamp++;
	for (int j = 0; j < b->n; j++)
		s->mark[base + b->experts[j]] = s->stamp, s->count[base + b->experts[j]] += 1;
}

/* One batch: every member counted and marked, then the hits used, then the misses placed.
 * next: each member's next use (BELADY), else NULL. */
static void play(coli_sim *s, const coli_sim_batch *b, const int *next)
{
	int base = b->layer * s->o.n_experts, pool = pool_of(s, b->layer);
	coli_sim_stats *st = &s->st[b->layer];
	mark_batch(s, b, base);
	for (int j = 0, g; j < b->n; j++)
		if (s->pinned[g = base + b->experts[j]])
			st->hits++, st->pin_hits++;
		else if (s->where[g] >= 0)
			st->hits++, arc_hit(s, pool, g), touch(s, pool, s->where[g], 1, g, next ? next[j] : 0);
	for (int j = 0, g; j < b->n; j++)
		if (!s->pinned[g = base + b->experts[j]] && s->where[g] < 0) {
			arc_miss(s, pool, g, 0);
			int i = place(s, pool, g);
			arc_miss(s, pool, g, 1);
			st->misses++, touch(s, pool, i, 0, g, next ? next[j] : 0);
		}
}

/* Slot i emptied (an eviction to a budget or a smaller share), the pool's last slot moved into it. */
static void drop(coli_sim *s, int pool, int i)
{
	int last = pool * s->cap + --s->n[pool], g = s->expert[i];
	evicted(s, pool, g), s->used[pool] -= s->cost[g / s->o.n_experts];
	if (i != last) {
		s->expert[i] = s->expert[last], s->key[i] = s->key[last], s->tick[i] = s->tick[last];
		s->where[s->expert[i]] = i;
	}
}

/* Bytes mode: one batch in its order, misses all made resident, then the pool evicted to its
 * budget sparing the batch. */
static void play_bytes(coli_sim *s, const coli_sim_batch *b, const int *next)
{
	int base = b->layer * s->o.n_experts, pool = pool_of(s, b->layer);
	coli_sim_stats *st = &s->st[b->layer];
	mark_batch(s, b, base);
	for (int j = 0, g, i; j < b->n; j++)
		if (s->pinned[g = base + b->experts[j]]) {
			st->hits++, st->pin_hits++;
		} else if (s->where[g] >= 0) {
			st->hits++, arc_hit(s, pool, g), touch(s, pool, s->where[g], 1, g, next ? next[j] : 0);
		} else {
			arc_miss(s, pool, g, 0), arc_miss(s, pool, g, 1);
			i = pool * s->cap + s->n[pool]++;
			s->expert[i] = g, s->where[g] = i, s->used[pool] += s->cost[b->layer];
			st->misses++, touch(s, pool, i, 0, g, next ? next[j] : 0);
		}
	for (int v; s->used[pool] > s->limit[pool] && (v = victim(s, pool)) >= 0;)
		drop(s, pool, v);
}

/* Adaptive shares: batch b's members that take slots played, and when the shares were derived
 * again each pool's new budget (its records' costs, 1e-9 above against rounding), a pool above it
 * evicted down to it, sparing nothing. */
static void adapt_batch(coli_sim *s, const coli_sim_batch *b)
{
	int base = b->layer * s->o.n_experts, n = 0;
	for (int j = 0; j < b->n; j++)
		if (!s->pinned[base + b->experts[j]])
			s->list[n++] = b->experts[j];
	if (!coli_adapt_play(s->ad, b->layer, s->list, n))
		return;
	const int *sh = coli_adapt_shares(s->ad);
	s->stamp++;
	for (int p = 0; p < s->pools; p++) {
		s->limit[p] = sh[p] * s->cost[p] * (1 + 1e-9);
		for (int v; s->used[p] > s->limit[p] && (v = victim(s, p)) >= 0;)
			drop(s, p, v);
	}
}

static int check_batch(coli_sim *s, const coli_sim_batch *b, int k, coli_err *e)
{
	int L = s->o.n_layers, E = s->o.n_experts;
	if (b->layer < 0 || b->layer >= L)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: batch %d: layer %d out of range 0..%d", k, b->layer, L - 1);
	if (b->n < 0 || b->n > s->o.max_batch)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: batch %d: %d experts, expected 0..%d (max_batch)", k, b->n,
				 s->o.max_batch);
	s->stamp++;
	for (int j = 0; j < b->n; j++) {
		int x = b->experts[j];
		if (x < 0 || x >= E)
			return coli_errf(e, COLI_EUSAGE, "cache simulator: batch %d: expert %d out of range 0..%d", k, x, E - 1);
		if (s->mark[b->layer * E + x] == s->stamp)
			return coli_errf(e, COLI_EUSAGE, "cache simulator: batch %d: expert %d listed twice", k, x);
		s->mark[b->layer * E + x] = s->stamp;
	}
	return 0;
}

/* BELADY: next[k x max_batch + j], the batch after k using member j again (INT_MAX: none);
 * first[g] ends as g's first use in seq. */
static void next_uses(coli_sim *s, const coli_sim_batch *seq, int n)
{
	size_t ge = (size_t)s->o.n_layers * (size_t)s->o.n_experts;
	for (size_t g = 0; g < ge; g++)
		s->first[g] = INT_MAX;
	for (int k = n - 1; k >= 0; k--) {
		int base = seq[k].layer * s->o.n_experts, *nx = s->next + (size_t)k * (size_t)s->o.max_batch;
		for (int j = 0; j < seq[k].n; j++)
			nx[j] = s->first[base + seq[k].experts[j]];
		for (int j = 0; j < seq[k].n; j++)
			s->first[base + seq[k].experts[j]] = k;
	}
}

/* The preload's ranking: LFU the counts, BELADY the earliest first use; pinned never. */
static void warm_scores(coli_sim *s)
{
	size_t ge = (size_t)s->o.n_layers * (size_t)s->o.n_experts;
	for (size_t g = 0; g < ge; g++)
		s->score[g] = s->pinned[g] ? 0
			    : s->o.policy == COLI_SIM_LFU ? s->count[g]
			    : s->first[g] == INT_MAX ? 0 : (double)(INT_MAX - s->first[g]);
}

/* Fills each empty pool with its experts of highest score, in rank order; neither hit nor miss. */
static void preload(coli_sim *s)
{
	int E = s->o.n_experts, span = s->o.global ? s->o.n_layers * E : E;
	warm_scores(s);
	for (int pool = 0; pool < s->pools; pool++) {
		int base = pool * E * !s->o.global, got = coli_pins_choose(s->score + base, span, s->cap, s->list);
		for (int j = 0; j < got; j++) {
			int g = base + s->list[j];
			touch(s, pool, place(s, pool, g), 0, g, s->first[g]);
		}
	}
}

int coli_sim_run(coli_sim *s, const coli_sim_batch *seq, int n, coli_err *e)
{
	int belady = s->o.policy == COLI_SIM_BELADY;
	if (belady && n > s->o.max_batches)
		return coli_errf(e, COLI_EUSAGE, "cache simulator: %d batches exceed max_batches %d", n, s->o.max_batches);
	for (int k = 0; k < n; k++)
		if (check_batch(s, &seq[k], k, e) < 0)
			return -1;
	if (belady)
		next_uses(s, seq, n);
	if (s->fresh && s->o.warm)
		preload(s);
	s->fresh = 0;
	for (int k = 0; k < n; k++) {
		if (s->ad)
			adapt_batch(s, &seq[k]);
		(s->o.bytes ? play_bytes : play)(s, &seq[k], belady ? s->next + (size_t)k * (size_t)s->o.max_batch : NULL);
	}
	return 0;
}

coli_sim_stats coli_sim_stats_of(const coli_sim *s, int layer)
{
	coli_sim_stats t = {0, 0, 0, 0};
	if (layer >= 0)
		return layer < s->o.n_layers ? s->st[layer] : t;
	for (int l = 0; l < s->o.n_layers; l++)
		t.hits += s->st[l].hits, t.misses += s->st[l].misses, t.pin_hits += s->st[l].pin_hits,
		t.evictions += s->st[l].evictions;
	return t;
}
