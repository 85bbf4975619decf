/* sha256.h: SHA-256 (FIPS 180-4), for model identity hashes. */
#ifndef COLI_SHA256_H
#define COLI_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct coli_sha256 {
	uint32_t h[8];
	uint64_t len;      /* bytes hashed so far */
	uint8_t buf[64];
	size_t nbuf;
} coli_sha256;

void coli_sha256_init(coli_sha256 *s);
void coli_sha256_update(coli_sha256 *s, const void *data, size_t n);
void coli_sha256_final(coli_sha256 *s, uint8_t out[32]);

/* Lowercase hex of 32 bytes into out[65]. */
void coli_hex32(const uint8_t in[32], char out[65]);

#endif
