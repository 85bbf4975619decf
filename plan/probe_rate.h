/* probe_rate.h: what the disk probe counts of its reads (probe_rate.c): a sustained rate from the
 * last 2/3 of a window of continuous reads, and a burst rate as the streaming store meets one (a
 * layer's misses after the compute's idle time), the median of bursts after several idle times.
 * The reads come from a reader: preads of the probe's scratch file (probe_disk.c), or a simulated
 * device on a virtual clock (tests/unit/test_probe_burst.c). */
#ifndef COLI_PLAN_PROBE_RATE_H
#define COLI_PLAN_PROBE_RATE_H

#include "error.h"

#define PROBE_SETTLE_S 0.25   /* idle before the bursts: the device forgets the sustained reads */
#define PROBE_BURST_IDLES 3   /* idle times before a burst: 1, 2 and 4 times the burst at the sustained rate */
#define PROBE_BURST_REPEATS 3 /* bursts after each idle time */
#define PROBE_BURST_IDLE_MIN 0.02 /* s: the least idle time before a burst */

/* The completions of one run of reads: from `cut` on, the first one starts the interval the rate
 * is counted over and those after it fill it. probe_window_add is called once per completed read
 * (by one thread at a time). */
typedef struct probe_window {
	double t0, cut;           /* the start; completions from cut on count toward the rate */
	double first, last;       /* the first completion at or after cut (-1: none yet), the last */
	double all, after;        /* bytes of every completion; of those after first */
	long n_after;
} probe_window;

void probe_window_add(probe_window *w, double t, double bytes);

/* Reads of record bytes each, by qd lanes, each starting another read until deadline (limit > 0:
 * limit reads in all, whatever the deadline), every completion given to probe_window_add; -1
 * with e on a failed read. */
typedef struct probe_reader {
	void *ctx;
	double record;
	double (*now)(void *ctx);
	void (*idle)(void *ctx, double seconds);
	int (*read)(void *ctx, int qd, long limit, double deadline, probe_window *w, coli_err *e);
} probe_reader;

/* Bytes per second of qd lanes reading for `seconds`, counted from the first completion after a
 * third of the window to the last (a throttle's initial allowance, spent in the first third, is
 * not counted); the whole window when fewer than two reads completed after that third. -1 with e
 * on a failed read. */
double probe_sustained(const probe_reader *r, int qd, double seconds, coli_err *e);

/* Bursts of `records` reads at queue depth `records`: PROBE_SETTLE_S idle, then PROBE_BURST_REPEATS
 * rounds, each a burst after each of the PROBE_BURST_IDLES idle times (1, 2, 4 x the burst's time
 * at `sustained` bytes/s, PROBE_BURST_IDLE_MIN at least); each burst's bytes over its time, the
 * median. -1 with e on a failed read. */
double probe_bursts(const probe_reader *r, int records, double sustained, coli_err *e);

/* The median of v[0..n) (n > 0; the upper one of an even count), v sorted in place. */
double probe_median(double *v, int n);

#endif
