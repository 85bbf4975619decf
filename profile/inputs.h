/* inputs.h: what a report is made from: a trace, and the probe and plan of its run when given;
 * from a .coli_trace and files, or all from a datapoint bundle (read in memory, never
 * extracted). */
#ifndef COLI_PROFILE_INPUTS_H
#define COLI_PROFILE_INPUTS_H

#include <jansson.h>

#include "error.h"
#include "plan.h"
#include "probe.h"
#include "tracesum.h"

typedef struct prof_inputs {
	const char *path;        /* the trace or the bundle as given */
	int is_bundle;
	prof_trace trace;        /* the trace (a bundle's headline trace) */
	coli_probe *probe;       /* NULL: none */
	coli_plan *plan;         /* NULL: none */
	json_t *manifest;        /* a bundle's manifest.json, else NULL */
	json_t *env;             /* a bundle's env.json, else NULL */
} prof_inputs;

/* Opens path (a bundle when it starts like gzip, else a trace), then probe and plan (NULL: from
 * the bundle when it has them, else none). Errors name the file and what is wrong with it. */
int prof_inputs_open(prof_inputs *in, const char *path, const char *probe, const char *plan, coli_err *e);
void prof_inputs_release(prof_inputs *in);

#endif
