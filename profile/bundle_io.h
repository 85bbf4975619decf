/* bundle_io.h: a datapoint bundle (formats/bundle.md) as a .tar.gz through libarchive: written
 * from files on disk with its manifest first, read back whole into memory (never extracted) and
 * checked member by member against the manifest. */
#ifndef COLI_PROFILE_BUNDLE_IO_H
#define COLI_PROFILE_BUNDLE_IO_H

#include <stddef.h>

#include "bundle.h"
#include "error.h"

#define PROF_BUNDLE_MAX_BYTES (4ull << 30) /* the members of a bundle read, summed */

typedef struct prof_member {
	char *name;
	unsigned char *data;       /* size bytes, then a NUL */
	size_t size;
} prof_member;

typedef struct prof_bundle {
	prof_member *m;            /* [n]: manifest.json first, then in archive order */
	int n;
	coli_bundle_manifest *man;
} prof_bundle;

/* Reads path: a gzip-compressed tar whose first member is manifest.json, whose other members are
 * exactly the manifest's files (regular files, sizes and SHA-256 as listed). Errors name the
 * bundle, the member and what is wrong ("truncated", "not in the manifest", "sha256 ..."). */
int prof_bundle_read(prof_bundle *b, const char *path, coli_err *e);

/* The member named name, NULL when there is none. */
const prof_member *prof_bundle_get(const prof_bundle *b, const char *name);

void prof_bundle_release(prof_bundle *b); /* b zeroed */

/* Writes the bundle out (via out.tmp, renamed when complete): m's files (name, bytes and sha256
 * filled here from paths[i] for m->files[i]) after manifest.json. */
int prof_bundle_write(const char *out, coli_bundle_manifest *m, const char *const *paths, coli_err *e);

#endif
