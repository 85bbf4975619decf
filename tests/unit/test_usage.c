/* test_usage.c: .coli_usage write/read roundtrip, fold arithmetic, and one corrupt file per
 * validation rule, each refused naming the field. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "le.h"
#include "t.h"
#include "usage.h"

static char path[256];

static void flip(long off)
{
	FILE *f = fopen(path, "r+b");
	int c;
	fseek(f, off, SEEK_SET);
	c = fgetc(f);
	fseek(f, off, SEEK_SET);
	fputc(c ^ 0xff, f);
	fclose(f);
}

/* Writes u afresh, damages it with how (NULL: none), reads it back with identity id. */
static int reread(const coli_usage *u, void (*how)(void), const uint8_t *id, coli_err *e)
{
	coli_usage v;
	coli_err we = {0, ""};
	if (coli_usage_write(path, u, &we) < 0)
		return printf("write: %s\n", we.msg), -2;
	if (how)
		how();
	int rc = coli_usage_read(path, id, &v, e);
	coli_usage_release(&v);
	return rc;
}

/* Sets header byte at to v and recomputes the header CRC, so only the rule under test fails. */
static void patch_header(int at, uint8_t v)
{
	uint8_t h[128];
	FILE *f = fopen(path, "r+b");
	if (!f || fread(h, 1, 128, f) != 128)
		return;
	h[at] = v;
	le_put32(h + 124, (uint32_t)crc32(0, h, 124));
	fseek(f, 0, SEEK_SET);
	fwrite(h, 1, 128, f);
	fclose(f);
}

static void header_size_64(void) { patch_header(12, 64); }
static void reserved_61(void) { patch_header(61, 1); }
static void reserved_100(void) { patch_header(100, 7); }

static void bad_payload(void) { flip(128 + 8 * 5 + 3); }
static void bad_header(void) { flip(56); }
static void bad_magic(void) { flip(1); }
static void truncated(void) { (void)!truncate(path, 128 + 8 * 3); }
static void short_header(void) { (void)!truncate(path, 60); }

static int refused(const coli_usage *u, void (*how)(void), const uint8_t *id, const char *field, const char *name)
{
	coli_err e = {0, ""};
	int rc = reread(u, how, id, &e);
	T_CHECK(name, rc == -1 && e.code == COLI_EDATA && strstr(e.msg, field) && strstr(e.msg, path),
		"rc %d, message '%s' (want '%s')", rc, e.msg, field);
	return 0;
}

int main(void)
{
	uint8_t id[32], other[32];
	coli_usage u, v;
	coli_err e = {0, ""};
	for (int i = 0; i < 32; i++)
		id[i] = (uint8_t)(i * 7 + 1), other[i] = id[i];
	other[31] ^= 1;
	snprintf(path, sizeof(path), "%s/coli-test-usage.%d.coli_usage", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid());

	int L = 3, E = 4;
	double run1[12], run2[12];
	for (int i = 0; i < L * E; i++)
		run1[i] = i, run2[i] = 10.0 + (i % 3);
	T_CHECK("init: empty table", coli_usage_init(&u, id, L, E, &e) == 0 && u.runs == 0 && u.counts[11] == 0.0,
		"%s", e.msg);
	coli_usage_fold(&u, run1, 0.9);
	coli_usage_fold(&u, run2, 0.9);
	int ok = u.runs == 2 && u.decay == 0.9;
	for (int i = 0; i < L * E; i++)
		ok &= u.counts[i] == run1[i] * 0.9 + run2[i];
	T_CHECK("fold: counts x decay + run, runs counted", ok, "runs %u, counts[5] %g", u.runs, u.counts[5]);

	int rc = coli_usage_write(path, &u, &e);
	T_CHECK("write: atomic, no .tmp left", rc == 0 && access(path, F_OK) == 0, "%s", e.msg);
	char tmp[300];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	T_CHECK("write: the temporary name is gone", access(tmp, F_OK) != 0, "%s exists", tmp);
	rc = coli_usage_read(path, id, &v, &e);
	ok = rc == 0 && v.n_layers == L && v.n_experts == E && v.runs == 2 && v.decay == 0.9 &&
	     !memcmp(v.identity, id, 32) && !memcmp(v.counts, u.counts, (size_t)L * E * sizeof(double));
	T_CHECK("read: roundtrip is exact", ok, "rc %d: %s", rc, e.msg);
	FILE *f = fopen(path, "rb");
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fclose(f);
	T_CHECK("write: size is 128 + 8 x layers x experts", size == 128 + 8 * L * E, "size %ld", size);
	coli_usage_release(&v);

	refused(&u, NULL, other, "identity", "read: refuses another model's file (identity)");
	refused(&u, bad_payload, id, "payload crc32", "read: refuses a flipped payload byte (payload crc32)");
	refused(&u, bad_header, id, "header_crc32 0x", "read: refuses a flipped header byte (header_crc32)");
	refused(&u, header_size_64, id, "header_size 64, expected 128", "read: refuses a header_size other than 128");
	refused(&u, reserved_61, id, "reserved byte 61 is 1, must be 0", "read: refuses a non-zero reserved byte 60..63");
	refused(&u, reserved_100, id, "reserved byte 100 is 7, must be 0", "read: refuses a non-zero reserved byte 84..123");
	refused(&u, truncated, id, "(truncated)", "read: refuses a truncated file (payload_size, truncated)");
	refused(&u, short_header, id, "truncated: file size 60, shorter than the 128-byte header",
		"read: a file cut inside its header (magic intact) is called truncated, not bad magic");
	refused(&u, bad_magic, id, "bad magic", "read: refuses a bad magic");

	e.code = 0;
	rc = coli_usage_read("/nonexistent/x.coli_usage", id, &v, &e);
	T_CHECK("read: a missing file is an I/O error", rc == -1 && e.code == COLI_EIO, "rc %d code %d", rc, (int)e.code);
	coli_usage_release(&v);
	coli_usage_release(&u);
	unlink(path);
	T_EXIT();
}
