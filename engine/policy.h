/* policy.h: the expert cache's policy, in one place: coli-run's RAM budget split (--ram,
 * --cache-slots, --pins), the pins chosen from usage counts, the usage decay, the order of
 * eviction that the streaming store and the simulator share, and a simulator of expert caches
 * that replays routing (coli-profile replay, docs/cache-policy.md).
 *
 * Pure functions: no I/O, no printing, no environment, no globals. The simulator is the one
 * object: it allocates its memory at open, nothing per batch.
 *
 * Counts tables are [layer][expert] doubles, as .coli_usage holds them (formats/usage.md). */
#ifndef COLI_POLICY_H
#define COLI_POLICY_H

#include <stdint.h>

#include "container.h"
#include "error.h"

/* ---- usage and pins -------------------------------------------------------------------------- */

/* coli-run folds each run's routing counts into .coli_usage as counts x COLI_USAGE_DECAY + the
 * run's: a run's weight halves after about 7 runs. */
#define COLI_USAGE_DECAY 0.9

/* The pin order of one layer's counts: highest count first, ties lower id first; an expert of
 * count <= 0 (or NaN) is never in it. Returns the expert after prev in that order (prev -1: the
 * first), or -1 when none is left. O(n_experts). */
int coli_pin_next(const double *counts, int n_experts, int prev);

/* The first n experts of the pin order into out[0..n): the pins of a layer, as the streaming
 * store chooses them. Returns how many (fewer than n when fewer experts have a count > 0; 0
 * when n <= 0). O(n x n_experts). */
int coli_pins_choose(const double *counts, int n_experts, int n, int *out);

/* The most experts of count > 0 in one layer of a [n_layers][n_experts] table (0 for NULL):
 * more pins than that would stay empty. */
int coli_usage_known(const double *counts, int n_layers, int n_experts);

/* ---- the eviction order ------------------------------------------------------------------------ */

/* coli-run's eviction policy when --cache-policy is not given (run/main.c): a value of enum
 * coli_sim_policy (below), COLI_SIM_LRU or COLI_SIM_LFU, the two the streaming store has
 * (store_stream_opts.cache_policy takes the same values). */
#define COLI_CACHE_DEFAULT COLI_SIM_LFU

/* Whether a cached expert of (count a, last use ta) is evicted before one of (count b, last use
 * tb): the one order of eviction that the streaming store (engine/store/stream.c) and the
 * simulator's LRU and LFU (below) both call. COLI_SIM_LRU: the least recently used first;
 * COLI_SIM_LFU: the lower count first (the usage counts given at start + the uses so far), ties
 * the least recently used. Ticks are distinct per pool. */
int coli_evict_before(int policy, double a, uint64_t ta, double b, uint64_t tb);

/* ---- the RAM budget --------------------------------------------------------------------------- */

/* Buffers of the run beside the weights, the KV cache and the expert cache: the engine's working
 * memory (coli_budget_in.work: the forward pass's buffers and the kernels', sized at open), the
 * tokenizer's tables (coli_budget_in.tok: coli_tok_bytes), per vocabulary entry COLI_LOGIT_ROWS
 * float32 rows of logits (the logits, the sampler's copies, a step dumped), and COLI_RAM_HEADROOM
 * bytes for the rest of the process (thread stacks, the usage table, the prompt's and the
 * output's strings, the tokenizer's encoding cache, the allocator's own). */
#define COLI_LOGIT_ROWS 4
#define COLI_RAM_HEADROOM (64.0 * 1048576)
/* The expert cache per MoE layer when neither --cache-slots nor --ram sizes it: top_k x this
 * (the streaming store's default). */
#define COLI_CACHE_PER_TOP_K 4

/* What the split is made of. Byte figures are doubles (a budget of GiB x 2^30 is exact). */
typedef struct coli_budget_in {
	double budget;         /* --ram in bytes; 0: no budget */
	double dense;          /* dense.bin + mtp.bin, read whole */
	double kv;             /* the KV cache */
	int vocab;             /* vocabulary entries */
	double work;           /* the engine's working memory (coli_engine_work_bytes) */
	double draft;          /* speculative decoding's state (coli_spec_bytes) */
	double tok;            /* the tokenizer's tables (coli_tok_bytes; 0: none) */
	double record;         /* one expert record of every MoE layer (MTP included), summed */
	int max_experts;       /* the most routed experts of one MoE layer */
	int top_k;             /* experts per token (< 1 counts as 1) */
	int cache_slots;       /* --cache-slots per layer, pins included; 0: not given */
	int pins;              /* --pins per layer; -1: not given */
	int has_usage;         /* --usage given: pins possible */
	int usage_known;       /* coli_usage_known of the usage table */
	int n_lists;           /* MoE layers of the per-layer figures below; 0: none given */
	const int *list_cache; /* NULL, or [n_lists]: each layer's records, pins included */
	const int *list_pins;  /* NULL, or [n_lists]: each layer's pins */
	const double *list_record; /* [n_lists] each layer's record bytes (with either list) */
	int *out_pins, *out_slots; /* NULL, or [n_lists] where the split puts each layer's pins and
				    * LRU slots (with lists) */
} coli_budget_in;

/* The split; byte figures as the --ram report prints them. */
typedef struct coli_budget {
	double dense, kv, buffers; /* the fixed part: dense + kv + buffers */
	double work, draft, tok; /* of buffers: the engine's working memory, speculative decoding's
				  * state, the tokenizer's tables */
	double fixed;
	double min_cache;      /* top_k slots per MoE layer */
	double left;           /* budget - fixed (meaningless without a budget) */
	double pin_bytes, slot_bytes; /* record x pins, record x slots */
	int cache;             /* records per MoE layer before the split (pins included) */
	int pins, slots;       /* pins and LRU slots per MoE layer: the streaming store's options
				* (with lists: the most of one layer) */
	int pins_min, slots_min; /* with lists: the fewest of one layer (else pins, slots) */
} coli_budget;

/* The container's part of in: dense (dense.bin + mtp.bin), record (one expert record of every
 * MoE layer, MTP included, summed) and max_experts; the other fields untouched. */
void coli_budget_container(const coli_container *ct, coli_budget_in *in);

/* The expert cache per MoE layer: --cache-slots records (pins included; default top_k x
 * COLI_CACHE_PER_TOP_K), or with a budget what it leaves beyond the fixed part, in whole
 * records, at most max_experts. Split into pins and LRU slots: --pins as given, else (with
 * usage) half the cache, at most usage_known and leaving top_k slots; pins only with usage; the
 * slots are the rest, at least top_k. With a budget, the fixed part and the minimum cache must
 * fit it, and so must the cache chosen. Fills *out and returns 0, or returns -1 with e
 * (COLI_EUSAGE) saying what does not fit:
 *   "--ram 1.5: needs at least 2.10 GiB (dense ... GiB, KV ..., buffers ..., minimum expert cache ...)"
 *   "--pins: 8 pins and 8 cache slots per layer (0.50 GiB) do not fit --ram 1.5 (...)"
 * With per-layer lists (n_lists > 0) each layer's cache and pins come from its entries (the
 * uniform figures where a list is NULL), every layer must keep top_k LRU slots beside its pins,
 * and the sum over layers of record x records must fit. */
int coli_budget_split(const coli_budget_in *in, coli_budget *out, coli_err *e);

/* ---- the copies' shares of the reads ---------------------------------------------------------- */

/* Each copy's share of the bytes read when n copies of experts.bin are read together (the model's
 * and its --mirror copies), the one rule coli-plan predicts with and the streaming store sends
 * reads by: proportional to each copy's sustained rate bps[i] (bytes/s; <= 0: unknown, counted as
 * the mean of the known ones, 1 when none is known), a copy that holds only part of the reads
 * capped at held[i] (the share of the reads that fall on records it holds; held NULL: every copy
 * full), what the caps leave spread over the others by rate (water-filling). The shares sum to 1
 * when some copy is uncapped (held[i] >= 1); share[0..n). */
void coli_copy_shares(int n, const double *bps, const double *held, double *share);

/* ---- a run's size ---------------------------------------------------------------------------- */

/* What a run asks for beside the container: coli-run's options and what its prompt and session
 * need; coli-plan's for the run it plans. */
typedef struct coli_run_ask {
	int ctx;               /* positions the sequence's state holds (coli_kv_init's cap) */
	double resumed;        /* bytes beyond: a resumed session's state (at most its file's size) */
	int batch;             /* tokens per forward call (coli_engine_opts.max_batch; 0: COLI_MAX_BATCH) */
	int threads;           /* compute threads (coli_engine_opts.threads; 0: the physical cores) */
	int draft;             /* 1: speculative decoding asked (--draft K or auto: coli_spec_open) */
	int oracle;            /* with draft: the drafts are given ids (no MTP state) */
	double tok;            /* the container's tokenizer's tables (coli_tok_bytes; 0: none) */
	double budget;         /* --ram in bytes; 0: no budget */
	int cache_slots;       /* --cache-slots per MoE layer, pins included; 0: not given */
	int pins;              /* --pins per MoE layer; -1: not given */
	const double *usage;   /* NULL: no --usage (no pins); else its counts [n_layers + n_mtp_layers]
				* [n_experts] */
	int n_lists;           /* 0, or the container's MoE layers (MTP included): the lists below */
	const int *list_cache; /* NULL, or [n_lists] --cache-slots per layer (each at most its experts) */
	const int *list_pins;  /* NULL, or [n_lists] --pins per layer */
	int *out_pins, *out_slots; /* with lists: [n_lists] where each layer's pins and slots go */
} coli_run_ask;

/* Everything a run of ct allocates for a, and how a's budget splits: into *out the dense part
 * (read whole), the state (coli_kv_init of a->ctx tokens, and a->resumed), the buffers (the
 * engine's working memory for a->batch tokens, coli_spec_open's state, a->tok, the logits rows,
 * the headroom) and the expert cache's pins and slots (coli_budget_split). Each figure is what the
 * engine's call allocates (the test: tests/unit/test_sizing.c). -1 with e as coli_budget_split's,
 * or COLI_EUSAGE for lists of another length, COLI_ENOMEM. */
int coli_run_sizing(const coli_container *ct, const coli_run_ask *a, coli_budget *out, coli_err *e);

/* ---- adaptive shares -------------------------------------------------------------------------- */

/* Per-layer pools sharing one budget, each pool's share following its layer's reuse: every
 * period batches of pool 0 (decode positions) the shares are derived again from the hits each
 * pool would have had so far at every size (utility-based cache partitioning, Qureshi & Patt
 * 2006: the lookahead greedy over hits per byte), within the budget the starting shares made.
 * A candidate policy, replayed by the simulator's adapt option (coli-profile replay's adapt-lru
 * and adapt-lfu); on the real trace of docs/cache-policy.md it does not beat even shares, so the
 * streaming store keeps even shares. */
#define COLI_ADAPT_PERIOD 8
/* A pool's share is at most this many times its starting share (and its experts). */
#define COLI_ADAPT_MOST 4

typedef struct coli_adapt_opts {
	int n_pools;           /* pools (MoE layers) 0..n_pools-1 */
	int n_experts;         /* experts 0..n_experts-1 in each */
	int policy;            /* COLI_SIM_LRU or COLI_SIM_LFU: the pools' eviction order */
	int period;            /* >= 1: pool 0's batches between two derivations */
	const double *cost;    /* [n_pools] > 0: a record's bytes (any unit, the same for all) */
	const int *start;      /* [n_pools] each pool's share at start, in records: their cost is the budget */
	const int *least, *most; /* [n_pools] the bounds of each share: least <= start <= most <= n_experts */
} coli_adapt_opts;

typedef struct coli_adapt coli_adapt;

/* Shares for o (copied); -1 with e filled (COLI_EUSAGE: options out of range; COLI_ENOMEM) and
 * *out NULL. Started as coli_adapt_start(a, NULL). */
int coli_adapt_open(coli_adapt **out, const coli_adapt_opts *o, coli_err *e);
void coli_adapt_close(coli_adapt *a);

/* A new run: the starting shares, no hits, counts (NULL: 0; [n_pools][n_experts], copied) as
 * LFU's counts before the run. */
void coli_adapt_start(coli_adapt *a, const double *counts);

/* One batch of pool p: experts[0..n) distinct, in range, the ones that take the pool's slots
 * (pinned experts left out), as they are requested together. Derives the shares again first when
 * p is 0 and period batches of pool 0 have passed since the last derivation: returns 1 then (read
 * coli_adapt_shares), else 0. */
int coli_adapt_play(coli_adapt *a, int p, const int *experts, int n);

/* The shares now, [n_pools] records; valid until the next call. */
const int *coli_adapt_shares(const coli_adapt *a);

/* The hits pool p would have had since start with c records (c >= the largest batch: a pool of
 * c records under the policy, batches never evicted); 0 out of range. */
double coli_adapt_hits(const coli_adapt *a, int p, int c);

/* ---- the cache simulator ---------------------------------------------------------------------- */

/* A run of the simulator replays a sequence of batches; a batch is one layer's experts needed
 * together (a decode step's top_k): each is a hit when pinned or resident, else a miss read into
 * a slot, and no member of a batch is evicted for another (so capacity >= the largest batch).
 * Within a batch the hits are used first, then the misses, each in batch order (the order of
 * last use LRU ties on). Pinned experts always hit and never take a slot. Each run starts with
 * empty slots (or warm ones) and zeroed statistics.
 *
 * Eviction: the resident not in the batch with the lowest (key, last use); the key is the
 * policy's:
 *   LRU     none: least recently used. With pins: the streaming store's "pins + LRU".
 *           (LRU and LFU evict in coli_evict_before's order, the store's own.)
 *   SLRU    segmented LRU: a hit moves an expert to the protected segment (at most 80% of the
 *           slots; beyond, its least recent other member returns to probation as if just used);
 *           probation is evicted first.
 *   LFU     the count: the counts given at start + the uses of the run so far, this batch's
 *           included (ties least recent).
 *   BELADY  the next use: the resident used again furthest ahead goes (ties least recent);
 *           needs the whole sequence (MIN: the optimum for a cache without preload).
 *   ARC     adaptive replacement (Megiddo & Modha): residents seen once (T1) and seen again (T2),
 *           ghosts of the experts evicted from each (B1, B2, no data); a miss in B1 raises T1's
 *           target p, one in B2 lowers it (by the cost x max(1, other ghost list / this one));
 *           the victim is T1's least recent when |T1| > p (or = p on a B2 miss), else T2's
 *           (either list when the other has no member outside the batch); a new expert
 *           trims the ghosts to |T1| + |B1| <= c, or else all four lists <= 2c, c the pool's
 *           capacity (bytes mode: its budget, sizes in costs; the trim comes before the batch's
 *           eviction there). With batches of one expert and slots, the paper's algorithm.
 * Capacity per layer, or (global) one pool of capacity slots shared by all layers. */
enum coli_sim_policy { COLI_SIM_LRU, COLI_SIM_SLRU, COLI_SIM_LFU, COLI_SIM_BELADY, COLI_SIM_ARC };

typedef struct coli_sim_opts {
	int policy;            /* enum coli_sim_policy */
	int n_layers;          /* layers 0..n_layers-1 */
	int n_experts;         /* experts 0..n_experts-1 in each layer */
	int capacity;          /* slots per layer (global: in all); >= max_batch */
	int global;            /* 1: one pool for all layers */
	int max_batch;         /* the most experts of one batch */
	int max_batches;       /* BELADY: the longest sequence a run is given (others: unused) */
	int warm;              /* LFU and BELADY only: each run starts with its slots filled, neither
				* hit nor miss (as pins are read): LFU with the experts of highest
				* count (coli_pins_choose per layer, or over all), BELADY with those
				* used first in the sequence (ties lower layer, then lower id) */
	/* Byte budgets, eviction after the batch (0: the slots above). A pool holds experts whose
	 * costs sum to at most budget: each expert of layer l costs cost[l] (NULL: 1 each), budget per
	 * layer, or in all (global); capacity is unused. A batch is played in its order (hits and
	 * misses interleaved), its misses all made resident, then the pool's lowest (key, last use)
	 * residents outside the batch evicted until it fits: a batch larger than the budget stays
	 * resident until later batches evict it (the semantics of BigMoeOnEdge's route-replay.py). SLRU's
	 * protected segment is then at most 80% of the pool's residents. Not with warm. */
	int bytes;
	const double *cost;    /* [n_layers], each > 0; NULL: 1 */
	double budget;         /* > 0 */
	const double *budgets; /* NULL, or [n_layers] > 0: each layer's budget in place of budget */
	/* Adaptive shares (bytes mode, per-layer LRU or LFU): 0 none, else coli_adapt's period. Each
	 * layer's pool starts at its budget's whole records, the shares move within their sum
	 * (coli_adapt_opts: least min(start, adapt_least), most COLI_ADAPT_MOST x start, each share a
	 * budget of its records' costs), and a pool above its new share evicts down to it before the
	 * batch that derived it, sparing nothing. */
	int adapt;
	int adapt_least;       /* with adapt: the fewest records of a share, >= 1 (top_k: a layer
				* always holds its batch, as the streaming store does) */
} coli_sim_opts;

typedef struct coli_sim_batch {
	int layer;
	int n;                 /* 0..max_batch experts */
	const int32_t *experts; /* n distinct ids */
} coli_sim_batch;

/* Hits include pin hits; hits + misses = the experts of the batches; evictions: residents
 * dropped to make room (slots) or to fit the budget (bytes mode). */
typedef struct coli_sim_stats {
	uint64_t hits, misses, pin_hits, evictions;
} coli_sim_stats;

typedef struct coli_sim coli_sim;

/* A simulator for o (copied); its memory allocated here. -1 with e filled (COLI_EUSAGE for
 * options out of range, capacity < max_batch included; COLI_ENOMEM) and *out NULL. */
int coli_sim_open(coli_sim **out, const coli_sim_opts *o, coli_err *e);

/* Frees s; NULL is fine. */
void coli_sim_close(coli_sim *s);

/* A new run: slots emptied, statistics zeroed, counts (NULL: all 0; [n_layers][n_experts],
 * copied) as the usage before the run: LFU's starting counts, the warm LFU's preload, and the
 * pins: each layer's first `pins` experts of the pin order (coli_pins_choose; 0: none). */
void coli_sim_start(coli_sim *s, const double *counts, int pins);

/* The same with each layer's number of pins: pins[l] (NULL: none) of layer l's pin order. */
void coli_sim_start_layers(coli_sim *s, const double *counts, const int *pins);

/* Replays seq[0..n) (the warm preload first, right after start). Every batch is checked first
 * (layer, size, ids in range and distinct, n <= max_batches for BELADY): -1 with e (COLI_EUSAGE)
 * naming the batch, nothing replayed. Several calls continue the same run, but BELADY sees
 * only the sequence of one call ahead. */
int coli_sim_run(coli_sim *s, const coli_sim_batch *seq, int n, coli_err *e);

/* The statistics of layer (-1: all layers) since start; zeros for a layer out of range. */
coli_sim_stats coli_sim_stats_of(const coli_sim *s, int layer);

#endif
