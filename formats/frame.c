/* frame.c: the fixed header of the files tied to a container, written and checked once (frame.h). */
#include "frame.h"

#include <stdio.h>
#include <string.h>

#include "crc32.h"
#include "le.h"

void coli_frame_put(const coli_frame *f, uint8_t *h, const uint8_t identity[32])
{
	memset(h, 0, f->header_size);
	memcpy(h, f->magic, 8);
	le_put32(h + 8, f->version);
	le_put32(h + 12, f->header_size);
	memcpy(h + 16, identity, 32);
}

void coli_frame_seal(const coli_frame *f, uint8_t *h)
{
	le_put32(h + f->header_size - 4, coli_crc32(0, h, f->header_size - 4));
}

/* "1", "1 and 2", "1 to 3": the versions f's reader knows. */
static const char *versions(char *buf, size_t n, const coli_frame *f)
{
	uint32_t lo = f->version_min, hi = f->version;
	if (lo == hi)
		snprintf(buf, n, "%u", hi);
	else
		snprintf(buf, n, "%u%s%u", lo, hi == lo + 1 ? " and " : " to ", hi);
	return buf;
}

/* Magic and version, on the bytes present: a short file is truncated only if they are right. */
static int check_start(const coli_frame *f, const uint8_t *h, uint64_t size, const char *path, coli_err *e)
{
	char known[32];
	uint32_t v = size >= 12 ? le_get32(h + 8) : 0; /* bytes past size may be unset */
	if (memcmp(h, f->magic, size < 8 ? (size_t)size : 8) != 0)
		return coli_errf(e, COLI_EDATA, "%s: not a %s (bad magic)", path, f->kind);
	if (size >= 12 && (v < f->version_min || v > f->version))
		return coli_errf(e, COLI_EDATA, "%s: version %u unsupported (this reader knows %s)", path, v,
				 versions(known, sizeof(known), f));
	if (size < f->header_size)
		return coli_errf(e, COLI_EDATA, "%s: truncated: file size %llu, shorter than the %u-byte header", path,
				 (unsigned long long)size, f->header_size);
	return 0;
}

int coli_frame_check(const coli_frame *f, const uint8_t *h, uint64_t size, const uint8_t *identity, const char *path,
		     coli_err *e)
{
	uint32_t at = f->header_size - 4, crc;
	if (check_start(f, h, size, path, e) < 0)
		return -1;
	if ((crc = coli_crc32(0, h, at)) != le_get32(h + at))
		return coli_errf(e, COLI_EDATA, "%s: header_crc32 0x%08x, the header hashes to 0x%08x (torn or corrupt header)",
				 path, le_get32(h + at), crc);
	if (le_get32(h + 12) != f->header_size)
		return coli_errf(e, COLI_EDATA, "%s: header_size %u, expected %u", path, le_get32(h + 12), f->header_size);
	if (identity && memcmp(h + 16, identity, 32) != 0)
		return coli_errf(e, COLI_EDATA, "%s: identity: %s", path, f->foreign);
	return 0;
}

int coli_frame_reserved(const uint8_t *h, int from, int to, const char *path, coli_err *e)
{
	for (int i = from; i < to; i++)
		if (h[i])
			return coli_errf(e, COLI_EDATA, "%s: reserved byte %d is %u, must be 0", path, i, h[i]);
	return 0;
}
