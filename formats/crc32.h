/* crc32.h: zlib's CRC-32 (the polynomial of gzip and PNG, 0x04C11DB7 reflected), folded with
 * carry-less multiplies where the CPU has them: the same values as zlib's crc32_z, several times
 * faster on large buffers (the streamed expert records, dense.bin's tensors). */
#ifndef COLI_CRC32_H
#define COLI_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* One implementation: crc32_z's contract (crc: the CRC of what came before, 0 to start). */
typedef uint32_t (*coli_crc32_fn)(uint32_t crc, const void *buf, size_t len);

/* The CRC of buf's len bytes after crc, by the fastest variant this CPU runs. Thread-safe. */
uint32_t coli_crc32(uint32_t crc, const void *buf, size_t len);

/* The variant called name: "zlib" (table-driven, every CPU), "pclmul" (128-bit carry-less
 * multiplies: x86-64 with PCLMULQDQ), "vpclmul" (512-bit: AVX-512 with VPCLMULQDQ); NULL when
 * the name is unknown or this CPU cannot run it. For tests and benchmarks. */
coli_crc32_fn coli_crc32_variant(const char *name);

/* The name of the variant coli_crc32 uses. */
const char *coli_crc32_name(void);

#endif
