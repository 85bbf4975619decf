/* mirror_stage.h: coli-plan mirror stage and verify, the work behind plan/mirror.c's command line. */
#ifndef COLI_PLAN_MIRROR_STAGE_H
#define COLI_PLAN_MIRROR_STAGE_H

#include <signal.h>
#include <stdint.h>

#include "container.h"
#include "error.h"

typedef struct stage_opts {
	const char *model, *dir, *usage;
	const char *plan;      /* --plan: the run's plan.json: its usage, and its pins staged last */
	double max;            /* --max in bytes; 0: no cap */
	double reserve;        /* --reserve in bytes; < 0: the default (1 GiB or 5%, the smaller) */
	double assume_free;    /* --assume-free in bytes (tests); < 0: statvfs */
	int kill_after;        /* --kill-after (tests): SIGKILL once N records are written; 0: never */
	int force;
	const volatile sig_atomic_t *stop; /* NULL, or set non-zero (a signal handler) to stop the stage at the
				    * next record or chunk: what is written is claimed first */
	coli_progress_fn progress; /* bytes done of this run's total; NULL: none */
	void *progress_ctx;
} stage_opts;

typedef struct stage_report {
	uint64_t n_records;    /* the container's */
	uint64_t held;         /* records the mirror holds at the end */
	uint64_t copied;       /* records copied by this run */
	uint64_t bytes;        /* bytes copied by this run (records and files) */
	uint64_t mirror_bytes; /* what the mirror holds in all */
	double budget;         /* bytes the mirror could take (--max, free space less the reserve) */
	int full;              /* 1: the budget took the whole container (every file is copied) */
	int resumed;           /* 1: continued an earlier stage */
	const char *kind;      /* what the folder holds at the end: mirror_kind's words */
} stage_report;

/* Stages the container o->model into the folder o->dir (see docs/coli-plan.md). Fills *r and
 * returns 0, or -1 with e: COLI_EUSAGE for a refusal (a folder of another container without
 * --force, --max too small), else data or I/O; stopped by *o->stop: -1 once the records written
 * are synced and claimed and any temporary removed (r says what the folder holds). */
int stage_run(const stage_opts *o, stage_report *r, coli_err *e);

/* One bad record found by verify. */
typedef struct verify_bad {
	int layer, expert;
	uint64_t offset;
	uint32_t crc, want;    /* crc 0 with want 0: the read failed */
} verify_bad;

/* What the mirror folder dir of container c holds, the words stage and verify both print:
 * "full" (every record and every other file of the container: a container itself), "every
 * record, not the other files" (coli-run --mirror serves every read from it, it is no container),
 * or "partial" (held < the container's records). */
const char *mirror_kind(const coli_container *c, const char *dir, uint64_t held);

typedef struct verify_report {
	uint64_t n_records, held, checked, bytes;
	int partial;           /* the folder has a map claiming fewer than every record */
	const char *kind;      /* mirror_kind's words */
	int n_bad;             /* bad records (the first VERIFY_MAX_BAD kept) */
	verify_bad bad[16];
} verify_report;
#define VERIFY_MAX_BAD 16

/* Checks the mirror folder dir: its map (CRCs, identity against its manifest; none: a full
 * copy), its manifest byte-identical to model's when model is not NULL, and every record the
 * map claims against the manifest's CRC (O_DIRECT reads). Bad records go to r (not an error);
 * -1 with e for a folder that cannot be checked. */
int verify_run(const char *dir, const char *model, coli_progress_fn fn, void *ctx, verify_report *r, coli_err *e);

#endif
