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
 *
 * usage: coli-replay --layers L --experts E --top-k K [--slots N,...] [--from R] [--per-run] TRACE... */
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fileio.h"

#define DECAY 0.9 /* coli-run's fold of .coli_usage */
#define MAX_SIZES 32

enum { P_LRU, P_SLRU, P_LFU, P_LFU_WARM, P_PINS_K, P_PINS_HALF, P_PINS_MAX, P_OPT, N_POLICIES };
static const char *const policy_name[N_POLICIES] = {"LRU", "SLRU", "LFU", "LFU warm", "pins k + LRU",
						    "pins N/2 + LRU", "pins N-k + LRU", "Belady"};

typedef struct trace {
	const char *path;
	int n;          /* positions */
	int32_t *ids;   /* [layers][n][top_k] */
} trace;

typedef struct study {
	int L, E, K;    /* MoE layers, experts per layer, top_k */
	int from;       /* first run counted in the hit rates (0-based) */
	trace *runs;
	int n_runs;
	double *hist;   /* [n_runs + 1][L][E]: usage counts before run r (decayed fold of runs < r) */
} study;

/* One layer's cache. A resident's eviction order is (key, tick), lowest first; key is the
 * policy's: 0 (LRU), the segment (SLRU: 1 protected), the count (LFU), -next use (Belady). */
typedef struct cache {
	int cap, n;
	int *expert;     /* [cap] */
	double *key;     /* [cap] */
	uint64_t *tick;  /* [cap] last use */
	int *where;      /* [E] slot, -1 when not resident */
	char *pinned;    /* [2E]: pinned, then scratch for choosing */
	uint64_t now;
} cache;

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

/* The pins of policy p at size n: how many experts per layer; -1 when the policy has none. */
static int pins_of(int p, int n, int K)
{
	return p == P_PINS_K ? K : p == P_PINS_HALF ? n / 2 : p == P_PINS_MAX ? n - K : -1;
}

/* The n experts of highest score (ties: lower id; score <= 0 never) into out; how many. As
 * coli-run chooses its pins from the usage counts. */
static int top_experts(const double *score, int E, int n, char *taken, int *out)
{
	int got = 0;
	memset(taken, 0, (size_t)E);
	for (; got < n; got++) {
		int best = -1;
		for (int x = 0; x < E; x++)
			if (!taken[x] && score[x] > 0 && (best < 0 || score[x] > score[best]))
				best = x;
		if (best < 0)
			break;
		taken[best] = 1, out[got] = best;
	}
	return got;
}

/* The resident with the lowest (key, tick) not in the step's set; -1 when none. */
static int victim(const cache *c, const int32_t *set, int K)
{
	int v = -1;
	for (int i = 0; i < c->n; i++)
		if (!listed(c->expert[i], set, K) &&
		    (v < 0 || c->key[i] < c->key[v] || (c->key[i] == c->key[v] && c->tick[i] < c->tick[v])))
			v = i;
	return v;
}

/* SLRU: slot i promoted to the protected segment; beyond 80% of the slots its least recent
 * other member goes back to probation. */
static void slru_promote(cache *c, int i)
{
	int prot = 0, lru = -1;
	c->key[i] = 1;
	for (int j = 0; j < c->n; j++)
		if (c->key[j] == 1) {
			prot++;
			if (j != i && (lru < 0 || c->tick[j] < c->tick[lru]))
				lru = j;
		}
	if (prot > c->cap * 4 / 5 && lru >= 0)
		c->key[lru] = 0, c->tick[lru] = ++c->now;
}

/* A use of slot i (hit: it was resident) under policy p. */
static void touch(cache *c, int p, int i, int hit, double count, int next)
{
	c->tick[i] = ++c->now;
	if (p == P_SLRU && hit)
		slru_promote(c, i);
	else if (p == P_SLRU)
		c->key[i] = 0;
	else if (p == P_LFU || p == P_LFU_WARM)
		c->key[i] = count;
	else if (p == P_OPT)
		c->key[i] = -(double)next;
	else
		c->key[i] = 0;
}

/* One decode step of one layer: hits first (all the set's residents in use), then each miss
 * into a free slot or the victim's. Returns the hits. */
static int step(cache *c, int p, const int32_t *set, int K, const double *count, const int *next)
{
	int hits = 0;
	for (int j = 0; j < K; j++) {
		int x = set[j];
		if (c->pinned[x] || c->where[x] >= 0)
			hits++;
		if (!c->pinned[x] && c->where[x] >= 0)
			touch(c, p, c->where[x], 1, count[x], next[j]);
	}
	for (int j = 0; j < K; j++) {
		int x = set[j], i;
		if (c->pinned[x] || c->where[x] >= 0)
			continue;
		if (c->n < c->cap) {
			i = c->n++;
		} else {
			i = victim(c, set, K); /* never -1: cap >= K */
			c->where[c->expert[i]] = -1;
		}
		c->expert[i] = x, c->where[x] = i;
		touch(c, p, i, 0, count[x], next[j]);
	}
	return hits;
}

/* next[pos][j]: the next position after pos using the same expert in layer l (INT_MAX: none). */
static void next_uses(const study *s, const trace *t, int l, int *next, int *last)
{
	for (int x = 0; x < s->E; x++)
		last[x] = INT_MAX;
	for (int pos = t->n - 1; pos >= 0; pos--) {
		const int32_t *set = step_ids(s, t, l, pos);
		for (int j = 0; j < s->K; j++)
			next[(size_t)pos * (size_t)s->K + (size_t)j] = last[set[j]];
		for (int j = 0; j < s->K; j++)
			last[set[j]] = pos;
	}
}

typedef struct work {
	cache c;
	double *count;    /* [E] LFU: earlier counts + this run's so far */
	double *score;    /* [E] what a preload ranks by */
	int *next, *last; /* [max positions x K], [E] (after next_uses: each expert's first use) */
	int *list;        /* [E] */
} work;

/* Fills the empty cache with the experts of highest score, each keyed as policy p keys it. Like
 * the pins, read before the run: neither a hit nor a miss. */
static void preload(cache *c, work *w, int p, int E)
{
	int n = top_experts(w->score, E, c->cap, c->pinned + E, w->list);
	for (int j = 0; j < n; j++) {
		int x = w->list[j];
		c->expert[j] = x, c->where[x] = j;
		touch(c, p, j, 0, w->count[x], w->last[x]);
	}
	c->n = n;
}

/* Hits of policy p with n slots over one layer of one run. */
static uint64_t replay_layer(const study *s, work *w, int p, int n, int r, int l)
{
	const trace *t = &s->runs[r];
	const double *hist = s->hist + ((size_t)r * (size_t)s->L + (size_t)l) * (size_t)s->E;
	cache *c = &w->c;
	int P = pins_of(p, n, s->K);
	c->cap = P > 0 ? n - P : n, c->n = 0, c->now = 0;
	int got = P > 0 ? top_experts(hist, s->E, P, c->pinned + s->E, w->list) : 0;
	memset(c->pinned, 0, (size_t)s->E);
	for (int j = 0; j < got; j++)
		c->pinned[w->list[j]] = 1;
	for (int x = 0; x < s->E; x++)
		c->where[x] = -1, w->count[x] = hist[x];
	next_uses(s, t, l, w->next, w->last);
	if (p == P_LFU_WARM || p == P_OPT) {
		for (int x = 0; x < s->E; x++) /* LFU: the counts; Belady: the earliest first use */
			w->score[x] = p == P_LFU_WARM ? hist[x] : w->last[x] == INT_MAX ? 0 : (double)(INT_MAX - w->last[x]);
		preload(c, w, p, s->E);
	}
	uint64_t hits = 0;
	for (int pos = 0; pos < t->n; pos++) {
		const int32_t *set = step_ids(s, t, l, pos);
		for (int j = 0; j < s->K; j++)
			w->count[set[j]] += 1;
		hits += (uint64_t)step(c, p, set, s->K, w->count, w->next + (size_t)pos * (size_t)s->K);
	}
	return hits;
}

/* hits[p][r] of every policy and run at n slots; a policy that cannot run at n gets UINT64_MAX. */
static void replay_size(const study *s, work *w, int n, uint64_t (*hits)[N_POLICIES])
{
	for (int p = 0; p < N_POLICIES; p++) {
		int P = pins_of(p, n, s->K);
		for (int r = 0; r < s->n_runs; r++) {
			hits[r][p] = P > 0 && n - P < s->K ? UINT64_MAX : 0;
			for (int l = 0; l < s->L && hits[r][p] != UINT64_MAX; l++)
				hits[r][p] += replay_layer(s, w, p, n, r, l);
		}
	}
}

/* The usage counts before each run: hist[0] = 0, hist[r+1] = hist[r] x 0.9 + run r's routings. */
static int fold_history(study *s, coli_err *e)
{
	size_t le = (size_t)s->L * (size_t)s->E;
	if (!(s->hist = coli_calloc((size_t)(s->n_runs + 1) * le, sizeof(double), e)))
		return -1;
	for (int r = 0; r < s->n_runs; r++) {
		double *prev = s->hist + (size_t)r * le, *h = prev + le;
		const trace *t = &s->runs[r];
		for (size_t i = 0; i < le; i++)
			h[i] = prev[i] * DECAY;
		for (int l = 0; l < s->L; l++)
			for (int pos = 0; pos < t->n; pos++)
				for (int j = 0; j < s->K; j++)
					h[(size_t)l * (size_t)s->E + (size_t)step_ids(s, t, l, pos)[j]] += 1;
	}
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
	return 0;
}

static int cmp_desc(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x < y) - (x > y);
}

/* The collapse check (DESIGN.md, "Measuring"), one row per run: distinct experts per layer (mean
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
		printf(" %s |", policy_name[p]);
	printf("\n|---:|");
	for (int p = 0; p < N_POLICIES; p++)
		printf("---:|");
	printf("\n");
}

static int run_study(study *s, const int *sizes, int n_sizes, int per_run, coli_err *e)
{
	int max_n = 0;
	for (int r = 0; r < s->n_runs; r++)
		max_n = s->runs[r].n > max_n ? s->runs[r].n : max_n;
	work w = {{0}, NULL, NULL, NULL, NULL, NULL};
	uint64_t(*hits)[N_POLICIES] = coli_calloc((size_t)s->n_runs * (size_t)n_sizes, sizeof(*hits), e);
	w.c.expert = coli_calloc((size_t)s->E, sizeof(int), e), w.c.key = coli_calloc((size_t)s->E, sizeof(double), e);
	w.c.tick = coli_calloc((size_t)s->E, sizeof(uint64_t), e), w.c.where = coli_calloc((size_t)s->E, sizeof(int), e);
	w.c.pinned = coli_calloc((size_t)s->E, 2, e), w.count = coli_calloc((size_t)s->E, sizeof(double), e);
	w.score = coli_calloc((size_t)s->E, sizeof(double), e), w.list = coli_calloc((size_t)s->E, sizeof(int), e);
	w.next = coli_calloc((size_t)max_n * (size_t)s->K, sizeof(int), e), w.last = coli_calloc((size_t)s->E, sizeof(int), e);
	int rc = hits && w.c.expert && w.c.key && w.c.tick && w.c.where && w.c.pinned && w.count && w.score && w.list &&
			 w.next && w.last ? 0 : -1;
	if (rc == 0)
		rc = fold_history(s, e);
	if (rc == 0) {
		for (int i = 0; i < n_sizes; i++)
			replay_size(s, &w, sizes[i], hits + (size_t)i * (size_t)s->n_runs);
		printf("Routing (collapse check):\n\n");
		print_routing(s);
		printf("\nHit rate, runs %d..%d of %d (k = top_k = %d, N = slots per layer, pins included):\n\n",
		       s->from + 1, s->n_runs, s->n_runs, s->K);
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
	free(hits), free(w.c.expert), free(w.c.key), free(w.c.tick), free(w.c.where), free(w.c.pinned);
	free(w.count), free(w.score), free(w.list), free(w.next), free(w.last);
	return rc;
}

static const char usage_text[] =
	"usage: coli-replay --layers L --experts E --top-k K [--slots N,...] [--from R] [--per-run] TRACE...\n"
	"\n"
	"Replays routing traces (coli-run --teacher-force --dump-routing; one file per run, in order)\n"
	"through per-layer expert caches and prints each policy's hit rate.\n"
	"\n"
	"  --layers L      MoE layers in the traces\n"
	"  --experts E     routed experts per layer\n"
	"  --top-k K       experts per token\n"
	"  --slots N,...   cache sizes to replay, experts per layer, each K..E (default K,2K,4K,8K up to E)\n"
	"  --from R        count hits from run R on (default 2 with several traces: the first has no\n"
	"                  earlier counts to learn from; 1 with one)\n"
	"  --per-run       also a table of every run's hit rates per size\n"
	"  -h, --help      this text\n";

static int bad_usage(const char *msg, const char *value)
{
	fprintf(stderr, "coli-replay: %s '%s'\n%s", msg, value, usage_text);
	return 2;
}

/* A whole decimal number in [lo, hi], or -1. */
static int parse_int(const char *str, int lo, int hi)
{
	char *end;
	long v = strtol(str, &end, 10);
	return end == str || *end || v < lo || v > hi ? -1 : (int)v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"layers", required_argument, NULL, 'l'}, {"experts", required_argument, NULL, 'e'},
					     {"top-k", required_argument, NULL, 'k'},  {"slots", required_argument, NULL, 's'},
					     {"from", required_argument, NULL, 'f'},   {"per-run", no_argument, NULL, 'r'},
					     {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
	study s = {0, 0, 0, -1, NULL, 0, NULL};
	const char *slots = NULL;
	int per_run = 0, sizes[MAX_SIZES], n_sizes = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (c == 'h')
			return fputs(usage_text, stdout), 0;
		if (c == 'r')
			per_run = 1;
		else if (c == 's')
			slots = optarg;
		else if (c == '?')
			return fputs(usage_text, stderr), 2;
		else if (c == 'l' && (s.L = parse_int(optarg, 1, 4096)) < 0)
			return bad_usage("--layers: expected 1..4096, got", optarg);
		else if (c == 'e' && (s.E = parse_int(optarg, 1, 65536)) < 0)
			return bad_usage("--experts: expected 1..65536, got", optarg);
		else if (c == 'k' && (s.K = parse_int(optarg, 1, 65536)) < 0)
			return bad_usage("--top-k: expected 1..65536, got", optarg);
		else if (c == 'f' && (s.from = parse_int(optarg, 1, INT_MAX) - 1) < 0)
			return bad_usage("--from: expected a run number >= 1, got", optarg);
	}
	if (!s.L || !s.E || !s.K)
		return fprintf(stderr, "coli-replay: --layers, --experts and --top-k are required\n%s", usage_text), 2;
	if (s.K > s.E)
		return fprintf(stderr, "coli-replay: --top-k %d exceeds --experts %d\n", s.K, s.E), 2;
	if (optind == argc)
		return fprintf(stderr, "coli-replay: no trace given\n%s", usage_text), 2;
	for (int n = s.K; !slots && n <= s.E && n <= 8 * s.K; n *= 2)
		sizes[n_sizes++] = n;
	for (const char *p = slots; p && *p; p += strcspn(p, ","), p += *p == ',') {
		char item[32];
		size_t len = strcspn(p, ",");
		snprintf(item, sizeof(item), "%.*s", (int)(len < sizeof(item) ? len : sizeof(item) - 1), p);
		if (n_sizes == MAX_SIZES)
			return bad_usage("--slots: more than 32 sizes in", slots);
		if ((sizes[n_sizes++] = parse_int(item, s.K, s.E)) < 0)
			return fprintf(stderr, "coli-replay: --slots: '%s' is not a size in %d..%d (top_k..experts)\n", item, s.K,
				       s.E), 2;
	}
	if (n_sizes == 0)
		return bad_usage("--slots: no size in", slots);
	s.n_runs = argc - optind;
	if (s.from < 0)
		s.from = s.n_runs > 1;
	if (s.from >= s.n_runs)
		return fprintf(stderr, "coli-replay: --from %d: exceeds the %d traces given\n", s.from + 1, s.n_runs), 2;
	coli_err e = {0, ""};
	int rc = (s.runs = coli_calloc((size_t)s.n_runs, sizeof(*s.runs), &e)) ? 0 : -1;
	for (int r = 0; rc == 0 && r < s.n_runs; r++) {
		s.runs[r].path = argv[optind + r];
		rc = load_trace(&s, &s.runs[r], &e);
	}
	if (rc == 0)
		rc = run_study(&s, sizes, n_sizes, per_run, &e);
	for (int r = 0; s.runs && r < s.n_runs; r++)
		free(s.runs[r].ids);
	free(s.runs);
	free(s.hist);
	if (rc < 0)
		fprintf(stderr, "coli-replay: %s\n", e.msg);
	return rc < 0 ? coli_err_exit_status(&e) : 0;
}
