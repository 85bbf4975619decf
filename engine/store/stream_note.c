/* store/stream_note.c: what the streaming store notes of its work, for the cache (store/stream.c)
 * and the I/O backends (store/stream_io.c) alike: each read's counters (the store's and its
 * copy's), its trace records, events, and read errors named by record. Calls neither of them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "store/stream.h"

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

void stream_event(const stream_store *s, coli_event_kind kind, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	if (!s->events.fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	coli_event ev = {kind, msg};
	s->events.fn(s->events.ctx, &ev);
}

void stream_trace_issue(const stream_store *s, slot *p, int c)
{
	if (s->tr)
		p->chunk_t0[c] = coli_tracer_now(s->tr);
}

/* A record for the call running, kept in the ring until the lock is released. Lock held. */
static void trace_keep(stream_store *s, int kind, int sub, int copy, const slot *p, uint64_t t0, uint64_t t1,
		       uint64_t n)
{
	if (s->trq_head - s->trq_tail == s->trq_cap) {
		s->trq_lost++;
		return;
	}
	s->trq[s->trq_head++ % s->trq_cap] = (coli_trace_rec){
		.kind = (uint8_t)kind, .sub = (uint8_t)sub, .copy = (uint16_t)copy, .token = atomic_load(&s->tr->token),
		.layer = p->x->layer, .expert = p->expert, .t0 = t0, .t1 = t1 < t0 ? t0 : t1, .n = n};
}

void stream_trace_flush(stream_store *s)
{
	if (!s->trq || pthread_mutex_trylock(&s->trq_mu) != 0)
		return; /* another caller is emitting: it, or a later call, emits these too */
	for (;;) {
		pthread_mutex_lock(&s->mu);
		uint64_t from = s->trq_tail, to = s->trq_head;
		pthread_mutex_unlock(&s->mu);
		if (from == to)
			break;
		for (uint64_t i = from; i < to; i++) /* producers never overwrite [trq_tail, trq_head) */
			s->tr->emit(s->tr->ctx, &s->trq[i % s->trq_cap]);
		pthread_mutex_lock(&s->mu);
		s->trq_tail = to;
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&s->trq_mu);
}

/* A READ record: flags ok, prediction, re-read. Lock held. */
static void trace_read(stream_store *s, const slot *p, int r, uint64_t t0, uint64_t len, int flags)
{
	trace_keep(s, COLI_TR_READ, flags, r, p, t0, coli_tracer_now(s->tr), len);
}

void stream_trace_read(stream_store *s, const slot *p, int c, int r, int ok)
{
	if (!s->tr)
		return;
	uint64_t off = (uint64_t)c * p->chunk, len = p->x->record_size - off < p->chunk ? p->x->record_size - off : p->chunk;
	trace_read(s, p, r, p->chunk_t0[c], len, (ok ? 1 : 0) | (p->origin == Q_PREDICT ? 2 : 0));
}

void stream_trace_outcome(stream_store *s, const slot *p, int pinned)
{
	static const int by_origin[] = {[Q_PREDICT] = COLI_X_PREDICTED, [Q_PREFETCH] = COLI_X_PREFETCHED,
					[Q_GET] = COLI_X_MISS};
	if (!s->tr)
		return;
	int x = pinned ? COLI_X_PIN : p->state == S_READY ? COLI_X_HIT : by_origin[p->origin];
	uint64_t t = coli_tracer_now(s->tr);
	trace_keep(s, COLI_TR_EXPERT, x, 0, p, t, t, 0);
}

void stream_trace_wasted(stream_store *s, const slot *p)
{
	if (!s->tr)
		return;
	uint64_t t = coli_tracer_now(s->tr);
	trace_keep(s, COLI_TR_EXPERT, COLI_X_PREDICT_WASTED, 0, p, t, t, 0);
}

void stream_trace_reread(stream_store *s, const slot *p, int r, uint64_t t0, uint64_t len, int ok)
{
	if (s->tr)
		trace_read(s, p, r, t0, len, (ok ? 1 : 0) | 4);
}
