/* store/stream_io.c: the streaming store's I/O backends: records read in chunks, each from the copy
 * expected to finish it first, by a pool of pread threads or one thread owning an io_uring. */
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

void stream_name_error(const stream_store *s, const slot *p, int r, const coli_err *err, coli_err *out)
{
	const char *path = s->rs.r[r].path, *why = err->msg;
	size_t n = strlen(path);
	if (strncmp(why, path, n) == 0 && why[n] == ':' && why[n + 1] == ' ')
		why += n + 2;
	coli_errf(out, err->code, "%s: expert record [layer %d][expert %d] at offset %llu: %s", path, p->x->layer,
		  p->expert, (unsigned long long)coli_record_offset(p->x, p->expert), why);
}

void stream_issue(stream_store *s, int r, uint64_t len)
{
	double t = coli_now();
	if (s->inflight++ == 0)
		s->busy_since = t;
	replica_issue(&s->rs, r, len, t);
}

void stream_retire(stream_store *s, int r, uint64_t len, int ok)
{
	double t = coli_now();
	replica_done(&s->rs, r, len, ok, t);
	if (--s->inflight == 0)
		s->st.read_s += t - s->busy_since;
	s->st.bytes_read += ok ? len : 0;
}

/* Whether the first queued chunk may be read now: not a prediction's while a demanded chunk is
 * being read. Lock held. */
static int claimable(const stream_store *s)
{
	return s->qhead && (s->qhead->prio != Q_PREDICT || s->demand_inflight == 0);
}

/* Takes the next chunk of the first queued record (the record leaves the queue with its last
 * chunk) and issues it to the copy expected to finish it first; *demand: 1 for a get's or a
 * prefetch's. Lock held, claimable(s). */
static slot *claim(stream_store *s, int *c, int *r, int *demand)
{
	slot *p = s->qhead;
	*demand = p->prio != Q_PREDICT;
	s->demand_inflight += *demand;
	*c = p->next_chunk++;
	if (p->next_chunk == p->n_chunks) {
		if (!(s->qhead = p->next))
			s->qtail = NULL;
		p->next = NULL;
	}
	*r = replica_pick(&s->rs, stream_rec(p), chunk_len(p, *c), 0);
	stream_issue(s, *r, chunk_len(p, *c));
	stream_trace_issue(s, p, *c);
	return p;
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
		if (rc == 0 && !s->no_crc)
			p->chunk_crc[c] = coli_crc32(0, p->buf + off, len);
		pthread_mutex_lock(&s->mu);
	} while (chunk_result(s, p, c, &r, &tried, demand, rc, &err));
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
		int c, r, demand;
		slot *p = claim(s, &c, &r, &demand);
		read_chunk(s, p, c, r, demand);
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

/* Queues on the ring the read of what is left of q's chunk. */
static void uring_submit_read(stream_store *s, ureq *q)
{
	const replica *R = &s->rs.r[q->r];
	uint64_t off = (uint64_t)q->c * q->p->chunk + q->done;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring); /* never NULL: at most depth in flight */
	io_uring_prep_read(sqe, R->fd, q->p->buf + off, (unsigned)(chunk_len(q->p, q->c) - q->done),
			   coli_record_offset(q->p->x, q->p->expert) + off);
	io_uring_sqe_set_data(sqe, q);
}

/* A completion for q: its read goes on (short read, interrupted), or ends (q->rc and q->err
 * set); 1 when it ended. No lock held: q's chunk is in flight. */
static int uring_complete(stream_store *s, ureq *q, int res)
{
	const replica *R = &s->rs.r[q->r];
	uint64_t off = coli_record_offset(q->p->x, q->p->expert) + (uint64_t)q->c * q->p->chunk + q->done;
	uint64_t len = chunk_len(q->p, q->c);
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

/* Puts the first queued chunk on the ring in a free request; lock held. */
static void uring_claim(stream_store *s)
{
	ureq *q = s->ureqs;
	while (q->p)
		q++;
	q->p = claim(s, &q->c, &q->r, &q->demand);
	q->tried = 1u << q->r, q->done = 0, q->rc = 0;
	uring_submit_read(s, q);
}

/* The io_uring thread: puts queued chunks on the ring in queue order, up to its depth, and
 * reaps their completions, until the store closes (the queue drained). The CRCs of chunks that
 * ended are computed once the next queued reads are on the ring. */
static void *uring_main(void *arg)
{
	stream_store *s = arg;
	ureq *ended[STORE_MAX_QD * STORE_MAX_COPIES];
	int n = 0, n_ended = 0; /* reads on the ring; reads ended, not yet accounted */
	pthread_mutex_lock(&s->mu);
	for (;;) {
		for (; n + n_ended < s->uring_depth && claimable(s); n++) /* ended ones still hold their request */
			uring_claim(s);
		if (n_ended) {
			pthread_mutex_unlock(&s->mu);
			io_uring_submit(&s->ring);
			for (int j = 0; j < n_ended && !s->no_crc; j++) {
				ureq *q = ended[j];
				uint64_t off = (uint64_t)q->c * q->p->chunk;
				if (q->rc == 0)
					q->p->chunk_crc[q->c] = coli_crc32(0, q->p->buf + off, chunk_len(q->p, q->c));
			}
			pthread_mutex_lock(&s->mu);
			for (int j = 0; j < n_ended; j++) {
				ureq *q = ended[j];
				if (chunk_result(s, q->p, q->c, &q->r, &q->tried, q->demand, q->rc, &q->err)) {
					q->done = 0, n++;
					uring_submit_read(s, q);
				} else {
					q->p = NULL;
				}
			}
			n_ended = 0;
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

/* One thread owning a ring of depth qd (STORE_URING_DEPTH) per copy; -1 with e filled (nothing
 * started) when the kernel refuses io_uring: the caller falls back to the threads. */
static int uring_start(stream_store *s, coli_err *e)
{
	s->uring_depth = (s->qd ? s->qd : STORE_URING_DEPTH) * s->rs.n;
	if (!(s->ureqs = coli_calloc((size_t)s->uring_depth, sizeof(*s->ureqs), e)))
		return -1;
	int rc = s->no_uring ? -ENOSYS : io_uring_queue_init((unsigned)s->uring_depth, &s->ring, 0);
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

const io_backend stream_uring_backend = {.start = uring_start, .stop = uring_stop};

