/* test_profile_replay.c: the cache simulator's bytes mode that coli-profile replay runs on
 * (engine/policy.h): a batch larger than the budget stays resident until later batches evict it,
 * per-layer costs in one global budget, the options it refuses; and replay's policy table. */
#include <string.h>

#include "policy.h"
#include "replay.h"
#include "t.h"

static coli_sim_stats play(const coli_sim_opts *o, const coli_sim_batch *b, int n, coli_err *e)
{
	coli_sim *s;
	coli_sim_stats st = {0, 0, 0, 0};
	if (coli_sim_open(&s, o, e) < 0)
		return (coli_sim_stats){9999, 9999, 0, 0};
	coli_sim_start(s, NULL, 0);
	if (coli_sim_run(s, b, n, e) == 0)
		st = coli_sim_stats_of(s, -1);
	coli_sim_close(s);
	return st;
}

static void test_big_batch(void)
{
	/* budget 2: {0,1,2} all stay; [3] then evicts 0 and 1; [2] hits; [0] misses */
	static const int32_t a[] = {0, 1, 2}, b3[] = {3}, b2[] = {2}, b0[] = {0};
	coli_sim_batch seq[] = {{0, 3, a}, {0, 1, b3}, {0, 1, b2}, {0, 1, b0}};
	coli_sim_opts o = {.policy = COLI_SIM_LRU, .n_layers = 1, .n_experts = 8, .max_batch = 3, .bytes = 1, .budget = 2};
	coli_err e = {0, ""};
	coli_sim_stats st = play(&o, seq, 4, &e);
	T_CHECK("bytes mode: a batch above the budget stays, then LRU evicts down to it", st.hits == 1 && st.misses == 5,
		"%llu hits %llu misses %s", (unsigned long long)st.hits, (unsigned long long)st.misses, e.msg);
	o.policy = COLI_SIM_BELADY, o.max_batches = 4;
	st = play(&o, seq, 4, &e);
	/* MIN after [3] (spared): 1 (never again) goes, then 0 (batch 3) before 2 (batch 2): 1 hit */
	T_CHECK("bytes mode: MIN evicts the furthest reuse, sparing the batch", st.hits == 1 && st.misses == 5, "%llu hits %s",
		(unsigned long long)st.hits, e.msg);
}

static void test_costs(void)
{
	/* global budget 4, layer 0 costs 1, layer 1 costs 3: L0[0] L1[0] L0[1] L1[0] L0[0] */
	static const int32_t x0[] = {0}, x1[] = {1};
	static const double cost[] = {1, 3};
	coli_sim_batch seq[] = {{0, 1, x0}, {1, 1, x0}, {0, 1, x1}, {1, 1, x0}, {0, 1, x0}};
	coli_sim_opts o = {.policy = COLI_SIM_LRU, .n_layers = 2, .n_experts = 4, .global = 1, .max_batch = 1,
			   .bytes = 1, .cost = cost, .budget = 4};
	coli_err e = {0, ""};
	coli_sim_stats st = play(&o, seq, 5, &e);
	T_CHECK("bytes mode: per-layer costs in one budget (the 3-byte expert keeps its place)",
		st.hits == 1 && st.misses == 4, "%llu hits %s", (unsigned long long)st.hits, e.msg);
	o.budget = 0;
	T_CHECK("bytes mode: a budget of 0 is refused", play(&o, seq, 5, &e).hits == 9999 && strstr(e.msg, "budget"),
		"%s", e.msg);
	o.budget = 4, o.warm = 1, o.policy = COLI_SIM_LFU;
	T_CHECK("bytes mode: no warm start", play(&o, seq, 5, &e).hits == 9999 && strstr(e.msg, "warm"), "%s", e.msg);
	static const double bad[] = {1, 0};
	o.warm = 0, o.cost = bad;
	T_CHECK("bytes mode: a cost of 0 is refused", play(&o, seq, 5, &e).hits == 9999 && strstr(e.msg, "cost[1]"), "%s",
		e.msg);
}

static void test_policies(void)
{
	int seen = 0;
	for (int i = 0; i < rp_n_policies; i++)
		for (int j = 0; j < i; j++)
			seen += strcmp(rp_policies[i].name, rp_policies[j].name) == 0;
	T_CHECK("replay: policy names unique, the issue's five among them", seen == 0 && rp_n_policies >= 5 &&
		!strcmp(rp_policies[0].name, "min") && !strcmp(rp_policies[4].name, "layer-lfu"), "%d duplicates", seen);
}

int main(void)
{
	test_big_batch();
	test_costs();
	test_policies();
	T_EXIT();
}
