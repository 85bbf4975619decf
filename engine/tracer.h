/* tracer.h: what the engine records for a trace (coli-run --trace; the records and the file are
 * formats/trace.h's): the spans of each forward call on the compute thread, every chunk read
 * of the streaming store, and each routed expert's outcome.
 *
 * The caller owns a coli_tracer, sets emit (and ctx) and phase, and hands it to coli_engine_open
 * (coli_engine_opts.tracer); NULL traces nothing and costs nothing. Within each forward call the SPAN
 * records are contiguous and cover the call from its start to its end, so their durations sum
 * to its TOKEN record's. emit is called from the compute thread (the streaming store keeps its I/O
 * threads' records under its lock and emits them from the thread calling it, the lock released):
 * it must serialise, and must not call into the engine.
 *
 * The caller's wall (formats/trace.md, "The caller's wall"): a caller that times a phase itself
 * brackets it with coli_tracer_wall_begin/end, giving its own clock readings; the calls inside
 * then tile that interval: the time between forward calls goes into BETWEEN spans of the call
 * before it (the first call also takes the time from the wall's start), each TOKEN record is
 * written when the next call begins or the wall ends, so the phase's TOKEN durations sum to the
 * caller's seconds; a WALL record then gives the interval and the tokens the caller counts in it
 * (with drafts, fewer than the positions its calls ran). */
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
	/* the caller's wall: open, when it began, and the call ended but not yet written (its TOKEN
	 * [pend_t0, ...), its phase and positions, its forward pass ending at pend_end) */
	int wall, pending, pend_phase;
	uint64_t wall_start, wall_t0, pend_t0, pend_end, pend_n; /* wall_t0: UINT64_MAX once a call began */
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

/* The caller's clock for phase (COLI_PHASE_*) starts / stops; now: its reading of coli_now()
 * (formats/clock.h: the tracer's clock in seconds), so the trace's wall is the caller's; tokens:
 * what the caller counts as made in it (its tokens/s figure's numerator). A wall still open is
 * ended first (with 0 tokens). No-ops when t is NULL or was never initialised (no emit). */
void coli_tracer_wall_begin(coli_tracer *t, int phase, double now);
void coli_tracer_wall_end(coli_tracer *t, double now, uint64_t tokens);

/* One record of kind READ or EXPERT for the call running (token filled in). */
void coli_tracer_emit(coli_tracer *t, int kind, int sub, int copy, int layer, int expert, uint64_t t0,
		      uint64_t t1, uint64_t n);

#endif
