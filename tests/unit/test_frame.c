/* test_frame.c: the shared file header (frame.h): written and sealed, read back, and each rule
 * refused in its order, a short file by the bytes it holds. */
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "frame.h"
#include "le.h"
#include "t.h"

enum { HSIZE = 64 };

static const coli_frame two = {
	.kind = "coli test file",
	.foreign = "a file of another container",
	.magic = {0x89, 'C', 'O', 'L', 'I', 'T', 'T', '\n'},
	.header_size = HSIZE,
	.version_min = 1,
	.version = 2,
};

static uint8_t id[32], h[HSIZE];

/* A fresh sealed header, with header bytes at..at+3 then set to v (at < 0: none) and, if reseal,
 * the CRC made right again, so that only the rule under test fails. */
static void make(int at, uint32_t v, int reseal)
{
	coli_frame_put(&two, h, id);
	le_put32(h + 48, 7);
	coli_frame_seal(&two, h);
	if (at >= 0)
		le_put32(h + at, v);
	if (at >= 0 && reseal)
		coli_frame_seal(&two, h);
}

/* Checking h as a file of size bytes fails naming want (NULL: succeeds). */
static void expect(const char *name, const coli_frame *f, uint64_t size, const uint8_t *ident, const char *want)
{
	coli_err e = {0, ""};
	int rc = coli_frame_check(f, h, size, ident, "f.bin", &e);
	if (!want)
		T_CHECK(name, rc == 0, "rc %d: %s", rc, e.msg);
	else
		T_CHECK(name, rc == -1 && e.code == COLI_EDATA && strstr(e.msg, "f.bin: ") && strstr(e.msg, want),
			"rc %d code %d, message '%s' (want '%s')", rc, e.code, e.msg, want);
}

static void written(void)
{
	make(-1, 0, 0);
	T_CHECK("put: magic, version, header_size, identity, zeros, then the caller's fields",
		!memcmp(h, two.magic, 8) && le_get32(h + 8) == 2 && le_get32(h + 12) == HSIZE && !memcmp(h + 16, id, 32) &&
		le_get32(h + 48) == 7 && le_get32(h + 52) == 0, "version %u header_size %u", le_get32(h + 8),
		le_get32(h + 12));
	T_CHECK("seal: header_crc32 of the bytes before it, in the last 4", le_get32(h + 60) == crc32(0, h, 60),
		"0x%08x", le_get32(h + 60));
	expect("check: the header written reads back", &two, HSIZE, id, NULL);
	expect("check: a longer file (the payload follows)", &two, 1000, id, NULL);
	expect("check: no identity given: any is accepted", &two, HSIZE, NULL, NULL);
	make(8, 1, 1);
	expect("check: the oldest version is read", &two, HSIZE, id, NULL);
}

static void refused(void)
{
	uint8_t other[32];
	memcpy(other, id, 32), other[5] ^= 1;
	make(0, 0x12345678, 1);
	expect("magic", &two, HSIZE, id, "not a coli test file (bad magic)");
	make(8, 3, 1);
	expect("version above", &two, HSIZE, id, "version 3 unsupported (this reader knows 1 and 2)");
	make(8, 0, 1);
	expect("version below", &two, HSIZE, id, "version 0 unsupported");
	make(8, 9, 0);
	expect("version before the CRC: a later version may have moved it", &two, HSIZE, id, "version 9 unsupported");
	make(50, 1, 0);
	expect("header_crc32: names both values", &two, HSIZE, id, "header_crc32 0x");
	make(12, 128, 1);
	expect("header_size", &two, HSIZE, id, "header_size 128, expected 64");
	make(-1, 0, 0);
	expect("identity: the format's words", &two, HSIZE, other, "identity: a file of another container");
}

static void short_files(void)
{
	make(-1, 0, 0);
	expect("short: empty, truncated", &two, 0, id, "truncated: file size 0, shorter than the 64-byte header");
	expect("short: 5 bytes of the magic, truncated", &two, 5, id, "truncated: file size 5");
	expect("short: the version present and right, truncated", &two, 40, id, "truncated: file size 40");
	make(1, 0, 0);
	expect("short: 5 bytes that are not the magic, bad magic", &two, 5, id, "bad magic");
	make(8, 7, 0);
	expect("short: a wrong version, said before truncated", &two, 12, id, "version 7 unsupported");
}

static void versions(void)
{
	coli_frame one = two, three = two;
	one.version_min = one.version = 1;
	three.version = 3;
	make(8, 4, 1);
	expect("versions: one known", &one, HSIZE, id, "(this reader knows 1)");
	expect("versions: a range", &three, HSIZE, id, "(this reader knows 1 to 3)");
}

static void reserved(void)
{
	coli_err e = {0, ""};
	make(-1, 0, 0);
	T_CHECK("reserved: zero bytes pass", coli_frame_reserved(h, 52, 60, "f.bin", &e) == 0, "%s", e.msg);
	h[57] = 4;
	int rc = coli_frame_reserved(h, 52, 60, "f.bin", &e);
	T_CHECK("reserved: the first non-zero byte named", rc == -1 && e.code == COLI_EDATA &&
		strstr(e.msg, "f.bin: reserved byte 57 is 4, must be 0"), "rc %d '%s'", rc, e.msg);
	T_CHECK("reserved: [from, to) only", coli_frame_reserved(h, 52, 57, "f.bin", &e) == 0, "%s", e.msg);
}

int main(void)
{
	for (int i = 0; i < 32; i++)
		id[i] = (uint8_t)(3 * i + 1);
	written();
	refused();
	short_files();
	versions();
	reserved();
	T_EXIT();
}
