/* store/stream_io.c: the streaming store's I/O backends: records read in chunks, each from the copy
 * its share gives (replica.h; a layer's queued neighbours on disk in one read), by a pool of
 * pread threads or one thread owning an io_uring. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "crc32.h"
#include "fileio.h"
#include "clock.h"
#include "store/stream.h"

static uint64_t chunk_len(const slot *p, int c)
{
	uint64_t n = p->x->record_size - (uint64_t)c * p->chunk;
	return n < p->chunk ? n : p->chunk;
}

/* Whether the first queued chunk may be read now: not a prediction's while a demanded chunk is
 * being read. Lock held. */
static int claimable(const stream_store *s)
{
	return s->qhead && (s->qhead->prio != Q_PREDICT || s->demand_inflight == 0);
}

/* Whether expert x of L, beside a read of p's on copy r, joins it: queued and not yet claimed,
 * one chunk, held by r and not failed there, and demanded when p is (a prediction never rides
 * on a demanded read). Lock held. */
static int joins(const stream_store *s, const stream_layer *L, const slot *p, int x, int r)
{
	if (x < 0 || x >= L->x->n_experts || L->where[x] < 0)
		return 0;
	const slot *q = &L->slots[L->where[x]];
	uint64_t rec = stream_rec(q);
	return q->state == S_FLIGHT && q->next_chunk == 0 && q->n_chunks == 1 &&
	       (q->prio != Q_PREDICT || p->prio == Q_PREDICT) && replica_holds(&s->rs, r, rec) &&
	       !(s->rs.r[r].bad && s->rs.r[r].bad[rec]);
}

/* d (p's single-chunk record, just claimed) grown by the queued records of p's layer next to
 * it on disk, up to STORE_GROUP_MAX, each taken off the queue. Lock held. */
static void gather(stream_store *s, sread *d)
{
	slot *p = d->g[0];
	const stream_layer *L = &s->layers[p->x->layer];
	int lo = p->expert, hi = p->expert;
	while (hi - lo + 1 < STORE_GROUP_MAX && joins(s, L, p, hi + 1, d->r))
		hi++;
	while (hi - lo + 1 < STORE_GROUP_MAX && joins(s, L, p, lo - 1, d->r))
		lo--;
	for (int x = lo; x <= hi; x++) {
		slot *q = &L->slots[L->where[x]];
		if (q != p)
			stream_dequeue(s, q), q->next_chunk = 1;
		d->g[x - lo] = q;
	}
	d->n = hi - lo + 1;
	s->st.coalesced += d->n > 1 ? (uint64_t)d->n : 0;
}

static uint64_t piece_len(const sread *d, int i)
{
	return chunk_len(d->g[i], d->c);
}

static uint8_t *piece_buf(const sread *d, int i)
{
	return d->g[i]->buf + (uint64_t)d->c * d->g[i]->chunk;
}

/* Where d starts in experts.bin. */
static uint64_t read_off(const sread *d)
{
	return coli_record_offset(d->g[0]->x, d->g[0]->expert) + (uint64_t)d->c * d->g[0]->chunk;
}

static uint64_t read_len(const sread *d)
{
	uint64_t n = 0;
	for (int i = 0; i < d->n; i++)
		n += piece_len(d, i);
	return n;
}

/* The buffers of what is left of d after its first done bytes; their count. */
static int read_iov(const sread *d, uint64_t done, struct iovec *iov)
{
	int k = 0;
	for (int i = 0; i < d->n; i++) {
		uint64_t len = piece_len(d, i);
		if (done >= len) {
			done -= len;
			continue;
		}
		iov[k++] = (struct iovec){piece_buf(d, i) + done, (size_t)(len - done)};
		done = 0;
	}
	return k;
}

/* Claims the next read: the next chunk of the first queued record (the record leaves the queue
 * with its last chunk), with its queued neighbours on disk when it is one chunk, on the copy
 * replica_pick gives the first record. Lock held, claimable(s). */
static void claim(stream_store *s, sread *d)
{
	slot *p = s->qhead;
	d->demand = p->prio != Q_PREDICT;
	d->c = p->next_chunk++;
	if (p->next_chunk == p->n_chunks) {
		if (!(s->qhead = p->next))
			s->qtail = NULL;
		p->next = NULL;
	}
	d->r = replica_pick(&s->rs, stream_rec(p), chunk_len(p, d->c), 0);
	d->g[0] = p, d->n = 1;
	if (p->n_chunks == 1)
		gather(s, d);
	s->demand_inflight += d->demand * d->n;
	for (int i = 0; i < d->n; i++) {
		stream_issue(s, d->r, piece_len(d, i));
		stream_trace_issue(s, d->g[i], d->c);
	}
}

/* The CRC of chunk c of p, just read (unless CRCs are off). No lock held (p is in flight). */
static void take_crc(const stream_store *s, slot *p, int c)
{
	if (!s->no_crc)
		p->chunk_crc[c] = coli_crc32(0, p->buf + (uint64_t)c * p->chunk, chunk_len(p, c));
}

static void read_crcs(const stream_store *s, const sread *d)
{
	for (int i = 0; i < d->n; i++)
		take_crc(s, d->g[i], d->c);
}

/* All of p's chunks are read: its CRC from theirs; S_FILLED. Lock held. */
static void filled(stream_store *s, slot *p)
{
	if (p->io_rc == 0 && !s->no_crc) {
		uLong crc = p->chunk_crc[0];
		for (int c = 1; c < p->n_chunks; c++)
			crc = crc32_combine(crc, p->chunk_crc[c], (z_off_t)chunk_len(p, c));
		p->crc = (uint32_t)crc;
	}
	p->state = S_FILLED;
	pthread_cond_broadcast(&s->done);
}

/* The read of chunk c of p on copy *r ended (rc 0, or -1 with err). A failed read is reported
 * and issued to another copy not in *tried when one is left: 1 (read it from *r now). Else
 * the chunk is over (p filled with its last; demand: claimed as a demanded chunk): 0. Lock held. */
static int chunk_result(stream_store *s, slot *p, int c, int *r, unsigned *tried, int demand, int rc,
			const coli_err *err)
{
	uint64_t len = chunk_len(p, c);
	stream_retire(s, *r, len, rc == 0);
	stream_trace_read(s, p, c, *r, rc == 0);
	p->used |= 1u << *r;
	if (rc < 0) {
		coli_err named;
		stream_name_error(s, p, *r, err, &named);
		replica_mark_bad(&s->rs, *r, stream_rec(p));
		int next = replica_pick(&s->rs, stream_rec(p), len, *tried);
		if (next >= 0) {
			stream_event(s, COLI_EV_READ_FAILOVER, "%s; reading it from the copy in %s", named.msg,
				     s->rs.r[next].d.dir);
			*tried |= 1u << next, *r = next;
			stream_issue(s, next, len);
			stream_trace_issue(s, p, c);
			return 1;
		}
		if (p->io_rc == 0)
			p->io_rc = -1, p->err = named;
	}
	if (demand && --s->demand_inflight == 0 && s->qhead) /* predictions may go */
		pthread_cond_broadcast(&s->queued);
	if (++p->chunks_done == p->n_chunks && p->state != S_DRAIN)
		filled(s, p);
	if (p->state == S_DRAIN && p->chunks_done == p->next_chunk) { /* its last claimed chunk */
		p->expert = -1, p->state = S_EMPTY;
		pthread_cond_broadcast(&s->done);
	}
	return 0;
}

/* Reads chunk c of p from copy r, and from others while reads fail. Lock held on entry and
 * exit, released while reading (p is in flight: nobody else touches this chunk). */
static void read_chunk(stream_store *s, slot *p, int c, int r, int demand)
{
	uint64_t off = (uint64_t)c * p->chunk, len = chunk_len(p, c);
	unsigned tried = 1u << r;
	coli_err err = {0, ""};
	int rc;
	do {
		const replica *R = &s->rs.r[r];
		pthread_mutex_unlock(&s->mu);
		rc = coli_pread_full(R->fd, p->buf + off, len, coli_record_offset(p->x, p->expert) + off, R->path, &err);
		if (rc == 0)
			take_crc(s, p, c);
		pthread_mutex_lock(&s->mu);
	} while (chunk_result(s, p, c, &r, &tried, demand, rc, &err));
}

/* A read of several records ended (rc; their CRCs taken when it delivered): each record ends
 * through chunk_result; when it failed, each is read again alone, from the same copy and then
 * from the others (read_chunk), so that the failure is pinned on its record. Lock held,
 * released while reading again. */
static void group_ended(stream_store *s, const sread *d, int rc, const coli_err *err)
{
	for (int i = 0; i < d->n; i++) {
		int r = d->r;
		unsigned tried = 1u << r;
		if (rc < 0)
			read_chunk(s, d->g[i], 0, r, d->demand);
		else
			chunk_result(s, d->g[i], 0, &r, &tried, d->demand, 0, err);
	}
}

/* Reads d from its copy, several records in one vectored read. Lock held on entry and exit,
 * released while reading. */
static void read_claimed(stream_store *s, const sread *d)
{
	if (d->n == 1) {
		read_chunk(s, d->g[0], d->c, d->r, d->demand);
		return;
	}
	const replica *R = &s->rs.r[d->r];
	struct iovec iov[STORE_GROUP_MAX];
	coli_err err = {0, ""};
	int k = read_iov(d, 0, iov);
	pthread_mutex_unlock(&s->mu);
	int rc = coli_preadv_full(R->fd, iov, k, read_off(d), R->path, &err);
	if (rc == 0)
		read_crcs(s, d);
	pthread_mutex_lock(&s->mu);
	group_ended(s, d, rc, &err);
}

/* An I/O thread: reads queued chunks until the store closes (the queue drained). */
static void *io_main(void *arg)
{
	stream_store *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!claimable(s) && !(s->stop && !s->qhead))
			pthread_cond_wait(&s->queued, &s->mu);
		if (!s->qhead)
			break;
		sread d;
		claim(s, &d);
		read_claimed(s, &d);
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
	for (int rc; s->n_threads < (s->qd ? s->qd : STORE_IO_THREADS) * s->rs.n; s->n_threads++)
		if ((rc = pthread_create(&s->threads[s->n_threads], NULL, io_main, s)) != 0)
			return coli_errf(e, COLI_ENOMEM, "cannot start an I/O thread: %s", strerror(rc));
	return 0;
}

const io_backend stream_threads_backend = {.start = threads_start, .stop = join_threads};

/* Queues on the ring the read of what is left of q. */
static void uring_submit_read(stream_store *s, ureq *q)
{
	const replica *R = &s->rs.r[q->d.r];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring); /* never NULL: at most depth in flight */
	int k = read_iov(&q->d, q->done, q->iov);
	io_uring_prep_readv(sqe, R->fd, q->iov, (unsigned)k, read_off(&q->d) + q->done);
	io_uring_sqe_set_data(sqe, q);
}

/* A completion for q: its read goes on (short read, interrupted), or ends (q->rc and q->err
 * set); 1 when it ended. No lock held: q's records are in flight. */
static int uring_complete(stream_store *s, ureq *q, int res)
{
	const replica *R = &s->rs.r[q->d.r];
	uint64_t off = read_off(&q->d) + q->done, len = read_len(&q->d);
	if (res == -EINTR || res == -EAGAIN) {
		uring_submit_read(s, q);
		return 0;
	}
	if (res < 0) {
		q->rc = coli_errf(&q->err, COLI_EIO, "%s: read at offset %llu: %s", R->path, (unsigned long long)off,
				  strerror(-res));
		return 1;
	}
	if (res == 0) {
		q->rc = coli_errf(&q->err, COLI_EIO, "%s: short read: end of file at offset %llu, %llu bytes missing",
				  R->path, (unsigned long long)off, (unsigned long long)(len - q->done));
		return 1;
	}
	q->done += (uint64_t)res;
	if (q->done < len) {
		uring_submit_read(s, q);
		return 0;
	}
	q->rc = 0;
	return 1;
}

/* Puts the next claimed read on the ring in a free request; lock held. */
static void uring_claim(stream_store *s)
{
	ureq *q = s->ureqs;
	while (q->d.n)
		q++;
	claim(s, &q->d);
	s->ureq_busy++;
	q->tried = 1u << q->d.r, q->done = 0, q->rc = 0;
	uring_submit_read(s, q);
}

static void ureq_free(stream_store *s, ureq *q)
{
	q->d.n = 0;
	s->ureq_busy--;
}

/* q's read ended (q->rc; its CRCs taken when it delivered): its records end, several through
 * group_ended, one chunk through chunk_result; 1 when that chunk is to be read again from
 * another copy (q keeps its request), else q's request is freed. Lock held. */
static int end_read(stream_store *s, ureq *q)
{
	if (q->d.n > 1)
		group_ended(s, &q->d, q->rc, &q->err);
	else if (chunk_result(s, q->d.g[0], q->d.c, &q->d.r, &q->tried, q->d.demand, q->rc, &q->err))
		return 1;
	ureq_free(s, q);
	return 0;
}

/* The reads of the ring that ended: one that delivered goes to the CRC thread when CRCs are on
 * (it ends there); the others end here, a failed chunk put back on the ring for another copy.
 * Lock held. Returns the reads put back on the ring. */
static int uring_ended(stream_store *s, ureq **ended, int n_ended)
{
	int again = 0;
	for (int j = 0; j < n_ended; j++) {
		ureq *q = ended[j];
		if (q->rc == 0 && s->crc_on) {
			q->next = NULL;
			*(s->crc_tail ? &s->crc_tail->next : &s->crc_head) = q;
			s->crc_tail = q;
			pthread_cond_signal(&s->crc_cv);
		} else if (end_read(s, q)) {
			q->done = 0, again++;
			uring_submit_read(s, q);
		}
	}
	return again;
}

/* The io_uring thread: puts queued reads on the ring in queue order while it has free requests,
 * and reaps their completions, until the store closes (the queue drained, every request free).
 * It never computes a CRC: that is the CRC thread's, so the ring is refilled at once. */
static void *uring_main(void *arg)
{
	stream_store *s = arg;
	ureq *ended[STORE_MAX_QD * STORE_MAX_COPIES];
	int n = 0, n_ended = 0; /* reads on the ring; reads ended, not yet accounted */
	pthread_mutex_lock(&s->mu);
	for (;;) {
		for (; s->ureq_busy < s->uring_depth && claimable(s); n++)
			uring_claim(s);
		if (n_ended) {
			pthread_mutex_unlock(&s->mu);
			io_uring_submit(&s->ring);
			pthread_mutex_lock(&s->mu);
			n += uring_ended(s, ended, n_ended);
			n_ended = 0;
			continue;
		}
		if (n == 0) {
			if (s->stop && !s->qhead && s->ureq_busy == 0)
				break;
			pthread_cond_wait(&s->queued, &s->mu); /* work, or a request freed by the CRC thread */
			continue;
		}
		pthread_mutex_unlock(&s->mu);
		struct io_uring_cqe *cqe;
		io_uring_submit_and_wait(&s->ring, 1); /* interrupted: no completion, waits again */
		while (io_uring_peek_cqe(&s->ring, &cqe) == 0) {
			ureq *q = io_uring_cqe_get_data(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(&s->ring, cqe);
			if (uring_complete(s, q, res))
				ended[n_ended++] = q, n--;
		}
		io_uring_submit(&s->ring); /* resubmitted short reads */
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* The CRC thread: the CRCs of the reads the ring's thread hands over, then their ends, until it
 * is told to stop (after the ring's thread, which waits for every request to come back). */
static void *crc_main(void *arg)
{
	stream_store *s = arg;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->crc_head && !s->crc_stop)
			pthread_cond_wait(&s->crc_cv, &s->mu);
		ureq *q = s->crc_head;
		if (!q)
			break;
		if (!(s->crc_head = q->next))
			s->crc_tail = NULL;
		pthread_mutex_unlock(&s->mu);
		read_crcs(s, &q->d);
		pthread_mutex_lock(&s->mu);
		end_read(s, q); /* delivered: never read again */
		pthread_cond_broadcast(&s->queued); /* a free request for the ring's thread */
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void crc_thread_stop(stream_store *s)
{
	pthread_mutex_lock(&s->mu);
	s->crc_stop = 1;
	pthread_cond_broadcast(&s->crc_cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->threads[1], NULL);
}

/* One thread owning a ring of depth qd (STORE_URING_DEPTH) per copy, and with CRCs on a thread
 * computing them; -1 with e filled (nothing started) when the kernel refuses io_uring: the
 * caller falls back to the threads. */
static int uring_start(stream_store *s, coli_err *e)
{
	s->uring_depth = (s->qd ? s->qd : STORE_URING_DEPTH) * s->rs.n;
	if (!(s->ureqs = coli_calloc((size_t)s->uring_depth, sizeof(*s->ureqs), e)))
		return -1;
	int rc = s->no_uring ? -ENOSYS : io_uring_queue_init((unsigned)s->uring_depth, &s->ring, 0);
	if (rc < 0)
		return coli_errf(e, COLI_EIO, "io_uring_queue_init: %s", strerror(-rc));
	s->crc_on = !s->no_crc;
	if (s->crc_on && (rc = pthread_create(&s->threads[1], NULL, crc_main, s)) != 0) {
		io_uring_queue_exit(&s->ring);
		return coli_errf(e, COLI_ENOMEM, "cannot start the CRC thread: %s", strerror(rc));
	}
	if ((rc = pthread_create(&s->threads[0], NULL, uring_main, s)) != 0) {
		if (s->crc_on)
			crc_thread_stop(s);
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
		if (s->crc_on)
			crc_thread_stop(s);
		io_uring_queue_exit(&s->ring);
	}
}

const io_backend stream_uring_backend = {.start = uring_start, .stop = uring_stop};

