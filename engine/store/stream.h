/* stream.h: the streaming store's insides, shared by its cache (store/stream.c), its I/O
 * backends (store/stream_io.c) and what both note of a read (store/stream_note.c). Not an API:
 * store.h is. */
#ifndef COLI_STREAM_H
#define COLI_STREAM_H

#include <liburing.h>
#include <pthread.h>
#include <sys/uio.h>

#include "store/replica.h"
#include "store.h"

/* A slot's state: empty; queued or being read; read; checked; a dropped prediction whose chunks
 * already claimed are still being read (neither resident nor free, empty once they land). */
enum { S_EMPTY, S_FLIGHT, S_FILLED, S_READY, S_DRAIN };
enum { Q_PREDICT, Q_PREFETCH, Q_GET }; /* read queue order: gets, then prefetches, then predictions */

/* One cache slot: a 4096-aligned buffer holding one expert record, and its views. */
typedef struct slot {
	uint8_t *buf;             /* record_size bytes in its layer's arena, placed on first use; NULL before */
	uint32_t *chunk_crc;      /* [n_chunks]: each chunk's CRC, combined once all are read */
	uint64_t *chunk_t0;       /* [n_chunks]: when each chunk's read was issued (traced) */
	const coli_lexperts *x;   /* its layer's records */
	uint64_t rec0;            /* index in experts.bin of its layer's first record */
	uint64_t chunk;           /* bytes per chunk read (the store's) */
	int expert;               /* -1 when empty */
	int state;                /* S_*: in flight never evicted; read and not yet got: not trimmed */
	int refs;                 /* gets not yet released: never evicted while > 0 */
	uint64_t last;            /* LRU tick of the last request, get or prefetch */
	int asked;                /* a request set last for the get to come: the get keeps it */
	int n_chunks, next_chunk, chunks_done; /* chunks of the record; claimed by a reader; read */
	unsigned used;            /* copies (bit per replica) its chunks were read from */
	int io_rc;                /* the read's result (S_FILLED) */
	uint32_t crc;             /* of the bytes read (S_FILLED) */
	coli_err err;             /* the read's error when io_rc < 0 */
	struct slot *next;        /* in the read queue */
	int prio;                 /* in the queue: Q_PREDICT, Q_PREFETCH or Q_GET */
	int origin;               /* the prio its read was queued at: who asked for it first */
	int stale;                /* predicted, not chosen, never got: a prefetch may evict it */
	coli_expert view;
} slot;

/* The slots of one MoE layer. */
typedef struct stream_layer {
	const coli_lexperts *x;
	uint64_t rec0;            /* index in experts.bin of its first record */
	slot *slots;              /* [work] */
	uint8_t *arena;           /* [work x record_size]: the slots' buffers, mapped at open, faulted in on first use */
	int keep, work;           /* slots resident after release; slots usable while in use (>= top_k) */
	int *where;               /* [n_experts] -> slot index, -1 when not resident */
	int resident;             /* slots holding an expert (also in flight) */
	int *pinned;              /* [n_experts] -> index in pins, -1 when not pinned; NULL: none */
	slot *pins;               /* [n_pins]: read and checked at open, never evicted */
	int n_pins;
	uint8_t *pin_arena;       /* [pin_cap x record_size]: the pins' buffers */
	int pin_cap;
	double *count;            /* [n_experts] LFU: the usage counts given + this run's gets; NULL: LRU */
	uint64_t evictions;       /* experts evicted by the policy to make room (coli_store_stats) */
	int *pred, *pred_read;    /* [top_k] the last prediction, its reads queued */
	int n_pred;               /* 0: none */
} stream_layer;

/* One read: chunk c of record g[0] (n 1), or n single-chunk records of one layer adjacent on
 * disk, ascending (c 0), from copy r; demand: claimed for gets or prefetches (all or none). */
typedef struct sread {
	slot *g[STORE_GROUP_MAX];
	int n, c, r, demand;
} sread;

/* An io_uring read in flight, or ended and waiting for its CRCs (d.n 0: a free request). */
typedef struct ureq {
	sread d;
	struct ureq *next;        /* in the CRC thread's list */
	int rc;
	unsigned tried;           /* copies tried for it */
	uint64_t done;            /* bytes read so far */
	struct iovec iov[STORE_GROUP_MAX]; /* what is left of it, as submitted */
	coli_err err;
} ureq;

typedef struct stream_store {
	coli_store base;
	const coli_container *c;
	replica_set rs;           /* experts.bin and its mirrors */
	int no_crc;
	int no_uring;             /* test hook: io_uring refused */
	coli_events events;
	coli_tracer *tr;          /* NULL: no trace */
	/* Trace records are made under the lock into this ring and emitted after it is released, by
	 * the caller's thread (stream_trace_flush): a slow trace never holds the lock, and the I/O
	 * threads never write one. Sized at open for the most records made between two flushes. */
	coli_trace_rec *trq;      /* [trq_cap]; NULL: no trace */
	uint64_t trq_cap, trq_head, trq_tail; /* records made / emitted so far (under mu) */
	uint64_t trq_lost;        /* made while the ring was full (none, by its size) */
	pthread_mutex_t trq_mu;   /* held by the one caller emitting, in ring order */
	uint64_t chunk;           /* STORE_CHUNK, or the opts' (tests: multi-chunk tiny records) */
	int top_k;                /* the model's: the most experts a prediction names */
	stream_layer *layers;     /* [container layer]; x NULL when not MoE */
	int n_layers;
	uint64_t tick;
	coli_store_stats st;
	pthread_mutex_t mu;       /* guards everything below, every slot's state, the replicas */
	pthread_cond_t queued, done;
	slot *qhead, *qtail;      /* records with chunks not yet claimed by a reader */
	int stop, n_threads, inflight;
	int demand_inflight;      /* chunks of gets and prefetches being read: a prediction's chunk
				   * is claimed only when none is, so it never shares the disk with them */
	int predict;              /* decode predicts the next layer's experts */
	double busy_since;        /* when inflight last became nonzero */
	pthread_t threads[STORE_MAX_QD * STORE_MAX_COPIES];
	int qd;                   /* reads in flight per copy (the opts', else the backend's default) */
	const struct io_backend *io; /* the backend running the threads */
	struct io_uring ring;     /* io_uring backend: owned by its one thread */
	ureq *ureqs;              /* [uring_depth] */
	int uring_depth;
	int ureq_busy;            /* requests not free: on the ring, or with the CRC thread */
	int crc_on, crc_stop;     /* a CRC thread runs (io_uring, CRCs on); it is to stop */
	pthread_cond_t crc_cv;    /* the CRC thread: a read handed over, or stop */
	ureq *crc_head, *crc_tail; /* reads delivered, their CRCs not yet computed */
} stream_store;

/* An I/O backend: starts the threads that take chunks off the queue (in its order), read them,
 * and end each through chunk_result; they stop once s->stop is set and the queue is drained. */
typedef struct io_backend {
	int (*start)(stream_store *s, coli_err *e); /* -1 with e filled: none started */
	void (*stop)(stream_store *s);              /* joins them (s->stop already set) */
} io_backend;

/* The two backends. */
extern const io_backend stream_threads_backend, stream_uring_backend;

/* Takes p out of the read queue; 0 when it is not there (being read, or read). Lock held. */
int stream_dequeue(stream_store *s, slot *p);

/* A read of len bytes issued to copy r / ended (ok: it delivered): the store's and the copy's
 * counters. Lock held. */
void stream_issue(stream_store *s, int r, uint64_t len);
void stream_retire(stream_store *s, int r, uint64_t len, int ok);

/* err, from a read of copy r ("PATH: problem"), reworded into out to name p's record:
 * "PATH: expert record [layer L][expert X] at offset O: problem". */
void stream_name_error(const stream_store *s, const slot *p, int r, const coli_err *err, coli_err *out);

/* Traced: chunk c of p issued to a copy / its read on copy r ended (ok: delivered; its record
 * kept for stream_trace_flush). Lock held. */
void stream_trace_issue(const stream_store *s, slot *p, int c);
void stream_trace_read(stream_store *s, const slot *p, int c, int r, int ok);
/* Traced: a whole record of p re-read from copy r after a CRC mismatch (len bytes from t0); a
 * get's outcome (pin, hit, or by who queued its read); a predicted read its layer did not choose.
 * Lock held. */
void stream_trace_reread(stream_store *s, const slot *p, int r, uint64_t t0, uint64_t len, int ok);
void stream_trace_outcome(stream_store *s, const slot *p, int pinned);
void stream_trace_wasted(stream_store *s, const slot *p);

/* Emits the trace records kept so far, in the order they were made, unless another caller is
 * emitting (it emits them, or a later call does). Lock not held; never called by an I/O thread. */
void stream_trace_flush(stream_store *s);

/* Formats an event and hands it to s->events (when set). */
void stream_event(const stream_store *s, coli_event_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline uint64_t stream_rec(const slot *p)
{
	return p->rec0 + (uint64_t)p->expert;
}

#endif
