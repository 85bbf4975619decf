/* mirrormap.c: writing and validating mirror.coli, the record map of a partial mirror. */
#include "crc32.h"
#include "mirrormap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "frame.h"
#include "le.h"
#include "manifest.h"

static const coli_frame map_frame = {
	.kind = "coli mirror map",
	.foreign = "the map of a mirror of another container",
	.magic = {0x89, 'C', 'O', 'L', 'I', 'M', 'R', '\n'},
	.header_size = COLI_MIRROR_HEADER,
	.version_min = COLI_MIRROR_VERSION,
	.version = COLI_MIRROR_VERSION,
};

static size_t bitmap_bytes(uint64_t n)
{
	return (size_t)((n + 7) / 8);
}

static uint32_t popcount(const uint8_t *b, size_t n)
{
	uint32_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += (uint32_t)__builtin_popcount(b[i]);
	return k;
}

int coli_mirror_map_init(coli_mirror_map *m, const uint8_t identity[32], uint64_t n_records, coli_err *e)
{
	memset(m, 0, sizeof(*m));
	if (n_records == 0 || n_records > COLI_MIRROR_MAX_RECORDS)
		return coli_errf(e, COLI_EUSAGE, "mirror map: %llu records out of range [1, %u]",
				 (unsigned long long)n_records, COLI_MIRROR_MAX_RECORDS);
	memcpy(m->identity, identity, 32);
	m->n_records = (uint32_t)n_records;
	m->bits = coli_calloc(bitmap_bytes(n_records), 1, e);
	return m->bits ? 0 : -1;
}

void coli_mirror_set(coli_mirror_map *m, uint64_t r)
{
	if (r >= m->n_records || coli_mirror_has(m, r))
		return;
	m->bits[r >> 3] |= (uint8_t)(1u << (r & 7));
	m->held++;
}

void coli_mirror_map_release(coli_mirror_map *m)
{
	free(m->bits);
	memset(m, 0, sizeof(*m));
}

int coli_mirror_map_write(const char *path, const coli_mirror_map *m, coli_err *e)
{
	size_t nb = bitmap_bytes(m->n_records);
	uint8_t *buf = coli_malloc(COLI_MIRROR_HEADER + nb, e), *h = buf;
	if (!buf)
		return -1;
	coli_frame_put(&map_frame, h, m->identity);
	le_put32(h + 48, m->n_records);
	le_put32(h + 52, m->held);
	memcpy(buf + COLI_MIRROR_HEADER, m->bits, nb);
	le_put32(h + 56, coli_crc32(0, buf + COLI_MIRROR_HEADER, nb));
	coli_frame_seal(&map_frame, h);
	int rc = coli_write_atomic(path, buf, COLI_MIRROR_HEADER + nb, e);
	free(buf);
	return rc;
}

/* The header's checks, in the spec's order; fills m's identity and counts. */
static int check_header(const uint8_t *h, uint64_t size, const uint8_t identity[32], uint64_t n_records,
			const char *path, coli_mirror_map *m, coli_err *e)
{
	if (coli_frame_check(&map_frame, h, size, identity, path, e) < 0)
		return -1;
	uint32_t n = le_get32(h + 48), held = le_get32(h + 52);
	if (n == 0 || n > COLI_MIRROR_MAX_RECORDS)
		return coli_errf(e, COLI_EDATA, "%s: n_records %u out of range [1, %u]", path, n, COLI_MIRROR_MAX_RECORDS);
	if (n_records && n != n_records)
		return coli_errf(e, COLI_EDATA, "%s: n_records %u, the container has %llu expert records", path, n,
				 (unsigned long long)n_records);
	if (held > n)
		return coli_errf(e, COLI_EDATA, "%s: held %u exceeds n_records %u", path, held, n);
	if (size != COLI_MIRROR_HEADER + bitmap_bytes(n))
		return coli_errf(e, COLI_EDATA, "%s: file size %llu, n_records %u implies %zu", path, (unsigned long long)size,
				 n, COLI_MIRROR_HEADER + bitmap_bytes(n));
	memcpy(m->identity, h + 16, 32);
	m->n_records = n, m->held = held;
	return 0;
}

/* The bitmap's checks: its CRC, no bit past n_records, its popcount equal to held. */
static int check_bitmap(const coli_mirror_map *m, uint32_t want, const char *path, coli_err *e)
{
	size_t nb = bitmap_bytes(m->n_records);
	uint32_t crc = coli_crc32(0, m->bits, nb);
	if (crc != want)
		return coli_errf(e, COLI_EDATA, "%s: bitmap crc32 0x%08x, bitmap_crc32 says 0x%08x (corrupt mirror map)", path,
				 (unsigned)crc, (unsigned)want);
	unsigned tail = m->n_records & 7;
	if (tail && m->bits[nb - 1] >> tail)
		return coli_errf(e, COLI_EDATA, "%s: bitmap: a bit past n_records %u is set (byte %zu is 0x%02x), must be 0", path,
				 m->n_records, COLI_MIRROR_HEADER + nb - 1, m->bits[nb - 1]);
	uint32_t k = popcount(m->bits, nb);
	if (k != m->held)
		return coli_errf(e, COLI_EDATA, "%s: held %u, the bitmap has %u bits set", path, m->held, k);
	return 0;
}

int coli_mirror_map_read(const char *path, const uint8_t identity[32], uint64_t n_records, coli_mirror_map *m,
			 coli_err *e)
{
	uint8_t h[COLI_MIRROR_HEADER];
	uint64_t size = 0;
	int fd = -1;
	memset(m, 0, sizeof(*m));
	if (coli_open_header(path, h, sizeof(h), &fd, &size, e) < 0)
		return -1;
	int rc = check_header(h, size, identity, n_records, path, m, e);
	size_t nb = rc == 0 ? bitmap_bytes(m->n_records) : 0;
	if (rc == 0 && !(m->bits = coli_malloc(nb, e)))
		rc = -1;
	if (rc == 0)
		rc = coli_pread_full(fd, m->bits, nb, COLI_MIRROR_HEADER, path, e);
	if (rc == 0)
		rc = check_bitmap(m, le_get32(h + 56), path, e);
	close(fd);
	if (rc < 0)
		coli_mirror_map_release(m);
	return rc;
}

uint64_t coli_mirror_records(const coli_container *c)
{
	uint64_t n = 0;
	for (int i = 0; i < c->layout.n_elayers; i++)
		n += (uint64_t)c->layout.elayers[i].n_experts;
	return n;
}
