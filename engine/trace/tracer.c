/* trace/tracer.c: the engine's trace records: spans coalesced on the compute thread, the time
 * between calls of a caller's wall, reads and expert outcomes from wherever they happen. */
#include "tracer.h"

#include <math.h>

#include "clock.h"

void coli_tracer_init(coli_tracer *t, void (*emit)(void *ctx, const coli_trace_rec *r), void *ctx)
{
	*t = (coli_tracer){.emit = emit, .ctx = ctx, .origin = coli_now_ns(), .span_kind = -1};
}

uint64_t coli_tracer_now(const coli_tracer *t)
{
	return coli_now_ns() - t->origin;
}

void coli_tracer_emit(coli_tracer *t, int kind, int sub, int copy, int layer, int expert, uint64_t t0,
		      uint64_t t1, uint64_t n)
{
	coli_trace_rec r = {.kind = (uint8_t)kind, .sub = (uint8_t)sub, .copy = (uint16_t)copy,
			    .token = atomic_load(&t->token), .layer = layer, .expert = expert,
			    .t0 = t0, .t1 = t1 < t0 ? t0 : t1, .n = n};
	t->emit(t->ctx, &r);
}

/* Emits the open span, if any. */
static void close_span(coli_tracer *t)
{
	if (t->span_kind >= 0)
		coli_tracer_emit(t, COLI_TR_SPAN, t->span_kind, 0, t->span_layer, -1, t->span_t0, t->last, 0);
	t->span_kind = -1;
}

/* A BETWEEN span [t0, t1) of the call running, when it lasts. */
static void between(coli_tracer *t, uint64_t t0, uint64_t t1)
{
	if (t1 > t0)
		coli_tracer_emit(t, COLI_TR_SPAN, COLI_SPAN_BETWEEN, 0, -1, -1, t0, t1, 0);
}

/* The call that ended, its TOKEN ending at `at`: the time since its forward pass ended is its
 * BETWEEN span. Then the next token index. */
static void flush_pending(coli_tracer *t, uint64_t at)
{
	if (!t->pending)
		return;
	at = at < t->pend_end ? t->pend_end : at;
	between(t, t->pend_end, at);
	coli_tracer_emit(t, COLI_TR_TOKEN, t->pend_phase, 0, -1, -1, t->pend_t0, at, t->pend_n);
	atomic_fetch_add(&t->token, 1);
	t->pending = 0;
}

/* The caller's coli_now() reading on the trace's clock (never before what was recorded). */
static uint64_t at_of(const coli_tracer *t, double now)
{
	double ns = floor(now * 1e9 + 0.5) - (double)t->origin;
	uint64_t at = ns > 0 ? (uint64_t)ns : 0;
	return at < t->last ? t->last : at;
}

void coli_tracer_mark(coli_tracer *t, int kind, int layer)
{
	if (!t)
		return;
	uint64_t now = coli_tracer_now(t);
	if (t->span_kind != kind || t->span_layer != layer) {
		close_span(t);
		t->span_kind = kind, t->span_layer = layer, t->span_t0 = t->last;
	}
	t->last = now;
}

/* Within a wall the previous call is written now, and the wall's first call starts at the wall's
 * start (the time before its forward pass a BETWEEN span). */
void coli_tracer_begin(coli_tracer *t)
{
	if (!t)
		return;
	uint64_t now = coli_tracer_now(t);
	int first = t->wall && t->wall_t0 != UINT64_MAX && !t->pending;
	flush_pending(t, now);
	t->call_t0 = t->last = now;
	if (first) {
		t->call_t0 = t->wall_t0 < now ? t->wall_t0 : now;
		between(t, t->call_t0, now);
	}
	t->wall_t0 = UINT64_MAX; /* the wall's first call has begun */
	t->span_kind = -1;
}

void coli_tracer_end(coli_tracer *t, uint64_t n)
{
	if (!t)
		return;
	close_span(t);
	if (t->wall) {
		t->pending = 1, t->pend_t0 = t->call_t0, t->pend_end = t->last, t->pend_n = n, t->pend_phase = t->phase;
		return;
	}
	coli_tracer_emit(t, COLI_TR_TOKEN, t->phase, 0, -1, -1, t->call_t0, t->last, n);
	atomic_fetch_add(&t->token, 1);
}

void coli_tracer_wall_begin(coli_tracer *t, int phase, double now)
{
	if (!t || !t->emit)
		return;
	if (t->wall)
		coli_tracer_wall_end(t, now, 0);
	t->phase = phase, t->wall = 1, t->wall_start = t->wall_t0 = at_of(t, now);
}

/* The last call written, then the WALL record (its token: the next call's index). */
void coli_tracer_wall_end(coli_tracer *t, double now, uint64_t tokens)
{
	if (!t || !t->emit || !t->wall)
		return;
	uint64_t at = at_of(t, now);
	flush_pending(t, at);
	coli_tracer_emit(t, COLI_TR_WALL, t->phase, 0, -1, -1, t->wall_start, at, tokens);
	t->last = at > t->last ? at : t->last;
	t->wall = 0;
}
