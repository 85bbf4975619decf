/* replay.c: coli-profile replay: routing traces through the engine's cache simulator, policy by
 * policy and size by size (replay.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "fileio.h"
#include "options.h"
#include "collapse.h"
#include "dumps.h"
#include "plots.h"
#include "route.h"
#include "study.h"
#include "tracesum.h"
#include "replay.h"
#include "tool.h"

const rp_policy rp_policies[] = {
	{"min", "Belady's MIN over one pool: evicts the expert used again furthest ahead (the ceiling)", COLI_SIM_BELADY, 1, 0, 0, 0},
	{"lru", "one LRU pool for every layer", COLI_SIM_LRU, 1, 0, 0, 0},
	{"lfu", "one LFU pool (uses in the run so far, ties least recent)", COLI_SIM_LFU, 1, 0, 0, 0},
	{"layer-lru", "LRU per layer, the budget split evenly over the layers", COLI_SIM_LRU, 0, 0, 0, 0},
	{"layer-lfu", "LFU per layer, the budget split evenly", COLI_SIM_LFU, 0, 0, 0, 0},
	{"slru", "one segmented LRU pool (a hit moves an expert to a protected 80%)", COLI_SIM_SLRU, 1, 0, 0, 0},
	{"layer-slru", "segmented LRU per layer", COLI_SIM_SLRU, 0, 0, 0, 0},
	{"layer-min", "MIN per layer: the ceiling of an even split", COLI_SIM_BELADY, 0, 0, 0, 0},
	{"coli", "coli-run's default without --usage (a first turn): its --cache-policy default per layer (lfu), "
		 "no pins", COLI_CACHE_DEFAULT, 0, 0, 0, 0},
	{"coli-usage", "coli-run's default with a --usage file: per layer half its share pinned, the rest under "
		       "its default policy, pins and counts from the whole trace's routing (the usage of earlier "
		       "turns like this one: it peeks)", COLI_CACHE_DEFAULT, 0, 1, 0, 0},
	{"skew-lru", "LRU per layer, each layer's share sized by its prompt working set", COLI_SIM_LRU, 0, 0, 1, 0},
	{"skew-lfu", "LFU per layer, shares sized by the prompt working set", COLI_SIM_LFU, 0, 0, 1, 0},
	{"arc", "one ARC pool (adaptive replacement: recency and frequency lists, their ghosts steering the split)",
	 COLI_SIM_ARC, 1, 0, 0, 0},
	{"layer-arc", "ARC per layer, the budget split evenly", COLI_SIM_ARC, 0, 0, 0, 0},
	{"adapt-lru", "LRU per layer, each layer's share following the hits it would have had at every size so "
		      "far (utility-based partitioning, top_k records at least)", COLI_SIM_LRU, 0, 0, 0, 1},
	{"adapt-lfu", "LFU per layer, shares following each layer's hits as adapt-lru's", COLI_SIM_LFU, 0, 0, 0, 1},
};
const int rp_n_policies = (int)(sizeof(rp_policies) / sizeof(rp_policies[0]));

/* x appended to list[0..*n) as its last use: an earlier occurrence removed first. */
static void use_last(int32_t *list, int *n, int32_t x)
{
	int j = 0;
	while (j < *n && list[j] != x)
		j++;
	if (j < *n)
		memmove(list + j, list + j + 1, (size_t)(*n - j - 1) * sizeof(*list)), (*n)--;
	list[(*n)++] = x;
}

static int alloc_seq(rp_seq *s, size_t n_batches, size_t n_ids, coli_err *e)
{
	size_t le = (size_t)s->n_layers * (size_t)s->n_experts;
	s->b = coli_calloc(n_batches + 1, sizeof(*s->b), e), s->ids = coli_calloc(n_ids + 1, sizeof(*s->ids), e);
	s->prompt_counts = coli_calloc(le, sizeof(double), e), s->all_counts = coli_calloc(le, sizeof(double), e);
	return s->b && s->ids && s->prompt_counts && s->all_counts ? 0 : -1;
}

static void add_batch(rp_seq *s, int layer, const int32_t *ids, int n, size_t *at)
{
	if (n == 0)
		return;
	memcpy(s->ids + *at, ids, (size_t)n * sizeof(*ids));
	s->b[s->n++] = (coli_sim_batch){layer, n, s->ids + *at};
	*at += (size_t)n;
	s->max_batch = n > s->max_batch ? n : s->max_batch;
}

/* The route trace: the prompt one batch per layer, each expert at its last use; then each decode
 * position's layers. */
static int from_route(rp_seq *s, const coli_route *r, coli_err *e)
{
	size_t at = 0, K = (size_t)r->top_k, E = (size_t)r->n_experts;
	s->n_layers = r->n_layers, s->n_experts = r->n_experts, s->top_k = r->top_k;
	if (alloc_seq(s, (size_t)r->n_layers * (size_t)r->n_positions, (size_t)r->n_positions * r->n_layers * K, e) < 0 ||
	    !(s->cost = coli_calloc((size_t)r->n_layers, sizeof(double), e)))
		return -1;
	int32_t *list = coli_calloc(E, sizeof(*list), e);
	if (!list)
		return -1;
	for (int l = 0; l < r->n_layers; l++) {
		int n = 0;
		s->cost[l] = (double)r->expert_bytes[l];
		for (int p = 0; p < r->n_prefill; p++)
			for (const int32_t *x = coli_route_at(r, p, l, NULL); x && x < coli_route_at(r, p, l, NULL) + K; x++)
				use_last(list, &n, *x), s->prompt_counts[(size_t)l * E + (size_t)*x] += 1;
		add_batch(s, l, list, n, &at);
	}
	s->n_prefill = s->n;
	for (int p = r->n_prefill; p < r->n_positions; p++)
		for (int l = 0; l < r->n_layers; l++) {
			const int32_t *x = coli_route_at(r, p, l, NULL);
			add_batch(s, l, x, x ? r->top_k : 0, &at);
		}
	for (int p = 0; p < r->n_positions; p++)
		for (int l = 0; l < r->n_layers; l++)
			for (const int32_t *x = coli_route_at(r, p, l, NULL); x && x < coli_route_at(r, p, l, NULL) + K; x++)
				s->all_counts[(size_t)l * E + (size_t)*x] += 1;
	free(list);
	return 0;
}

/* A coli trace: each call's routed experts per layer, one batch; its prompt calls first. */
static int from_trace(rp_seq *s, const prof_trace *t, coli_err *e)
{
	size_t at = 0, E = (size_t)t->n_experts;
	s->n_layers = t->n_layers, s->n_experts = t->n_experts, s->top_k = t->top_k;
	if (alloc_seq(s, t->n_routes, t->n_routes, e) < 0)
		return -1;
	for (size_t i = 0, j; i < t->n_routes; i = j) {
		const prof_route *r = &t->routes[i];
		for (j = i; j < t->n_routes && t->routes[j].call == r->call && t->routes[j].layer == r->layer; j++) {
			s->ids[at + (j - i)] = t->routes[j].expert;
			s->all_counts[(size_t)r->layer * E + (size_t)t->routes[j].expert] += 1;
			if (t->calls[r->call].phase == COLI_PHASE_PREFILL)
				s->prompt_counts[(size_t)r->layer * E + (size_t)t->routes[j].expert] += 1;
		}
		if (t->calls[r->call].phase == COLI_PHASE_DECODE && s->n_prefill == 0)
			s->n_prefill = s->n;
		s->b[s->n++] = (coli_sim_batch){r->layer, (int)(j - i), s->ids + at};
		at += j - i;
		s->max_batch = (int)(j - i) > s->max_batch ? (int)(j - i) : s->max_batch;
	}
	if (s->n_prefill == 0 && s->n > 0 && t->calls[t->routes[t->n_routes - 1].call].phase == COLI_PHASE_PREFILL)
		s->n_prefill = s->n;
	return 0;
}

int rp_load(rp_seq *s, const char *path, coli_err *e)
{
	memset(s, 0, sizeof(*s));
	int rc = coli_trace_sniff(path, e);
	if (rc < 0)
		return -1;
	if (rc == 1) {
		prof_trace t;
		if ((rc = prof_trace_load(&t, path, e)) == 0) {
			rc = from_trace(s, &t, e);
			prof_trace_release(&t);
		}
	} else {
		coli_route *r;
		rc = coli_route_open(&r, path, e);
		rc = rc ? rc : from_route(s, r, e);
		coli_route_close(r);
	}
	if (rc == 0 && s->n == s->n_prefill)
		rc = coli_errf(e, COLI_EDATA, "%s: no decode step to replay (the trace holds only a prompt)", path);
	if (rc == 0 && !(s->name = strdup(path)))
		rc = coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc < 0)
		rp_release(s);
	return rc;
}

void rp_release(rp_seq *s)
{
	free(s->name), free(s->cost), free(s->b), free(s->ids), free(s->prompt_counts), free(s->all_counts);
	memset(s, 0, sizeof(*s));
}

/* ---- one replay ------------------------------------------------------------------------------ */

/* What a replay of one policy at one size is given: each layer's share of the budget and the cost
 * of its experts (per-layer pools get budget 1 and costs scaled by their share; adaptive shares
 * the costs and each layer's budget), the pins. */
typedef struct rp_setup {
	double budget;         /* the simulator's budget */
	double *cost;          /* [L] the simulator's costs */
	double *budgets;       /* [L] adaptive shares: each layer's budget; NULL: none */
	const double *counts;  /* [L x E] the usage before the run (LFU's counts, the pin order); NULL: none */
	int *pins;             /* [L] each layer's pins (of counts' pin order); NULL: none */
} rp_setup;

/* Each layer's share: even, or by its prompt working set (distinct experts, at least 1). */
static void shares(const rp_seq *s, const rp_policy *p, double part, double *share)
{
	double sum = 0;
	for (int l = 0; l < s->n_layers; l++) {
		int w = 0;
		for (int x = 0; p->skew && x < s->n_experts; x++)
			w += s->prompt_counts[(size_t)l * (size_t)s->n_experts + (size_t)x] > 0;
		share[l] = p->skew ? (w > 0 ? w : 1) : 1;
		sum += share[l];
	}
	for (int l = 0; l < s->n_layers; l++)
		share[l] = part * s->n_layers * share[l] / sum;
}

/* The usage (the whole trace's counts) and each layer's pins as coli-run's budget split makes
 * them with --usage: half of what its share holds, leaving top_k slots, at most the experts the
 * usage has seen (coli_budget_split), the most counted first. */
static int pin_table(const rp_seq *s, const double *share, const double *cost, rp_setup *u, coli_err *e)
{
	size_t E = (size_t)s->n_experts;
	int *list = coli_calloc(E, sizeof(*list), e);
	if (!list || !(u->pins = coli_calloc((size_t)s->n_layers, sizeof(*u->pins), e)))
		return free(list), -1;
	u->counts = s->all_counts;
	for (int l = 0; l < s->n_layers; l++) {
		int cache = (int)(share[l] / cost[l]), want = cache / 2;
		want = want < cache - s->top_k ? want : cache - s->top_k;
		u->pins[l] = coli_pins_choose(u->counts + (size_t)l * E, s->n_experts, want, list);
	}
	free(list);
	return 0;
}

static int setup(const rp_seq *s, const rp_policy *p, double budget, double expert_bytes, int slots, rp_setup *u,
		 coli_err *e)
{
	double *cost = coli_calloc((size_t)s->n_layers, sizeof(double), e);
	double *share = coli_calloc((size_t)s->n_layers, sizeof(double), e);
	int rc = cost && share ? 0 : -1;
	for (int l = 0; rc == 0 && l < s->n_layers; l++)
		cost[l] = slots ? 1 : expert_bytes > 0 ? expert_bytes : s->cost ? s->cost[l] : 0;
	if (rc == 0 && !slots && !(expert_bytes > 0) && !s->cost)
		rc = coli_errf(e, COLI_EUSAGE, "%s: a coli trace does not say what an expert costs: give --expert-mib "
			       "with --budget, or --slots", s->name);
	/* route-replay.py: the per-layer share is the budget's bytes // layers */
	double total = slots ? (double)slots * s->n_layers : (double)(uint64_t)budget;
	if (rc == 0)
		shares(s, p, slots ? slots : (double)((uint64_t)total / (uint64_t)s->n_layers), share);
	if (rc == 0 && p->pins)
		rc = pin_table(s, share, cost, u, e);
	if (rc == 0 && p->adapt && !(u->budgets = coli_calloc((size_t)s->n_layers, sizeof(double), e)))
		rc = -1;
	for (int l = 0; rc == 0 && l < s->n_layers; l++) {
		double pinned = u->pins ? u->pins[l] : 0, left = share[l] - pinned * cost[l] > 0 ? share[l] - pinned * cost[l] : 1e-300;
		if (u->budgets) /* 1 + 1e-9: k x cost may round above the k records' share */
			u->budgets[l] = left * (1 + 1e-9);
		else if (!p->global)
			cost[l] = cost[l] / left;
	}
	u->budget = p->global ? total : 1 + 1e-9, u->cost = cost; /* 1 + 1e-9: k x (1/k) may round above 1 */
	free(share);
	return rc;
}

/* Decode hits and lookups: the prompt's batches, then decode's (MIN: the whole in one call, the
 * prompt's share from a replay of the prompt alone: exact when no prompt batch repeats a layer). */
static int play(coli_sim *sim, const rp_seq *s, const rp_setup *u, int belady, uint64_t *hits, uint64_t *gets,
		coli_err *e)
{
	coli_sim_start_layers(sim, u->counts, u->pins);
	if (coli_sim_run(sim, s->b, s->n_prefill, e) < 0)
		return -1;
	coli_sim_stats pre = coli_sim_stats_of(sim, -1);
	if (belady) {
		coli_sim_start_layers(sim, u->counts, u->pins);
		if (coli_sim_run(sim, s->b, s->n, e) < 0)
			return -1;
	} else if (coli_sim_run(sim, s->b + s->n_prefill, s->n - s->n_prefill, e) < 0) {
		return -1;
	}
	coli_sim_stats all = coli_sim_stats_of(sim, -1);
	*hits = all.hits - pre.hits, *gets = all.hits + all.misses - pre.hits - pre.misses;
	return 0;
}

int rp_replay(const rp_seq *s, const rp_policy *p, double budget, double expert_bytes, int slots, double *hit,
	      coli_err *e)
{
	rp_setup u = {0, NULL, NULL, NULL, NULL};
	int rc = setup(s, p, budget, expert_bytes, slots, &u, e);
	coli_sim_opts o = {.policy = p->sim, .n_layers = s->n_layers, .n_experts = s->n_experts, .global = p->global,
			   .max_batch = s->max_batch, .max_batches = s->n, .bytes = 1, .cost = u.cost, .budget = u.budget,
			   .budgets = u.budgets, .adapt = p->adapt ? COLI_ADAPT_PERIOD : 0, .adapt_least = s->top_k};
	coli_sim *sim = NULL;
	uint64_t h = 0, g = 0;
	if (rc == 0)
		rc = coli_sim_open(&sim, &o, e);
	if (rc == 0)
		rc = play(sim, s, &u, p->sim == COLI_SIM_BELADY, &h, &g, e);
	*hit = g ? (double)h / (double)g : 0;
	coli_sim_close(sim);
	free(u.cost), free(u.pins), free(u.budgets);
	return rc;
}

/* ---- the subcommand ------------------------------------------------------------------------- */

#define RP_MAX_SIZES 32

static struct {
	const char *budgets, *slots, *policies, *out;
	double expert_mib;
	int json, help;
	int layers, experts, top_k, from, per_run; /* routing dumps */
} o;

static const char *const synopsis[] = {
	"coli-profile replay TRACE|ROUTE.csv [--budget MiB,...] [--slots N,...] [--policy NAME,...] [--json]",
	"coli-profile replay --layers L --experts E --top-k K [--slots N,...] [--from R] [--per-run] ROUTING.i32...",
	NULL};

static const coli_option options[] = {
	COLI_OPT_TEXT("Replays the routing of a trace (a route_trace v1 CSV, or a .coli_trace's routed experts) "
		      "through expert caches of each policy and size on coli's cache simulator, and prints the "
		      "decode hit rate of each (markdown, or JSON). The prompt is one batch per layer, each "
		      "generated token one batch per layer; eviction follows each batch and spares its members; "
		      "each expert costs its layer's record bytes (route-replay.py's semantics)."),
	COLI_OPT_TEXT(""),
	COLI_OPT_TEXT("With --layers, --experts and --top-k: routing dumps instead (coli-run --teacher-force "
		      "--dump-routing; one file per run of a workload, in order), each position a decode step, "
		      "the usage counts carried from run to run (pins and LFU learn from earlier runs); prints "
		      "the routing collapse table and each policy's hit rate per size of --slots."),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRING(0, "budget", &o.budgets, "MiB,...", "cache budgets in MiB, global or split evenly over the "
			"layers (default 1000,2000,3000,4000 with a route trace)"),
	COLI_OPT_STRING(0, "slots", &o.slots, "N,...", "cache sizes in experts per layer instead (default for a "
			".coli_trace or routing dumps: top_k x 1, 2, 4, 8)"),
	COLI_OPT_DOUBLE(0, "expert-mib", &o.expert_mib, "MiB", 0, 1 << 20, "what every expert costs, for --budget on "
			"a .coli_trace (or to override a route trace's sizes)", .open_lo = 1),
	COLI_OPT_STRING(0, "policy", &o.policies, "NAME,...", "the policies to replay (default all: min, lru, lfu, "
			"layer-lru, layer-lfu, slru, layer-slru, layer-min, coli, coli-usage, skew-lru, skew-lfu, arc, layer-arc, adapt-lru, adapt-lfu)"),
	COLI_OPT_FLAG(0, "json", &o.json, "print a JSON array of {\"policy\", \"budget_mib\" or \"slots\", "
		      "\"hit_pct\"} instead"),
	COLI_OPT_INT(0, "layers", &o.layers, "L", 1, 4096, "routing dumps: MoE layers in the files"),
	COLI_OPT_INT(0, "experts", &o.experts, "E", 1, 65536, "routing dumps: routed experts per layer"),
	COLI_OPT_INT(0, "top-k", &o.top_k, "K", 1, 65536, "routing dumps: experts per position"),
	COLI_OPT_INT(0, "from", &o.from, "R", 1, 1 << 30, "routing dumps: count hits from run R on (default 2 "
		     "with several files: the first has no earlier counts to learn from; 1 with one)"),
	COLI_OPT_FLAG(0, "per-run", &o.per_run, "routing dumps: also a table of every run's hit rates per size"),
	COLI_OPT_STRING('o', "output", &o.out, "DIR", "also plot hit rate against capacity (gnuplot): DIR/replay.png "
			"and DIR/replay.svg, their data replay.dat"),
	COLI_OPT_HELP(&o.help),
	COLI_OPT_END(),
};

static int usage(const char *msg)
{
	return tool_usage("coli-profile replay", msg, synopsis, options);
}

/* A comma list of positive numbers (budgets in MiB, or slot counts 1..E) into v; -1 with e. */
static int parse_list(const char *opt, const char *text, double lo, double hi, double *v, int *n, coli_err *e)
{
	*n = 0;
	for (const char *p = text; *p; p += strcspn(p, ","), p += *p == ',') {
		char item[64], *end;
		size_t len = strcspn(p, ",");
		snprintf(item, sizeof(item), "%.*s", (int)(len < sizeof(item) ? len : sizeof(item) - 1), p);
		double x = strtod(item, &end);
		if (*n == RP_MAX_SIZES)
			return coli_errf(e, COLI_EUSAGE, "--%s: more than %d sizes in '%s'", opt, RP_MAX_SIZES, text);
		if (end == item || *end || !(x >= lo && x <= hi))
			return coli_errf(e, COLI_EUSAGE, "--%s: '%s' is not a size in %g..%g", opt, item, lo, hi);
		v[(*n)++] = x;
	}
	return *n ? 0 : coli_errf(e, COLI_EUSAGE, "--%s: no size in '%s'", opt, text);
}

static int parse_policies(const char *text, int *use, coli_err *e)
{
	for (int i = 0; i < rp_n_policies; i++)
		use[i] = !text;
	for (const char *p = text; p && *p; p += strcspn(p, ","), p += *p == ',') {
		int len = (int)strcspn(p, ","), i = 0;
		while (i < rp_n_policies && ((int)strlen(rp_policies[i].name) != len || strncmp(rp_policies[i].name, p, (size_t)len)))
			i++;
		if (i == rp_n_policies)
			return coli_errf(e, COLI_EUSAGE, "--policy: '%.*s' is not a policy (coli-profile replay --help lists them)",
					 len, p);
		use[i] = 1;
	}
	return 0;
}

static void print_table(const rp_seq *s, const int *use, const double *sz, int n_sz, int slots, const double *hit)
{
	printf("Decode hit rate (%%), %s: %d layers x %d experts, top-k %d, %d prompt and %d decode batches.\n\n", s->name,
	       s->n_layers, s->n_experts, s->top_k, s->n_prefill, s->n - s->n_prefill);
	printf("| %s |", slots ? "slots/layer" : "budget MiB");
	for (int i = 0; i < rp_n_policies; i++)
		if (use[i])
			printf(" %s |", rp_policies[i].name);
	printf("\n|---:|");
	for (int i = 0; i < rp_n_policies; i++)
		if (use[i])
			printf("---:|");
	printf("\n");
	for (int k = 0; k < n_sz; k++) {
		printf("| %g |", sz[k]);
		for (int i = 0; i < rp_n_policies; i++)
			if (use[i])
				printf(" %.1f |", 100 * hit[k * rp_n_policies + i]);
		printf("\n");
	}
}

static void print_json(const int *use, const double *sz, int n_sz, int slots, const double *hit)
{
	json_t *a = json_array();
	for (int k = 0; k < n_sz; k++)
		for (int i = 0; i < rp_n_policies; i++)
			if (use[i])
				json_array_append_new(a, json_pack("{s:s, s:f, s:f}", "policy", rp_policies[i].name,
								   slots ? "slots" : "budget_mib", sz[k], "hit_pct",
								   100 * hit[k * rp_n_policies + i]));
	char *t = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(10));
	puts(t ? t : "[]");
	free(t), json_decref(a);
}

/* One colour per policy (its index in rp_policies), none twice: 16 policies; the second half also
 * dashed, each its own point type. */
static const char *const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
				      "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#b8860b",
				      "#000080", "#ff1493", "#006400", "#8b0000"};
#define N_COLOURS ((int)(sizeof(colours) / sizeof(colours[0])))

static int plot_script(FILE *f, const int *use, int slots)
{
	static const char *const term[2][2] = {{"png", "pngcairo size 960,540 font \"sans,11\""},
					       {"svg", "svg size 960,540 dynamic font \"sans,11\""}};
	for (int k = 0; k < 2; k++) {
		fprintf(f, "set terminal %s noenhanced\nset output 'replay.%s.tmp'\nset title \"Decode hit rate against "
			"cache capacity\"\nset xlabel \"%s\"\nset ylabel \"decode hit rate (%%)\"\nset yrange [0:100]\n"
			"set grid\nset key outside right\nplot ", term[k][1], term[k][0],
			slots ? "cache slots per layer (experts)" : "cache budget (MiB)");
		for (int i = 0, c = 2, first = 1; i < rp_n_policies; i++)
			if (use[i])
				fprintf(f, "%s'replay.dat' using 1:%d with linespoints lw 2 lc rgb \"%s\" pt %d dt %d title \"%s\"",
					first ? "" : ", ", c, colours[i % N_COLOURS], 1 + i % 15, i < N_COLOURS / 2 ? 1 : 2,
					rp_policies[i].name), first = 0, c++;
		fprintf(f, "\nunset output\n");
	}
	return ferror(f) ? -1 : 0;
}

/* replay.dat, replay.gp, then gnuplot: DIR/replay.png and .svg. */
static int plot(const rp_seq *s, const int *use, const double *sz, int n_sz, int slots, const double *hit, coli_err *e)
{
	char gp[4200], *dat = coli_path_join(o.out, "replay.dat"), *scr = coli_path_join(o.out, "replay.gp");
	FILE *f = NULL, *g = NULL;
	int rc = dat && scr ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0 && prof_gnuplot_find(getenv("PATH"), gp, sizeof(gp)) < 0)
		rc = coli_errf(e, COLI_EIO, "-o %s: gnuplot is not on PATH (Debian: apt-get install gnuplot-nox): no plot", o.out);
	if (rc == 0 && mkdir(o.out, 0755) < 0 && errno != EEXIST)
		rc = coli_errf(e, COLI_EIO, "%s: cannot create: %s", o.out, strerror(errno));
	if (rc == 0 && (!(f = fopen(dat, "w")) || !(g = fopen(scr, "w"))))
		rc = coli_errf(e, COLI_EIO, "%s: cannot write: %s", f ? scr : dat, strerror(errno));
	for (int k = 0; rc == 0 && k < n_sz; k++) {
		fprintf(f, "%g", sz[k]);
		for (int i = 0; i < rp_n_policies; i++)
			if (use[i])
				fprintf(f, " %.4f", 100 * hit[k * rp_n_policies + i]);
		fprintf(f, "\n");
	}
	if (rc == 0 && plot_script(g, use, slots) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: write failed", scr);
	if ((f && fclose(f) != 0) || (g && fclose(g) != 0))
		rc = rc ? rc : coli_errf(e, COLI_EIO, "%s: write failed", o.out);
	if (rc == 0)
		rc = prof_gnuplot_run(gp, o.out, "replay.gp", e);
	if (rc == 0 && (prof_plot_publish(o.out, "replay", "png", e) < 0 || prof_plot_publish(o.out, "replay", "svg", e) < 0))
		rc = -1;
	(void)s;
	free(dat), free(scr);
	return rc;
}

static int replay_all(const rp_seq *s, const int *use, const double *sz, int n_sz, int slots, coli_err *e)
{
	double *hit = coli_calloc((size_t)n_sz * (size_t)rp_n_policies, sizeof(double), e);
	int rc = hit ? 0 : -1;
	for (int k = 0; rc == 0 && k < n_sz; k++)
		for (int i = 0; rc == 0 && i < rp_n_policies; i++)
			if (use[i])
				rc = rp_replay(s, &rp_policies[i], slots ? 0 : sz[k] * 1048576, o.expert_mib * 1048576,
					       slots ? (int)sz[k] : 0, &hit[k * rp_n_policies + i], e);
	if (rc == 0)
		(o.json ? print_json(use, sz, n_sz, slots, hit) : print_table(s, use, sz, n_sz, slots, hit));
	if (rc == 0 && o.out)
		rc = plot(s, use, sz, n_sz, slots, hit, e);
	free(hit);
	return rc;
}

static int sizes(const rp_seq *s, double *sz, int *n, int *slots, coli_err *e)
{
	static const double budgets[] = {1000, 2000, 3000, 4000};
	if (o.slots && o.budgets)
		return coli_errf(e, COLI_EUSAGE, "--budget and --slots exclude each other");
	*slots = o.slots || (!o.budgets && !s->cost && !(o.expert_mib > 0));
	if (o.slots)
		return parse_list("slots", o.slots, 1, s->n_experts, sz, n, e);
	if (o.budgets)
		return parse_list("budget", o.budgets, 1e-3, 1e9, sz, n, e);
	*n = 0;
	for (int k = 1; *slots && k <= 8 && k * s->top_k <= s->n_experts; k *= 2)
		sz[(*n)++] = k * s->top_k;
	for (int k = 0; !*slots && k < 4; k++)
		sz[(*n)++] = budgets[k];
	return 0;
}

/* Routing dumps: the options that fit them, the slot sizes (K..E; default K, 2K, 4K, 8K up to E)
 * and from (0-based) into sz and *from; -1 with e (COLI_EUSAGE). */
static int dump_args(int n_files, int *sz, int *n_sz, int *from, coli_err *e)
{
	double v[RP_MAX_SIZES];
	if (!o.layers || !o.experts || !o.top_k)
		return coli_errf(e, COLI_EUSAGE, "routing dumps need --layers, --experts and --top-k together");
	if (o.budgets || o.expert_mib > 0 || o.policies || o.json || o.out)
		return coli_errf(e, COLI_EUSAGE, "%s: not with routing dumps (--slots sizes their study)",
				 o.budgets ? "--budget" : o.expert_mib > 0 ? "--expert-mib" : o.policies ? "--policy"
				 : o.json ? "--json" : "-o");
	if (o.top_k > o.experts)
		return coli_errf(e, COLI_EUSAGE, "--top-k %d exceeds --experts %d", o.top_k, o.experts);
	if (n_files == 0)
		return coli_errf(e, COLI_EUSAGE, "no ROUTING.i32 given");
	*from = o.from ? o.from - 1 : n_files > 1;
	if (*from >= n_files)
		return coli_errf(e, COLI_EUSAGE, "--from %d: exceeds the %d files given", *from + 1, n_files);
	*n_sz = 0;
	for (int k = o.top_k; !o.slots && k <= o.experts && k <= 8 * o.top_k; k *= 2)
		sz[(*n_sz)++] = k;
	if (o.slots && parse_list("slots", o.slots, o.top_k, o.experts, v, n_sz, e) < 0)
		return -1;
	for (int i = 0; o.slots && i < *n_sz; i++)
		if ((sz[i] = (int)v[i]) != v[i])
			return coli_errf(e, COLI_EUSAGE, "--slots: %g is not a whole number of slots", v[i]);
	return 0;
}

/* coli-profile replay --layers L --experts E --top-k K ... ROUTING.i32... */
static int dump_main(int n, char **files)
{
	coli_err e = {0, ""};
	int sz[RP_MAX_SIZES], n_sz = 0, from = 0;
	if (dump_args(n, sz, &n_sz, &from, &e) < 0)
		return usage(e.msg);
	rp_dumps d;
	int rc = rp_dumps_load(&d, o.layers, o.experts, o.top_k, files, n, &e);
	if (rc == 0) {
		printf("Routing (collapse check):\n\n");
		rc = rp_collapse_print(&d, &e);
	}
	if (rc == 0)
		printf("\n"), rc = rp_study_print(&d, sz, n_sz, from, o.per_run, &e);
	rp_dumps_release(&d);
	return rc < 0 ? prof_fail(&e) : 0;
}

int prof_replay_main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(options, argc, argv, &e), use[64], n_sz = 0, slots = 0;
	double sz[RP_MAX_SIZES];
	if (o.help)
		return usage(NULL);
	if (n < 0)
		return usage(e.msg);
	if (o.layers || o.experts || o.top_k)
		return dump_main(n, argv);
	if (o.from || o.per_run)
		return usage(o.from ? "--from: routing dumps only (with --layers, --experts, --top-k)"
				    : "--per-run: routing dumps only (with --layers, --experts, --top-k)");
	if (n != 1)
		return usage(n ? "give one TRACE" : "no TRACE given");
	if (parse_policies(o.policies, use, &e) < 0)
		return usage(e.msg);
	rp_seq s;
	if (rp_load(&s, argv[0], &e) < 0)
		return prof_fail(&e);
	int rc = sizes(&s, sz, &n_sz, &slots, &e);
	if (rc < 0 && e.code == COLI_EUSAGE) {
		rp_release(&s);
		return usage(e.msg);
	}
	if (rc == 0)
		rc = replay_all(&s, use, sz, n_sz, slots, &e);
	rp_release(&s);
	return rc < 0 ? prof_fail(&e) : 0;
}
