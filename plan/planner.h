/* planner.h: coli-plan MODEL.coli: what it reads, what it decides, and the parts that decide. */
#ifndef COLI_PLANNER_H
#define COLI_PLANNER_H

#include <jansson.h>
#include <stdint.h>

#include "container.h"
#include "error.h"
#include "plan.h"
#include "policy.h"
#include "mirrormap.h"
#include "probe.h"
#include "route.h"
#include "usage.h"

#define PLAN_MAX_COPIES 8

/* The command line of coli-plan MODEL.coli. */
typedef struct plan_args {
	const char *model, *probe, *usage, *out;
	const char *routing;      /* --routing: a route_trace CSV of this workload, replayed */
	double ram;               /* GiB; 0: the probe's available RAM (or cgroup limit) */
	int ctx;                  /* KV cache tokens (default 4096) */
	const char *mirrors[PLAN_MAX_COPIES - 1];
	int n_mirrors;
	double recall;            /* --recall: next-layer prediction recall (default 0.8) */
	int allow_q8;             /* --allow-q8: the plan may choose --precision q8 */
	int explain, json, quiet;
} plan_args;

/* One MoE layer's cache and what it is predicted to give. */
typedef struct plan_layer {
	int layer;                /* container layer */
	int n_experts;
	double record;            /* bytes of one record */
	double *p;                /* [n_experts] routing probabilities the prediction samples */
	int32_t *ids;             /* [tokens][top_k] the simulator's input: routing sampled from p,
				   * or --routing's for this layer */
	int n_tokens, warmup;     /* tokens of ids; of them, the first replayed before counting */
	double top10;             /* share of the routings the top 10% of experts take (uniform: 0.10) */
	int twin;                 /* the first layer alike (same experts, record size, distribution,
				   * counts; sampled with its seed): alike layers get the same cache;
				   * itself when none */
	double alpha;             /* the Dirichlet prior strength fitted to its counts (hits.c) */
	int cache, pins;          /* records kept per layer, pins included */
	double hit;               /* predicted warm hit rate (simulator) */
	double hit_pins;          /* the pins' share: the cold hit rate */
} plan_layer;

/* A copy of experts.bin a run reads from: the model's, or a mirror. */
typedef struct plan_copy {
	const char *dir;
	char abs[4096];           /* dir made absolute: what plan.json names */
	const coli_probe_disk *disk; /* its probe measurement */
	double bps;               /* O_DIRECT bandwidth at the queue depth used */
	double share;             /* predicted fraction of the bytes it serves */
	double held;              /* the share of the misses it can serve (1: a full copy) */
	coli_mirror_map map;      /* a partial mirror's record map (bits NULL: a full copy) */
} plan_copy;

/* One decision and why, in plain words, for plan.json and --explain. */
typedef struct plan_note {
	char what[32];
	char value[64];
	char why[512];
} plan_note;

#define PLAN_MAX_NOTES 24

typedef struct plan {
	const plan_args *a;
	coli_container *ct;
	coli_probe probe;
	coli_usage usage;         /* counts NULL without --usage */
	coli_route *routing;      /* --routing, or NULL */
	char usage_abs[4096];     /* its path made absolute */
	int top_k, n_moe;         /* the model's top_k, MoE layers (MTP included) */
	coli_budget fixed;
	double budget;            /* bytes */
	int stream;               /* 0: every expert fits in RAM */
	plan_layer *layers;       /* [n_moe] */
	double hit;               /* over layers, weighted by routings */
	double hit_pins;          /* the pins' share of it: the cold hit rate */
	int cache_policy;         /* STORE_CACHE_LRU or STORE_CACHE_LFU: the one predicted better */
	int threads, prefetch, io, qd;
	int q8;                   /* --precision q8 (only with --allow-q8, when predicted faster) */
	plan_copy copies[PLAN_MAX_COPIES];
	int n_copies;
	double disk_bps;          /* the copies together, for the misses' mix */
	coli_plan_speed warm, cold;
	plan_note notes[PLAN_MAX_NOTES];
	int n_notes;
	char warnings[4][512];
	int n_warnings;
} plan;

/* inputs.c: the container, the probe (this machine's), the usage (this container's), the
 * fixed part of the RAM budget. */
int plan_inputs(plan *p, const plan_args *a, coli_err *e);
void plan_release(plan *p);

/* hits.c: each layer's routing distribution from the usage counts (uniform without), and the
 * predicted hit rate of pins + LRU slots, by the policy module's simulator on routing sampled
 * from it. */
int plan_distributions(plan *p, coli_err *e);
double plan_layer_hit(const plan *p, const plan_layer *L, int pins, int cache, double *pin_share);

/* cache.c: the records each layer keeps, and how many of them pinned, within the budget. */
int plan_cache(plan *p, coli_err *e);

/* cost.c: threads, prefetch, I/O, the copies' shares, and the predicted speed. */
int plan_cost(plan *p, coli_err *e);

/* output.c: plan.json, the summary, --explain. */
void plan_note_add(plan *p, const char *what, const char *value, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void plan_warn(plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
json_t *plan_json(const plan *p);
int plan_write(const plan *p, coli_err *e);
void plan_print(const plan *p);

#endif
