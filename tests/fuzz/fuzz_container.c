/* fuzz_container.c: a container's manifest.coli (64-byte header + JSON manifest) through
 * coli_container_open, as it is and with its length and CRCs made right. */
#include "container.h"
#include "fuzz.h"

/* The folder holds only manifest.coli: a manifest that passes every check fails at the first
 * section file, after the whole manifest has been read. */
static void open_manifest(const uint8_t *data, size_t size, void *ctx)
{
	(void)ctx;
	coli_container *c = NULL;
	coli_err e;
	if (fuzz_write(COLI_MANIFEST_FILE, data, size, 0))
		coli_container_open(&c, fuzz_dir(), &e);
	coli_container_close(c);
}

/* json_len (32), the JSON's CRC32 (40) and the header's (60). */
static int fix_header(uint8_t *b, size_t size)
{
	if (size < COLI_MANIFEST_HEADER)
		return -1;
	fuzz_put64(b + 32, size - COLI_MANIFEST_HEADER);
	fuzz_put_crc(b + 40, b + COLI_MANIFEST_HEADER, size - COLI_MANIFEST_HEADER);
	fuzz_put_crc(b + 60, b, 60);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_raw_and_fixed(data, size, fix_header, open_manifest, NULL);
	return 0;
}
