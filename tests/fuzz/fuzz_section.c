/* fuzz_section.c: the 4096-byte header of dense.bin / mtp.bin / experts.bin through
 * coli_section_header_check, for each section kind, as it is and with its CRC made right; the
 * identity expected is the one the header claims. A header the check accepts must be what
 * formats/container.md describes: the magic, this version, the kind asked, reserved bytes zero. */
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "fuzz.h"

static int fix_crc(uint8_t *h, size_t size)
{
	if (size != COLI_SECTION_HEADER)
		return -1;
	fuzz_put_crc(h + COLI_SECTION_HEADER - 4, h, COLI_SECTION_HEADER - 4);
	return 0;
}

static void check(const uint8_t *h, size_t size, void *ctx)
{
	(void)ctx, (void)size;
	for (int s = 0; s < COLI_SEC_COUNT; s++) {
		coli_err e;
		if (coli_section_header_check(h, (coli_section)s, h + 16, "fuzz.bin", &e) < 0)
			continue;
		if (memcmp(h, coli_magic, 8) != 0 || h[8] != COLI_CONTAINER_VERSION || h[12] != s + 1)
			abort();
		for (size_t i = 48; i < COLI_SECTION_HEADER - 4; i++)
			if (h[i])
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *h = calloc(1, COLI_SECTION_HEADER);
	if (!h)
		return 0;
	memcpy(h, data, size < COLI_SECTION_HEADER ? size : COLI_SECTION_HEADER);
	fuzz_raw_and_fixed(h, COLI_SECTION_HEADER, fix_crc, check, NULL);
	free(h);
	return 0;
}
