/* test_kvfile.c: .coli_kv round trips (version 2; version 1 read as parts), and one corrupt file
 * per reader rule (formats/kv.md), each refused with a message naming the field. */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "kvfile.h"
#include "le.h"
#include "t.h"

#define VOCAB 100
#define N_PARTS 5
#define TABLE(i, k) (128 + 16 * (i) + 4 * (k)) /* file offset of parts[i]'s field k (layer, kind, width, fixed) */
#define FLOATS 64

static char path[256];
static const uint8_t id[32] = {1, 2, 3};

/* A DSA-like model's state with a fixed-size part (no fixed kind exists yet: latent stands in). */
static const coli_state_part mixed[N_PARTS] = {
	{0, COLI_STATE_LATENT, 4, 0}, {0, COLI_STATE_ROPE_KEY, 2, 0}, {0, COLI_STATE_INDEX_KEY, 3, 0},
	{1, COLI_STATE_LATENT, 0, 6}, {1, COLI_STATE_ROPE_KEY, 2, 0},
};
static const coli_state_part gqa[4] = {
	{0, COLI_STATE_KEY, 3, 0}, {0, COLI_STATE_VALUE, 2, 0}, {1, COLI_STATE_KEY, 3, 0}, {1, COLI_STATE_VALUE, 2, 0},
};
static const coli_state_part mla[4] = {
	{0, COLI_STATE_LATENT, 3, 0}, {0, COLI_STATE_ROPE_KEY, 2, 0}, {1, COLI_STATE_LATENT, 3, 0}, {1, COLI_STATE_ROPE_KEY, 2, 0},
};

static float value(int part, int j)
{
	return (float)part - 0.125f * (float)j;
}

/* The mixed session: 4 tokens (the first token0), 3 cached; part `bad` gets v at index j. */
static int write_mixed(int32_t token0, int bad, int j, float v)
{
	static float buf[N_PARTS][FLOATS];
	float *data[N_PARTS];
	int32_t tokens[4] = {token0, 5, 6, 7};
	for (int i = 0; i < N_PARTS; i++)
		for (int k = 0; k < FLOATS; k++)
			buf[i][k] = value(i, k);
	if (bad >= 0)
		buf[bad][j] = v;
	for (int i = 0; i < N_PARTS; i++)
		data[i] = buf[i];
	coli_kvfile f = {.n_parts = N_PARTS, .parts = (coli_state_part *)mixed, .n_tokens = 4, .n_cached = 3,
			 .tokens = tokens, .data = data};
	memcpy(f.identity, id, 32);
	coli_err e = {0, ""};
	return coli_kvfile_write(path, &f, &e);
}

static long file_size(void)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Puts v (4 bytes, little-endian) at `at`; fix: then recomputes the payload and header CRCs, so
 * that only the rule under test fails. */
static void patch32(long at, uint32_t v, int fix)
{
	long n = file_size();
	uint8_t *b = n >= 128 ? malloc((size_t)n) : NULL;
	int fd = open(path, O_RDWR);
	if (b && fd >= 0 && pread(fd, b, (size_t)n, 0) == n) {
		le_put32(b + at, v);
		if (fix) {
			le_put32(b + 80, (uint32_t)crc32(0, b + 128, (uInt)(n - 128)));
			le_put32(b + 124, (uint32_t)crc32(0, b, 124));
		}
		(void)!pwrite(fd, b, (size_t)n, 0);
	}
	if (fd >= 0)
		close(fd);
	free(b);
}

/* Header byte `at` set to v, the CRCs made right. */
static void patch_byte(int at, uint8_t v)
{
	uint8_t h[4];
	int fd = open(path, O_RDONLY);
	if (fd >= 0 && pread(fd, h, 4, at & ~3) == 4) {
		h[at & 3] = v;
		patch32(at & ~3, le_get32(h), 1);
	}
	if (fd >= 0)
		close(fd);
}

/* A version 1 file, written byte by byte (formats/kv.md, "Version 1"): 2 layers, widths 3 and 2,
 * 4 tokens, 3 cached; k[l][i] = l + i / 8, v[l][i] = -(l + i / 4). */
static void write_v1(void)
{
	uint8_t b[128 + 16 + 2 * 3 * (3 + 2) * 4] = {0}, *p = b + 128;
	int32_t tokens[4] = {4, 5, 6, 7};
	memcpy(b, "\x89" "COLIKV\n", 8);
	le_put32(b + 8, 1), le_put32(b + 12, 128), memcpy(b + 16, id, 32);
	le_put32(b + 48, 2), le_put32(b + 52, 3), le_put32(b + 56, 2), le_put32(b + 60, 4), le_put32(b + 64, 3);
	memcpy(p, tokens, 16), p += 16;
	for (int l = 0; l < 2; l++)
		for (int kv = 0; kv < 2; kv++)
			for (int i = 0; i < 3 * (kv ? 2 : 3); i++, p += 4) {
				float x = kv ? -((float)l + (float)i / 4) : (float)l + (float)i / 8;
				memcpy(p, &x, 4);
			}
	le_put64(b + 72, sizeof(b) - 128);
	le_put32(b + 80, (uint32_t)crc32(0, b + 128, sizeof(b) - 128));
	le_put32(b + 124, (uint32_t)crc32(0, b, 124));
	FILE *fp = fopen(path, "wb");
	if (fp) {
		fwrite(b, 1, sizeof(b), fp);
		fclose(fp);
	}
}

static int load(const coli_state_part *want, int n_want, coli_kvfile *f, coli_err *e)
{
	return coli_kvfile_load(path, id, VOCAB, want, n_want, f, e);
}

/* The load must fail with code, a message naming the file and holding want1 (and want2), f empty. */
static void refused_as(const char *name, int code, const coli_state_part *want, int n_want, const char *want1,
		       const char *want2)
{
	coli_kvfile f;
	coli_err e = {0, ""};
	int rc = load(want, n_want, &f, &e);
	T_CHECK(name, rc == -1 && e.code == code && strstr(e.msg, path) && strstr(e.msg, want1) &&
		(!want2 || strstr(e.msg, want2)) && !f.parts && !f.data && !f.block && !f.tokens,
		"rc %d code %d msg '%s' (want '%s')", rc, e.code, e.msg, want1);
	if (rc == 0)
		coli_kvfile_release(&f);
}

static void refused(const char *name, const char *want1, const char *want2)
{
	refused_as(name, COLI_EDATA, mixed, N_PARTS, want1, want2);
}

/* Every part of f holds what write_mixed wrote. */
static int mixed_data_ok(const coli_kvfile *f)
{
	for (int i = 0; i < N_PARTS; i++) {
		int n = mixed[i].width ? 3 * mixed[i].width : mixed[i].fixed;
		for (int k = 0; k < n; k++)
			if (f->data[i][k] != value(i, k))
				return 0;
	}
	return 1;
}

static void test_round_trip(void)
{
	coli_kvfile f;
	coli_err e = {0, ""};
	int rc = write_mixed(4, -1, 0, 0) || load(mixed, N_PARTS, &f, &e);
	long want_size = 128 + 16 * N_PARTS + 16 + 4 * (12 + 6 + 9 + 6 + 6);
	T_CHECK("kvfile: round trip of growing and fixed parts", rc == 0 && f.n_parts == N_PARTS &&
		!memcmp(f.parts, mixed, sizeof(mixed)) && f.n_tokens == 4 && f.n_cached == 3 && f.tokens[0] == 4 &&
		f.tokens[3] == 7 && mixed_data_ok(&f) && !memcmp(f.identity, id, 32) && file_size() == want_size,
		"rc %d '%s' size %ld", rc, e.msg, file_size());
	if (rc == 0)
		coli_kvfile_release(&f);
	rc = load(NULL, 0, &f, &e);
	T_CHECK("kvfile: want NULL accepts any valid part table", rc == 0 && f.n_parts == N_PARTS && mixed_data_ok(&f),
		"rc %d '%s'", rc, e.msg);
	if (rc == 0)
		coli_kvfile_release(&f);
}

/* Nothing cached yet (one token chosen, none run): growing parts empty, the fixed part whole. */
static void test_nothing_cached(void)
{
	float x[6] = {1, 2, 3, 4, 5, 6}, *data[N_PARTS] = {NULL, NULL, NULL, x, NULL};
	int32_t t[1] = {9};
	coli_kvfile f = {.n_parts = N_PARTS, .parts = (coli_state_part *)mixed, .n_tokens = 1, .n_cached = 0, .tokens = t,
			 .data = data}, g;
	coli_err e = {0, ""};
	memcpy(f.identity, id, 32);
	int rc = coli_kvfile_write(path, &f, &e) || load(mixed, N_PARTS, &g, &e);
	T_CHECK("kvfile: round trip with nothing cached: growing parts empty, the fixed part whole", rc == 0 &&
		g.n_cached == 0 && g.n_tokens == 1 && g.tokens[0] == 9 && !memcmp(g.data[3], x, sizeof(x)) &&
		file_size() == 128 + 16 * N_PARTS + 4 + 24, "rc %d '%s' size %ld", rc, e.msg, file_size());
	if (rc == 0)
		coli_kvfile_release(&g);
}

static void test_writer(void)
{
	coli_state_part bad[2] = {{0, COLI_STATE_VALUE, 2, 0}, {0, COLI_STATE_KEY, 2, 0}};
	float x[8] = {0}, *data[2] = {x, x};
	int32_t t[1] = {1};
	coli_kvfile f = {.n_parts = 2, .parts = bad, .n_tokens = 1, .n_cached = 1, .tokens = t, .data = data};
	coli_err e = {0, ""};
	unlink(path);
	int rc = coli_kvfile_write(path, &f, &e);
	T_CHECK("kvfile: the writer refuses an unsorted part table, writing nothing", rc == -1 &&
		e.code == COLI_EUSAGE && strstr(e.msg, "parts[1] (layer 0 key) does not follow parts[0]") &&
		access(path, F_OK) != 0, "rc %d '%s'", rc, e.msg);
	bad[1] = (coli_state_part){0, COLI_STATE_ROPE_KEY, 2, 4};
	rc = coli_kvfile_write(path, &f, &e);
	T_CHECK("kvfile: the writer refuses a part with width and fixed", rc == -1 && e.code == COLI_EUSAGE &&
		strstr(e.msg, "parts[1]: width 2 and fixed 4"), "rc %d '%s'", rc, e.msg);
	coli_state_part empty[1] = {{0, COLI_STATE_KEY, 0, 0}};
	write_mixed(4, -1, 0, 0);
	refused_as("kvfile: a model state that breaks the rules is a usage error", COLI_EUSAGE, empty, 1,
		   "the model's state: parts[0]: width 0 and fixed 0", NULL);
}

static void test_header(void)
{
	write_mixed(4, -1, 0, 0), patch32(8, 3, 1);
	refused("kvfile: an unknown version is refused", "version 3 unsupported (this reader knows 1 and 2)", NULL);
	write_mixed(4, -1, 0, 0), patch32(8, 0, 1);
	refused("kvfile: version 0 is refused", "version 0 unsupported", NULL);
	write_mixed(4, -1, 0, 0), patch_byte(12, 64);
	refused("kvfile: a header_size other than 128 is refused", "header_size 64, expected 128", NULL);
	write_mixed(4, -1, 0, 0), patch_byte(52, 1);
	refused("kvfile: version 2: reserved byte 52 (v1's k_width) is refused", "reserved byte 52 is 1, must be 0", NULL);
	write_mixed(4, -1, 0, 0), patch_byte(59, 2);
	refused("kvfile: version 2: reserved byte 59 (v1's v_width) is refused", "reserved byte 59 is 2, must be 0", NULL);
	write_mixed(4, -1, 0, 0), patch_byte(69, 1);
	refused("kvfile: a non-zero reserved byte 68..71 is refused", "reserved byte 69 is 1, must be 0", NULL);
	write_mixed(4, -1, 0, 0), patch_byte(100, 7);
	refused("kvfile: a non-zero reserved byte 84..123 is refused", "reserved byte 100 is 7, must be 0", NULL);
	write_mixed(4, -1, 0, 0), patch_byte(20, 9);
	refused("kvfile: a session of another container is refused", "identity", NULL);
	write_mixed(4, -1, 0, 0), patch_byte(1, 'X');
	refused("kvfile: a bad magic is refused", "not a coli KV session (bad magic)", NULL);
	write_mixed(4, -1, 0, 0), patch32(60, 5, 1);
	refused("kvfile: n_tokens above n_cached + 1 is refused", "n_cached 3 with n_tokens 5", NULL);
	write_mixed(4, -1, 0, 0), patch32(64, 5, 1);
	refused("kvfile: n_cached above n_tokens is refused", "n_cached 5 with n_tokens 4", NULL);
	write_mixed(4, -1, 0, 0), patch32(48, 0, 1);
	refused("kvfile: n_parts 0 is refused", "n_parts 0 outside [1, 1048576]", NULL);
	write_mixed(4, -1, 0, 0), patch32(48, 100, 1);
	refused("kvfile: n_parts beyond the payload is refused", "the part table and tokens alone take 1616", NULL);
}

static void test_crc_and_size(void)
{
	write_mixed(4, -1, 0, 0), patch32(64, 2, 0);
	refused("kvfile: a header CRC mismatch is refused", "header_crc32 0x", NULL);
	write_mixed(4, -1, 0, 0), patch32(TABLE(3, 1), 9, 0);
	refused("kvfile: a corrupt part table is reported by the payload CRC", "payload crc32", NULL);
	write_mixed(4, -1, 0, 0), patch32(file_size() - 4, 0x7fc00000u, 0);
	refused("kvfile: a payload CRC mismatch is refused", "payload crc32", "(corrupt session file)");
	write_mixed(4, -1, 0, 0);
	(void)!truncate(path, file_size() - 8);
	refused("kvfile: a truncated file is refused", "payload length 252, but the file holds 244", NULL);
	(void)!truncate(path, 100);
	refused("kvfile: a file shorter than the header is refused", "file size 100, shorter than the 128-byte header",
		NULL);
	write_mixed(4, -1, 0, 0), patch32(TABLE(1, 2), 3, 1);
	refused_as("kvfile: a part table implying another payload length is refused", COLI_EDATA, NULL, 0,
		   "payload length 252, the part table, n_tokens and n_cached imply 264", NULL);
}

static void test_table(void)
{
	write_mixed(4, -1, 0, 0), patch32(TABLE(3, 1), COLI_STATE_KIND_MAX + 1, 1);
	refused("kvfile: an unknown kind is refused", "parts[3].kind 13 unknown (kinds 1..12)", NULL);
	write_mixed(4, -1, 0, 0), patch32(TABLE(0, 1), 0, 1);
	refused("kvfile: kind 0 is refused", "parts[0].kind 0 unknown", NULL);
	write_mixed(4, -1, 0, 0), patch32(TABLE(3, 2), 4, 1);
	refused("kvfile: a part with width and fixed both set is refused",
		"parts[3]: width 4 and fixed 6, exactly one must be non-zero", NULL);
	write_mixed(4, -1, 0, 0), patch32(TABLE(0, 2), 0, 1);
	refused("kvfile: a part with width and fixed both zero is refused", "parts[0]: width 0 and fixed 0", NULL);
	write_mixed(4, -1, 0, 0), patch32(TABLE(1, 1), COLI_STATE_LATENT, 1);
	refused("kvfile: a repeated (layer, kind) is refused",
		"parts[1] (layer 0 latent) does not follow parts[0] (layer 0 latent)", "strictly increasing");
	write_mixed(4, -1, 0, 0), patch32(TABLE(4, 0), 0, 1);
	refused("kvfile: a layer out of order is refused", "parts[4] (layer 0 rope_key) does not follow parts[3] (layer 1 latent)",
		NULL);
	write_mixed(4, -1, 0, 0), patch32(TABLE(4, 0), 70000, 1);
	refused("kvfile: a layer beyond 65535 is refused", "parts[4].layer 70000 outside [0, 65535]", NULL);
	write_mixed(4, -1, 0, 0), patch32(TABLE(1, 2), (1u << 28) + 1, 1);
	refused("kvfile: a width beyond 2^28 is refused", "parts[1].width 268435457 outside [1, 268435456]", NULL);
	write_mixed(4, -1, 0, 0), patch32(TABLE(3, 3), 0xffffffffu, 1);
	refused("kvfile: a fixed size beyond int range is refused", "parts[3].fixed 4294967295 out of range", NULL);
}

static void test_want(void)
{
	coli_state_part other[N_PARTS + 1];
	memcpy(other, mixed, sizeof(mixed));
	other[2].width = 5;
	write_mixed(4, -1, 0, 0);
	refused_as("kvfile: a part table other than the model's names the first differing entry", COLI_EDATA, other,
		   N_PARTS, "parts[2] is layer 0 index_key width 3, this model's is layer 0 index_key width 5", NULL);
	refused_as("kvfile: a part the model lacks is named", COLI_EDATA, mixed, N_PARTS - 1,
		   "n_parts 5, this model keeps 4 (parts[4], layer 1 rope_key width 2, is the file's only)", NULL);
	memcpy(other, mixed, sizeof(mixed));
	other[N_PARTS] = (coli_state_part){2, COLI_STATE_KEY, 3, 0};
	refused_as("kvfile: a part the file lacks is named", COLI_EDATA, other, N_PARTS + 1,
		   "n_parts 5, this model keeps 6 (parts[5], layer 2 key width 3, is missing)", NULL);
}

static void test_values(void)
{
	write_mixed(VOCAB, -1, 0, 0);
	refused("kvfile: a token id equal to the vocabulary size is refused",
		"tokens[0]: id 100 outside the vocabulary [0, 100)", NULL);
	write_mixed(-1, -1, 0, 0);
	refused("kvfile: a negative token id is refused", "tokens[0]: id -1 outside the vocabulary", NULL);
	write_mixed(4, 2, 5, NAN);
	refused("kvfile: a NaN in a growing part is refused, naming part, token and column",
		"data[part 2 (layer 0 index_key)][token 1][2]: value nan is not finite", NULL);
	write_mixed(4, 3, 4, INFINITY);
	refused("kvfile: an infinity in a fixed part is refused", "data[part 3 (layer 1 latent)][4]: value inf is not finite",
		NULL);
	write_mixed(4, 0, 11, -INFINITY);
	refused("kvfile: a -inf in the last cached row is refused",
		"data[part 0 (layer 0 latent)][token 2][3]: value -inf is not finite", NULL);
}

static void test_v1(void)
{
	coli_kvfile f;
	coli_err e = {0, ""};
	write_v1();
	int rc = load(gqa, 4, &f, &e);
	T_CHECK("kvfile: version 1 is read for a model of keys and values, as its parts", rc == 0 && f.n_parts == 4 &&
		!memcmp(f.parts, gqa, sizeof(gqa)) && f.n_tokens == 4 && f.n_cached == 3 && f.tokens[2] == 6 &&
		f.data[2][8] == 2.0f && f.data[3][5] == -2.25f && f.data[0][1] == 0.125f, "rc %d '%s'", rc, e.msg);
	if (rc == 0)
		coli_kvfile_release(&f);
	rc = load(mla, 4, &f, &e);
	T_CHECK("kvfile: version 1 is read for an MLA model, with the model's kinds", rc == 0 &&
		f.parts[0].kind == COLI_STATE_LATENT && f.parts[3].kind == COLI_STATE_ROPE_KEY && f.data[1][0] == 0.0f,
		"rc %d '%s'", rc, e.msg);
	if (rc == 0)
		coli_kvfile_release(&f);
	coli_state_part dsa[6] = {{0, 3, 3, 0}, {0, 4, 2, 0}, {0, 5, 4, 0}, {1, 3, 3, 0}, {1, 4, 2, 0}, {1, 5, 4, 0}};
	refused_as("kvfile: version 1 is refused for a model with index_key parts", COLI_EDATA, dsa, 6,
		   "version 1 holds keys and values only, and this model's layers keep latent, rope_key and index_key",
		   "run the conversation again");
	coli_state_part fixed[4] = {{0, 1, 3, 0}, {0, 2, 2, 0}, {1, 1, 3, 0}, {1, 2, 0, 10}};
	refused_as("kvfile: version 1 is refused for a model with a fixed-size part", COLI_EDATA, fixed, 4,
		   "this model's layers keep key, value and value (fixed size)", NULL);
	coli_state_part wide[4] = {{0, 1, 3, 0}, {0, 2, 2, 0}, {1, 1, 4, 0}, {1, 2, 2, 0}};
	refused_as("kvfile: version 1 of other widths is refused", COLI_EDATA, wide, 4,
		   "k_width 3, this model's parts[2] is layer 1 key width 4", NULL);
	refused_as("kvfile: version 1 of another layer count is refused", COLI_EDATA, gqa, 2, "n_layers 2, this model has 1",
		   NULL);
	refused_as("kvfile: version 1 without the model's state is refused", COLI_EDATA, NULL, 0,
		   "version 1: readable only with the model's state", NULL);
	write_v1(), patch_byte(70, 1);
	refused_as("kvfile: version 1: a non-zero reserved byte is refused", COLI_EDATA, gqa, 4,
		   "reserved byte 70 is 1, must be 0", NULL);
}

int main(void)
{
	snprintf(path, sizeof(path), "/tmp/coli-test-kvfile-%d.coli_kv", (int)getpid());
	test_round_trip();
	test_nothing_cached();
	test_writer();
	test_header();
	test_crc_and_size();
	test_table();
	test_want();
	test_values();
	test_v1();
	unlink(path);
	T_EXIT();
}
