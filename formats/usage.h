/* usage.h: .coli_usage, how often each (layer, expert) was routed to, folded over runs with an
 * exponential decay and tied to one container's identity (spec: formats/usage.md). coli-run
 * writes it (--usage FILE); coli-plan reads it (--usage) to plan pins and caches.
 *
 *   128-byte header (magic, version, identity, n_layers, n_experts, runs, decay, payload length
 *   and CRC, header CRC)
 *   float64 counts[n_layers][n_experts]   (n_layers: main layers + MTP layers)
 *
 * Written to a temporary name, fsynced and renamed: a crash leaves the old file or the new one.
 * Readers check everything, the payload CRC included, before use. */
#ifndef COLI_USAGE_H
#define COLI_USAGE_H

#include <stdint.h>

#include "error.h"

#define COLI_USAGE_VERSION 1u
#define COLI_USAGE_HEADER 128u
#define COLI_USAGE_MAX_LAYERS 4096
#define COLI_USAGE_MAX_EXPERTS 65536

typedef struct coli_usage {
	uint8_t identity[32];     /* the container's identity hash */
	int n_layers, n_experts;  /* container layers (MTP included), experts per MoE layer */
	uint32_t runs;            /* runs folded in */
	double decay;             /* the per-run decay of the last fold */
	double *counts;           /* [n_layers * n_experts]; release with coli_usage_release */
} coli_usage;

/* An empty table (all counts 0, runs 0, decay 1) of the given shape. */
int coli_usage_init(coli_usage *u, const uint8_t identity[32], int n_layers, int n_experts, coli_err *e);

/* Reads path; refuses a file of another container (identity), another version, a torn or
 * corrupt one (CRCs), shape fields out of range or disagreeing with the file size. Allocates
 * counts (release with coli_usage_release). */
int coli_usage_read(const char *path, const uint8_t identity[32], coli_usage *u, coli_err *e);

/* Writes u to path atomically (path.tmp, fsync, rename, fsync of the folder). */
int coli_usage_write(const char *path, const coli_usage *u, coli_err *e);

/* counts = counts * decay + run[i] for every (layer, expert); runs++; u->decay = decay. run has
 * u's shape. */
void coli_usage_fold(coli_usage *u, const double *run, double decay);

void coli_usage_release(coli_usage *u); /* accepts a zeroed or released table */

#endif
