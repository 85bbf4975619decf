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
	int bits[3];              /* a checkpoint's --expert-bits, --dense-bits, --mtp-bits (0: not given) */
	const char *on;           /* a checkpoint's --on DIR: where the container would be written */
} plan_args;

/* The routing model of a run without usage (locality.c): each expert's popularity Gamma(skew),
 * redrawn with probability drift before each token; each slot one of the previous token's experts
 * with probability reuse, else drawn by popularity. */
typedef struct plan_locality {
	double skew, reuse, drift;
	int top_k;                /* the top_k they were fitted at: skew and reuse scale from it */
	double loss;              /* the fit's sum of squared differences (0: not fitted) */
	char source[160];         /* where the parameters come from, for the plan's notes */
} plan_locality;

extern const plan_locality plan_locality_default;

/* One layer's routing: n tokens x top_k ids, the first warm replayed before counting. */
typedef struct plan_seq {
	const int32_t *ids;
	int n, warm;
} plan_seq;

/* A part of a route trace: layers layer0, layer0 + layer_step, ... < layer1; positions [pos0,
 * pos1), those before warm_to replayed but not counted; the first k slots of each position. */
typedef struct plan_view {
	int layer0, layer1, layer_step, pos0, pos1, warm_to, k;
} plan_view;

#define PLAN_CURVE_MAX 8
/* Pins-free hit rates of LRU and LFU at caches of cache[0..n) experts, and the overlap. */
typedef struct plan_curve {
	int n, cache[PLAN_CURVE_MAX];
	double lru[PLAN_CURVE_MAX], lfu[PLAN_CURVE_MAX], overlap;
} plan_curve;

/* One MoE layer's cache and what it is predicted to give. */
typedef struct plan_layer {
	int layer;                /* container layer */
	int n_experts;
	double record;            /* bytes of one record */
	double *p;                /* [n_experts] routing probabilities the prediction samples */
	int32_t *ids;             /* [tokens][top_k] the simulator's input: routing sampled from p,
				   * or --routing's for this layer */
	int n_tokens, warmup;     /* tokens of ids; of them, the first replayed before counting */
	int runs;                 /* ids holds runs independent runs of n_tokens / runs tokens, each
				   * with its warmup (the locality model's; else 1) */
	double top10;             /* share of the routings the top 10% of experts take (uniform: 0.10) */
	int twin;                 /* the first layer alike (same experts, record size, distribution,
				   * counts; sampled with its seed): alike layers get the same cache;
				   * itself when none */
	double alpha;             /* the Dirichlet prior strength fitted to its counts (hits.c) */
	int modeled;              /* no usage counts: routed by the locality model (plan.loc) */
	int cache, pins;          /* records kept per layer, pins included */
	double hit;               /* predicted warm hit rate (simulator) */
	double hit_pins;          /* the pins' share: the cold hit rate */
	int exact;                /* read ahead exactly: a deepseek_v4 hash layer, whose experts the
				   * token id gives before the layer runs (cost.c) */
	double stall_s;           /* warm: seconds a token waits for this layer's misses (cost.c) */
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
	int described;            /* ct is the container coli-convert would write from the checkpoint
				   * folder a->model (checkpoint.c), not one read */
	int from_headers;         /* described from the safetensors' headers (else config.json alone) */
	char ckpt_abs[4096];      /* that folder made absolute: what plan.json names */
	coli_probe probe;
	coli_usage usage;         /* counts NULL without --usage */
	coli_route *routing;      /* --routing, or NULL */
	int replay;               /* 1: routing has this model's shape, its layers replayed */
	plan_locality loc;        /* the no-usage routing model: fitted on --routing, else the default */
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

/* checkpoint.c: p->ct from a->model: the container it holds (manifest.coli), or the one
 * coli-convert would write from the Hugging Face checkpoint it is (config.json, with or without
 * its safetensors), described (coli_container_describe); what the plan says of it. */
int plan_open_container(plan *p, coli_err *e);
void plan_print_container(const plan *p);
json_t *plan_container_json(const plan *p);

/* inputs.c: the container, the probe (this machine's), the usage (this container's), the
 * fixed part of the RAM budget. */
int plan_inputs(plan *p, const plan_args *a, coli_err *e);
void plan_release(plan *p);

/* hits.c: each layer's routing distribution from the usage counts (uniform without), and the
 * predicted hit rate of pins + LRU slots, by the policy module's simulator on routing sampled
 * from it. */
int plan_distributions(plan *p, coli_err *e);
double plan_layer_hit(const plan *p, const plan_layer *L, int pins, int cache, double *pin_share);
/* The probability that m of a token's k picks miss, each with probability miss (binomial): the
 * distribution the cost model averages a layer's wait over. */
double plan_miss_prob(int k, double miss, int m);

/* locality.c: the no-usage routing model, its sampling and its fit; a seeded generator. */
uint64_t plan_rand(uint64_t *s);
double plan_uniform(uint64_t *s); /* in (0, 1) */
#define PLAN_RAMP_LAYERS 5 /* the first MoE layers, less local (locality.c) */
/* m's parameters for MoE layer `layer` (-1: none of the first, ramped ones) at top_k k (skew and
 * reuse scaled from m->top_k); plan_locality_ramp: the layer's place in the ramp (layers with the
 * same place get the same parameters). */
plan_locality plan_locality_at(const plan_locality *m, int layer, int k);
int plan_locality_ramp(int layer);
int plan_locality_sample(const plan_locality *m, int n_experts, int k, int tokens, uint64_t seed, int32_t *ids);
/* Replays q (its first warm tokens uncounted) through pins (counts' first `pins`) + `cache - pins`
 * slots of policy (COLI_SIM_LRU, COLI_SIM_LFU): hits and lookups added to h[0], h[1]. -1: memory. */
int plan_seq_hits(const plan_seq *q, int n_experts, int k, int policy, const double *counts, int pins, int cache,
		  double h[2]);
int plan_locality_curve(const plan_seq *q, int n_seqs, int n_experts, int k, plan_curve *out);
/* v's part of r as sequences (*out and *ids the caller's to free; layers with nothing counted left out). */
int plan_route_seqs(const coli_route *r, const plan_view *v, plan_seq **out, int32_t **ids, int *n_seqs, coli_err *e);
/* The parameters whose routing is closest to q's curve (plan_locality_curve). */
int plan_locality_fit(plan_locality *m, const plan_seq *q, int n_seqs, int n_experts, int k, coli_err *e);

/* routes.c: --routing's file, a route_trace CSV or a .coli_trace (by its magic), as a route table
 * (*out the caller's, coli_route_close). */
int plan_route_open(coli_route **out, const char *path, coli_err *e);

/* cache.c: the records each layer keeps, and how many of them pinned, within the budget. */
int plan_cache(plan *p, coli_err *e);

/* cost.c: threads, prefetch, I/O, the copies' shares, and the predicted speed. */
int plan_cost(plan *p, coli_err *e);
/* Each copy's bps (at p->qd), held (partial mirrors) and share: coli_copy_shares, the rule the
 * streaming store reads by; p->disk_bps. */
void plan_shares(plan *p);

/* output.c: plan.json, the summary, --explain. */
void plan_note_add(plan *p, const char *what, const char *value, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void plan_warn(plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
json_t *plan_json(const plan *p);
int plan_write(const plan *p, coli_err *e);
void plan_print(const plan *p);

#endif
