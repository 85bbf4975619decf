/* manifest.h: the JSON manifest of a container, and its binary header (libcoli-internal). */
#ifndef COLI_MANIFEST_H
#define COLI_MANIFEST_H

#include <stdint.h>

#include "container.h"

/* Reads DIR/manifest.coli into c (c->dir set): header, JSON, geometry, identity. */
int coli_manifest_read(coli_container *c, coli_err *e);

void coli_manifest_header(uint8_t out[COLI_MANIFEST_HEADER], const char *json, size_t len);
int coli_manifest_header_check(const uint8_t h[COLI_MANIFEST_HEADER], uint64_t file_size,
			       const char *what, uint64_t *json_len, coli_err *e);
/* Reads carried file f of the container in dir whole and checks its size and CRC32. */
int coli_carried_check(const char *dir, const coli_carried *f, coli_err *e);

uint32_t coli_manifest_header_crc(const uint8_t h[COLI_MANIFEST_HEADER]);

#endif
