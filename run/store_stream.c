/* store_stream.c: the streaming expert store: records read from experts.bin on demand or by
 * prefetch, by an I/O backend (a pool of pread threads, or one thread owning an io_uring), into
 * per-layer LRU cache slots, each CRC checked. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "fileio.h"
#include "store.h"

enum { S_EMPTY, S_FLIGHT, S_FILLED, S_READY }; /* a slot's state: queued or being read, read, checked */
enum { Q_PREDICT, Q_PREFETCH, Q_GET }; /* read queue order: gets, then prefetches, then predictions */

/* One cache slot: a 4096-aligned buffer holding one expert record, and its views. */
typedef struct slot {
	uint8_t *buf;             /* record_size bytes, allocated (and pre-faulted) on first use */
	const coli_lexperts *x;   /* its layer's records */
	int expert;               /* -1 when empty */
	int state;                /* S_*: in flight never evicted; read and not yet got: not trimmed */
	int refs;                 /* gets not yet released: never evicted while > 0 */
	uint64_t last;            /* LRU tick of the last get or prefetch */
	int io_rc;                /* the read's result (S_FILLED) */
	uint32_t crc;             /* of the bytes read (S_FILLED) */
	coli_err err;             /* the read's error when io_rc < 0 */
	size_t done;              /* io_uring: bytes of the record read so far */
	struct slot *next;        /* in the read queue */
	int prio;                 /* in the queue: Q_PREDICT, Q_PREFETCH or Q_GET */
	int stale;                /* predicted, not chosen, never got: a prefetch may evict it */
	coli_expert view;
} slot;

/* The slots of one MoE layer. */
typedef struct stream_layer {
	const coli_lexperts *x;
	slot *slots;              /* [n_work] */
	int *where;               /* [n_experts] -> slot index, -1 when not resident */
	int resident;             /* slots holding an expert (also in flight) */
	int *pinned;              /* [n_experts] -> index in pins, -1 when not pinned; NULL: none */
	slot *pins;               /* [n_pins]: read and checked at open, never evicted */
	int n_pins;
	int pred[64], pred_read[64], n_pred; /* the last prediction, its reads queued; n_pred 0: none */
} stream_layer;

typedef struct stream_store {
	coli_store base;
	const coli_container *c;
	char *path;               /* <dir>/experts.bin, for errors */
	int fd;                   /* O_DIRECT descriptor, or the container's buffered one */
	int own_fd;
	int keep, work;           /* slots resident after release; slots usable while in use */
	stream_layer *layers;     /* [container layer]; x NULL when not MoE */
	int n_layers;
	uint64_t tick;
	store_stats st;
	pthread_mutex_t mu;       /* guards everything below and every slot's state */
	pthread_cond_t queued, done;
	slot *qhead, *qtail;      /* reads not yet started */
	int stop, n_threads, inflight;
	int predict;              /* decode predicts the next layer's experts */
	double busy_since;        /* when inflight last became nonzero */
	pthread_t threads[STORE_IO_THREADS];
	const struct io_backend *io; /* the backend running the threads */
	struct io_uring ring;     /* io_uring backend: owned by its one thread */
} stream_store;

/* An I/O backend: starts the threads that take reads off the queue (in its order), read each
 * record, and mark its slot S_FILLED with io_rc, err and crc set, broadcasting done; they stop
 * once s->stop is set and the queue is drained. */
typedef struct io_backend {
	int (*start)(stream_store *s, coli_err *e); /* -1 with e filled: none started */
	void (*stop)(stream_store *s);              /* joins them (s->stop already set) */
} io_backend;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads p's record and its CRC (no lock held: the slot is in flight, nobody else touches it). */
static void read_slot(stream_store *s, slot *p)
{
	p->io_rc = coli_pread_full(s->fd, p->buf, p->x->record_size, coli_record_offset(p->x, p->expert), s->path, &p->err);
	if (p->io_rc == 0)
		p->crc = (uint32_t)crc32_z(0, p->buf, p->x->record_size);
}

/* An I/O thread: takes queued reads until the store closes (the queue drained). */
static void *io_main(void *arg)
{
	stream_store *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->qhead && !s->stop)
			pthread_cond_wait(&s->queued, &s->mu);
		slot *p = s->qhead;
		if (!p)
			break;
		if (!(s->qhead = p->next))
			s->qtail = NULL;
		if (s->inflight++ == 0)
			s->busy_since = now_s();
		pthread_mutex_unlock(&s->mu);
		read_slot(s, p);
		pthread_mutex_lock(&s->mu);
		if (--s->inflight == 0)
			s->st.read_s += now_s() - s->busy_since;
		s->st.bytes_read += p->io_rc == 0 ? p->x->record_size : 0;
		p->state = S_FILLED;
		pthread_cond_broadcast(&s->done);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void join_threads(stream_store *s)
{
	for (int t = 0; t < s->n_threads; t++)
		pthread_join(s->threads[t], NULL);
	s->n_threads = 0;
}

static int threads_start(stream_store *s, coli_err *e)
{
	for (int rc; s->n_threads < STORE_IO_THREADS; s->n_threads++)
		if ((rc = pthread_create(&s->threads[s->n_threads], NULL, io_main, s)) != 0)
			return coli_errf(e, COLI_ENOMEM, "cannot start an I/O thread: %s", strerror(rc));
	return 0;
}

static const io_backend threads_backend = {.start = threads_start, .stop = join_threads};

/* Queues on the ring the read of what is left of p's record. */
static void uring_submit_read(stream_store *s, slot *p)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring); /* never NULL: at most depth in flight */
	io_uring_prep_read(sqe, s->fd, p->buf + p->done, (unsigned)(p->x->record_size - p->done),
			   coli_record_offset(p->x, p->expert) + p->done);
	io_uring_sqe_set_data(sqe, p);
}

/* A completion for p: its read goes on (short read), or ends (io_rc and err set); 1 when it
 * ended. No lock held: p is in flight. */
static int uring_complete(stream_store *s, slot *p, int res)
{
	uint64_t off = coli_record_offset(p->x, p->expert) + p->done;
	if (res == -EINTR || res == -EAGAIN) {
		uring_submit_read(s, p);
		return 0;
	}
	if (res < 0) {
		p->io_rc = coli_errf(&p->err, COLI_EIO, "%s: read at offset %llu: %s", s->path, (unsigned long long)off,
				     strerror(-res));
		return 1;
	}
	if (res == 0) {
		p->io_rc = coli_errf(&p->err, COLI_EIO, "%s: short read: end of file at offset %llu, %zu bytes missing",
				     s->path, (unsigned long long)off, (size_t)(p->x->record_size - p->done));
		return 1;
	}
	p->done += (size_t)res;
	if (p->done < p->x->record_size) {
		uring_submit_read(s, p);
		return 0;
	}
	p->io_rc = 0;
	return 1;
}

/* The io_uring thread: submits queued reads in queue order, up to STORE_URING_DEPTH at once,
 * and reaps their completions, until the store closes (the queue drained). The CRCs of reads
 * that ended are computed once the next queued reads are on the ring. */
static void *uring_main(void *arg)
{
	stream_store *s = arg;
	slot *ended[STORE_URING_DEPTH];
	int n = 0, n_ended = 0; /* reads on the ring; reads ended, not yet checked */
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (n < STORE_URING_DEPTH && s->qhead) {
			slot *p = s->qhead;
			if (!(s->qhead = p->next))
				s->qtail = NULL;
			if (s->inflight++ == 0)
				s->busy_since = now_s();
			p->done = 0;
			uring_submit_read(s, p);
			n++;
		}
		if (n_ended) {
			pthread_mutex_unlock(&s->mu);
			io_uring_submit(&s->ring);
			for (int j = 0; j < n_ended; j++)
				if (ended[j]->io_rc == 0)
					ended[j]->crc = (uint32_t)crc32_z(0, ended[j]->buf, ended[j]->x->record_size);
			pthread_mutex_lock(&s->mu);
			for (int j = 0; j < n_ended; j++) {
				slot *p = ended[j];
				if (--s->inflight == 0)
					s->st.read_s += now_s() - s->busy_since;
				s->st.bytes_read += p->io_rc == 0 ? p->x->record_size : 0;
				p->state = S_FILLED;
			}
			n_ended = 0;
			pthread_cond_broadcast(&s->done);
			continue;
		}
		if (n == 0) {
			if (s->stop)
				break;
			pthread_cond_wait(&s->queued, &s->mu);
			continue;
		}
		pthread_mutex_unlock(&s->mu);
		struct io_uring_cqe *cqe;
		io_uring_submit_and_wait(&s->ring, 1); /* interrupted: no completion, waits again */
		while (io_uring_peek_cqe(&s->ring, &cqe) == 0) {
			slot *p = io_uring_cqe_get_data(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(&s->ring, cqe);
			if (uring_complete(s, p, res))
				ended[n_ended++] = p, n--;
		}
		io_uring_submit(&s->ring); /* resubmitted short reads */
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* One thread owning a ring; -1 with e filled (nothing started) when the kernel refuses
 * io_uring: the caller falls back to the threads. */
static int uring_start(stream_store *s, coli_err *e)
{
	int rc = io_uring_queue_init(STORE_URING_DEPTH, &s->ring, 0);
	if (rc < 0)
		return coli_errf(e, COLI_EIO, "io_uring_queue_init: %s", strerror(-rc));
	if ((rc = pthread_create(&s->threads[0], NULL, uring_main, s)) != 0) {
		io_uring_queue_exit(&s->ring);
		return coli_errf(e, COLI_ENOMEM, "cannot start the I/O thread: %s", strerror(rc));
	}
	s->n_threads = 1;
	return 0;
}

static void uring_stop(stream_store *s)
{
	if (s->n_threads) {
		join_threads(s);
		io_uring_queue_exit(&s->ring);
	}
}

static const io_backend uring_backend = {.start = uring_start, .stop = uring_stop};

/* Drops slot i's expert (its buffer stays for reuse). */
static void evict(stream_layer *L, int i)
{
	L->where[L->slots[i].expert] = -1;
	L->slots[i].expert = -1;
	L->slots[i].state = S_EMPTY;
	L->resident--;
}

static int listed(int x, const int *list, int n)
{
	for (int j = 0; j < n; j++)
		if (list[j] == x)
			return 1;
	return 0;
}

/* Whether slot p may be evicted: released, not in flight; for a prefetch (only) also already
 * got once and not listed in it. */
static int evictable(const slot *p, const int *list, int n, int prefetching)
{
	if (p->expert < 0 || p->refs > 0 || p->state == S_FLIGHT)
		return 0;
	return !prefetching || ((p->state == S_READY || p->stale) && !listed(p->expert, list, n));
}

/* The least recently used evictable slot; -1 when none. */
static int lru_slot(const stream_store *s, const stream_layer *L, const int *list, int n, int prefetching)
{
	int lru = -1;
	for (int i = 0; i < s->work; i++)
		if (evictable(&L->slots[i], list, n, prefetching) && (lru < 0 || L->slots[i].last < L->slots[lru].last))
			lru = i;
	return lru;
}

/* A slot for a new expert: an empty one (one with a buffer first), else the least recently
 * used evictable one, evicted; -1 when none. */
static int pick_slot(const stream_store *s, stream_layer *L, const int *list, int n, int prefetching)
{
	int empty = -1;
	for (int i = 0; i < s->work; i++)
		if (L->slots[i].expert < 0 && (empty < 0 || (L->slots[i].buf && !L->slots[empty].buf)))
			empty = i;
	if (empty >= 0)
		return empty;
	int lru = lru_slot(s, L, list, n, prefetching);
	if (lru >= 0)
		evict(L, lru);
	return lru;
}

/* Whether a read nobody has got yet is in flight (it will become evictable). */
static int unclaimed_in_flight(const stream_store *s, const stream_layer *L)
{
	for (int i = 0; i < s->work; i++)
		if (L->slots[i].state == S_FLIGHT && L->slots[i].refs == 0)
			return 1;
	return 0;
}

/* Puts p in the read queue after every entry of its priority or higher. */
static void enqueue(stream_store *s, slot *p, int prio)
{
	slot **at = &s->qhead;
	p->prio = prio;
	while (*at && (*at)->prio >= prio)
		at = &(*at)->next;
	p->next = *at;
	*at = p;
	if (!p->next)
		s->qtail = p;
	pthread_cond_signal(&s->queued);
}

/* Takes p out of the read queue; 0 when it is not there (being read, or read). */
static int dequeue(stream_store *s, slot *p)
{
	slot *prev = NULL;
	for (slot **at = &s->qhead; *at; prev = *at, at = &(*at)->next)
		if (*at == p) {
			*at = p->next;
			if (s->qtail == p)
				s->qtail = prev;
			p->next = NULL;
			return 1;
		}
	return 0;
}

/* Moves p, when still queued, up to priority prio. */
static void promote(stream_store *s, slot *p, int prio)
{
	if (p->state == S_FLIGHT && p->prio < prio && dequeue(s, p))
		enqueue(s, p, prio);
}

/* Queues the read of expert x into slot i (its buffer allocated and pre-faulted first), at the
 * queue's order prio (Q_GET: a get waits for it). */
static int queue_read(stream_store *s, stream_layer *L, int i, int x, int prio, coli_err *e)
{
	slot *p = &L->slots[i];
	void *buf = NULL;
	if (!p->buf && posix_memalign(&buf, 4096, L->x->record_size) != 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating a %llu-byte cache slot for layer %d",
				 (unsigned long long)L->x->record_size, L->x->layer);
	if (buf)
		p->buf = memset(buf, 0, L->x->record_size);
	p->expert = x, p->state = S_FLIGHT, p->last = ++s->tick, p->next = NULL, p->stale = 0;
	L->where[x] = i;
	L->resident++;
	s->st.misses += prio != Q_PREDICT; /* a prediction's read: a miss once chosen */
	enqueue(s, p, prio);
	return 0;
}

/* Checks a read slot: its read's result and its CRC; then its views. */
static int check(stream_store *s, slot *p, coli_err *e)
{
	const coli_lexperts *lx = p->x;
	int x = p->expert;
	if (p->io_rc < 0)
		return e ? (*e = p->err, -1) : -1;
	if (p->crc != lx->crc[x])
		return coli_errf(e, COLI_EDATA,
				 "%s: expert record [layer %d][expert %d] at offset %llu: crc32 0x%08x, expected 0x%08x",
				 s->path, lx->layer, x, (unsigned long long)coli_record_offset(lx, x), p->crc, lx->crc[x]);
	p->view.gate = coli_mat_of(&lx->part[0], p->buf + lx->part_off[0]);
	p->view.up = coli_mat_of(&lx->part[1], p->buf + lx->part_off[1]);
	p->view.down = coli_mat_of(&lx->part[2], p->buf + lx->part_off[2]);
	p->state = S_READY;
	return 0;
}

/* The slot holding expert x, its read queued first on a miss; -1 with e filled on error. */
static int find_or_queue(stream_store *s, stream_layer *L, int x, coli_err *e)
{
	int i = L->where[x];
	if (i >= 0) {
		s->st.hits += L->slots[i].state == S_READY;
		promote(s, &L->slots[i], Q_GET);
		return i;
	}
	while ((i = pick_slot(s, L, NULL, 0, 0)) < 0 && unclaimed_in_flight(s, L))
		pthread_cond_wait(&s->done, &s->mu);
	if (i < 0)
		return coli_errf(e, COLI_EUSAGE, "expert store: layer %d: all %d cache slots in use", L->x->layer, s->work);
	return queue_read(s, L, i, x, Q_GET, e) < 0 ? -1 : i;
}

static stream_layer *layer_of(stream_store *s, int layer, int expert, coli_err *e)
{
	stream_layer *L = layer >= 0 && layer < s->n_layers ? &s->layers[layer] : NULL;
	if (!L || !L->x)
		return coli_errf(e, COLI_EUSAGE, "expert store: layer %d has no experts", layer), NULL;
	if (expert < 0 || expert >= L->x->n_experts)
		return coli_errf(e, COLI_EUSAGE, "expert store: expert %d of layer %d out of range", expert, layer), NULL;
	return L;
}

static const coli_expert *stream_get(coli_store *base, int layer, int expert, coli_err *e)
{
	stream_store *s = (stream_store *)base;
	stream_layer *L = layer_of(s, layer, expert, e);
	if (!L)
		return NULL;
	if (L->pinned && L->pinned[expert] >= 0) {
		pthread_mutex_lock(&s->mu);
		s->st.hits++, s->st.pin_hits++;
		pthread_mutex_unlock(&s->mu);
		return &L->pins[L->pinned[expert]].view;
	}
	pthread_mutex_lock(&s->mu);
	int i = find_or_queue(s, L, expert, e);
	slot *p = i >= 0 ? &L->slots[i] : NULL;
	if (p) {
		p->refs++;
		p->stale = 0;
		p->last = ++s->tick;
		while (p->state == S_FLIGHT)
			pthread_cond_wait(&s->done, &s->mu);
		if (p->state == S_FILLED && check(s, p, e) < 0) {
			p->refs--;
			evict(L, i);
			p = NULL;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return p ? &p->view : NULL;
}

/* Queues reads of the listed experts not resident, as many as slots allow without evicting an
 * expert in use, in flight, not yet got (unless stale) or listed; queued[j] (may be NULL): 1
 * when expert j's read was queued. Queued reads of listed experts move up to prio. */
static void prefetch_locked(stream_store *s, stream_layer *L, const int *experts, int n, int prio, int *queued)
{
	for (int j = 0; queued && j < n; j++)
		queued[j] = 0;
	for (int j = 0, i; j < n; j++) {
		if (experts[j] < 0 || experts[j] >= L->x->n_experts || (L->pinned && L->pinned[experts[j]] >= 0))
			continue;
		if ((i = L->where[experts[j]]) >= 0) {
			promote(s, &L->slots[i], prio);
			continue;
		}
		if ((i = pick_slot(s, L, experts, n, 1)) < 0 || queue_read(s, L, i, experts[j], prio, NULL) < 0)
			break;
		if (queued)
			queued[j] = 1;
	}
}

static void stream_prefetch(coli_store *base, int layer, const int *experts, int n)
{
	stream_store *s = (stream_store *)base;
	if (layer < 0 || layer >= s->n_layers || !s->layers[layer].x)
		return;
	pthread_mutex_lock(&s->mu);
	prefetch_locked(s, &s->layers[layer], experts, n, Q_PREFETCH, NULL);
	pthread_mutex_unlock(&s->mu);
}

/* Releases one use; then evicts released slots, least recently used first, down to keep. */
static void stream_release(coli_store *base, int layer, int expert)
{
	stream_store *s = (stream_store *)base;
	stream_layer *L = &s->layers[layer];
	if (L->pinned && L->pinned[expert] >= 0)
		return;
	pthread_mutex_lock(&s->mu);
	int i = L->where[expert];
	if (i >= 0 && L->slots[i].refs > 0) {
		L->slots[i].refs--;
		for (int lru; L->resident > s->keep && (lru = lru_slot(s, L, NULL, 0, 1)) >= 0;)
			evict(L, lru);
	}
	pthread_mutex_unlock(&s->mu);
}

/* Stops the I/O threads once the queued reads are done. */
static void stop_threads(stream_store *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_broadcast(&s->queued);
	pthread_mutex_unlock(&s->mu);
	if (s->io)
		s->io->stop(s);
}

static void stream_close(coli_store *base)
{
	stream_store *s = (stream_store *)base;
	stop_threads(s);
	for (int l = 0; s->layers && l < s->n_layers; l++) {
		for (int i = 0; s->layers[l].slots && i < s->work; i++)
			free(s->layers[l].slots[i].buf);
		free(s->layers[l].slots);
		free(s->layers[l].where);
		for (int i = 0; s->layers[l].pins && i < s->layers[l].n_pins; i++)
			free(s->layers[l].pins[i].buf);
		free(s->layers[l].pins);
		free(s->layers[l].pinned);
	}
	free(s->layers);
	if (s->own_fd)
		close(s->fd);
	free(s->path);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->queued);
	pthread_cond_destroy(&s->done);
	free(s);
}

static const coli_store_ops stream_ops = {
	.get = stream_get, .release = stream_release, .prefetch = stream_prefetch, .close = stream_close};

/* experts.bin with O_DIRECT, probed with one aligned read of its header; the container's
 * buffered descriptor when the filesystem refuses (tmpfs). */
static int open_direct(stream_store *s, coli_err *e)
{
	void *probe = NULL;
	s->fd = s->c->fd[COLI_SEC_EXPERTS];
	int fd = open(s->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno != EINVAL)
		return coli_errf(e, COLI_EIO, "%s: %s", s->path, strerror(errno));
	if (fd < 0)
		return 0;
	if (posix_memalign(&probe, 4096, 4096) != 0) {
		close(fd);
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating 4096 bytes");
	}
	if (pread(fd, probe, 4096, 0) == 4096) {
		s->fd = fd;
		s->own_fd = 1;
	} else {
		close(fd);
	}
	free(probe);
	return 0;
}

static int init_layer(stream_store *s, const coli_lexperts *x, coli_err *e)
{
	stream_layer *L = &s->layers[x->layer];
	L->x = x;
	L->slots = coli_calloc((size_t)s->work, sizeof(*L->slots), e);
	L->where = coli_malloc((size_t)x->n_experts * sizeof(*L->where), e);
	if (!L->slots || !L->where)
		return -1;
	for (int i = 0; i < s->work; i++)
		L->slots[i].expert = -1, L->slots[i].x = x;
	for (int k = 0; k < x->n_experts; k++)
		L->where[k] = -1;
	return 0;
}

/* Pins layer L's n experts of highest counts (row: its usage counts, ne of them; ties: lower
 * id; count 0 never pinned): each read into a buffer of its own and checked. */
static int pin_layer(stream_store *s, stream_layer *L, const double *row, int ne, int n, coli_err *e)
{
	const coli_lexperts *x = L->x;
	if (n > x->n_experts)
		n = x->n_experts;
	if (!(L->pinned = coli_malloc((size_t)x->n_experts * sizeof(*L->pinned), e)) ||
	    !(L->pins = coli_calloc((size_t)(n > 0 ? n : 1), sizeof(*L->pins), e)))
		return -1;
	for (int k = 0; k < x->n_experts; k++)
		L->pinned[k] = -1;
	while (L->n_pins < n) {
		int best = -1;
		for (int k = 0; k < x->n_experts && k < ne; k++)
			if (L->pinned[k] < 0 && row[k] > 0 && (best < 0 || row[k] > row[best]))
				best = k;
		if (best < 0)
			break;
		slot *p = &L->pins[L->n_pins];
		void *buf = NULL;
		if (posix_memalign(&buf, 4096, x->record_size) != 0)
			return coli_errf(e, COLI_ENOMEM, "out of memory allocating a %llu-byte pinned expert for layer %d",
					 (unsigned long long)x->record_size, x->layer);
		p->buf = buf, p->x = x, p->expert = best, p->refs = 0;
		read_slot(s, p); /* not counted in the stats: those are of the run */
		L->n_pins++;
		if (check(s, p, e) < 0)
			return -1;
		L->pinned[best] = L->n_pins - 1;
	}
	return 0;
}

int store_stream_open(coli_store **out, const coli_container *c, const store_stream_opts *o, coli_err *e)
{
	int top_k = c->model.top_k > 0 ? c->model.top_k : 1, n = o ? o->cache_slots : 0;
	if (n < 0)
		return coli_errf(e, COLI_EUSAGE, "cache slots: %d is negative", n);
	stream_store *s = coli_calloc(1, sizeof(*s), e);
	if (!s)
		return -1;
	s->base.ops = &stream_ops;
	s->c = c;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->queued, NULL);
	pthread_cond_init(&s->done, NULL);
	s->keep = n ? n : top_k * 4;
	s->work = s->keep > top_k ? s->keep : top_k;
	s->n_layers = c->model.n_layers + c->model.n_mtp_layers;
	s->path = coli_path_join(c->dir, "experts.bin");
	int rc = s->path ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0)
		rc = (s->layers = coli_calloc((size_t)s->n_layers, sizeof(*s->layers), e)) ? 0 : -1;
	if (rc == 0)
		rc = open_direct(s, e);
	for (int i = 0; rc == 0 && i < c->layout.n_elayers; i++)
		rc = init_layer(s, &c->layout.elayers[i], e);
	int pins = o && o->usage && o->pins > 0 ? o->pins : 0, ne = c->model.n_experts;
	for (int i = 0; rc == 0 && pins && i < c->layout.n_elayers; i++) {
		const coli_lexperts *x = &c->layout.elayers[i];
		if (x->layer >= 0 && x->layer < s->n_layers)
			rc = pin_layer(s, &s->layers[x->layer], o->usage + (size_t)x->layer * (size_t)ne, ne, pins, e);
		if (rc == 0 && s->layers[x->layer].n_pins > s->st.pins)
			s->st.pins = s->layers[x->layer].n_pins;
	}
	if (rc == 0 && o && o->io == STORE_IO_URING) {
		coli_err ue = {0, ""};
		s->io = &uring_backend;
		if (s->io->start(s, &ue) < 0) {
			fprintf(stderr, "coli-run: --io uring: %s; using --io threads\n", ue.msg);
			s->io = NULL;
		}
	}
	if (rc == 0 && !s->io) {
		s->io = &threads_backend;
		rc = s->io->start(s, e);
	}
	if (rc < 0) {
		stream_close(&s->base);
		return -1;
	}
	*out = &s->base;
	return 0;
}

int store_stream_set_predict(coli_store *s, int on)
{
	if (!s || s->ops != &stream_ops)
		return -1;
	((stream_store *)s)->predict = on;
	return 0;
}

int store_predicting(const coli_store *s)
{
	return s && s->ops == &stream_ops && ((const stream_store *)s)->predict;
}

void store_predict(coli_store *base, int layer, const int *experts, int n)
{
	stream_store *s = (stream_store *)base;
	if (!store_predicting(base) || layer < 0 || layer >= s->n_layers || !s->layers[layer].x || n > 64)
		return;
	stream_layer *L = &s->layers[layer];
	pthread_mutex_lock(&s->mu);
	prefetch_locked(s, L, experts, n, Q_PREDICT, L->pred_read);
	memcpy(L->pred, experts, (size_t)n * sizeof(int));
	L->n_pred = n;
	pthread_mutex_unlock(&s->mu);
}

void store_predict_check(coli_store *base, int layer, const int32_t *chosen, int n)
{
	stream_store *s = (stream_store *)base;
	if (!store_predicting(base) || layer < 0 || layer >= s->n_layers || !s->layers[layer].n_pred)
		return;
	stream_layer *L = &s->layers[layer];
	pthread_mutex_lock(&s->mu);
	s->st.predicted += (uint64_t)L->n_pred;
	for (int j = 0; j < L->n_pred; j++) {
		int hit = 0, x = L->pred[j], i = L->where[x];
		for (int t = 0; t < n && !hit; t++)
			hit = chosen[t] == x;
		s->st.predict_hits += (uint64_t)hit;
		s->st.misses += (uint64_t)(hit && L->pred_read[j]);
		if (hit || !L->pred_read[j] || i < 0)
			continue;
		slot *p = &L->slots[i];
		if (p->refs > 0 || p->state == S_READY) /* got since (another use): not a prediction's */
			continue;
		if (p->state == S_FLIGHT && dequeue(s, p)) { /* not started: never read */
			evict(L, i);
			continue;
		}
		p->stale = 1;
		s->st.predict_wasted_bytes += L->x->record_size;
	}
	L->n_pred = 0;
	pthread_mutex_unlock(&s->mu);
}

int store_stream_stats(const coli_store *s, store_stats *st)
{
	if (!s || s->ops != &stream_ops)
		return -1;
	stream_store *ss = (stream_store *)s;
	pthread_mutex_lock(&ss->mu);
	*st = ss->st;
	pthread_mutex_unlock(&ss->mu);
	return 0;
}
