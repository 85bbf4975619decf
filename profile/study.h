/* study.h: the multi-run cache study on routing dumps (dumps.h): each run of a workload replayed
 * in order through per-layer expert caches of N slots, each position one decode step (its top_k
 * experts got together, so N >= top_k). As in coli-run, every run starts with empty slots; what
 * carries over from run to run is the usage counts (counts x COLI_USAGE_DECAY + the run's
 * routings, as .coli_usage folds them), which choose the pins and seed LFU.
 *
 * Columns (the simulator of engine/policy.h, per layer):
 *   LRU, SLRU, ARC  from empty slots, nothing learned
 *   LFU             by the decayed counts of earlier runs + this run's so far
 *   LFU warm        the same, its slots preloaded with the experts of highest earlier counts
 *   pins P + LRU    P experts of highest earlier counts pinned, N - P LRU slots (coli-run --usage
 *                   F --pins P --cache-slots N-P; a first run pins nothing): P = top_k, N/2, N - top_k
 *   Belady          evicts the expert used again furthest ahead, preloaded: the upper bound */
#ifndef COLI_PROFILE_STUDY_H
#define COLI_PROFILE_STUDY_H

#include "dumps.h"
#include "error.h"

/* The hit rate table of runs [from, n_runs) (from 0-based) at each of sizes[0..n_sizes) slots per
 * layer (each top_k..experts), and with per_run a table per size of every run's, markdown on
 * stdout. -1 with e. */
int rp_study_print(const rp_dumps *d, const int *sizes, int n_sizes, int from, int per_run, coli_err *e);

#endif
