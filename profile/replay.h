/* replay.h: coli-profile replay: a routing trace (route_trace v1 CSV, or a .coli_trace's routed
 * experts) replayed through expert caches of several policies and sizes on the engine's cache
 * simulator (engine/policy.h, bytes mode), with the semantics of BigMoeOnEdge's route-replay.py:
 * the prompt one batch per layer (every prompt position's experts, position-major, each expert once),
 * then one batch per layer per generated token; eviction after each batch, sparing its members;
 * byte budgets (each expert costs its layer's record size), global or split evenly over the
 * layers; the hit rate over the decode batches. */
#ifndef COLI_PROFILE_REPLAY_H
#define COLI_PROFILE_REPLAY_H

#include <stdint.h>

#include "error.h"
#include "policy.h"

/* The batches of one trace. */
typedef struct rp_seq {
	char *name;
	int n_layers, n_experts, top_k;
	double *cost;          /* [n_layers]: bytes of an expert record per layer; NULL: unknown */
	coli_sim_batch *b;     /* [n]: the prompt's batches first (n_prefill), then decode's */
	int n, n_prefill;
	int32_t *ids;          /* the batches' experts */
	int max_batch;
	double *prompt_counts; /* [n_layers][n_experts]: routings of the prompt */
	double *all_counts;    /* [n_layers][n_experts]: routings of the whole trace */
} rp_seq;

/* A policy of the study. */
typedef struct rp_policy {
	const char *name;      /* as --policy and --json name it */
	const char *what;      /* a line for the docs and --help */
	int sim;               /* enum coli_sim_policy */
	int global;            /* one pool for every layer */
	int pins;              /* 0: none; 1: coli-run's --usage split (half the share pinned, top_k
				* slots left), the usage standing in the whole trace's counts (which
				* also seed LFU): turns like this one before it */
	int skew;              /* per-layer shares sized by each layer's prompt working set */
	int adapt;             /* per-layer shares that adapt to each layer's reuse (coli_adapt) */
} rp_policy;

extern const rp_policy rp_policies[];
extern const int rp_n_policies;

/* Reads a route_trace CSV or a .coli_trace (by its magic) into *s. */
int rp_load(rp_seq *s, const char *path, coli_err *e);
void rp_release(rp_seq *s);

/* The decode hit rate (0..1) of policy p with a budget of budget bytes (cost per layer from the
 * trace, or expert_bytes for every layer when > 0), or with slots experts per layer (budget 0;
 * global pools hold slots x n_layers). -1 with e when the policy cannot run there. */
int rp_replay(const rp_seq *s, const rp_policy *p, double budget, double expert_bytes, int slots, double *hit,
	      coli_err *e);

int prof_replay_main(int argc, char **argv);

#endif
