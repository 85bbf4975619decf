/* probe.h: probe.json, what `coli-plan probe` measured on one machine (spec: formats/probe.md):
 * the CPU (model, ISA flags, cores, memory and kernel speeds), RAM and the memory cgroup limit,
 * GPUs, and for each probed folder its block device and O_DIRECT read speeds. The planner reads
 * it; coli-run checks a plan's probe was taken on this machine.
 *
 *   { "format": "coli-probe", "version": 1, "taken": unix seconds,
 *     "cpu_model", "isa", "physical_cores", "logical_cpus", "kernels", "cpu_taken",
 *     "mem_bps_1", "mem_bps_all", "int4_bps_1", "int4_bps_all", "int8_bps_1", "int8_bps_all",
 *     "int4_prefill_bps_all", "int8_prefill_bps_all", "attn_fma_per_s",
 *     "fp4_bps_1", "fp4_bps_all", "fp4_prefill_bps_all",
 *     "q8_int4_bps_1", "q8_int4_bps_all", "q8_int8_bps_1", "q8_int8_bps_all",
 *     "ram_total", "ram_available", "cgroup_limit" (bytes or "none"), "gpus",
 *     "disks": [ { "dir", "dev", "major", "minor", "identity", "fs", "free_bytes",
 *                  "record_bytes", "file_bytes", "qd": [..], "direct_bps": [..],
 *                  "burst_bps", "buffered_bps", "latency_s", "taken" } ] }
 *
 * Bandwidths in bytes per second, sizes in bytes, times in seconds. The reader checks every
 * field's type and range and names the file and field of the first bad one; fields it does not
 * know are ignored (a later revision of version 1 may add some; the revision's fields are read as 0,
 * "not measured", from a file without them). Written atomically. */
#ifndef COLI_PROBE_H
#define COLI_PROBE_H

#include <stddef.h>

#include "error.h"

#define COLI_PROBE_VERSION 1
#define COLI_PROBE_MAX_DISKS 8
#define COLI_PROBE_MAX_QD 8
#define COLI_PROBE_PREFILL_TOKENS 64 /* tokens per product of the prefill figures */
#define COLI_PROBE_BURST_RECORDS 4   /* records per burst of burst_bps, read at this queue depth */

typedef struct coli_probe_disk {
	char dir[4096];          /* the folder as given (absolute) */
	char dev[32];            /* block device name, e.g. "vda", "loop3"; "none" without one */
	unsigned major, minor;
	char identity[256];      /* what tells this device from another with the same MAJ:MIN */
	char fs[32];             /* filesystem type */
	double free_bytes;
	double record_bytes;     /* record size the reads used */
	double file_bytes;       /* size of the scratch file the reads were spread over */
	int n_qd; int qd[COLI_PROBE_MAX_QD];
	double direct_bps[COLI_PROBE_MAX_QD]; /* O_DIRECT random reads, bytes/s at qd[i] */
	double burst_bps;        /* the same in bursts after idle time (a throttle's allowance); 0: not measured */
	double buffered_bps;     /* the same reads through the page cache, cold, qd 1 */
	double latency_s;        /* one 4 KiB O_DIRECT read, median */
	double taken;            /* unix time of the measurement */
} coli_probe_disk;

typedef struct coli_probe {
	int version;
	char cpu_model[256];
	char isa[256];           /* space-separated flags */
	int physical_cores, logical_cpus;
	double ram_total, ram_available, cgroup_limit; /* bytes; cgroup_limit 0: none */
	double mem_bps_1, mem_bps_all;                 /* memory read bandwidth, 1 thread / all */
	double int4_bps_1, int4_bps_all, int8_bps_1, int8_bps_all; /* weight bytes/s of the kernels' decode matvec */
	double int4_prefill_bps_all, int8_prefill_bps_all; /* weight bytes x tokens / s, 64 tokens per product */
	double attn_fma_per_s;   /* the attention core's multiply-adds per second, 1 thread; 0: not measured */
	double fp4_bps_1, fp4_bps_all, fp4_prefill_bps_all; /* the same as int4's for FP4 (fp4: e2m1 + UE8M0 per 32);
							     * 0: not measured (revision 1.2) */
	double q8_int4_bps_1, q8_int4_bps_all, q8_int8_bps_1, q8_int8_bps_all; /* the decode matvec with
				  * --precision q8 (8-bit activations); 0: not measured */
	char kernels[32];        /* the kernel variant measured ("avx512", ...) */
	char gpus[256];          /* "none found" or a list */
	double cpu_taken;        /* unix time of the CPU measurements */
	double taken;            /* unix time */
	coli_probe_disk disks[COLI_PROBE_MAX_DISKS]; int n_disks;
} coli_probe;

/* The best of d's O_DIRECT bandwidths over the queue depths measured (0 with none). */
double coli_probe_best_bps(const coli_probe_disk *d);

/* Reads and validates path (every field, see coli_probe_validate); *p is filled only on success. */
int coli_probe_read(const char *path, coli_probe *p, coli_err *e);
/* The same for text already in memory; name stands for the file in errors. */
int coli_probe_parse(const char *text, size_t len, const char *name, coli_probe *p, coli_err *e);
/* The ranges of formats/probe.md; the first violation named as "<name>: <field>: <why>". */
int coli_probe_validate(const coli_probe *p, const char *name, coli_err *e);
/* p as JSON text (indented when indent, else one line ending in a newline); malloc'd, caller
 * frees; NULL with e filled when p does not validate or memory is short. */
char *coli_probe_json(const coli_probe *p, int indent, coli_err *e);
/* Validates p and writes it to path atomically (path.tmp, fsync, rename). */
int coli_probe_write(const char *path, const coli_probe *p, coli_err *e);

/* The facts of this machine that a probe is tied to (CPU model, cores, and for each given
 * folder its device): fills the machine fields of *p (cpu_model, isa, cores, RAM, cgroup
 * limit, gpus; formats/machine.c); used to refuse another machine's probe. */
int coli_probe_machine(coli_probe *p, coli_err *e);
/* dir's device: dir made absolute, dev, major:minor, identity, fs, free. A missing folder is
 * an error (COLI_EIO) naming it. */
int coli_probe_disk_ident(const char *dir, coli_probe_disk *d, coli_err *e);
/* 0 when p was taken on this machine (CPU model and cores equal, and each disk's dir still on the
 * same device); else -1 with e saying which fact differs ("probe.json: cpu_model 'X' is not this
 * machine's 'Y'"). path names the probe in messages. */
int coli_probe_check_machine(const coli_probe *p, const char *path, coli_err *e);

#endif
