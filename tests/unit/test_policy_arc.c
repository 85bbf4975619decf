/* test_policy_arc.c: the cache simulator's ARC (engine/policy.h) on sequences traced by hand
 * through the paper's lists (T1, T2, ghosts B1, B2, target p), one expert per batch, and the
 * same in bytes mode, global and per layer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "t.h"

#define MAXSEQ 32

/* Hits of ids (layer 0 unless "L:x") one per batch through a fresh simulator of o. */
static long hits_of(const coli_sim_opts *o, const char *text)
{
	coli_sim_batch b[MAXSEQ];
	int32_t ids[MAXSEQ];
	int n = 0;
	for (char *end; *text && n < MAXSEQ; text = end + strspn(end, " "), n++) {
		long v = strtol(text, &end, 10), layer = 0;
		if (*end == ':')
			layer = v, v = strtol(end + 1, &end, 10);
		ids[n] = (int32_t)v, b[n] = (coli_sim_batch){(int)layer, 1, &ids[n]};
	}
	coli_sim *s;
	coli_err e = {0, ""};
	long hits = -1;
	if (coli_sim_open(&s, o, &e) < 0)
		return printf("open: %s\n", e.msg), -1;
	if (coli_sim_run(s, b, n, &e) == 0)
		hits = (long)coli_sim_stats_of(s, -1).hits;
	else
		printf("run: %s\n", e.msg);
	coli_sim_close(s);
	return hits;
}

static coli_sim_opts arc(int capacity)
{
	return (coli_sim_opts){.policy = COLI_SIM_ARC, .n_layers = 2, .n_experts = 8, .capacity = capacity, .max_batch = 1,
			       .max_batches = MAXSEQ};
}

static void test_arc_slots(void)
{
	coli_sim_opts o = arc(2), lru = o;
	lru.policy = COLI_SIM_LRU;
	/* 0 to T1, hit: T2; 1 to T1; 2: |T1| 1 > p 0, 1 goes to B1; 0 hits in T2 */
	long h = hits_of(&o, "0 0 1 2 0"), l = hits_of(&lru, "0 0 1 2 0");
	T_CHECK("arc: the twice-used 0 (T2) survives a scan that evicts it from LRU", h == 2 && l == 1, "arc %ld, lru %ld",
		h, l);
	/* ... then 1 hits B1: p 1, |T1| 1 is not > p, T2's 0 goes to B2; 1 to T2; 2, 1, 2 hit */
	h = hits_of(&o, "0 0 1 2 1 2 1 2");
	T_CHECK("arc: a ghost hit in B1 raises p: recency wins the next evictions", h == 4, "%ld hits, expected 4", h);
	/* "0 0 1 2 0" then 1 (B1: p 1, 0 of T2 to B2), 0 (B2: p 0, 2 of T1 to B1), 2 (B1: p 1, T1
	 * empty: 1 of T2 to B2), 1 (B2: p 0, T1 empty: 0 of T2 to B2): misses from the ghosts */
	h = hits_of(&o, "0 0 1 2 0 1 0 2 1");
	T_CHECK("arc: ghost hits in B1 and B2 move p both ways", h == 2, "%ld hits, expected 2", h);
}

static void test_arc_pools(void)
{
	coli_sim_opts o = arc(2);
	o.global = 1;
	long h = hits_of(&o, "0:0 0:0 1:1 1:2 0:0");
	T_CHECK("arc: global: one pool over the layers (the scan of layer 1 spares layer 0's T2)", h == 2,
		"%ld hits, expected 2", h);
	o = arc(1);
	h = hits_of(&o, "0:0 0:0 1:1 1:2 0:0");
	T_CHECK("arc: per layer: each layer its own lists", h == 2, "%ld hits, expected 2", h);
	o = arc(2);
	o.bytes = 1, o.budget = 2;
	h = hits_of(&o, "0 0 1 2 1 2 1 2");
	T_CHECK("arc: bytes mode, cost 1, budget 2: as two slots", h == 4, "%ld hits, expected 4", h);
	double cost[2] = {2, 1};
	o.cost = cost, o.budget = 3, o.global = 1;
	coli_sim_opts lru = o;
	lru.policy = COLI_SIM_LRU;
	/* 1:2 makes 4 > 3: T1 (1:1, 1:2; 2) > p 0, so T1's 1:1 goes, where LRU evicts 0:0 */
	h = hits_of(&o, "0:0 0:0 1:1 1:2 0:0");
	long l = hits_of(&lru, "0:0 0:0 1:1 1:2 0:0");
	T_CHECK("arc: bytes mode, global, costs 2 and 1: 0 of layer 0 stays in T2", h == 2 && l == 1, "arc %ld, lru %ld",
		h, l);
	coli_sim *s;
	coli_err e = {0, ""};
	o = arc(2);
	o.warm = 1;
	T_CHECK("arc: a warm start refused", coli_sim_open(&s, &o, &e) < 0 && strstr(e.msg, "warm"), "'%s'", e.msg);
}

int main(void)
{
	test_arc_slots();
	test_arc_pools();
	T_EXIT();
}
