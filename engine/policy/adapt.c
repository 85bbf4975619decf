/* policy/adapt.c: per-layer cache shares that follow each layer's reuse (policy.h): a stack of
 * every size's pool per layer, the hits each size would have had so far, and utility-based
 * partitioning's lookahead greedy over them.
 *
 * LRU and LFU (the key: the count, then the last use) rank experts by a priority that does not
 * depend on the pool's size, and a batch is never evicted: a pool of c records after a batch B
 * holds B and the c - |B| experts of highest priority among those its pool held before and B does
 * not name. Pools of every size are then nested (Mattson's inclusion property), so one list per
 * layer, its stack, holds them all: a pool of c records holds the stack's first c entries. A
 * batch member at depth d hits in every pool larger than d; after the batch the stack is B (the
 * highest priority first), then, size by size, the expert of highest priority among the old
 * stack's first entries not yet placed (a heap). */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

struct coli_adapt {
	coli_adapt_opts o;
	double *cost, total;   /* [pools] bytes a record; the budget the shares split */
	int *start, *least, *most; /* [pools] the starting shares and the bounds of a share, in records */
	int *share;            /* [pools] records */
	int *stack;            /* [pools x E] experts, most kept first; each pool's first depth[p] */
	int *depth;            /* [pools] experts in the stack */
	int *at;               /* [pools x E] an expert's place in its stack, -1 when absent */
	double *count;         /* [pools x E] LFU: counts at start + batches so far */
	uint64_t *last;        /* [pools x E] the tick of the last batch naming it (0: never) */
	uint64_t *hist;        /* [pools x (E + 1)] batch members found at each depth */
	int *heap, *old;       /* [E] scratch: restack's heap and old stack */
	int *c;                /* [pools] derive's shares */
	double *cum;           /* [pools x (E + 1)] derive's hits at each size */
	int *ratio_k;          /* [pools] the size of each pool's best step */
	double *ratio;         /* [pools] its hits per byte */
	uint64_t tick;
	int since;             /* pool 0's batches since the shares were last derived */
};

static int check(const coli_adapt_opts *o, coli_err *e)
{
	if (o->n_pools < 1 || o->n_experts < 1 || o->period < 1)
		return coli_errf(e, COLI_EUSAGE, "adaptive shares: %d pools x %d experts, period %d: expected >= 1 each",
				 o->n_pools, o->n_experts, o->period);
	if (o->policy != COLI_SIM_LRU && o->policy != COLI_SIM_LFU)
		return coli_errf(e, COLI_EUSAGE, "adaptive shares: policy %d is not LRU or LFU", o->policy);
	for (int p = 0; p < o->n_pools; p++) {
		if (!(o->cost[p] > 0 && o->cost[p] < 1e300))
			return coli_errf(e, COLI_EUSAGE, "adaptive shares: cost[%d] %g: expected > 0", p, o->cost[p]);
		if (o->least[p] < 0 || o->least[p] > o->start[p] || o->start[p] > o->most[p] || o->most[p] > o->n_experts)
			return coli_errf(e, COLI_EUSAGE, "adaptive shares: pool %d: least %d, start %d, most %d: expected "
					 "0 <= least <= start <= most <= %d", p, o->least[p], o->start[p], o->most[p],
					 o->n_experts);
	}
	return 0;
}

int coli_adapt_open(coli_adapt **out, const coli_adapt_opts *o, coli_err *e)
{
	*out = NULL;
	if (check(o, e) < 0)
		return -1;
	coli_adapt *a = calloc(1, sizeof(*a));
	size_t P = (size_t)o->n_pools, E = (size_t)o->n_experts;
	if (a) {
		a->o = *o;
		a->cost = calloc(P, sizeof(*a->cost)), a->least = calloc(P, sizeof(int)), a->most = calloc(P, sizeof(int));
		a->start = calloc(P, sizeof(int));
		a->share = calloc(P, sizeof(int)), a->stack = calloc(P * E, sizeof(int)), a->depth = calloc(P, sizeof(int));
		a->at = calloc(P * E, sizeof(int)), a->count = calloc(P * E, sizeof(double));
		a->last = calloc(P * E, sizeof(uint64_t)), a->hist = calloc(P * (E + 1), sizeof(uint64_t));
		a->heap = calloc(E, sizeof(int)), a->old = calloc(E, sizeof(int)), a->c = calloc(P, sizeof(int));
		a->cum = calloc(P * (E + 1), sizeof(double));
		a->ratio_k = calloc(P, sizeof(int)), a->ratio = calloc(P, sizeof(double));
	}
	if (!a || !a->cost || !a->start || !a->least || !a->most || !a->share || !a->stack || !a->depth || !a->at || !a->count ||
	    !a->last || !a->hist || !a->heap || !a->old || !a->c || !a->cum || !a->ratio_k || !a->ratio) {
		coli_adapt_close(a);
		return coli_errf(e, COLI_ENOMEM, "out of memory for adaptive shares of %zu pools x %zu experts", P, E);
	}
	for (size_t p = 0; p < P; p++)
		a->cost[p] = o->cost[p], a->start[p] = o->start[p], a->least[p] = o->least[p], a->most[p] = o->most[p],
		a->total += o->cost[p] * o->start[p];
	a->o.cost = NULL, a->o.start = a->o.least = a->o.most = NULL; /* the copies above */
	coli_adapt_start(a, NULL);
	*out = a;
	return 0;
}

void coli_adapt_close(coli_adapt *a)
{
	if (!a)
		return;
	free(a->cost), free(a->start), free(a->least), free(a->most), free(a->share), free(a->stack), free(a->depth), free(a->at);
	free(a->count), free(a->last), free(a->hist), free(a->heap), free(a->old), free(a->c), free(a->cum);
	free(a->ratio_k), free(a->ratio), free(a);
}

void coli_adapt_start(coli_adapt *a, const double *counts)
{
	size_t P = (size_t)a->o.n_pools, E = (size_t)a->o.n_experts;
	for (size_t p = 0; p < P; p++)
		a->share[p] = a->start[p], a->depth[p] = 0;
	for (size_t g = 0; g < P * E; g++)
		a->at[g] = -1, a->last[g] = 0, a->count[g] = counts && counts[g] > 0 ? counts[g] : 0;
	memset(a->hist, 0, P * (E + 1) * sizeof(*a->hist));
	a->tick = 0, a->since = 0;
}

const int *coli_adapt_shares(const coli_adapt *a)
{
	return a->share;
}

double coli_adapt_hits(const coli_adapt *a, int p, int c)
{
	if (p < 0 || p >= a->o.n_pools || c < 0 || c > a->o.n_experts)
		return 0;
	const uint64_t *hs = a->hist + (size_t)p * (size_t)(a->o.n_experts + 1);
	double sum = 0;
	for (int d = 0; d < c; d++)
		sum += (double)hs[d];
	return sum;
}

/* Whether expert x of the pool (row: its counts and ticks) is kept before y: the eviction order
 * of coli_evict_before, reversed. */
static int kept_before(const coli_adapt *a, size_t row, int x, int y)
{
	return coli_evict_before(a->o.policy, a->count[row + (size_t)y], a->last[row + (size_t)y], a->count[row + (size_t)x],
				 a->last[row + (size_t)x]);
}

/* The heap h[0..n) ordered by kept_before (the most kept at the root): x pushed / the root popped. */
static void heap_push(const coli_adapt *a, size_t row, int *h, int *n, int x)
{
	int i = (*n)++;
	for (; i > 0 && kept_before(a, row, x, h[(i - 1) / 2]); i = (i - 1) / 2)
		h[i] = h[(i - 1) / 2];
	h[i] = x;
}

static int heap_pop(const coli_adapt *a, size_t row, int *h, int *n)
{
	int top = h[0], x = h[--*n], i = 0;
	for (int c; (c = 2 * i + 1) < *n; i = c) {
		if (c + 1 < *n && kept_before(a, row, h[c + 1], h[c]))
			c++;
		if (!kept_before(a, row, h[c], x))
			break;
		h[i] = h[c];
	}
	if (*n > 0)
		h[i] = x;
	return top;
}

/* The pool's stack after batch b[0..n) (distinct, counted and ticked): b first, most kept first,
 * then the heap's order over the old stack's entries as each size admits them. */
static void restack(coli_adapt *a, int p, const int *b, int n)
{
	size_t E = (size_t)a->o.n_experts, row = (size_t)p * E;
	int *st = a->stack + row, old = a->depth[p], hn = 0, out = 0;
	memcpy(a->old, st, (size_t)old * sizeof(int));
	for (int j = 0; j < n; j++) { /* b by insertion, most kept first */
		int x = b[j], i = out++;
		for (; i > 0 && kept_before(a, row, x, st[i - 1]); i--)
			st[i] = st[i - 1];
		st[i] = x;
	}
	for (int d = 0; d < old || hn > 0; d++) {
		if (d < old && a->at[row + (size_t)a->old[d]] != -2)
			heap_push(a, row, a->heap, &hn, a->old[d]);
		if (d >= n && hn > 0)
			st[out++] = heap_pop(a, row, a->heap, &hn);
	}
	a->depth[p] = out;
	for (int d = 0; d < out; d++)
		a->at[row + (size_t)st[d]] = d;
}

/* Each pool's hits at each size c so far (the members found above depth c), into cum. */
static void curves(coli_adapt *a)
{
	size_t E1 = (size_t)a->o.n_experts + 1;
	for (size_t p = 0; p < (size_t)a->o.n_pools; p++) {
		double *h = a->cum + p * E1, sum = 0;
		for (size_t d = 0; d < E1; d++)
			h[d] = sum, sum += (double)a->hist[p * E1 + d];
	}
}

static double hits_at(const coli_adapt *a, int p, int c)
{
	return a->cum[(size_t)p * (size_t)(a->o.n_experts + 1) + (size_t)c];
}

/* Pool p's best step from its share: the k more records (within left bytes and its most) that
 * add the most hits per byte. */
static void best_step(coli_adapt *a, const int *c, int p, double left)
{
	double base = hits_at(a, p, c[p]), best = 0;
	int k_best = 0;
	for (int k = 1; c[p] + k <= a->most[p] && k * a->cost[p] <= left; k++) {
		double r = (hits_at(a, p, c[p] + k) - base) / (k * a->cost[p]);
		if (r > best)
			best = r, k_best = k;
	}
	a->ratio[p] = best, a->ratio_k[p] = k_best;
}

/* The shares that would have hit most so far within the budget: utility-based partitioning's
 * lookahead greedy (Qureshi & Patt, 2006) from each pool's least; what no step gained goes to the
 * pools in order, a record at a time while it fits. */
static void derive(coli_adapt *a)
{
	int P = a->o.n_pools, *c = a->c;
	double left = a->total;
	for (int p = 0; p < P; p++)
		c[p] = a->least[p], left -= a->cost[p] * a->least[p];
	if (left < 0)
		return; /* the least of every pool does not fit: the shares stay */
	curves(a);
	for (int p = 0; p < P; p++)
		best_step(a, c, p, left);
	for (;;) {
		int q = 0;
		for (int p = 1; p < P; p++)
			q = a->ratio[p] > a->ratio[q] ? p : q;
		if (!(a->ratio[q] > 0))
			break;
		c[q] += a->ratio_k[q], left -= a->ratio_k[q] * a->cost[q];
		for (int p = 0; p < P; p++)
			if (p == q || a->ratio_k[p] * a->cost[p] > left)
				best_step(a, c, p, left);
	}
	for (int p = 0; p < P; p++)
		for (; c[p] < a->most[p] && a->cost[p] <= left; c[p]++)
			left -= a->cost[p];
	memcpy(a->share, c, (size_t)P * sizeof(int));
}

int coli_adapt_play(coli_adapt *a, int p, const int *experts, int n)
{
	int derived = 0;
	if (p == 0 && ++a->since > a->o.period) {
		derive(a);
		a->since = 1, derived = 1;
	}
	size_t E = (size_t)a->o.n_experts, row = (size_t)p * E;
	uint64_t *hs = a->hist + (size_t)p * (E + 1);
	for (int j = 0; j < n; j++) {
		int x = experts[j], d = a->at[row + (size_t)x];
		hs[d >= 0 ? d : (int)E]++;
		a->at[row + (size_t)x] = -2; /* in the batch: not pushed again by restack */
		a->count[row + (size_t)x] += 1, a->last[row + (size_t)x] = ++a->tick;
	}
	restack(a, p, experts, n);
	return derived;
}
