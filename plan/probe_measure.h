/* probe_measure.h: the probe's measurements: the engine's kernels and the memory read speed
 * (probe_cpu.c), a folder's O_DIRECT and buffered reads (probe_disk.c). Each fills the measured
 * fields of a coli_probe (formats/probe.h) and prints nothing but the progress line. */
#ifndef COLI_PLAN_PROBE_MEASURE_H
#define COLI_PLAN_PROBE_MEASURE_H

#include <stdint.h>

#include "probe.h"

/* The progress line on stderr (progress.c): shown only when probe.c turned it on (a terminal,
 * no -q); what is one short phrase ("disk /x: O_DIRECT reads at queue depth 8"). _done clears
 * it before another line is printed. */
void probe_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void probe_progress_show(int on);
int probe_progress_showing(void);
void probe_progress_done(void);

typedef struct probe_cpu_opts {
	uint64_t weights_bytes;  /* the expert matrices streamed through the kernels */
	double seconds;          /* each measurement's time */
} probe_cpu_opts;

/* The kernel variant coli_kernels_open picks on this CPU ("avx512", ...), into out. */
int probe_cpu_variant(char *out, size_t size, coli_err *e);

/* Memory read bandwidth and the kernels' decode and prefill speeds at a Qwen3-30B-A3B expert
 * shape: fills kernels, mem_bps_*, int4_*, int8_*, cpu_taken. */
int probe_cpu_measure(coli_probe *p, const probe_cpu_opts *o, coli_err *e);

typedef struct probe_disk_opts {
	uint64_t record_bytes;   /* bytes per random read */
	uint64_t file_bytes;     /* the scratch file's size */
	double seconds;          /* each measurement's time */
	int n_qd, qd[COLI_PROBE_MAX_QD];
} probe_disk_opts;

/* Whether d (identified by coli_probe_disk_ident) can be measured: a disk, not memory; room for
 * the scratch file; O_DIRECT accepted. -1 with e saying why, naming the folder. */
int probe_disk_check(const coli_probe_disk *d, const probe_disk_opts *o, coli_err *e);

/* Writes the scratch file in d->dir, measures the 4 KiB latency, the O_DIRECT random record
 * reads at each queue depth and the buffered ones, removes the file; fills record_bytes,
 * file_bytes, qd, direct_bps, burst_bps, buffered_bps, latency_s, taken. */
int probe_disk_measure(coli_probe_disk *d, const probe_disk_opts *o, coli_err *e);

/* Removes the scratch file a measurement or check has in its folder now, if any: 1 when one was
 * removed. Async-signal-safe: for a SIGINT or SIGTERM handler. */
int probe_disk_cleanup(void);

#endif
