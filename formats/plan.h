/* plan.h: plan.json, what coli-plan decided for one container on one machine and what coli-run
 * --plan executes (spec: formats/plan.md).
 *
 *   {"format": "coli-plan", "version": 1,
 *    "container": {"path", "identity",           the container's identity hash (hex)
 *                  "described": {...}},          made from a checkpoint: its folder and bits
 *    "machine": {"cpu_model", "physical_cores", "logical_cpus",
 *                "disks": [{"dir", "dev", "major", "minor", "identity"}]},
 *    "knobs": {"ram": 5, "cache-slots": "24,24,...", ...},   coli-run options, by long name
 *    "predicted": {"hit_rate", "warm": {...}, "cold": {...}},  tokens/s and their breakdown
 *    "layers": [...], "disks": [...], "decisions": [...], "warnings": [...]}  what and why
 *
 * The reader validates the fields coli-run acts on (format, version, identity, machine, knobs,
 * predicted, disks[].bps) and the types of the rest; the knobs' values are checked by coli-run's own option
 * table, as if given on its command line. */
#ifndef COLI_PLAN_H
#define COLI_PLAN_H

#include <stddef.h>

#include "error.h"

#define COLI_PLAN_VERSION 1
#define COLI_PLAN_MAX_DISKS 8
#define COLI_PLAN_MAX_KNOBS 32

/* The coli-run options a plan may set, by long name, NULL-terminated: every one is an option of
 * coli-run (a test compares the two tables). */
extern const char *const coli_plan_knobs[];

/* One knob as coli-run's command line would give it: --name value. */
typedef struct coli_plan_knob {
	const char *name;         /* one of coli_plan_knobs */
	char *value;              /* the argument text: a number, a word, a list, a folder */
} coli_plan_knob;

/* A predicted decode speed and where its time goes, seconds per token. */
typedef struct coli_plan_speed {
	double tok_s;
	double disk_s, experts_s, attention_s, other_s;
} coli_plan_speed;

/* A folder the plan reads from and the device it was on (as formats/probe.h identifies it). */
typedef struct coli_plan_disk {
	char dir[4096];
	char dev[32];
	unsigned major, minor;
	char identity[256];
} coli_plan_disk;

typedef struct coli_plan {
	int version;
	char identity[65];        /* hex */
	char checkpoint[4096];    /* made from a checkpoint (container.described): its folder; else "" */
	int bits[3];              /* then the expert, dense and MTP bits it was described with */
	char cpu_model[256];
	int physical_cores, logical_cpus;
	coli_plan_disk disks[COLI_PLAN_MAX_DISKS];
	int n_disks;
	coli_plan_knob knobs[COLI_PLAN_MAX_KNOBS];
	int n_knobs;
	double hit_rate;          /* predicted warm expert cache hit rate, 0..1 */
	coli_plan_speed warm, cold;
	double copy_bps[COLI_PLAN_MAX_DISKS]; /* disks[].bps: each copy's sustained rate (bytes/s), the
					       * model's then each mirror's: where coli-run's shares
					       * of the reads start */
	int n_copies;
} coli_plan;

/* Reads and validates path into *p (knob values malloc'd: coli_plan_release). Errors name the
 * file and the field: "plan.json: knobs.frob: not an option coli-run takes". */
int coli_plan_read(const char *path, coli_plan *p, coli_err *e);

/* The same from text[0..len) (path names it in errors). */
int coli_plan_parse(const char *text, size_t len, const char *path, coli_plan *p, coli_err *e);

/* Frees the knob values; p zeroed. */
void coli_plan_release(coli_plan *p);

/* The index of name in coli_plan_knobs, -1 when it is not a knob. */
int coli_plan_knob_index(const char *name);

#endif
