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

typedef struct coli_expert {
	coli_mat gate, up, down; /* [ffn, hidden] [ffn, hidden] [hidden, ffn] */
} coli_expert;

typedef struct coli_store coli_store;

typedef struct coli_store_ops {
	/* The expert's matrices, valid until released; NULL with e filled on error. */
	const coli_expert *(*get)(coli_store *s, int layer, int expert, coli_err *e);
	void (*release)(coli_store *s, int layer, int expert);
	/* A hint: the experts will be got soon; a store may start reading them now. Never evicts an
	 * expert in use, never makes a later get fail; errors surface at get. */
	void (*prefetch)(coli_store *s, int layer, const int *experts, int n);
	void (*close)(coli_store *s);
} coli_store_ops;

struct coli_store {
	const coli_store_ops *ops;
};

static inline const coli_expert *store_get(coli_store *s, int layer, int expert, coli_err *e)
{
	return s->ops->get(s, layer, expert, e);
}

static inline void store_release(coli_store *s, int layer, int expert) { s->ops->release(s, layer, expert); }

static inline void store_prefetch(coli_store *s, int layer, const int *experts, int n)
{
	s->ops->prefetch(s, layer, experts, n);
}

static inline void store_close(coli_store *s)
{
	if (s)
		s->ops->close(s);
}

/* Every expert record read into RAM at open, each CRC checked. */
int store_ram_open(coli_store **out, const coli_container *c, coli_err *e);

/* I/O threads of the streaming store's pread backend (its read queue depth). */
#define STORE_IO_THREADS 8
/* Queue depth of its io_uring backend (one thread). */
#define STORE_URING_DEPTH 8

/* The streaming store's I/O backend. */
enum { STORE_IO_THREADS_POOL, STORE_IO_URING };

/* Options of the streaming store. */
typedef struct store_stream_opts {
	int cache_slots;          /* experts kept resident per MoE layer; 0: top_k x 4 */
	int pins;                 /* experts pinned in RAM per MoE layer (with usage); 0: none */
	const double *usage;      /* NULL, or routing counts [container layer * n_experts + expert]
				   * (n_experts: the model's) choosing the pinned experts */
	int io;                   /* STORE_IO_THREADS_POOL (pread threads) or STORE_IO_URING (one
				   * thread owning an io_uring; the threads, with a note on stderr,
				   * when the kernel refuses it) */
} store_stream_opts;

/* Counters of the streaming store since open. */
typedef struct store_stats {
	uint64_t hits, misses;     /* gets of a checked record; records read (a prediction's once chosen) */
	uint64_t pin_hits;        /* of the hits, gets of a pinned expert */
	int pins;                 /* experts pinned in the MoE layer with most (0: none) */
	uint64_t bytes_read;
	double read_s;            /* wall time with at least one read in flight */
	uint64_t predicted;       /* experts predicted for a layer whose real routing followed */
	uint64_t predict_hits;    /* of those, chosen by the real routing */
	uint64_t predict_wasted_bytes; /* read for a prediction, not chosen */
} store_stats;

/* Experts read from experts.bin on demand (O_DIRECT when the filesystem allows), one whole
 * record per miss, its CRC checked, kept in per-layer LRU slots. Reads run on a pool of
 * STORE_IO_THREADS pread threads (or one thread submitting them to an io_uring of depth
 * STORE_URING_DEPTH, in the same queue order): a prefetch queues the misses it has free or evictable slots for
 * (concurrently, queue depth = the pool size), a get of a miss queues it first and waits. A layer holds up to
 * max(cache_slots, top_k) experts while they are in use (decode holds all top_k at once) and
 * keeps cache_slots of them resident once released. o may be NULL (defaults). */
/* Pins: at open, for each MoE layer, the o->pins experts with the highest o->usage counts
 * (ties: lower id; count 0 never pinned) are read (CRC checked) into buffers of their own and
 * stay resident until close: a get returns them without touching the slots, a release does
 * nothing, they are never evicted and never counted against cache_slots. */
int store_stream_open(coli_store **out, const coli_container *c, const store_stream_opts *o, coli_err *e);

/* The counters of a streaming store into *st; -1 (st untouched) for any other store. */
int store_stream_stats(const coli_store *s, store_stats *st);

/* Next-layer prediction (decode, streaming store only; off at open): the forward pass runs
 * layer l+1's router on layer l's post-attention state and calls store_predict with the
 * experts it would pick; their reads are queued behind every get and prefetch, into slots a
 * prefetch may take. When layer l+1's real routing is known, store_predict_check scores the
 * prediction (predicted / predict_hits / predict_wasted_bytes), drops predicted reads not yet
 * started that were not chosen, and lets prefetches evict the ones already read. Only a hint:
 * never changes what a get returns. set_predict: -1 for any other store. */
int store_stream_set_predict(coli_store *s, int on);
int store_predicting(const coli_store *s);
void store_predict(coli_store *s, int layer, const int *experts, int n);
void store_predict_check(coli_store *s, int layer, const int32_t *chosen, int n);

#endif
