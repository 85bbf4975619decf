/* frame.h: the fixed header that opens each file tied to a container (.coli_kv, .coli_usage,
 * .coli_trace, mirror.coli), written and checked once for all of them.
 *
 * Layout, little-endian (each format's spec gives the rest of its header):
 *   0   8  magic        the format's, "\x89COLI..\n"
 *   8   4  version
 *   12  4  header_size  the whole header's bytes (the format's fixed size)
 *   16  32 identity     the container's identity hash
 *   ..     the format's own fields
 *   header_size - 4  4  header_crc32  CRC32 of the bytes before it: the header's last 4 bytes
 *
 * A reader checks, in this order, and refuses (COLI_EDATA) at the first failure:
 *   magic, over the bytes present (fewer than 8 in a short file)  PATH: not a KIND (bad magic)
 *   version, as soon as its bytes are present: a later version may move every later field
 *                                     PATH: version 3 unsupported (this reader knows 1 and 2)
 *   the whole header present          PATH: truncated: file size 60, shorter than the 128-byte header
 *   header_crc32                      PATH: header_crc32 0x..., the header hashes to 0x... (torn or corrupt header)
 *   header_size                       PATH: header_size 64, expected 128
 *   identity, when the caller gives one  PATH: identity: FOREIGN */
#ifndef COLI_FRAME_H
#define COLI_FRAME_H

#include <stdint.h>

#include "error.h"

typedef struct coli_frame {
	const char *kind;        /* the file kind in messages: "coli KV session" */
	const char *foreign;     /* what a file of another identity is: "a session of another model ...";
				  * NULL for a format whose reader is never given an identity */
	uint8_t magic[8];
	uint32_t header_size;    /* bytes, and the value of the header_size field */
	uint32_t version_min;    /* the oldest version a reader reads */
	uint32_t version;        /* the newest: the one a writer writes */
} coli_frame;

/* Zeroes h's header_size bytes and writes magic, version, header_size and identity; the caller
 * then fills its own fields and seals the header. */
void coli_frame_put(const coli_frame *f, uint8_t *h, const uint8_t identity[32]);

/* Writes header_crc32 over the bytes before it: the last step of writing a header. */
void coli_frame_seal(const coli_frame *f, uint8_t *h);

/* The checks above on h, the file's first header_size bytes, or all of a shorter file. size: the
 * file's size, or, for a streaming reader, the bytes it got (fewer than header_size only where
 * its input ended); no byte of h at or past size is read. identity: the container's, or NULL
 * when the caller has none (any is accepted). */
int coli_frame_check(const coli_frame *f, const uint8_t *h, uint64_t size, const uint8_t *identity, const char *path,
		     coli_err *e);

/* Header bytes [from, to) must be zero: PATH: reserved byte 61 is 1, must be 0. */
int coli_frame_reserved(const uint8_t *h, int from, int to, const char *path, coli_err *e);

#endif
