/* test_adapt.c: adaptive shares (engine/policy.h, coli_adapt): the hits of every size from one
 * stack equal the simulator's pools of each size, on skewed and looping batches, LRU and LFU; the
 * shares move toward the layer that reuses, within the budget and the bounds; bad options refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "t.h"

#define E 24
#define K 3
#define STEPS 300

/* Skewed batches of K distinct experts of 0..E-1 (some steps repeat the last batch's members). */
static void batches(int32_t (*ids)[K], unsigned seed)
{
	unsigned r = seed;
	for (int t = 0; t < STEPS; t++)
		for (int m = 0; m < K;) {
			r = r * 1103515245u + 12345u;
			int x = (int)((r >> 16) % E) % (1 + (int)((r >> 8) % E));
			if (t > 0 && (r >> 4) % 3 == 0)
				x = ids[t - 1][(r >> 6) % K];
			int dup = 0;
			for (int j = 0; j < m; j++)
				dup |= ids[t][j] == x;
			if (!dup)
				ids[t][m++] = x;
		}
}

/* The simulator's hits with a pool of c records, one layer, on the batches: bytes mode, each
 * batch's recency in its order (slots mode ticks the hits first, an order that depends on c). */
static double sim_hits(int policy, int c, int32_t (*ids)[K])
{
	coli_sim_opts o = {.policy = policy, .n_layers = 1, .n_experts = E, .max_batch = K, .bytes = 1, .budget = c};
	coli_sim *s = NULL;
	coli_err e = {0, ""};
	if (coli_sim_open(&s, &o, &e) < 0)
		return -1;
	for (int t = 0; t < STEPS; t++) {
		coli_sim_batch b = {0, K, ids[t]};
		coli_sim_run(s, &b, 1, &e);
	}
	double h = (double)coli_sim_stats_of(s, 0).hits;
	coli_sim_close(s);
	return h;
}

static void test_curves(void)
{
	static int32_t ids[STEPS][K];
	for (int seed = 1; seed <= 3; seed++) {
		batches(ids, (unsigned)seed);
		for (int policy = COLI_SIM_LRU; policy <= COLI_SIM_LFU; policy += COLI_SIM_LFU - COLI_SIM_LRU) {
			int start = K, least = K, most = E;
			double cost = 1;
			coli_adapt_opts o = {.n_pools = 1, .n_experts = E, .policy = policy, .period = 1 << 30, .cost = &cost,
					     .start = &start, .least = &least, .most = &most};
			coli_adapt *a = NULL;
			coli_err e = {0, ""};
			int rc = coli_adapt_open(&a, &o, &e), bad = -1;
			for (int t = 0; rc == 0 && t < STEPS; t++)
				coli_adapt_play(a, 0, ids[t], K);
			double got = 0, want = 0;
			for (int c = K; rc == 0 && c <= E && bad < 0; c++)
				if ((got = coli_adapt_hits(a, 0, c)) != (want = sim_hits(policy, c, ids)))
					bad = c;
			char name[120];
			snprintf(name, sizeof(name), "adapt: %s, seed %d: the stack's hits at every size = the simulator's pools",
				 policy == COLI_SIM_LFU ? "LFU" : "LRU", seed);
			T_CHECK(name, rc == 0 && bad < 0 && coli_adapt_hits(a, 0, E) > coli_adapt_hits(a, 0, K), "rc %d (%s): at %d slots %g hits, the simulator %g",
				rc, e.msg, bad, got, want);
			coli_adapt_close(a);
		}
	}
}

/* Two layers: 0 cycles through 8 experts (a pool of 8 hits always), 1 draws from all E (little
 * reuse). From 5 records each, the shares move to layer 0, within the budget and the bounds. */
static void test_shares(void)
{
	int start[2] = {5, 5}, least[2] = {K, K}, most[2] = {E, E}, ok = 1, s0 = 0;
	double cost[2] = {2, 2};
	coli_adapt_opts o = {.n_pools = 2, .n_experts = E, .policy = COLI_SIM_LFU, .period = 4, .cost = cost,
			     .start = start, .least = least, .most = most};
	coli_adapt *a = NULL;
	coli_err e = {0, ""};
	int rc = coli_adapt_open(&a, &o, &e), derived = 0;
	unsigned r = 7;
	for (int t = 0; rc == 0 && t < 200; t++) {
		int b0[K], b1[K];
		for (int j = 0; j < K; j++)
			b0[j] = (t * K + j) % 8;
		for (int m = 0; m < K;) {
			r = r * 1103515245u + 12345u;
			int x = (int)((r >> 16) % E), dup = 0;
			for (int j = 0; j < m; j++)
				dup |= b1[j] == x;
			if (!dup)
				b1[m++] = x;
		}
		derived += coli_adapt_play(a, 0, b0, K);
		coli_adapt_play(a, 1, b1, K);
		const int *sh = coli_adapt_shares(a);
		ok &= sh[0] >= K && sh[1] >= K && sh[0] + sh[1] <= 10;
		s0 = sh[0];
	}
	T_CHECK("adapt: the share goes to the layer that reuses, within the budget and the bounds",
		rc == 0 && ok && s0 >= 7 && derived >= 40, "rc %d (%s), in bounds %d, layer 0's share %d, %d derivations", rc,
		e.msg, ok, s0, derived);
	coli_adapt_close(a);
}

/* The simulator with adaptive shares: the same two layers, byte budgets of 5 records each:
 * layer 0 hits more than with even shares, the pair more in all. */
static void test_sim_adapt(void)
{
	static int32_t ids[2 * STEPS][K];
	unsigned r = 11;
	coli_sim_batch seq[2 * STEPS];
	for (int t = 0; t < STEPS; t++) {
		for (int j = 0; j < K; j++)
			ids[2 * t][j] = (t * K + j) % 8;
		for (int m = 0; m < K;) {
			r = r * 1103515245u + 12345u;
			int x = (int)((r >> 16) % E), dup = 0;
			for (int j = 0; j < m; j++)
				dup |= ids[2 * t + 1][j] == x;
			if (!dup)
				ids[2 * t + 1][m++] = x;
		}
		seq[2 * t] = (coli_sim_batch){0, K, ids[2 * t]}, seq[2 * t + 1] = (coli_sim_batch){1, K, ids[2 * t + 1]};
	}
	double hits[2][2] = {{0}};
	for (int adapt = 0; adapt < 2; adapt++) {
		coli_sim_opts o = {.policy = COLI_SIM_LFU, .n_layers = 2, .n_experts = E, .max_batch = K, .bytes = 1,
				   .budget = 5.5, .adapt = adapt ? 4 : 0, .adapt_least = K};
		coli_sim *s = NULL;
		coli_err e = {0, ""};
		if (coli_sim_open(&s, &o, &e) == 0 && coli_sim_run(s, seq, 2 * STEPS, &e) == 0)
			hits[adapt][0] = (double)coli_sim_stats_of(s, 0).hits, hits[adapt][1] = (double)coli_sim_stats_of(s, -1).hits;
		coli_sim_close(s);
	}
	T_CHECK("adapt: the simulator's adaptive shares give the reusing layer more hits, the pair more in all",
		hits[1][0] > hits[0][0] && hits[1][1] > hits[0][1], "layer 0 %g against %g even, all %g against %g",
		hits[1][0], hits[0][0], hits[1][1], hits[0][1]);
}

/* Options out of range: refused with the field named. */
static void test_refused(void)
{
	int start = 4, least = 5, most = E;
	double cost = 1;
	coli_adapt_opts o = {.n_pools = 1, .n_experts = E, .policy = COLI_SIM_LRU, .period = 8, .cost = &cost,
			     .start = &start, .least = &least, .most = &most};
	coli_adapt *a = NULL;
	coli_err e = {0, ""};
	T_CHECK("adapt: least above start refused", coli_adapt_open(&a, &o, &e) < 0 && !a && strstr(e.msg, "least 5"),
		"%s", e.msg);
	least = 1, o.policy = COLI_SIM_ARC;
	T_CHECK("adapt: a policy without a priority order refused", coli_adapt_open(&a, &o, &e) < 0 && strstr(e.msg, "policy"),
		"%s", e.msg);
	coli_sim_opts so = {.policy = COLI_SIM_LFU, .n_layers = 1, .n_experts = E, .capacity = 4, .max_batch = K, .adapt = 8,
			    .adapt_least = K};
	coli_sim *s = NULL;
	T_CHECK("adapt: the simulator's adaptive shares need byte budgets",
		coli_sim_open(&s, &so, &e) < 0 && !s && strstr(e.msg, "byte budgets"), "%s", e.msg);
}

int main(void)
{
	test_curves();
	test_shares();
	test_sim_adapt();
	test_refused();
	T_EXIT();
}
