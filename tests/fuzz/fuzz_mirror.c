/* fuzz_mirror.c: a mirror.coli record map through coli_mirror_map_read, as it is and with its
 * CRCs made right; the identity and record count expected are the ones the file claims. A map
 * the reader accepts must hold what formats/mirror.md promises: held equal to the bits set, none
 * past n_records. */
#include <stdlib.h>

#include "fuzz.h"
#include "mirrormap.h"

static int fix_crcs(uint8_t *b, size_t size)
{
	if (size < COLI_MIRROR_HEADER)
		return -1;
	fuzz_put_crc(b + 56, b + COLI_MIRROR_HEADER, size - COLI_MIRROR_HEADER);
	fuzz_put_crc(b + 60, b, 60);
	return 0;
}

static void read_map(const uint8_t *data, size_t size, void *ctx)
{
	(void)ctx;
	uint8_t id[32] = {0};
	uint64_t n = 0;
	const char *path = fuzz_write("mirror.coli", data, size, 0);
	for (size_t i = 0; i < 32 && 16 + i < size; i++)
		id[i] = data[16 + i];
	for (size_t i = 0; i < 4 && 48 + i < size; i++)
		n |= (uint64_t)data[48 + i] << (8 * i);
	coli_mirror_map m;
	coli_err e;
	if (!path || coli_mirror_map_read(path, id, n, &m, &e) < 0)
		return;
	uint32_t k = 0;
	for (uint64_t r = 0; r < (uint64_t)m.n_records + 8; r++)
		k += (uint32_t)coli_mirror_has(&m, r);
	for (uint64_t r = m.n_records; r < ((uint64_t)m.n_records + 7) / 8 * 8; r++)
		if (m.bits[r >> 3] >> (r & 7) & 1)
			abort();
	if (k != m.held || m.n_records == 0 || m.n_records > COLI_MIRROR_MAX_RECORDS)
		abort();
	coli_mirror_map_release(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_raw_and_fixed(data, size, fix_crcs, read_map, NULL);
	return 0;
}
