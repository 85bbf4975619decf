/* attrib.h: where the time of a traced run went: the attribution table of each phase (its parts
 * sum to the phase's wall time exactly: the spans, the time between calls, and the small
 * remainder the spans do not cover; the wall is the run's own, coli-run's seconds), each disk's
 * service time and bandwidth, and the bottleneck verdict with its arithmetic (Amdahl: what a
 * faster disk, faster products or a larger cache would give). */
#ifndef COLI_PROFILE_ATTRIB_H
#define COLI_PROFILE_ATTRIB_H

#include <jansson.h>

#include "error.h"
#include "more_cache.h"
#include "probe.h"
#include "tracesum.h"

/* The parts of the table, in the order printed: the span kinds reordered, then the remainder. */
enum { PART_IO_WAIT, PART_EXPERTS, PART_ATTENTION, PART_LINEAR, PART_INDEXER, PART_MIX, PART_ROUTER, PART_OTHER,
       PART_BETWEEN, PART_UNTRACED, PART_N };
extern const char *const prof_part_names[PART_N];  /* "I/O wait", "expert products", ... */
extern const char *const prof_part_keys[PART_N];   /* "io_wait", "experts", ... (JSON) */

typedef struct prof_phase {
	int calls;
	double positions;          /* tokens: what the run counted (its WALL records'), else the calls'
				    * positions (prompt positions, or generated tokens) */
	double wall;               /* seconds: the calls' durations summed */
	double part[PART_N];       /* seconds; they sum to wall */
	double disk_service;       /* seconds of the reads submitted in the phase, summed over reads
				    * (they overlap each other and the compute: not a part) */
	double read_bytes;
	uint64_t out[COLI_X_N];    /* the EXPERT outcomes */
} prof_phase;

/* What coli-plan's attention figure counts of a phase (attention, linear attention, the sparse
 * selection), and its "other" (the rest but I/O wait and expert products): seconds. */
double prof_attention_s(const prof_phase *p);
double prof_other_s(const prof_phase *p);

typedef struct prof_disk {
	const char *dir, *dev;     /* the trace's (not copied) */
	double bytes;              /* delivered */
	long reads, failed;
	double service;            /* seconds, summed over reads */
	double busy;               /* seconds with at least one read in flight */
	double probe_bps;          /* the probe's best O_DIRECT bandwidth of this device; 0: none */
} prof_disk;

typedef struct prof_verdict {
	int phase;                 /* the phase judged: decode when there is one */
	int bound;                 /* PART_* taking the most time */
	double tok_s;              /* tokens/s of the phase */
	double share[PART_N];      /* of the phase's wall */
	double disk2x, compute2x;  /* tokens/s with a disk 2x faster, with products 2x faster */
	double no_wait;            /* tokens/s with every expert in RAM (no I/O wait) */
	double hit;                /* the phase's hit rate */
	prof_cache_est cache;      /* the run's cache replayed at its size and 25% more */
	double more_tok_s;         /* tokens/s with the larger cache; 0: no estimate */
	char text[2048];           /* the verdict in words, with the arithmetic */
} prof_verdict;

typedef struct prof_attrib {
	prof_phase ph[2];          /* COLI_PHASE_PREFILL, COLI_PHASE_DECODE */
	prof_disk *disks;          /* [n_disks]: one per copy of the trace */
	int n_disks;
	double span_error;         /* the worst |sum of spans - call| / call over the calls */
	prof_verdict v;
} prof_attrib;

/* The table, the disks (their probe figures from probe, may be NULL) and the verdict of t. */
int prof_attrib_make(prof_attrib *a, const prof_trace *t, const coli_probe *probe, coli_err *e);
void prof_attrib_release(prof_attrib *a);

/* The table and the verdict as one JSON object (formats: docs/coli-profile.md). */
json_t *prof_attrib_json(const prof_attrib *a, const prof_trace *t);

#endif
