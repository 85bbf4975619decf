/* test_mirror.c: mirror.coli write/read round trip, one malformed map per validation rule (each
 * refused naming the field), and replica_pick with a partial copy (engine/store/replica.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "le.h"
#include "mirrormap.h"
#include "store/replica.h"
#include "t.h"

#define N 21 /* records: the last bitmap byte has 5 bits in use */
#define MiB (1ull << 20)

static char path[256];
static uint8_t id[32];

/* The file as written, edited by how, then with its CRCs made right again unless raw: only the
 * rule under test fails. */
static void damage(void (*how)(uint8_t *b, size_t *n), int raw)
{
	uint8_t b[256];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(b, 1, sizeof(b), f) : 0;
	if (f)
		fclose(f);
	how(b, &n);
	if (!raw && n >= 64) {
		le_put32(b + 56, (uint32_t)crc32(0, b + 64, (uInt)(n - 64)));
		le_put32(b + 60, (uint32_t)crc32(0, b, 60));
	}
	f = fopen(path, "wb");
	if (f) {
		fwrite(b, 1, n, f);
		fclose(f);
	}
}

static void bad_magic(uint8_t *b, size_t *n) { (void)n, b[3] ^= 1; }
static void short_file(uint8_t *b, size_t *n) { (void)b, *n = 40; }
static void flip_header(uint8_t *b, size_t *n) { (void)n, b[20] ^= 1; }
static void version_2(uint8_t *b, size_t *n) { (void)n, le_put32(b + 8, 2); }
static void header_size_128(uint8_t *b, size_t *n) { (void)n, le_put32(b + 12, 128); }
static void other_identity(uint8_t *b, size_t *n) { (void)n, b[16] ^= 0x80; }
static void zero_records(uint8_t *b, size_t *n) { (void)n, le_put32(b + 48, 0); }
static void fewer_records(uint8_t *b, size_t *n) { (void)n, le_put32(b + 48, 20); }
static void held_too_many(uint8_t *b, size_t *n) { (void)n, le_put32(b + 52, N + 1); }
static void cut(uint8_t *b, size_t *n) { (void)b, *n -= 1; }
static void longer(uint8_t *b, size_t *n) { b[(*n)++] = 0; }
static void flip_bitmap(uint8_t *b, size_t *n) { (void)n, b[64] ^= 4; }
static void bit_past_end(uint8_t *b, size_t *n) { b[*n - 1] |= 0x80, le_put32(b + 52, le_get32(b + 52) + 1); }
static void held_wrong(uint8_t *b, size_t *n) { (void)n, le_put32(b + 52, le_get32(b + 52) - 1); }

static void refused(const coli_mirror_map *m, void (*how)(uint8_t *, size_t *), int raw, const char *field,
		    const char *name)
{
	coli_err e = {0, ""};
	coli_mirror_map r;
	int rc = coli_mirror_map_write(path, m, &e);
	if (rc == 0) {
		damage(how, raw);
		rc = coli_mirror_map_read(path, id, N, &r, &e);
	}
	T_CHECK(name, rc == -1 && e.code == COLI_EDATA && strstr(e.msg, field) && strstr(e.msg, path),
		"rc %d, message '%s' (want '%s')", rc, e.msg, field);
}

static void map_rules(void)
{
	coli_mirror_map m, r;
	coli_err e = {0, ""};
	for (int i = 0; i < 32; i++)
		id[i] = (uint8_t)(i * 5 + 3);
	snprintf(path, sizeof(path), "%s/coli-test-mirror.%d.coli", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid());
	T_CHECK("init: an empty map", coli_mirror_map_init(&m, id, N, &e) == 0 && m.held == 0 && m.n_records == N, "%s",
		e.msg);
	coli_mirror_set(&m, 0), coli_mirror_set(&m, 7), coli_mirror_set(&m, 7), coli_mirror_set(&m, 20);
	T_CHECK("set: each record counted once", m.held == 3 && coli_mirror_has(&m, 7) && !coli_mirror_has(&m, 8) &&
		!coli_mirror_has(&m, N), "held %u", m.held);
	int rc = coli_mirror_map_write(path, &m, &e);
	T_CHECK("write: 64 + ceil(21 / 8) bytes", rc == 0 && access(path, F_OK) == 0, "%s", e.msg);
	rc = coli_mirror_map_read(path, id, N, &r, &e);
	T_CHECK("read: the same map back", rc == 0 && r.held == 3 && r.n_records == N && !memcmp(r.bits, m.bits, 3) &&
		!memcmp(r.identity, id, 32), "rc %d: %s", rc, e.msg);
	coli_mirror_map_release(&r);
	rc = coli_mirror_map_read(path, NULL, 0, &r, &e);
	T_CHECK("read: any identity and count when not given", rc == 0 && r.held == 3, "%s", e.msg);
	coli_mirror_map_release(&r);

	refused(&m, bad_magic, 1, "bad magic", "read: refuses a bad magic");
	refused(&m, short_file, 1, "truncated: file size 40, shorter than the 64-byte header",
		"read: a file cut inside its header (magic intact) is called truncated, not bad magic");
	refused(&m, flip_header, 1, "header_crc32", "read: refuses a flipped header byte (header_crc32)");
	refused(&m, version_2, 0, "version 2", "read: refuses another version");
	refused(&m, header_size_128, 0, "header_size 128", "read: refuses another header_size");
	refused(&m, other_identity, 0, "identity", "read: refuses the map of another container (identity)");
	refused(&m, zero_records, 0, "n_records 0", "read: refuses n_records 0");
	refused(&m, fewer_records, 0, "n_records 20, the container has 21", "read: refuses n_records not the container's");
	refused(&m, held_too_many, 0, "held 22 exceeds", "read: refuses held > n_records");
	refused(&m, cut, 0, "file size 66", "read: refuses a cut file (file size)");
	refused(&m, longer, 0, "file size 68", "read: refuses a longer file (file size)");
	refused(&m, flip_bitmap, 1, "bitmap crc32", "read: refuses a flipped bitmap byte (bitmap_crc32)");
	refused(&m, bit_past_end, 0, "a bit past n_records 21", "read: refuses a bit set past n_records");
	refused(&m, held_wrong, 0, "held 2, the bitmap has 3", "read: refuses held disagreeing with the bitmap");
	coli_mirror_map_release(&m);
	unlink(path);
}

/* Two copies of 16 records at equal sustained rates (equal shares); the second holds only
 * records 0..7. */
static void partial_pair(replica_set *rs)
{
	coli_err e;
	memset(rs, 0, sizeof(*rs));
	rs->n = 2, rs->n_records = 16;
	for (int i = 0; i < 2; i++)
		rs->r[i].d.rate_bps = 100 * MiB;
	replicas_share(rs);
	rs->r[1].partial = 1;
	coli_mirror_map_init(&rs->r[1].map, id, 16, &e);
	for (int i = 0; i < 8; i++)
		coli_mirror_set(&rs->r[1].map, (uint64_t)i);
}

static void pick_rules(void)
{
	replica_set rs;
	partial_pair(&rs);
	replica_issue(&rs, 0, 64 * MiB, 0);
	T_CHECK("partial copy: picked for a record it holds when the full one is past its share", replica_pick(&rs, 3, MiB, 0) == 1,
		"picked %d", replica_pick(&rs, 3, MiB, 0));
	T_CHECK("partial copy: never for a record it lacks, however far past its share the full one", replica_pick(&rs, 12, MiB, 0) == 0,
		"picked %d", replica_pick(&rs, 12, MiB, 0));
	T_CHECK("partial copy: the full one tried, a lacked record has no copy left", replica_pick(&rs, 12, MiB, 1u) == -1,
		"picked %d", replica_pick(&rs, 12, MiB, 1u));
	replica_mark_bad(&rs, 0, 12);
	T_CHECK("partial copy: not picked for a lacked record even when the full copy of it is bad",
		replica_pick(&rs, 12, MiB, 0) == 0, "picked %d", replica_pick(&rs, 12, MiB, 0));
	T_CHECK("replica_holds: the full copy every record, the partial its own",
		replica_holds(&rs, 0, 15) && replica_holds(&rs, 1, 7) && !replica_holds(&rs, 1, 8), "%d %d %d",
		replica_holds(&rs, 0, 15), replica_holds(&rs, 1, 7), replica_holds(&rs, 1, 8));
	int count[2] = {0, 0};
	free(rs.r[0].bad);
	coli_mirror_map_release(&rs.r[1].map);
	partial_pair(&rs);
	for (int i = 0; i < 32; i++) {
		int r = replica_pick(&rs, (uint64_t)(i % 8), MiB, 0);
		replica_issue(&rs, r, MiB, 0);
		count[r]++;
	}
	T_CHECK("partial copy: reads of held records shared by both copies", count[0] == 16 && count[1] == 16, "%d and %d",
		count[0], count[1]);
	free(rs.r[0].bad);
	coli_mirror_map_release(&rs.r[1].map);
}

int main(void)
{
	map_rules();
	pick_rules();
	T_EXIT();
}
