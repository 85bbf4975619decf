/* replay.c: the cache-policy study: routing traces of consecutive runs, replayed through per-layer
 * expert caches of several policies and sizes; prints each policy's hit rate (markdown, stdout).
 *
 * A trace is what `coli-run --teacher-force --dump-routing FILE` writes: int32 little-endian
 * [moe layers][positions][top_k], each token's experts. Each file is one run of a workload, in
 * order. Each position is replayed as a decode step: its top_k experts are got together (a hit
 * when resident or pinned), so none of them may be evicted for another (slots >= top_k). As in
 * coli-run, every run starts with empty slots; what carries over from run to run is the usage
 * counts (counts x 0.9 + this run's routings, as .coli_usage), which choose the pins and seed LFU.
 *
 * Policies (slots = the RAM budget in experts per layer, the same for all):
 *   LRU        least recently used (coli-run --pins 0 --cache-slots N)
 *   SLRU       segmented LRU: a hit moves an expert to the protected segment (80% of the slots);
 *              probation is evicted first
 *   LFU        least frequently used by the decayed counts of earlier runs + this run's so far
 *   pins P     P experts of highest earlier counts pinned, N - P LRU slots (coli-run --usage F
 *              --pins P --cache-slots N-P; a first run has no counts and pins nothing): P = top_k
 *              (coli's default), N/2, and N - top_k (the most pins leaving top_k slots)
 *   Belady     evicts the expert used again furthest in the future: the upper bound
 * Each policy is engine/policy.h's cache simulator (coli_sim_*), the pins its coli_pins_choose
 * (the streaming store's choice), the decay COLI_USAGE_DECAY (coli-run's); this file loads the
 * traces, runs the study and prints the tables.
 *
 * usage: coli-replay --layers L --experts E --top-k K [--slots N,...] [--from R] [--per-run] TRACE... */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fileio.h"
#include "options.h"
#include "policy.h"

#define MAX_SIZES 32

/* The study's columns: a simulator policy (policy.h), warm or not, and how many pins. */
enum { PINS_NONE, PINS_K, PINS_HALF, PINS_MAX };
typedef struct column {
	const char *name;
	int policy, warm, pins;
} column;
static const column columns[] = {
	{"LRU", COLI_SIM_LRU, 0, PINS_NONE},          {"SLRU", COLI_SIM_SLRU, 0, PINS_NONE},
	{"LFU", COLI_SIM_LFU, 0, PINS_NONE},          {"LFU warm", COLI_SIM_LFU, 1, PINS_NONE},
	{"pins k + LRU", COLI_SIM_LRU, 0, PINS_K},    {"pins N/2 + LRU", COLI_SIM_LRU, 0, PINS_HALF},
	{"pins N-k + LRU", COLI_SIM_LRU, 0, PINS_MAX}, {"Belady", COLI_SIM_BELADY, 1, PINS_NONE},
};
#define N_POLICIES ((int)(sizeof(columns) / sizeof(columns[0])))

typedef struct trace {
	const char *path;
	int n;          /* positions */
	int32_t *ids;   /* [layers][n][top_k] */
	coli_sim_batch *seq; /* [layers x n]: each layer's positions in order, one decode step each */
} trace;

typedef struct study {
	int L, E, K;    /* MoE layers, experts per layer, top_k */
	int from;       /* first run counted in the hit rates (0-based) */
	trace *runs;
	int n_runs;
	double *hist;   /* [n_runs + 1][L][E]: usage counts before run r (decayed fold of runs < r) */
} study;

static const int32_t *step_ids(const study *s, const trace *t, int l, int pos)
{
	return t->ids + ((size_t)l * (size_t)t->n + (size_t)pos) * (size_t)s->K;
}

static int listed(int x, const int32_t *set, int n)
{
	for (int j = 0; j < n; j++)
		if (set[j] == x)
			return 1;
	return 0;
}

/* The pins of column c at size n: how many experts per layer; -1 when it has none. */
static int pins_of(const column *c, int n, int K)
{
	return c->pins == PINS_K ? K : c->pins == PINS_HALF ? n / 2 : c->pins == PINS_MAX ? n - K : -1;
}

/* hits[r] of column c at n slots for every run, through one simulator; UINT64_MAX for all when
 * the pins leave fewer than top_k slots. */
static int replay_column(const study *s, const column *c, int n, uint64_t (*hits)[N_POLICIES], coli_err *e)
{
	int P = pins_of(c, n, s->K), max_n = 0;
	for (int r = 0; r < s->n_runs; r++)
		hits[r][c - columns] = P > 0 && n - P < s->K ? UINT64_MAX : 0;
	if (P > 0 && n - P < s->K)
		return 0;
	for (int r = 0; r < s->n_runs; r++)
		max_n = s->runs[r].n > max_n ? s->runs[r].n : max_n;
	coli_sim_opts o = {.policy = c->policy, .n_layers = s->L, .n_experts = s->E, .capacity = P > 0 ? n - P : n,
			   .max_batch = s->K, .max_batches = max_n * s->L, .warm = c->warm};
	coli_sim *sim;
	if (coli_sim_open(&sim, &o, e) < 0)
		return -1;
	int rc = 0;
	for (int r = 0; rc == 0 && r < s->n_runs; r++) {
		coli_sim_start(sim, s->hist + (size_t)r * (size_t)s->L * (size_t)s->E, P > 0 ? P : 0);
		rc = coli_sim_run(sim, s->runs[r].seq, s->runs[r].n * s->L, e);
		hits[r][c - columns] = coli_sim_stats_of(sim, -1).hits;
	}
	coli_sim_close(sim);
	return rc;
}

/* The usage counts before each run: hist[0] = 0, hist[r+1] = hist[r] x COLI_USAGE_DECAY + run r's routings. */
static int fold_history(study *s, coli_err *e)
{
	size_t le = (size_t)s->L * (size_t)s->E;
	if (!(s->hist = coli_calloc((size_t)(s->n_runs + 1) * le, sizeof(double), e)))
		return -1;
	for (int r = 0; r < s->n_runs; r++) {
		double *prev = s->hist + (size_t)r * le, *h = prev + le;
		const trace *t = &s->runs[r];
		for (size_t i = 0; i < le; i++)
			h[i] = prev[i] * COLI_USAGE_DECAY;
		for (int l = 0; l < s->L; l++)
			for (int pos = 0; pos < t->n; pos++)
				for (int j = 0; j < s->K; j++)
					h[(size_t)l * (size_t)s->E + (size_t)step_ids(s, t, l, pos)[j]] += 1;
	}
	return 0;
}

/* t->seq: the trace as the simulator's batches, layer by layer, each position a decode step. */
static int trace_steps(const study *s, trace *t, coli_err *e)
{
	if (!(t->seq = coli_calloc((size_t)s->L * (size_t)t->n, sizeof(*t->seq), e)))
		return -1;
	for (int l = 0; l < s->L; l++)
		for (int pos = 0; pos < t->n; pos++)
			t->seq[(size_t)l * (size_t)t->n + (size_t)pos] = (coli_sim_batch){l, s->K, step_ids(s, t, l, pos)};
	return 0;
}

/* Reads a trace and checks its size, every id's range and that no token repeats an expert. */
static int load_trace(const study *s, trace *t, coli_err *e)
{
	char *buf;
	size_t len, row = (size_t)s->L * (size_t)s->K * sizeof(int32_t);
	if (coli_read_file(t->path, &buf, &len, e) < 0)
		return -1;
	t->ids = (int32_t *)(void *)buf;
	if (len == 0 || len % row != 0 || len / row > INT_MAX)
		return coli_errf(e, COLI_EDATA, "%s: size %zu is not a positive multiple of layers x top_k x 4 = %zu",
				 t->path, len, row);
	t->n = (int)(len / row);
	if (t->n > INT_MAX / s->L)
		return coli_errf(e, COLI_EDATA, "%s: %d positions x %d layers exceed %d decode steps", t->path, t->n, s->L,
				 INT_MAX);
	for (int l = 0; l < s->L; l++)
		for (int pos = 0; pos < t->n; pos++) {
			const int32_t *set = step_ids(s, t, l, pos);
			for (int j = 0; j < s->K; j++) {
				if (set[j] < 0 || set[j] >= s->E)
					return coli_errf(e, COLI_EDATA, "%s: expert [layer %d][position %d][%d]: %d out of range 0..%d",
							 t->path, l, pos, j, set[j], s->E - 1);
				if (listed(set[j], set, j))
					return coli_errf(e, COLI_EDATA, "%s: expert [layer %d][position %d][%d]: %d chosen twice",
							 t->path, l, pos, j, set[j]);
			}
		}
	return trace_steps(s, t, e);
}

static int cmp_desc(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x < y) - (x > y);
}

/* The collapse check (docs/benchmarks.md, "Measuring"), one row per run: distinct experts per layer (mean
 * and least), overlap with the previous token's experts, share of the top 10% experts. */
static void print_routing(const study *s)
{
	int *cnt = calloc((size_t)s->E, sizeof(int));
	if (!cnt)
		return;
	printf("| run | trace | positions | distinct experts/layer (mean, min) | prev-token overlap | top-10%% share |\n");
	printf("|---:|---|---:|---:|---:|---:|\n");
	for (int r = 0; r < s->n_runs; r++) {
		const trace *t = &s->runs[r];
		double distinct = 0, overlap = 0, share = 0;
		int least = s->E, top = (s->E + 9) / 10;
		for (int l = 0; l < s->L; l++) {
			memset(cnt, 0, (size_t)s->E * sizeof(int));
			for (int pos = 0; pos < t->n; pos++) {
				const int32_t *set = step_ids(s, t, l, pos);
				for (int j = 0; j < s->K; j++) {
					cnt[set[j]]++;
					overlap += pos > 0 && listed(set[j], step_ids(s, t, l, pos - 1), s->K);
				}
			}
			int d = 0, in_top = 0;
			for (int x = 0; x < s->E; x++)
				d += cnt[x] > 0;
			qsort(cnt, (size_t)s->E, sizeof(int), cmp_desc);
			for (int x = 0; x < top; x++)
				in_top += cnt[x];
			distinct += d, least = d < least ? d : least;
			share += (double)in_top / ((double)t->n * s->K);
		}
		printf("| %d | %s | %d | %.1f, %d of %d | %.3f | %.3f |\n", r + 1, t->path, t->n, distinct / s->L, least,
		       s->E, t->n > 1 ? overlap / ((double)s->L * (t->n - 1) * s->K) : 0.0, share / s->L);
	}
	free(cnt);
}

/* Hit rate over runs [from, to) of policy p, or "-" when it cannot run at that size. */
static void print_rate(const study *s, uint64_t (*hits)[N_POLICIES], int p, int from, int to)
{
	uint64_t h = 0, gets = 0;
	for (int r = from; r < to; r++) {
		if (hits[r][p] == UINT64_MAX) {
			printf(" - |");
			return;
		}
		h += hits[r][p];
		gets += (uint64_t)s->runs[r].n * (uint64_t)s->L * (uint64_t)s->K;
	}
	printf(" %.1f%% |", gets ? 100.0 * (double)h / (double)gets : 0.0);
}

static void print_header(const char *first)
{
	printf("| %s |", first);
	for (int p = 0; p < N_POLICIES; p++)
		printf(" %s |", columns[p].name);
	printf("\n|---:|");
	for (int p = 0; p < N_POLICIES; p++)
		printf("---:|");
	printf("\n");
}

/* The tables: the collapse check, the hit rates over runs [from, n_runs), each run's. */
static void print_study(const study *s, const int *sizes, int n_sizes, int per_run, uint64_t (*hits)[N_POLICIES])
{
	printf("Routing (collapse check):\n\n");
	print_routing(s);
	printf("\nHit rate, runs %d..%d of %d (k = top_k = %d, N = slots per layer, pins included):\n\n", s->from + 1,
	       s->n_runs, s->n_runs, s->K);
	print_header("slots N");
	for (int i = 0; i < n_sizes; i++) {
		printf("| %d |", sizes[i]);
		for (int p = 0; p < N_POLICIES; p++)
			print_rate(s, hits + (size_t)i * (size_t)s->n_runs, p, s->from, s->n_runs);
		printf("\n");
	}
	for (int i = 0; per_run && i < n_sizes; i++) {
		printf("\nPer run, %d slots per layer:\n\n", sizes[i]);
		print_header("run");
		for (int r = 0; r < s->n_runs; r++) {
			printf("| %d |", r + 1);
			for (int p = 0; p < N_POLICIES; p++)
				print_rate(s, hits + (size_t)i * (size_t)s->n_runs, p, r, r + 1);
			printf("\n");
		}
	}
}

static int run_study(study *s, const int *sizes, int n_sizes, int per_run, coli_err *e)
{
	uint64_t(*hits)[N_POLICIES] = coli_calloc((size_t)s->n_runs * (size_t)n_sizes, sizeof(*hits), e);
	int rc = hits ? fold_history(s, e) : -1;
	for (int i = 0; rc == 0 && i < n_sizes; i++)
		for (int p = 0; rc == 0 && p < N_POLICIES; p++)
			rc = replay_column(s, &columns[p], sizes[i], hits + (size_t)i * (size_t)s->n_runs, e);
	if (rc == 0)
		print_study(s, sizes, n_sizes, per_run, hits);
	free(hits);
	return rc;
}

static study s = {0, 0, 0, 0, NULL, 0, NULL};
static const char *slots;
static int per_run, help;

static const char *const synopsis[] = {
	"coli-replay --layers L --experts E --top-k K [--slots N,...] [--from R] [--per-run] TRACE...", NULL};

static const coli_option options[] = {
	COLI_OPT_TEXT("Replays routing traces (coli-run --teacher-force --dump-routing; one file per run, in "
		      "order) through per-layer expert caches and prints each policy's hit rate."),
	COLI_OPT_TEXT(""),
	COLI_OPT_INT(0, "layers", &s.L, "L", 1, 4096, "MoE layers in the traces"),
	COLI_OPT_INT(0, "experts", &s.E, "E", 1, 65536, "routed experts per layer"),
	COLI_OPT_INT(0, "top-k", &s.K, "K", 1, 65536, "experts per token"),
	COLI_OPT_STRING(0, "slots", &slots, "N,...", "cache sizes to replay, experts per layer, each K..E "
			"(default K,2K,4K,8K up to E)"),
	COLI_OPT_INT(0, "from", &s.from, "R", 1, INT_MAX, "count hits from run R on (default 2 with several "
		     "traces: the first has no earlier counts to learn from; 1 with one)"),
	COLI_OPT_FLAG(0, "per-run", &per_run, "also a table of every run's hit rates per size"),
	COLI_OPT_HELP(&help),
	COLI_OPT_END(),
};

static int usage(const char *msg)
{
	char *text = coli_opts_usage("coli-replay", msg, synopsis, options);
	fputs(text ? text : "coli-replay: out of memory\n", msg ? stderr : stdout);
	free(text);
	return msg ? 2 : 0;
}

int main(int argc, char **argv)
{
	coli_err pe = {0, ""};
	int sizes[MAX_SIZES], n_sizes = 0, n_traces = coli_opts_parse(options, argc, argv, &pe);
	if (help)
		return usage(NULL);
	if (n_traces < 0)
		return usage(pe.msg);
	s.from--; /* 0-based; -1: the default */
	if (!s.L || !s.E || !s.K)
		return usage("--layers, --experts and --top-k are required");
	if (s.K > s.E)
		return fprintf(stderr, "coli-replay: --top-k %d exceeds --experts %d\n", s.K, s.E), 2;
	if (n_traces == 0)
		return usage("no trace given");
	for (int n = s.K; !slots && n <= s.E && n <= 8 * s.K; n *= 2)
		sizes[n_sizes++] = n;
	for (const char *p = slots; p && *p; p += strcspn(p, ","), p += *p == ',') {
		char item[32];
		size_t len = strcspn(p, ",");
		snprintf(item, sizeof(item), "%.*s", (int)(len < sizeof(item) ? len : sizeof(item) - 1), p);
		if (n_sizes == MAX_SIZES)
			return fprintf(stderr, "coli-replay: --slots: more than 32 sizes in '%s'\n", slots), 2;
		if (coli_opts_int(item, s.K, s.E, &sizes[n_sizes++], &pe) < 0)
			return fprintf(stderr, "coli-replay: --slots: '%s' is not a size in %d..%d (top_k..experts)\n", item, s.K,
				       s.E), 2;
	}
	if (n_sizes == 0)
		return fprintf(stderr, "coli-replay: --slots: no size in '%s'\n", slots), 2;
	s.n_runs = n_traces;
	if (s.from < 0)
		s.from = s.n_runs > 1;
	if (s.from >= s.n_runs)
		return fprintf(stderr, "coli-replay: --from %d: exceeds the %d traces given\n", s.from + 1, s.n_runs), 2;
	coli_err e = {0, ""};
	int rc = (s.runs = coli_calloc((size_t)s.n_runs, sizeof(*s.runs), &e)) ? 0 : -1;
	for (int r = 0; rc == 0 && r < s.n_runs; r++) {
		s.runs[r].path = argv[r];
		rc = load_trace(&s, &s.runs[r], &e);
	}
	if (rc == 0)
		rc = run_study(&s, sizes, n_sizes, per_run, &e);
	for (int r = 0; s.runs && r < s.n_runs; r++)
		free(s.runs[r].ids), free(s.runs[r].seq);
	free(s.runs);
	free(s.hist);
	if (rc < 0)
		fprintf(stderr, "coli-replay: %s\n", e.msg);
	return rc < 0 ? coli_err_exit_status(&e) : 0;
}
