/* tracesum.h: a .coli_trace read whole into what coli-profile reports on: each forward call (phase,
 * times, its spans by kind, its outcomes, hits and gets per layer), every read, every routed
 * expert (for replays), the header and the metadata.
 *
 * The reader (formats/trace.h) checks each record alone; this adds the order rules a report
 * depends on (formats/trace.md, "Time and order"): TOKEN records numbered 0, 1, 2, ..., a call's
 * SPAN and EXPERT records before its TOKEN, no READ of a call not yet begun, a WALL after the
 * TOKEN of its last call. */
#ifndef COLI_PROFILE_TRACESUM_H
#define COLI_PROFILE_TRACESUM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "trace.h"

typedef struct prof_call {
	int phase;                    /* COLI_PHASE_* */
	uint64_t t0, t1, n;           /* start, end (ns since the trace's start), positions */
	uint64_t span[COLI_SPAN_N];   /* ns of each span kind */
	uint64_t out[COLI_X_N];       /* EXPERT outcomes */
} prof_call;

typedef struct prof_read {
	uint64_t t0, t1, bytes;
	int copy, token, flags;
} prof_read;

/* A routed expert as the store got it (an EXPERT record other than PREDICT_WASTED). */
typedef struct prof_route {
	int32_t call, layer, expert;
	int32_t outcome;              /* COLI_X_*: PIN for a pinned expert */
} prof_route;

typedef struct prof_trace {
	char *name;                   /* the file or archive member, for messages */
	int version;                  /* the file's: 1 has no BETWEEN span and no caller's wall */
	int n_layers, n_experts, top_k, n_copies;
	uint64_t start_unix_ns;
	uint8_t identity[32];         /* the container's identity hash */
	char (*dev)[32];              /* [n_copies] */
	char **dir;                   /* [n_copies] */
	json_t *meta;                 /* the metadata object (never NULL once read) */
	prof_call *calls;             /* [n_calls] */
	int n_calls;
	int n_walls[2];               /* WALL records (version 2) of each phase */
	uint64_t wall_tokens[2];      /* the tokens their caller counted in them */
	uint32_t *lhit, *lget;        /* [n_calls][n_layers]: pin + hit, and gets (every outcome but
				       * PREDICT_WASTED) of each layer */
	prof_read *reads;
	size_t n_reads;
	prof_route *routes;
	size_t n_routes;
	size_t cap_calls, cap_reads, cap_routes; /* allocated entries */
} prof_trace;

/* Reads the whole trace of r (opened by the caller, who still closes it) into *t; errors name
 * the trace (COLI_EDATA for a broken order, the reader's errors as they come). */
int prof_trace_read(prof_trace *t, coli_trace_reader *r, const char *name, coli_err *e);

/* The same from a file or from memory. */
int prof_trace_load(prof_trace *t, const char *path, coli_err *e);
int prof_trace_load_mem(prof_trace *t, const void *data, size_t n, const char *name, coli_err *e);

void prof_trace_release(prof_trace *t); /* frees everything; t zeroed */

/* The hit rate of outcomes out[] ((pin + hit) / gets), 0 when there is no get. */
double prof_hit_rate(const uint64_t *out);

/* Gets among outcomes: every outcome but PREDICT_WASTED. */
uint64_t prof_gets(const uint64_t *out);

#endif
