/* study.c: the multi-run cache study on routing dumps, usage carried from run to run (study.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fileio.h"
#include "policy.h"
#include "study.h"

/* The study's columns: a simulator policy (policy.h), warm or not, and how many pins. */
enum { PINS_NONE, PINS_K, PINS_HALF, PINS_MAX };
typedef struct column {
	const char *name;
	int policy, warm, pins;
} column;
static const column columns[] = {
	{"LRU", COLI_SIM_LRU, 0, PINS_NONE},          {"SLRU", COLI_SIM_SLRU, 0, PINS_NONE},
	{"ARC", COLI_SIM_ARC, 0, PINS_NONE},          {"LFU", COLI_SIM_LFU, 0, PINS_NONE},
	{"LFU warm", COLI_SIM_LFU, 1, PINS_NONE},     {"pins k + LRU", COLI_SIM_LRU, 0, PINS_K},
	{"pins N/2 + LRU", COLI_SIM_LRU, 0, PINS_HALF}, {"pins N-k + LRU", COLI_SIM_LRU, 0, PINS_MAX},
	{"Belady", COLI_SIM_BELADY, 1, PINS_NONE},
};
#define N_COLUMNS ((int)(sizeof(columns) / sizeof(columns[0])))

/* What a replay of the study needs beside the dumps. */
typedef struct study {
	const rp_dumps *d;
	double *hist;          /* [n_runs + 1][L][E]: usage counts before run r (decayed fold of runs < r) */
	coli_sim_batch **seq;  /* [n_runs][L x n]: each layer's positions in order, one decode step each */
	uint64_t (*hits)[N_COLUMNS]; /* [n_sizes][n_runs]: hits per column; UINT64_MAX: cannot run there */
} study;

/* The pins of column c at size n: how many experts per layer; -1 when it has none. */
static int pins_of(const column *c, int n, int K)
{
	return c->pins == PINS_K ? K : c->pins == PINS_HALF ? n / 2 : c->pins == PINS_MAX ? n - K : -1;
}

/* hits[r] of column c at n slots for every run, through one simulator; UINT64_MAX for all when
 * the pins leave fewer than top_k slots. */
static int replay_column(const study *s, const column *c, int n, uint64_t (*hits)[N_COLUMNS], coli_err *e)
{
	const rp_dumps *d = s->d;
	int P = pins_of(c, n, d->K), max_n = 0, col = (int)(c - columns);
	for (int r = 0; r < d->n_runs; r++)
		hits[r][col] = P > 0 && n - P < d->K ? UINT64_MAX : 0, max_n = d->runs[r].n > max_n ? d->runs[r].n : max_n;
	if (P > 0 && n - P < d->K)
		return 0;
	coli_sim_opts o = {.policy = c->policy, .n_layers = d->L, .n_experts = d->E, .capacity = P > 0 ? n - P : n,
			   .max_batch = d->K, .max_batches = max_n * d->L, .warm = c->warm};
	coli_sim *sim;
	if (coli_sim_open(&sim, &o, e) < 0)
		return -1;
	int rc = 0;
	for (int r = 0; rc == 0 && r < d->n_runs; r++) {
		coli_sim_start(sim, s->hist + (size_t)r * (size_t)d->L * (size_t)d->E, P > 0 ? P : 0);
		rc = coli_sim_run(sim, s->seq[r], d->runs[r].n * d->L, e);
		hits[r][col] = coli_sim_stats_of(sim, -1).hits;
	}
	coli_sim_close(sim);
	return rc;
}

/* The usage counts before each run: hist[0] = 0, hist[r+1] = hist[r] x COLI_USAGE_DECAY + run r's routings. */
static int fold_history(study *s, coli_err *e)
{
	const rp_dumps *d = s->d;
	size_t le = (size_t)d->L * (size_t)d->E;
	if (!(s->hist = coli_calloc((size_t)(d->n_runs + 1) * le, sizeof(double), e)))
		return -1;
	for (int r = 0; r < d->n_runs; r++) {
		double *prev = s->hist + (size_t)r * le, *h = prev + le;
		const rp_dump *t = &d->runs[r];
		for (size_t i = 0; i < le; i++)
			h[i] = prev[i] * COLI_USAGE_DECAY;
		for (int l = 0; l < d->L; l++)
			for (int pos = 0; pos < t->n; pos++)
				for (int j = 0; j < d->K; j++)
					h[(size_t)l * (size_t)d->E + (size_t)rp_dump_at(d, t, l, pos)[j]] += 1;
	}
	return 0;
}

/* Each run as the simulator's batches, layer by layer, each position a decode step. */
static int make_steps(study *s, coli_err *e)
{
	const rp_dumps *d = s->d;
	if (!(s->seq = coli_calloc((size_t)d->n_runs, sizeof(*s->seq), e)))
		return -1;
	for (int r = 0; r < d->n_runs; r++) {
		const rp_dump *t = &d->runs[r];
		if (!(s->seq[r] = coli_calloc((size_t)d->L * (size_t)t->n, sizeof(**s->seq), e)))
			return -1;
		for (int l = 0; l < d->L; l++)
			for (int pos = 0; pos < t->n; pos++)
				s->seq[r][(size_t)l * (size_t)t->n + (size_t)pos] = (coli_sim_batch){l, d->K, rp_dump_at(d, t, l, pos)};
	}
	return 0;
}

/* Hit rate over runs [from, to) of column p, or "-" when it cannot run at that size. */
static void print_rate(const rp_dumps *d, uint64_t (*hits)[N_COLUMNS], int p, int from, int to)
{
	uint64_t h = 0, gets = 0;
	for (int r = from; r < to; r++) {
		if (hits[r][p] == UINT64_MAX) {
			printf(" - |");
			return;
		}
		h += hits[r][p];
		gets += (uint64_t)d->runs[r].n * (uint64_t)d->L * (uint64_t)d->K;
	}
	printf(" %.1f%% |", gets ? 100.0 * (double)h / (double)gets : 0.0);
}

static void print_header(const char *first)
{
	printf("| %s |", first);
	for (int p = 0; p < N_COLUMNS; p++)
		printf(" %s |", columns[p].name);
	printf("\n|---:|");
	for (int p = 0; p < N_COLUMNS; p++)
		printf("---:|");
	printf("\n");
}

static void print_tables(const study *s, const int *sizes, int n_sizes, int from, int per_run)
{
	const rp_dumps *d = s->d;
	printf("Hit rate, runs %d..%d of %d (k = top_k = %d, N = slots per layer, pins included):\n\n", from + 1,
	       d->n_runs, d->n_runs, d->K);
	print_header("slots N");
	for (int i = 0; i < n_sizes; i++) {
		printf("| %d |", sizes[i]);
		for (int p = 0; p < N_COLUMNS; p++)
			print_rate(d, s->hits + (size_t)i * (size_t)d->n_runs, p, from, d->n_runs);
		printf("\n");
	}
	for (int i = 0; per_run && i < n_sizes; i++) {
		printf("\nPer run, %d slots per layer:\n\n", sizes[i]);
		print_header("run");
		for (int r = 0; r < d->n_runs; r++) {
			printf("| %d |", r + 1);
			for (int p = 0; p < N_COLUMNS; p++)
				print_rate(d, s->hits + (size_t)i * (size_t)d->n_runs, p, r, r + 1);
			printf("\n");
		}
	}
}

int rp_study_print(const rp_dumps *d, const int *sizes, int n_sizes, int from, int per_run, coli_err *e)
{
	study s = {d, NULL, NULL, coli_calloc((size_t)d->n_runs * (size_t)n_sizes, sizeof(*s.hits), e)};
	int rc = s.hits && fold_history(&s, e) == 0 ? make_steps(&s, e) : -1;
	for (int i = 0; rc == 0 && i < n_sizes; i++)
		for (int p = 0; rc == 0 && p < N_COLUMNS; p++)
			rc = replay_column(&s, &columns[p], sizes[i], s.hits + (size_t)i * (size_t)d->n_runs, e);
	if (rc == 0)
		print_tables(&s, sizes, n_sizes, from, per_run);
	for (int r = 0; s.seq && r < d->n_runs; r++)
		free(s.seq[r]);
	free(s.seq), free(s.hist), free(s.hits);
	return rc;
}
