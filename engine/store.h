/* store.h: the expert store, the one way the forward pass gets routed experts.
 *
 * The forward pass asks for (layer, expert) and releases it when the product is done; what
 * stands behind (all in RAM, or streamed from disk with a cache) is the store's business and
 * never changes the bytes multiplied. Layers count as in the container (MTP layers after the
 * main ones). */
#ifndef COLI_STORE_H
#define COLI_STORE_H

#include "container.h"
#include "kernels.h"
#include "policy.h"
#include "tracer.h"

typedef struct coli_expert {
	coli_mat gate, up, down; /* [ffn, hidden] [ffn, hidden] [hidden, ffn] */
} coli_expert;

typedef struct coli_store coli_store;
typedef struct coli_store_stats coli_store_stats;

/* What stands behind a store. */
typedef enum coli_store_kind { COLI_STORE_RAM, COLI_STORE_MMAP, COLI_STORE_STREAM } coli_store_kind;

/* A store's function table. get, try_get, release and close are always there; the other
 * entries may be NULL (the store_* wrappers below then do nothing or report "none"). */
typedef struct coli_store_ops {
	coli_store_kind kind;
	/* 1: a get may wait for a read, and the store traces its own expert outcomes (hits, misses,
	 * reads); 0: every expert is resident, a get never waits (the caller traces it as a pin). */
	int streams;
	/* The expert's matrices, valid until released; NULL with e filled on error. */
	const coli_expert *(*get)(coli_store *s, int layer, int expert, coli_err *e);
	/* A get that never waits: the expert when it is resident and read (a use to release),
	 * else NULL with e->code 0 while its read is pending (coli_store_get then waits for it), or
	 * NULL with e filled on error. */
	const coli_expert *(*try_get)(coli_store *s, int layer, int expert, coli_err *e);
	void (*release)(coli_store *s, int layer, int expert);
	/* The experts will be got now (a decoding token's top_k, all needed at once): their reads
	 * start at once, ahead of prefetches and predictions. Never evicts an expert in use,
	 * never makes a later get fail; errors surface at get. */
	void (*request)(coli_store *s, int layer, const int *experts, int n);
	/* A hint: the experts will be got soon (a batch's next experts); a store may start
	 * reading them now, behind every request. Same guarantees as request. */
	void (*prefetch)(coli_store *s, int layer, const int *experts, int n);
	/* Counters since open into *st; -1 when the store keeps none. */
	int (*stats)(const coli_store *s, coli_store_stats *st);
	/* Next-layer prediction (coli_store_predict below): on or off; -1 when the store has none. */
	int (*set_predict)(coli_store *s, int on);
	int (*predicting)(const coli_store *s);
	void (*predict)(coli_store *s, int layer, const int *experts, int n);
	void (*predict_check)(coli_store *s, int layer, const int32_t *chosen, int n);
	void (*close)(coli_store *s);
} coli_store_ops;

struct coli_store {
	const coli_store_ops *ops;
};

static inline coli_store_kind coli_store_kind_of(const coli_store *s) { return s->ops->kind; }
static inline int coli_store_streams(const coli_store *s) { return s->ops->streams; }

static inline const coli_expert *coli_store_get(coli_store *s, int layer, int expert, coli_err *e)
{
	return s->ops->get(s, layer, expert, e);
}

static inline const coli_expert *coli_store_try_get(coli_store *s, int layer, int expert, coli_err *e)
{
	return s->ops->try_get(s, layer, expert, e);
}

static inline void coli_store_release(coli_store *s, int layer, int expert) { s->ops->release(s, layer, expert); }

static inline void coli_store_request(coli_store *s, int layer, const int *experts, int n)
{
	if (s->ops->request)
		s->ops->request(s, layer, experts, n);
}

static inline void coli_store_prefetch(coli_store *s, int layer, const int *experts, int n)
{
	if (s->ops->prefetch)
		s->ops->prefetch(s, layer, experts, n);
}

static inline int coli_store_get_stats(const coli_store *s, coli_store_stats *st)
{
	return s && s->ops->stats ? s->ops->stats(s, st) : -1;
}

static inline int coli_store_set_predict(coli_store *s, int on)
{
	return s && s->ops->set_predict ? s->ops->set_predict(s, on) : -1;
}

static inline int coli_store_predicting(const coli_store *s)
{
	return s && s->ops->predicting ? s->ops->predicting(s) : 0;
}

static inline void coli_store_predict(coli_store *s, int layer, const int *experts, int n)
{
	if (s->ops->predict)
		s->ops->predict(s, layer, experts, n);
}

static inline void coli_store_predict_check(coli_store *s, int layer, const int32_t *chosen, int n)
{
	if (s->ops->predict_check)
		s->ops->predict_check(s, layer, chosen, n);
}

static inline void coli_store_close(coli_store *s)
{
	if (s)
		s->ops->close(s);
}

/* Every expert record read into RAM at open, each CRC checked. */
int coli_store_ram_open(coli_store **out, const coli_container *c, coli_err *e);

/* experts.bin mapped read-only and used in place: the kernel's page cache decides what stays
 * in RAM and reads on page faults (what llama.cpp's mmap loading does); no CRC checks, no
 * cache of its own. A baseline for the benchmarks. */
int coli_store_mmap_open(coli_store **out, const coli_container *c, coli_err *e);

/* The streaming store's read queue depth on each copy of experts.bin, by default: its pread
 * backend's threads per copy, its io_uring backend's depth per copy (one thread). */
#define STORE_IO_THREADS 8
#define STORE_URING_DEPTH 8
/* The most a store_stream_opts.qd may ask. */
#define STORE_MAX_QD 32
/* Records are read in chunks of at most this many bytes, each from the copy expected to
 * finish it first: a record's first bytes arrive early, copies share one record. */
#define STORE_CHUNK (4u << 20)
/* Queued records of one layer next to each other on disk, each at most one chunk, are read
 * together, up to this many in one vectored read (one request instead of several). */
#define STORE_GROUP_MAX 4
/* Copies of experts.bin a streaming store reads: the model's and up to 7 mirrors. */
#define STORE_MAX_COPIES 8

/* How routed experts are read: the streaming store's two I/O backends, or an mmap of
 * experts.bin through the page cache (coli_store_mmap_open). */
enum { STORE_IO_THREADS_POOL, STORE_IO_URING, STORE_IO_MMAP };

/* Something a store did that its user should hear of (the engine never prints): the tool
 * prints msg, a full sentence without the tool's name. */
typedef enum coli_event_kind {
	COLI_EV_URING_REFUSED,    /* --io uring asked, the kernel refused it: the pread threads instead */
	COLI_EV_READ_FAILOVER,    /* a chunk's read failed on one copy: read from another */
	COLI_EV_READ_FAILED,      /* a record's re-read failed on one copy (with mirrors) */
	COLI_EV_CRC_FAILED,       /* a copy of a record failed its CRC (with mirrors: recovered or not) */
} coli_event_kind;

typedef struct coli_event {
	coli_event_kind kind;
	const char *msg;
} coli_event;

/* Where events go: fn(ctx, ev), from any of the store's threads, with the store's lock held
 * (it must not call back into the store); fn NULL: nowhere. */
typedef struct coli_events {
	void (*fn)(void *ctx, const coli_event *ev);
	void *ctx;
} coli_events;

/* The streaming store's eviction policies: the simulator's COLI_SIM_LRU and COLI_SIM_LFU
 * (policy.h), whose order of eviction (coli_evict_before) the store calls; coli-run's default
 * is COLI_CACHE_DEFAULT. */
enum { STORE_CACHE_LRU = COLI_SIM_LRU, STORE_CACHE_LFU = COLI_SIM_LFU };

/* Options of the streaming store. */
typedef struct store_stream_opts {
	int cache_slots;          /* LRU slots per MoE layer, beside the pins; 0: top_k x 4 */
	int pins;                 /* experts pinned in RAM per MoE layer (with usage); 0: none */
	const double *usage;      /* NULL, or routing counts [container layer * n_experts + expert]
				   * (n_experts: the model's) choosing the pinned experts */
	const int *layer_slots;   /* NULL, or [container layer]: that layer's LRU slots (0: cache_slots) */
	const int *layer_pins;    /* NULL, or [container layer]: that layer's pins (with usage), in
				   * place of pins */
	int io;                   /* STORE_IO_THREADS_POOL (pread threads) or STORE_IO_URING (one
				   * thread owning an io_uring; the threads, with an event,
				   * when the kernel refuses it) */
	int cache_policy;         /* which cached expert a miss evicts: STORE_CACHE_LRU (the least
				   * recently used) or STORE_CACHE_LFU (the least used: the usage counts
				   * given + the gets of this run; ties the least recent) */
	int qd;                   /* reads in flight per copy (1..STORE_MAX_QD); 0: the backend's
				   * default (STORE_IO_THREADS, STORE_URING_DEPTH) */
	const char *const *mirrors; /* folders holding the same container, read alongside it */
	int n_mirrors;
	const double *copy_bps;   /* NULL, or [1 + n_mirrors]: each copy's sustained rate (bytes/s, 0:
				   * unknown) as coli-plan measured it (plan.json's disks[].bps): where
				   * the copies' shares start (store/replica.h) */
	int no_crc;               /* 1: records read are not CRC checked (pins included) */
	coli_events events;       /* where io_uring refusals, failovers and CRC failures go */
	coli_tracer *tracer;      /* NULL, or where each chunk read and each get's outcome go: kept
				   * under the store's lock, emitted by the thread calling the store
				   * once it has released the lock (before the call returns, unless
				   * another thread is emitting them), never by an I/O thread; the
				   * last ones at close */
	/* test hooks */
	uint64_t chunk;           /* bytes per chunk read, a multiple of 4096 (0: STORE_CHUNK) */
	int no_uring;             /* 1: act as if the kernel refused io_uring */
} store_stream_opts;

/* One copy of experts.bin, as the statistics see it. */
typedef struct store_disk {
	const char *dir;          /* the container folder: the model's, or a mirror */
	char dev[32];             /* its block device ("nvme0n1", "loop3"), MAJ:MIN, or "?" */
	uint64_t bytes_read;
	double busy_s;            /* wall time with at least one read in flight on it */
	uint64_t failures;        /* reads or CRC checks failed on it (each served by another copy,
				   * or the run failed) */
	double rate_bps;          /* the sustained rate the store counts it at now (store/replica.h) */
	double share;             /* its target share of the bytes read, from the rates */
} store_disk;

/* Counters of the streaming store since open. */
struct coli_store_stats {
	/* gets = hits + misses: each get (and each try_get that returns an expert) counts once, as
	 * its trace outcome (COLI_X_*) says: a hit when pinned or read and checked for an earlier get,
	 * else a miss (read, or being read, for it: by the get, a request, a prefetch or a prediction) */
	uint64_t hits, misses;
	uint64_t pin_hits;        /* of the hits, gets of a pinned expert */
	uint64_t evictions;       /* cached experts the policy evicted to make room (a miss's slot, or
				   * the cache trimmed to its size after a release; not the dropped
				   * predictions nor records failing their check) */
	int pins;                 /* experts pinned in the MoE layer with most (0: none) */
	int pins_min;             /* experts pinned in the MoE layer with fewest */
	uint64_t bytes_read;
	double read_s;            /* wall time with at least one read in flight */
	uint64_t predicted;       /* experts predicted for a layer whose real routing followed */
	uint64_t predict_hits;    /* of those, chosen by the real routing */
	uint64_t predict_wasted_bytes; /* read for a prediction, not chosen */
	uint64_t coalesced;       /* records read in one read with a neighbour of theirs on disk */
	store_disk disks[STORE_MAX_COPIES]; /* the model's copy, then each mirror */
	int n_disks;
};

/* *d = a - b, counter by counter (b taken before a, of the same store): what happened between
 * the two snapshots. pins, n_disks and the disks' names are a's. */
void coli_store_stats_sub(const coli_store_stats *a, const coli_store_stats *b, coli_store_stats *d);

/* Experts read from experts.bin on demand (O_DIRECT when the filesystem allows), one whole
 * record per miss in chunks of STORE_CHUNK (o->chunk), its CRC checked (unless o->no_crc), kept in
 * per-layer LRU slots. Reads run on STORE_IO_THREADS pread threads per copy (or one thread
 * submitting them to an io_uring of depth STORE_URING_DEPTH per copy, a second one computing
 * the CRCs of what it read), in queue order: a get's
 * read first, then prefetches, then predictions; a layer's queued records adjacent on disk, each
 * one chunk, are read together (up to STORE_GROUP_MAX in one vectored read; a failed one is read
 * again record by record). A prefetch queues the misses it has free or
 * evictable slots for; a get of a miss queues it first and waits. A layer holds up to
 * max(cache_slots, top_k) experts while they are in use (decode holds all top_k at once) and
 * keeps cache_slots of them resident once released. o may be NULL (defaults).
 * Mirrors (o->mirrors): each chunk is read from the copy furthest below its share of the bytes,
 * the shares coli-plan predicts, from the copies' sustained rates (store/replica.h);
 * a chunk whose read fails is read from another copy; a record whose CRC fails is read whole
 * from each copy in turn until one checks, the failing copies reported (o->events) and avoided
 * for that record from then on. A mirror whose manifest differs is refused at open.
 * Pins: at open, for each MoE layer, the o->pins experts with the highest o->usage counts
 * (ties: lower id; count 0 never pinned) are read (CRC checked) into buffers of their own and
 * stay resident until close: a get returns them without touching the slots, a release does
 * nothing, they are never evicted and never counted against cache_slots. */
int coli_store_stream_open(coli_store **out, const coli_container *c, const store_stream_opts *o, coli_err *e);

/* Next-layer prediction (decode, streaming store only; off at open): the forward pass runs
 * layer l+1's router on layer l's post-attention state and calls coli_store_predict with the
 * experts it would pick; their reads are queued behind every get and prefetch, into slots a
 * prefetch may take, and a predicted chunk is read only while no get's or prefetch's chunk is.
 * When layer l+1's real routing is known, coli_store_predict_check scores the prediction
 * (predicted / predict_hits / predict_wasted_bytes), drops the chunks not yet claimed of
 * predicted reads not chosen (a slot whose claimed chunks are still being read is freed once
 * they land), and lets prefetches evict the ones already read. Only a hint: never changes
 * what a get returns. */

#endif
