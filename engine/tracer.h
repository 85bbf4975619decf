/* tracer.h: what the engine records for a trace (coli-run --trace; the records and the file are
 * formats/trace.h's): the spans of each forward call on the compute thread, every chunk read
 * of the streaming store, and each routed expert's outcome.
 *
 * The caller owns a coli_tracer, sets emit (and ctx) and phase, and hands it to coli_engine_open
 * (coli_engine_opts.tracer); NULL traces nothing and costs nothing. Within each forward call the SPAN
 * records are contiguous and cover the call from its start to its end, so their durations sum
 * to its TOKEN record's. emit is called from the compute thread and from the store's I/O
 * threads (with the store's lock held): it must serialise, and must not call into the engine. */
#ifndef COLI_TRACER_H
#define COLI_TRACER_H

#include <stdatomic.h>
#include <stdint.h>

#include "trace.h"

typedef struct coli_tracer {
	void (*emit)(void *ctx, const coli_trace_rec *r);
	void *ctx;
	int phase;                /* COLI_PHASE_PREFILL or COLI_PHASE_DECODE: the caller's, per call */
	uint64_t origin;          /* CLOCK_MONOTONIC ns that t0 and t1 count from (coli_tracer_init) */
	_Atomic int32_t token;    /* the forward call running: its records' token */
	/* the compute thread's call and its open span [span_t0, last) */
	uint64_t call_t0, span_t0, last;
	int span_kind, span_layer;  /* span_kind -1: none open */
} coli_tracer;

/* A tracer emitting to emit(ctx), its clock starting now, no call yet. */
void coli_tracer_init(coli_tracer *t, void (*emit)(void *ctx, const coli_trace_rec *r), void *ctx);

/* Nanoseconds since t's origin. */
uint64_t coli_tracer_now(const coli_tracer *t);

/* The compute thread's time since the last mark belongs to span kind of layer (-1: none):
 * extends the open span when it is of the same kind and layer, else emits it and opens this
 * one. t may be NULL (nothing happens). */
void coli_tracer_mark(coli_tracer *t, int kind, int layer);

/* A forward call of n positions begins / ends: the end emits the open span and the TOKEN
 * record, and moves on to the next token index. */
void coli_tracer_begin(coli_tracer *t);
void coli_tracer_end(coli_tracer *t, uint64_t n);

/* One record of kind READ or EXPERT for the call running (token filled in). */
void coli_tracer_emit(coli_tracer *t, int kind, int sub, int copy, int layer, int expert, uint64_t t0,
		      uint64_t t1, uint64_t n);

#endif
