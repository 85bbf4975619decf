/* dumps.h: routing dumps, what `coli-run --teacher-force --dump-routing FILE` writes: int32
 * little-endian [MoE layers][positions][top_k], each position's experts; one file per run of a
 * workload, in order. Read whole and checked (size, every id's range, no expert twice in a
 * position) against the layers, experts and top_k given. */
#ifndef COLI_PROFILE_DUMPS_H
#define COLI_PROFILE_DUMPS_H

#include <stdint.h>

#include "error.h"

typedef struct rp_dump {
	const char *path;
	int n;                 /* positions */
	int32_t *ids;          /* [layers][n][top_k] */
} rp_dump;

typedef struct rp_dumps {
	int L, E, K;           /* MoE layers, experts per layer, top_k */
	int n_runs;
	rp_dump *runs;         /* [n_runs] */
} rp_dumps;

/* Reads paths[0..n) (kept, not copied) as runs of L layers x E experts, top_k K. Errors (COLI_EDATA,
 * COLI_EIO) name the file, and for an id its [layer][position][slot]. */
int rp_dumps_load(rp_dumps *d, int L, int E, int K, char *const *paths, int n, coli_err *e);
void rp_dumps_release(rp_dumps *d);

/* The K experts of layer l at position pos of run t. */
const int32_t *rp_dump_at(const rp_dumps *d, const rp_dump *t, int l, int pos);

/* Whether x is among set[0..n). */
int rp_listed(int32_t x, const int32_t *set, int n);

#endif
