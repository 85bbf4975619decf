/* more_cache.h: the verdict's "more cache" estimate: the trace's routing replayed through the run's
 * own expert cache (its eviction policy, cache and pins per layer, from the trace's metadata) at
 * the run's size and at 25% more, per layer, as the streaming store keeps them (engine/policy.h's
 * simulator: a prefill call's experts got one at a time, a decode call's together; decode hits
 * counted). */
#ifndef COLI_PROFILE_MORE_CACHE_H
#define COLI_PROFILE_MORE_CACHE_H

#include "error.h"
#include "tracesum.h"

typedef struct prof_cache_est {
	int ok;                  /* the estimate was made; else why says why not */
	char why[200];
	char policy[4];          /* "LFU" or "LRU": the run's eviction policy */
	const char *policy_from; /* where that comes from: the metadata, the command line, or the default */
	int cache, more;         /* records per MoE layer, pins included (per-layer lists: the largest) */
	int pins;                /* pins of the MoE layer with most */
	int usage;               /* LFU counts started from a usage file (not in the trace: replayed from 0) */
	double base_hit, more_hit; /* decode hit rates replayed at cache and at more */
} prof_cache_est;

/* The estimate for t (0 with c->ok or c->why filled; -1 with e on memory or simulator errors). */
int prof_cache_estimate(const prof_trace *t, prof_cache_est *c, coli_err *e);

#endif
