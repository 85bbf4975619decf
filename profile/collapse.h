/* collapse.h: the routing collapse check of routing dumps (docs/benchmarks.md, "Measuring"): per
 * run, distinct experts per layer (mean and least), the overlap of each position's experts with
 * the previous position's (independent uniform routing gives top_k / experts), and the share of
 * the routings that go to each layer's top 10% experts. */
#ifndef COLI_PROFILE_COLLAPSE_H
#define COLI_PROFILE_COLLAPSE_H

#include "dumps.h"
#include "error.h"

/* The collapse table, markdown, on stdout: "| run | trace | positions | distinct experts/layer
 * (mean, min) | prev-token overlap | top-10% share |", one row per run. -1 with e when out of
 * memory. */
int rp_collapse_print(const rp_dumps *d, coli_err *e);

#endif
