/* test_kvfile.c: .coli_kv round trip, and one corrupt file per reader rule (formats/kv.md). */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "kvfile.h"
#include "le.h"
#include "t.h"

#define VOCAB 100
static char path[256];
static const uint8_t id[32] = {1, 2, 3};

/* A session of 2 layers, widths 3 and 2, 4 tokens of which 3 cached; bad values on request. */
static int write_session(int32_t token0, float k0)
{
	int32_t tokens[4] = {token0, 5, 6, 7};
	float k[2][9], v[2][6], *kp[2] = {k[0], k[1]}, *vp[2] = {v[0], v[1]};
	for (int i = 0; i < 9; i++)
		k[0][i] = k[1][i] = 0.5f * (float)i;
	for (int i = 0; i < 6; i++)
		v[0][i] = v[1][i] = -0.25f * (float)i;
	k[1][4] = k0;
	coli_kvfile f = {.n_layers = 2, .k_width = 3, .v_width = 2, .n_tokens = 4, .n_cached = 3,
			 .tokens = tokens, .k = kp, .v = vp};
	memcpy(f.identity, id, 32);
	coli_err e = {0, ""};
	return coli_kvfile_write(path, &f, &e);
}

/* Sets header byte `at` to v and recomputes the header CRC: only the rule under test fails. */
static void patch_header(int at, uint8_t v)
{
	uint8_t h[128];
	int fd = open(path, O_RDWR);
	if (fd >= 0 && pread(fd, h, 128, 0) == 128) {
		h[at] = v;
		le_put32(h + 124, (uint32_t)crc32(0, h, 124));
		(void)!pwrite(fd, h, 128, 0);
	}
	if (fd >= 0)
		close(fd);
}

static void refused(const char *name, const char *want1, const char *want2)
{
	coli_kvfile f;
	coli_err e = {0, ""};
	int rc = coli_kvfile_load(path, id, VOCAB, &f, &e);
	T_CHECK(name, rc == -1 && e.code == COLI_EDATA && strstr(e.msg, path) && strstr(e.msg, want1) &&
		(!want2 || strstr(e.msg, want2)), "rc %d code %d msg '%s' (want '%s')", rc, e.code, e.msg, want1);
	if (rc == 0)
		coli_kvfile_release(&f);
}

int main(void)
{
	snprintf(path, sizeof(path), "/tmp/coli-test-kvfile-%d.coli_kv", (int)getpid());
	coli_kvfile f;
	coli_err e = {0, ""};
	int rc = write_session(4, 2.0f) || coli_kvfile_load(path, id, VOCAB, &f, &e);
	T_CHECK("kvfile: round trip", rc == 0 && f.n_tokens == 4 && f.n_cached == 3 && f.tokens[0] == 4 &&
		f.k[1][4] == 2.0f && f.v[1][5] == -1.25f, "rc %d '%s'", rc, e.msg);
	if (rc == 0)
		coli_kvfile_release(&f);

	write_session(4, 2.0f), patch_header(12, 64);
	refused("kvfile: a header_size other than 128 is refused", "header_size 64, expected 128", NULL);
	write_session(4, 2.0f), patch_header(69, 1);
	refused("kvfile: a non-zero reserved byte 68..71 is refused", "reserved byte 69 is 1, must be 0", NULL);
	write_session(4, 2.0f), patch_header(100, 7);
	refused("kvfile: a non-zero reserved byte 84..123 is refused", "reserved byte 100 is 7, must be 0", NULL);
	write_session(4, 2.0f), patch_header(60, 5);
	refused("kvfile: n_tokens above n_cached + 1 is refused", "shape fields out of range", NULL);
	write_session(VOCAB, 2.0f);
	refused("kvfile: a token id equal to the vocabulary size is refused",
		"tokens[0]: id 100 outside the vocabulary [0, 100)", NULL);
	write_session(-1, 2.0f);
	refused("kvfile: a negative token id is refused", "tokens[0]: id -1 outside the vocabulary", NULL);
	write_session(4, NAN);
	refused("kvfile: a NaN key is refused", "k[layer 1][token 1][1]: value nan is not finite", NULL);
	write_session(4, INFINITY);
	refused("kvfile: an infinite key is refused", "k[layer 1][token 1][1]: value inf is not finite", NULL);
	unlink(path);
	T_EXIT();
}
