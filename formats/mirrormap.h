/* mirrormap.h: mirror.coli, the record map of a mirror of a container: which expert records
 * its experts.bin holds (spec: formats/mirror.md). coli-plan mirror stage writes it, coli-run
 * and coli-plan mirror verify read it; a mirror folder without one is a full copy.
 *
 *   64-byte header: magic "\x89COLIMR\n", version, header_size, identity (the container's),
 *                   n_records, held (bits set), bitmap_crc32, header_crc32
 *   bitmap          ceil(n_records / 8) bytes: record r held iff bit (r % 8) of byte r / 8;
 *                   bits past n_records zero
 *
 * Records are numbered as the manifest lists them: layer by layer (main, then MTP), experts
 * ascending. Written to a temporary name, fsynced and renamed; readers check every field, both
 * CRCs and the popcount before use. */
#ifndef COLI_MIRRORMAP_H
#define COLI_MIRRORMAP_H

#include <stdint.h>

#include "container.h"
#include "error.h"

#define COLI_MIRROR_FILE "mirror.coli"
#define COLI_MIRROR_VERSION 1u
#define COLI_MIRROR_HEADER 64u
#define COLI_MIRROR_MAX_RECORDS (1u << 30)

typedef struct coli_mirror_map {
	uint8_t identity[32];     /* the container's identity hash */
	uint32_t n_records;       /* expert records of the container */
	uint32_t held;            /* records held: the bits set */
	uint8_t *bits;            /* [ceil(n_records / 8)]; release with coli_mirror_map_release */
} coli_mirror_map;

/* An empty map (no record held) for a container of n_records records. */
int coli_mirror_map_init(coli_mirror_map *m, const uint8_t identity[32], uint64_t n_records, coli_err *e);

/* Reads path. identity: the container's (a map of another is refused), or NULL to accept any
 * (the caller compares m->identity itself); n_records: the container's count, or 0 for any.
 * Refuses a torn or corrupt file (CRCs, size), another version, held disagreeing with the
 * bitmap, bits set past n_records. Allocates bits (release with coli_mirror_map_release). */
int coli_mirror_map_read(const char *path, const uint8_t identity[32], uint64_t n_records, coli_mirror_map *m,
			 coli_err *e);

/* Writes m to path atomically (path.tmp, fsync, rename, fsync of the folder). */
int coli_mirror_map_write(const char *path, const coli_mirror_map *m, coli_err *e);

static inline int coli_mirror_has(const coli_mirror_map *m, uint64_t r)
{
	return r < m->n_records && (m->bits[r >> 3] >> (r & 7) & 1);
}

/* Marks record r held (r < n_records); held counts it once. */
void coli_mirror_set(coli_mirror_map *m, uint64_t r);

void coli_mirror_map_release(coli_mirror_map *m); /* accepts a zeroed or released map */

/* The expert records of container c: how many (main and MTP layers). */
uint64_t coli_mirror_records(const coli_container *c);

#endif
