/* bundle.h: the manifest of a coli datapoint bundle (spec: formats/bundle.md), the JSON object that
 * names every other file of the bundle with its size and SHA-256, the runs made, the headline.
 *
 *   {"format": "coli-bundle", "version": 1, "created": unix seconds,
 *    "coli_version": "...", "git_commit": "..." | "unknown",
 *    "model": {"path": "...", "identity": "64 hex"},
 *    "headline": {"run": "rotate-2", "tokens_per_s": 12.5},
 *    "runs": [{"name", "kind": "cold"|"warm"|"rotate", "trace", "json", "tokens_per_s"}],
 *    "files": [{"name", "bytes", "sha256"}]}
 *
 * The bundle reader (coli-profile's, which owns the archive) checks the members against it; this
 * parses and checks the manifest alone: types, ranges, names (relative, no "..", unique), every
 * run's files listed, the headline a run. Never prints. */
#ifndef COLI_BUNDLE_H
#define COLI_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define COLI_BUNDLE_VERSION 1
#define COLI_BUNDLE_MAX_FILES 256
#define COLI_BUNDLE_MAX_RUNS 64
#define COLI_BUNDLE_MAX_NAME 200   /* bytes of a member name */

enum { COLI_BUNDLE_COLD, COLI_BUNDLE_WARM, COLI_BUNDLE_ROTATE };

typedef struct coli_bundle_file {
	char name[COLI_BUNDLE_MAX_NAME + 1];
	uint64_t bytes;
	char sha256[65];           /* lowercase hex */
} coli_bundle_file;

typedef struct coli_bundle_run {
	char name[64];
	int kind;                  /* COLI_BUNDLE_* */
	char trace[COLI_BUNDLE_MAX_NAME + 1], json[COLI_BUNDLE_MAX_NAME + 1]; /* member names */
	double tokens_per_s;       /* decode tokens/s of the run (its --json) */
} coli_bundle_run;

typedef struct coli_bundle_manifest {
	int version;
	double created;
	char coli_version[64], git_commit[64];
	char model[4096];
	char identity[65];
	char headline[COLI_BUNDLE_MAX_NAME + 1]; /* the headline run's trace (member name) */
	char headline_run[64];
	double headline_tok_s;     /* the median of the rotating runs */
	coli_bundle_run runs[COLI_BUNDLE_MAX_RUNS];
	int n_runs;
	coli_bundle_file files[COLI_BUNDLE_MAX_FILES];
	int n_files;
} coli_bundle_manifest;

/* Parses and checks text[0..len); name stands for the manifest in errors ("x.tar.gz:manifest.json:
 * runs[2].trace: 'a/../b' is not a member name"). *m is filled only on success. */
int coli_bundle_manifest_parse(const char *text, size_t len, const char *name, coli_bundle_manifest *m,
			       coli_err *e);

/* m as JSON text (indented), malloc'd (caller frees); NULL with e when m does not check or memory is
 * short. */
char *coli_bundle_manifest_json(const coli_bundle_manifest *m, coli_err *e);

/* 1 when name is a valid member name: 1..COLI_BUNDLE_MAX_NAME bytes of [A-Za-z0-9._-] in '/'-
 * separated parts, none empty, "." or "..". */
int coli_bundle_name_ok(const char *name);

/* The file entry named name, NULL when the manifest lists none. */
const coli_bundle_file *coli_bundle_file_of(const coli_bundle_manifest *m, const char *name);

#endif
