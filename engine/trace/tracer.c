/* trace/tracer.c: the engine's trace records: spans coalesced on the compute thread, reads and
 * expert outcomes from wherever they happen. */
#include "tracer.h"

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

void coli_tracer_begin(coli_tracer *t)
{
	if (!t)
		return;
	t->call_t0 = t->last = coli_tracer_now(t);
	t->span_kind = -1;
}

void coli_tracer_end(coli_tracer *t, uint64_t n)
{
	if (!t)
		return;
	close_span(t);
	coli_tracer_emit(t, COLI_TR_TOKEN, t->phase, 0, -1, -1, t->call_t0, t->last, n);
	atomic_fetch_add(&t->token, 1);
}
