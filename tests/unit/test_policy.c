/* test_policy.c: the cache policy (engine/policy.h): the RAM budget split with its messages, the
 * pin order, and the cache simulator's policies on sequences worked out by hand; then the
 * simulator's pins + LRU and LFU against the streaming store itself on the same decode steps. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "container.h"
#include "policy.h"
#include "store.h"
#include "t.h"

#define MiB 1048576.0
#define GiB 1073741824.0

/* ---- budget ---------------------------------------------------------------------------------- */

/* A model of 64 experts per layer, top-4, records of 1 MiB per layer summed; no budget. */
static coli_budget_in base_in(void)
{
	return (coli_budget_in){.dense = 100 * MiB, .kv = 10 * MiB, .vocab = 1000, .record = MiB, .max_experts = 64,
				.top_k = 4, .pins = -1};
}

static void test_budget_fits(void)
{
	coli_budget_in in = base_in();
	coli_budget b;
	coli_err e = {0, ""};
	in.budget = 2 * GiB;
	int rc = coli_budget_split(&in, &b, &e);
	double buf = 1000.0 * 4 * 4 + 64 * MiB, fixed = 110 * MiB + buf;
	T_CHECK("budget: fits: the fixed part is dense + KV + 4 float32 logit rows per entry + 64 MiB",
		rc == 0 && b.buffers == buf && b.fixed == fixed && b.left == 2 * GiB - fixed && b.min_cache == 4 * MiB,
		"rc %d (%s), buffers %.0f, fixed %.0f, left %.0f", rc, e.msg, b.buffers, b.fixed, b.left);
	T_CHECK("budget: what the budget leaves is capped at the experts per layer; no usage, no pins",
		b.cache == 64 && b.pins == 0 && b.slots == 64 && b.slot_bytes == 64 * MiB && b.pin_bytes == 0,
		"cache %d, pins %d, slots %d", b.cache, b.pins, b.slots);
	in.work = 40 * MiB;
	rc = coli_budget_split(&in, &b, &e);
	T_CHECK("budget: the engine's working memory counts in the buffers", rc == 0 && b.buffers == buf + 40 * MiB &&
		b.fixed == fixed + 40 * MiB, "rc %d, buffers %.0f", rc, b.buffers);
	in.work = 0;
	in.budget = fixed + 10.5 * MiB;
	rc = coli_budget_split(&in, &b, &e);
	T_CHECK("budget: in whole records of what is left", rc == 0 && b.cache == 10 && b.slots == 10, "rc %d, cache %d",
		rc, b.cache);
	in.has_usage = 1, in.usage_known = 64;
	rc = coli_budget_split(&in, &b, &e);
	T_CHECK("budget: with usage, half the cache pinned", rc == 0 && b.pins == 5 && b.slots == 5 &&
		b.pin_bytes == 5 * MiB, "rc %d, pins %d, slots %d", rc, b.pins, b.slots);
}

/* The error of in, or "" when it fits. */
static const char *split_error(const coli_budget_in *in, coli_err *e)
{
	coli_budget b;
	e->code = 0, e->msg[0] = 0;
	coli_budget_split(in, &b, e);
	return e->msg;
}

static void test_budget_refused(void)
{
	coli_err e;
	coli_budget_in in = {.budget = 0.25 * GiB, .dense = 200 * MiB, .vocab = 1000, .record = 10 * MiB,
			     .max_experts = 64, .top_k = 4, .pins = -1};
	const char *m = split_error(&in, &e);
	T_CHECK("budget: the fixed part and the minimum cache do not fit: refused with today's message",
		e.code == COLI_EUSAGE && !strcmp(m, "--ram 0.25: needs at least 0.30 GiB (dense 0.20 GiB, KV 0.00 GiB, "
						    "buffers 0.06 GiB, minimum expert cache 0.04 GiB)"), "'%s'", m);
	in = (coli_budget_in){.budget = GiB, .record = 100 * MiB, .max_experts = 64, .top_k = 2, .cache_slots = 12,
			      .pins = -1};
	m = split_error(&in, &e);
	T_CHECK("budget: --cache-slots beyond the budget: refused naming --cache-slots",
		e.code == COLI_EUSAGE && !strcmp(m, "--cache-slots: 0 pins and 12 cache slots per layer (1.17 GiB) do not "
						    "fit --ram 1 (0.94 GiB left beyond 0.06 GiB fixed)"), "'%s'", m);
	in.cache_slots = 0, in.pins = 20, in.has_usage = 1;
	m = split_error(&in, &e);
	T_CHECK("budget: --pins beyond the budget: refused naming --pins",
		e.code == COLI_EUSAGE && !strcmp(m, "--pins: 20 pins and 2 cache slots per layer (2.15 GiB) do not fit "
						    "--ram 1 (0.94 GiB left beyond 0.06 GiB fixed)"), "'%s'", m);
	in.budget = 0;
	m = split_error(&in, &e);
	T_CHECK("budget: without a budget nothing is refused", e.code == 0 && !*m, "'%s'", m);
}

/* pins and slots of a budget-less split of cache (0: default) with pins (-1: default). */
static void split(int cache, int pins, int has_usage, int known, int *p, int *s)
{
	coli_budget_in in = base_in();
	coli_budget b = {.pins = -7, .slots = -7};
	in.dense = 1e15, in.cache_slots = cache, in.pins = pins, in.has_usage = has_usage, in.usage_known = known;
	coli_budget_split(&in, &b, NULL);
	*p = b.pins, *s = b.slots;
}

static void test_budget_pins(void)
{
	int p, s;
	split(0, -1, 1, 100, &p, &s);
	T_CHECK("budget: no budget: top_k x 4 records, half of them pins", p == 8 && s == 8, "%d pins, %d slots", p, s);
	split(0, -1, 1, 3, &p, &s);
	T_CHECK("budget: default pins capped by the experts the usage has seen", p == 3 && s == 13, "%d, %d", p, s);
	split(0, -1, 1, 0, &p, &s);
	T_CHECK("budget: a fresh usage file pins nothing", p == 0 && s == 16, "%d, %d", p, s);
	split(0, -1, 0, 100, &p, &s);
	T_CHECK("budget: no usage, no pins", p == 0 && s == 16, "%d, %d", p, s);
	split(5, -1, 1, 100, &p, &s);
	T_CHECK("budget: default pins leave top_k slots", p == 1 && s == 4, "%d, %d", p, s);
	split(16, 14, 1, 0, &p, &s);
	T_CHECK("budget: explicit pins are not capped; slots at least top_k", p == 14 && s == 4, "%d, %d", p, s);
	split(16, 14, 0, 100, &p, &s);
	T_CHECK("budget: explicit pins need usage", p == 0 && s == 16, "%d, %d", p, s);
	split(16, 0, 1, 100, &p, &s);
	T_CHECK("budget: --pins 0: all slots", p == 0 && s == 16, "%d, %d", p, s);
	coli_budget_in in = base_in();
	coli_budget b;
	in.top_k = 0;
	coli_budget_split(&in, &b, NULL);
	T_CHECK("budget: top_k 0 counts as 1", b.cache == 4 && b.slots == 4 && b.min_cache == MiB, "cache %d", b.cache);
}

/* ---- pins ------------------------------------------------------------------------------------ */

static void test_pins(void)
{
	const double c[] = {3, 5, 5, 0, 5, -1, 1};
	int out[8], n = coli_pins_choose(c, 7, 3, out);
	T_CHECK("pins: highest counts, ties lower id", n == 3 && out[0] == 1 && out[1] == 2 && out[2] == 4,
		"%d: %d %d %d", n, out[0], out[1], out[2]);
	n = coli_pins_choose(c, 7, 8, out);
	T_CHECK("pins: more asked than counted: count <= 0 never pinned", n == 5 && out[3] == 0 && out[4] == 6, "%d", n);
	const double z[] = {0, 0, 0};
	T_CHECK("pins: all zero: none", coli_pins_choose(z, 3, 2, out) == 0 && coli_pins_choose(c, 7, 0, out) == 0, "chose some");
	const double nan[] = {1, NAN, 2};
	n = coli_pins_choose(nan, 3, 3, out);
	T_CHECK("pins: NaN never pinned", n == 2 && out[0] == 2 && out[1] == 0, "%d", n);
	T_CHECK("pins: the order step by step", coli_pin_next(c, 7, -1) == 1 && coli_pin_next(c, 7, 4) == 0 &&
		coli_pin_next(c, 7, 6) == -1, "%d %d %d", coli_pin_next(c, 7, -1), coli_pin_next(c, 7, 4),
		coli_pin_next(c, 7, 6));
	const double t[] = {1, 0, 2, 0, 3, 3, 3, 0};
	T_CHECK("pins: usage known: the most experts counted in one layer",
		coli_usage_known(t, 2, 4) == 3 && coli_usage_known(NULL, 2, 4) == 0, "%d", coli_usage_known(t, 2, 4));
	T_CHECK("decay: coli-run's 0.9", COLI_USAGE_DECAY == 0.9, "%g", COLI_USAGE_DECAY);
}

/* ---- simulator ------------------------------------------------------------------------------- */

#define MAXSEQ 64

/* A sequence written as "layer:expert,expert layer:expert ..." ("e" alone: layer 0). */
typedef struct seqbuf {
	coli_sim_batch b[MAXSEQ];
	int32_t ids[MAXSEQ][8];
	int n;
} seqbuf;

static void parse_seq(seqbuf *q, const char *text)
{
	q->n = 0;
	for (const char *p = text; *p && q->n < MAXSEQ;) {
		coli_sim_batch *b = &q->b[q->n];
		char *end;
		long v = strtol(p, &end, 10);
		b->layer = 0, b->n = 0, b->experts = q->ids[q->n];
		if (*end == ':')
			b->layer = (int)v, v = strtol(end + 1, &end, 10);
		q->ids[q->n][b->n++] = (int32_t)v;
		while (*end == ',')
			q->ids[q->n][b->n++] = (int32_t)strtol(end + 1, &end, 10);
		q->n++;
		p = end + strspn(end, " ");
	}
}

/* Total statistics of one run of text through a fresh simulator of o (counts, pins at start). */
static coli_sim_stats sim(const coli_sim_opts *o, const double *counts, int pins, const char *text, int *layer1_hits)
{
	coli_sim *s = NULL;
	coli_err e = {0, ""};
	coli_sim_stats st = {~0ull, ~0ull, ~0ull, ~0ull};
	seqbuf q;
	parse_seq(&q, text);
	if (coli_sim_open(&s, o, &e) < 0)
		return printf("open: %s\n", e.msg), st;
	coli_sim_start(s, counts, pins);
	if (coli_sim_run(s, q.b, q.n, &e) == 0)
		st = coli_sim_stats_of(s, -1);
	else
		printf("run: %s\n", e.msg);
	if (layer1_hits)
		*layer1_hits = (int)coli_sim_stats_of(s, 1).hits;
	coli_sim_close(s);
	return st;
}

static coli_sim_opts opts(int policy, int capacity, int max_batch)
{
	return (coli_sim_opts){.policy = policy, .n_layers = 2, .n_experts = 8, .capacity = capacity,
			       .max_batch = max_batch, .max_batches = MAXSEQ};
}

static int is(coli_sim_stats st, uint64_t hits, uint64_t misses, uint64_t pin_hits)
{
	return st.hits == hits && st.misses == misses && st.pin_hits == pin_hits;
}

#define SHOW(st) (unsigned long long)(st).hits, (unsigned long long)(st).misses, (unsigned long long)(st).pin_hits

/* The order of eviction the store and the simulator share. */
static void test_evict_order(void)
{
	T_CHECK("evict: LRU takes the least recent whatever the counts",
		coli_evict_before(COLI_SIM_LRU, 9, 1, 1, 2) && !coli_evict_before(COLI_SIM_LRU, 1, 2, 9, 1), "%s", "order");
	T_CHECK("evict: LFU takes the lower count first, then the least recent",
		coli_evict_before(COLI_SIM_LFU, 1, 2, 9, 1) && !coli_evict_before(COLI_SIM_LFU, 9, 1, 1, 2) &&
		coli_evict_before(COLI_SIM_LFU, 3, 1, 3, 2) && !coli_evict_before(COLI_SIM_LFU, 3, 2, 3, 1), "%s", "order");
}

static void test_sim_loop(void)
{
	const char *loop = "0 1 2 0 1 2 0 1 2";
	coli_sim_opts o = opts(COLI_SIM_LRU, 2, 1);
	coli_sim_stats st = sim(&o, NULL, 0, loop, NULL);
	T_CHECK("sim: LRU on a loop one longer than the cache misses every time", is(st, 0, 9, 0),
		"%llu hits, %llu misses, %llu pin hits", SHOW(st));
	o.policy = COLI_SIM_BELADY;
	st = sim(&o, NULL, 0, loop, NULL);
	T_CHECK("sim: Belady on the same loop: 3 hits (evicts the one used furthest ahead)", is(st, 3, 6, 0),
		"%llu, %llu, %llu", SHOW(st));
	o.warm = 1;
	st = sim(&o, NULL, 0, loop, NULL);
	T_CHECK("sim: Belady warm: the first used preloaded, neither hit nor miss", is(st, 5, 4, 0), "%llu, %llu, %llu",
		SHOW(st));
}

static void test_sim_pins(void)
{
	double counts[16] = {0};
	counts[3] = 7, counts[8 + 5] = 2;
	coli_sim_opts o = opts(COLI_SIM_LRU, 1, 1);
	coli_sim_stats st = sim(&o, counts, 1, "3 0 3 1 3 0", NULL);
	T_CHECK("sim: pins always hit", is(st, 3, 3, 3), "%llu, %llu, %llu", SHOW(st));
	st = sim(&o, counts, 1, "0 3 0 1:5 1:4 1:5", NULL);
	T_CHECK("sim: pins take no slot (one slot: 0 stays beside pinned 3); each layer its own pins",
		is(st, 4, 2, 3), "%llu, %llu, %llu", SHOW(st));
	st = sim(&o, counts, 0, "3 3", NULL);
	T_CHECK("sim: pins 0: none", is(st, 1, 1, 0), "%llu, %llu, %llu", SHOW(st));
	double zero[16] = {0};
	st = sim(&o, zero, 4, "3 3", NULL);
	T_CHECK("sim: a count of 0 is never pinned", is(st, 1, 1, 0), "%llu, %llu, %llu", SHOW(st));
}

static void test_sim_batches(void)
{
	double counts[16] = {0};
	counts[5] = 10, counts[6] = 10;
	coli_sim_opts o = opts(COLI_SIM_LFU, 2, 2);
	o.warm = 1;
	coli_sim_stats st = sim(&o, counts, 0, "0,1 0 1", NULL);
	T_CHECK("sim: a batch never evicts its own members (LFU: 0's low count does not make 1 evict it)",
		is(st, 2, 2, 0), "%llu, %llu, %llu", SHOW(st));
	o = opts(COLI_SIM_BELADY, 2, 2);
	st = sim(&o, NULL, 0, "0,1 2,3 0 1", NULL);
	T_CHECK("sim: Belady: a batch's misses evict others, not each other", is(st, 0, 6, 0), "%llu, %llu, %llu",
		SHOW(st));
	o = opts(COLI_SIM_LRU, 3, 3);
	st = sim(&o, NULL, 0, "0,1,2 3,0 1 4 3", NULL);
	T_CHECK("sim: within a batch the hits are used first (of batch 3,0, 4 evicts 0 later, not 3)", is(st, 2, 6, 0),
		"%llu, %llu, %llu", SHOW(st));
}

static void test_sim_global(void)
{
	coli_sim_opts o = opts(COLI_SIM_LRU, 1, 1);
	int l1 = -1;
	coli_sim_stats st = sim(&o, NULL, 0, "0 1 0 1", NULL);
	T_CHECK("sim: per layer, one slot: layer 0 thrashes", is(st, 0, 4, 0), "%llu, %llu, %llu", SHOW(st));
	o.capacity = 2, o.global = 1;
	st = sim(&o, NULL, 0, "0 1 0 1", NULL);
	T_CHECK("sim: global, two slots: layer 0 may use both", is(st, 2, 2, 0), "%llu, %llu, %llu", SHOW(st));
	st = sim(&o, NULL, 0, "0:0 1:0 0:1 0:0 1:0", &l1);
	T_CHECK("sim: global: layers compete for the pool", is(st, 0, 5, 0) && l1 == 0, "%llu, %llu, %llu; layer 1: %d",
		SHOW(st), l1);
	o.global = 0;
	st = sim(&o, NULL, 0, "0:0 1:0 0:1 0:0 1:0", &l1);
	T_CHECK("sim: per layer: they do not (statistics per layer)", is(st, 2, 3, 0) && l1 == 1,
		"%llu, %llu, %llu; layer 1: %d", SHOW(st), l1);
	double counts[16] = {0};
	counts[8 + 2] = 3, counts[1] = 2, counts[4] = 1;
	o = opts(COLI_SIM_LFU, 2, 1);
	o.global = 1, o.warm = 1;
	st = sim(&o, counts, 0, "1:2 0:1 0:4", NULL);
	T_CHECK("sim: global LFU warm preloads the most counted of all layers", is(st, 2, 1, 0), "%llu, %llu, %llu",
		SHOW(st));
}

static void test_sim_policies(void)
{
	coli_sim_opts o = opts(COLI_SIM_SLRU, 2, 1);
	coli_sim_stats st = sim(&o, NULL, 0, "0 0 1 2 0", NULL);
	T_CHECK("sim: SLRU: a hit protects 0 from a scan", is(st, 2, 3, 0), "%llu, %llu, %llu", SHOW(st));
	o.policy = COLI_SIM_LRU;
	st = sim(&o, NULL, 0, "0 0 1 2 0", NULL);
	T_CHECK("sim: LRU: the same scan evicts 0", is(st, 1, 4, 0), "%llu, %llu, %llu", SHOW(st));
	o.policy = COLI_SIM_SLRU;
	st = sim(&o, NULL, 0, "0 0 1 1 0 2 1 0", NULL);
	T_CHECK("sim: SLRU: beyond 80% protected the least recent other member returns to probation",
		is(st, 4, 4, 0), "%llu, %llu, %llu", SHOW(st));
	o.policy = COLI_SIM_LFU;
	st = sim(&o, NULL, 0, "0 0 0 1 2 0", NULL);
	T_CHECK("sim: LFU keeps the most used", is(st, 3, 3, 0), "%llu, %llu, %llu", SHOW(st));
	double counts[16] = {0};
	counts[1] = 10;
	st = sim(&o, counts, 0, "0 0 1 2 0 1", NULL);
	T_CHECK("sim: LFU counts the counts given up front", is(st, 2, 4, 0), "%llu, %llu, %llu", SHOW(st));
	counts[1] = 2, counts[3] = 5;
	o.warm = 1;
	st = sim(&o, counts, 0, "1 0 3", NULL);
	T_CHECK("sim: LFU warm: preloaded by count, evicts the lowest", is(st, 2, 1, 0), "%llu, %llu, %llu", SHOW(st));
}

/* Each rule of the options and the batches refused, naming what. */
static void test_sim_refused(void)
{
	coli_sim *s = (coli_sim *)1;
	coli_err e = {0, ""};
	coli_sim_opts o = opts(COLI_SIM_LRU, 3, 4);
	T_CHECK("sim: capacity below the largest batch refused", coli_sim_open(&s, &o, &e) < 0 && !s &&
		e.code == COLI_EUSAGE && strstr(e.msg, "capacity 3"), "'%s'", e.msg);
	o = opts(COLI_SIM_SLRU, 2, 1);
	o.warm = 1;
	T_CHECK("sim: warm LRU or SLRU refused", coli_sim_open(&s, &o, &e) < 0 && strstr(e.msg, "warm"), "'%s'", e.msg);
	o = opts(COLI_SIM_BELADY, 2, 2);
	coli_sim_open(&s, &o, &e);
	const struct {
		const char *seq, *want;
	} bad[] = {{"2:1", "batch 0: layer 2 out of range 0..1"}, {"0 1:8", "batch 1: expert 8 out of range 0..7"},
		   {"1,1", "batch 0: expert 1 listed twice"}, {"1,2,3", "batch 0: 3 experts, expected 0..2"}};
	for (int i = 0; s && i < 4; i++) {
		seqbuf q;
		char name[96];
		parse_seq(&q, bad[i].seq);
		e.msg[0] = 0;
		snprintf(name, sizeof(name), "sim: a bad batch refused: %s", bad[i].want);
		T_CHECK(name, coli_sim_run(s, q.b, q.n, &e) < 0 && strstr(e.msg, bad[i].want) &&
			is(coli_sim_stats_of(s, -1), 0, 0, 0), "'%s'", e.msg);
	}
	coli_sim_batch many[MAXSEQ + 1];
	memset(many, 0, sizeof(many));
	T_CHECK("sim: Belady refuses a sequence beyond max_batches", s && coli_sim_run(s, many, MAXSEQ + 1, &e) < 0 &&
		strstr(e.msg, "max_batches"), "'%s'", e.msg);
	coli_sim_close(s);
	coli_sim_close(NULL);
}

/* ---- the streaming store --------------------------------------------------------------------- */

static char scratch[] = "/tmp/coli-policy-XXXXXX";

/* Runs a shell command; its exit status, -1 when it did not exit. */
static int run_cmd(const char *cmd)
{
	int st = system(cmd);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define STEPS 40

/* A decode step as coli-run's MoE block asks it: the batch requested (its reads queued, none
 * evicting another), then got in the order the reads land (here reversed when backwards: the
 * recency must not depend on it), all released. */
static int store_step(coli_store *st, const coli_sim_batch *b, int backwards, coli_err *e)
{
	int ids[8];
	for (int j = 0; j < b->n; j++)
		ids[j] = b->experts[j];
	coli_store_request(st, b->layer, ids, b->n);
	for (int i = 0; i < b->n; i++)
		if (!coli_store_get(st, b->layer, ids[backwards ? b->n - 1 - i : i], e))
			return -1;
	for (int j = 0; j < b->n; j++)
		coli_store_release(st, b->layer, ids[j]);
	return 0;
}

/* Skewed decode steps over the container's MoE layers (one batch per layer per step). */
static int make_steps(const coli_container *c, coli_sim_batch *seq, int32_t (*ids)[8], int k)
{
	unsigned r = 12345;
	int n = 0;
	for (int t = 0; t < STEPS; t++)
		for (int i = 0; i < c->layout.n_elayers; i++) {
			int E = c->layout.elayers[i].n_experts, m = 0;
			while (m < k) {
				r = r * 1103515245u + 12345u;
				int x = (int)((r >> 16) % (unsigned)E) % (1 + (int)((r >> 8) % (unsigned)E)), dup = 0;
				for (int j = 0; j < m; j++)
					dup |= ids[n][j] == x;
				if (!dup)
					ids[n][m++] = x;
			}
			seq[n] = (coli_sim_batch){c->layout.elayers[i].layer, k, ids[n]};
			n++;
		}
	return n;
}

/* The store and the simulator on the same steps, one step at a time: after each, the same hits,
 * misses, pin hits and evictions so far (both evict in coli_evict_before's order). */
static void compare_store(const coli_container *c, const coli_sim_batch *seq, int n, const double *usage,
			  int slots, int pins, int policy, int backwards)
{
	coli_err e = {0, ""};
	coli_store *st = NULL;
	coli_sim *s = NULL;
	store_stream_opts so = {.cache_slots = slots, .pins = pins, .usage = usage, .cache_policy = policy};
	int L = c->model.n_layers + c->model.n_mtp_layers, k = c->model.top_k, rc = coli_store_stream_open(&st, c, &so, &e);
	coli_sim_opts o = {.policy = policy, .n_layers = L, .n_experts = c->model.n_experts, .capacity = slots,
			   .max_batch = k};
	if (rc == 0 && (rc = coli_sim_open(&s, &o, &e)) == 0)
		coli_sim_start(s, usage, pins);
	coli_store_stats got = {0};
	coli_sim_stats want = {0, 0, 0, 0};
	int step = 0, same = 1;
	for (; rc == 0 && same && step < n; step++) {
		rc = store_step(st, &seq[step], backwards, &e);
		rc = rc == 0 ? coli_sim_run(s, &seq[step], 1, &e) : rc;
		if (rc == 0)
			coli_store_get_stats(st, &got), want = coli_sim_stats_of(s, -1);
		same = got.hits == want.hits && got.misses == want.misses && got.pin_hits == want.pin_hits &&
		       got.evictions == want.evictions;
	}
	char name[160];
	snprintf(name, sizeof(name), "sim: the streaming store's decode steps, %s, %d slots + %d pins, got %s: the same "
		 "hits, misses and evictions after every step", policy == COLI_SIM_LFU ? "LFU" : "LRU", slots, pins,
		 backwards ? "backwards" : "in order");
	T_CHECK(name, rc == 0 && same && want.misses > 0 && want.hits > want.pin_hits && want.evictions > 0,
		"rc %d (%s): after step %d of %d: store %llu/%llu/%llu/%llu evicted, sim %llu/%llu/%llu/%llu evicted", rc,
		e.msg, step, n, (unsigned long long)got.hits, (unsigned long long)got.misses,
		(unsigned long long)got.pin_hits, (unsigned long long)got.evictions, SHOW(want),
		(unsigned long long)want.evictions);
	coli_sim_close(s);
	coli_store_close(st);
}

static void test_store(void)
{
	char dir[600];
	coli_container *c = NULL;
	coli_err e = {0, ""};
	char cmd[1400];
	snprintf(dir, sizeof(dir), "%s/q.coli", scratch);
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q '%s/qwen3_moe-tiny/checkpoint' '%s'", t_fixtures(), dir);
	int rc = run_cmd(cmd);
	rc = rc == 0 ? coli_container_open(&c, dir, &e) : -1;
	T_CHECK("sim: qwen3_moe-tiny converts and opens", rc == 0, "%s", e.msg);
	if (rc)
		return;
	int L = c->model.n_layers + c->model.n_mtp_layers, E = c->model.n_experts;
	coli_sim_batch *seq = calloc((size_t)STEPS * (size_t)c->layout.n_elayers, sizeof(*seq));
	int32_t(*ids)[8] = calloc((size_t)STEPS * (size_t)c->layout.n_elayers, sizeof(*ids));
	double *usage = calloc((size_t)L * (size_t)E, sizeof(*usage));
	if (seq && ids && usage && c->model.top_k <= 8) {
		int n = make_steps(c, seq, ids, c->model.top_k);
		for (int i = 0; i < n; i++) /* the counts of the same steps: pins that matter */
			for (int j = 0; j < seq[i].n; j++)
				usage[(size_t)seq[i].layer * (size_t)E + (size_t)seq[i].experts[j]] += 1;
		static const int policies[] = {COLI_SIM_LRU, COLI_SIM_LFU};
		T_CHECK("sim: coli-run's default policy is one the store has (checked below)",
			COLI_CACHE_DEFAULT == COLI_SIM_LRU || COLI_CACHE_DEFAULT == COLI_SIM_LFU, "%d", COLI_CACHE_DEFAULT);
		for (int i = 0; i < 4; i++) {
			int p = policies[i / 2], bw = i % 2;
			compare_store(c, seq, n, usage, c->model.top_k, 0, p, bw);
			compare_store(c, seq, n, usage, c->model.top_k * 2, 0, p, bw);
			compare_store(c, seq, n, usage, c->model.top_k + 1, 3, p, bw);
			compare_store(c, seq, n, usage, c->model.top_k * 2, c->model.top_k, p, bw);
			compare_store(c, seq, n, NULL, c->model.top_k + 2, 0, p, bw);
		}
	}
	free(seq), free(ids), free(usage);
	coli_container_close(c);
}

int main(void)
{
	test_budget_fits();
	test_budget_refused();
	test_budget_pins();
	test_pins();
	test_evict_order();
	test_sim_loop();
	test_sim_pins();
	test_sim_batches();
	test_sim_global();
	test_sim_policies();
	test_sim_refused();
	if (!mkdtemp(scratch)) {
		T_CHECK("sim: scratch folder", 0, "mkdtemp failed");
		T_EXIT();
	}
	test_store();
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
	if (run_cmd(cmd) != 0)
		fprintf(stderr, "test_policy: cannot remove %s\n", scratch);
	T_EXIT();
}
