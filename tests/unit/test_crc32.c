/* test_crc32.c: every CRC-32 variant this CPU runs against zlib's crc32_z: every length 0..1100
 * (around each variant's block sizes), every start misalignment, chained calls, a 19 MiB
 * record-sized buffer, and the all-zero and all-one patterns. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "crc32.h"
#include "t.h"

#define BIG (19u << 20)

/* The first length (or -1) at which fn differs from zlib over buf at offsets 0..63. */
static long first_bad(coli_crc32_fn fn, const uint8_t *buf, size_t max_len)
{
	for (size_t off = 0; off < 64; off++)
		for (size_t n = 0; n <= max_len; n++)
			if (fn(0, buf + off, n) != (uint32_t)crc32_z(0, buf + off, n))
				return (long)(off << 16 | n);
	return -1;
}

static void check_variant(const char *name, const uint8_t *big)
{
	char what[128];
	coli_crc32_fn fn = coli_crc32_variant(name);
	if (!fn) {
		printf("SKIP %s: this CPU lacks it\n", name);
		return;
	}
	long bad = first_bad(fn, big, 1100);
	snprintf(what, sizeof(what), "%s: lengths 0..1100 at offsets 0..63 equal zlib's", name);
	T_CHECK(what, bad < 0, "offset %ld, length %ld", bad >> 16, bad & 0xffff);

	uint32_t want = (uint32_t)crc32_z(0, big, BIG), got = fn(0, big, BIG);
	snprintf(what, sizeof(what), "%s: a 19 MiB buffer equals zlib's", name);
	T_CHECK(what, got == want, "0x%08x, zlib 0x%08x", got, want);

	uint32_t c = 0;
	size_t at = 0;
	for (size_t step = 1; at < BIG; at += step, step = step * 3 + 7)
		c = fn(c, big + at, (at + step < BIG ? step : BIG - at));
	snprintf(what, sizeof(what), "%s: chained over uneven pieces equals one call", name);
	T_CHECK(what, c == want, "0x%08x, one call 0x%08x", c, want);

	static uint8_t zeros[4096], ones[4096];
	memset(ones, 0xff, sizeof(ones));
	snprintf(what, sizeof(what), "%s: all-zero and all-one pages equal zlib's", name);
	T_CHECK(what, fn(0, zeros, 4096) == (uint32_t)crc32_z(0, zeros, 4096) &&
			      fn(0x12345678u, ones, 4096) == (uint32_t)crc32_z(0x12345678u, ones, 4096),
		"differs");
}

int main(void)
{
	uint8_t *big = malloc(BIG + 64);
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < BIG + 64; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		big[i] = (uint8_t)(s >> 24);
	}
	check_variant("zlib", big);
	check_variant("pclmul", big);
	check_variant("vpclmul", big);
	T_CHECK("an unknown variant is NULL", coli_crc32_variant("sse9") == NULL, "not NULL");
	T_CHECK("coli_crc32 uses a variant this CPU runs", coli_crc32_variant(coli_crc32_name()) != NULL, "%s",
		coli_crc32_name());
	T_CHECK("coli_crc32 equals zlib", coli_crc32(7, big, 12345) == (uint32_t)crc32_z(7, big, 12345), "differs");
	free(big);
	T_EXIT();
}
