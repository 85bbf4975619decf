/* test_trace.c: .coli_trace round trips (file, buffer, callback), atomic writing, truncation at
 * every part of the file, and one corrupt input per validation rule, each refused naming the field. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "clock.h"
#include "le.h"
#include "t.h"
#include "trace.h"
#include "tracer.h"

enum { L = 48, E = 128, NC = 3 };

static char path[256], tmp[300];
static const char *const meta_full =
	"{\"argv\":[\"coli-run\",\"-m\",\"q.coli\",\"--trace\",\"run.coli_trace\"],\"version\":\"0.1\","
	"\"store\":{\"cache_slots\":32,\"io\":\"uring\"},\"note\":\"\xc3\xa9\xe2\x86\x92\"}";
static const coli_trace_copy copies[NC] = {
	{"/models/q.coli", "nvme0n1"}, {"/mnt/m1/q.coli", "nvme1n1"}, {"/mnt/m2/q.coli", "259:3"}};

static coli_trace_info info_of(const char *meta)
{
	coli_trace_info in = {{0}, L, E, 8, 0, NC, copies, meta, 0};
	for (int i = 0; i < 32; i++)
		in.identity[i] = (uint8_t)(i * 13 + 5);
	return in;
}

/* A valid record of every kind in turn, fields spread over their ranges. */
static coli_trace_rec gen(uint32_t i)
{
	uint32_t h = i * 2654435761u;
	coli_trace_rec r = {(uint8_t)(1 + i % 4), 0, 0, (int32_t)(i / 16), -1, -1, 0, 0, 0};
	r.t0 = i == 5 ? (1ull << 63) : (uint64_t)i * 1000 + h % 97;
	r.t1 = r.t0 + h % 5000;
	if (r.kind == COLI_TR_TOKEN)
		r.sub = (uint8_t)(h % 2), r.n = 1 + h % 300;
	else if (r.kind == COLI_TR_SPAN)
		r.sub = (uint8_t)(h % COLI_SPAN_N), r.layer = (int32_t)(h % (L + 1)) - 1;
	else if (r.kind == COLI_TR_READ)
		r.sub = (uint8_t)(h % 8), r.copy = (uint16_t)(h % NC), r.layer = (int32_t)(h % L),
		r.expert = (int32_t)((h >> 8) % E), r.n = (uint64_t)h << 12;
	else
		r.sub = (uint8_t)(h % COLI_X_N), r.layer = (int32_t)(h % L), r.expert = (int32_t)((h >> 8) % E),
		r.t1 = r.t0;
	return r;
}

static int rec_eq(const coli_trace_rec *a, const coli_trace_rec *b)
{
	return a->kind == b->kind && a->sub == b->sub && a->copy == b->copy && a->token == b->token &&
	       a->layer == b->layer && a->expert == b->expert && a->t0 == b->t0 && a->t1 == b->t1 && a->n == b->n;
}

static long file_size(const char *p)
{
	FILE *f = fopen(p, "rb");
	long n = -1;
	if (f && fseek(f, 0, SEEK_END) == 0)
		n = ftell(f);
	if (f)
		fclose(f);
	return n;
}

static uint8_t *slurp(const char *p, size_t *len)
{
	long n = file_size(p);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	FILE *f = fopen(p, "rb");
	*len = f && n > 0 && fread(b, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
	if (f)
		fclose(f);
	return b;
}

/* Writes n records of gen() in arrays of growing size and single appends; *mid: the temporary's
 * size after 2.5 buffers, when the final name must not exist yet. */
static int write_trace(const char *meta, uint32_t n, long *mid, coli_err *e)
{
	coli_trace_info in = info_of(meta);
	coli_trace_writer *w;
	coli_trace_rec batch[97];
	if (coli_trace_writer_open(&w, path, &in, e) < 0)
		return -1;
	for (uint32_t i = 0; i < n;) {
		uint32_t k = i % 3 ? 1 : (i / 7) % 97 + 1;
		k = k > n - i ? n - i : k;
		for (uint32_t j = 0; j < k; j++)
			batch[j] = gen(i + j);
		if (coli_trace_append_n(w, batch, k, e) < 0)
			return coli_trace_writer_abort(w), -1;
		if (mid && i < COLI_TRACE_BUF_RECORDS * 5 / 2 && i + k >= COLI_TRACE_BUF_RECORDS * 5 / 2)
			*mid = access(path, F_OK) == 0 ? -2 : file_size(tmp);
		i += k;
	}
	return coli_trace_writer_close(w, e);
}

/* Reads every record through r in batches of `batch`, checking each against gen(). */
static long read_all(coli_trace_reader *r, size_t batch, int *same, coli_err *e)
{
	coli_trace_rec recs[512];
	long total = 0, k;
	*same = 1;
	while ((k = coli_trace_next_n(r, recs, batch, e)) > 0) {
		for (long i = 0; i < k; i++) {
			coli_trace_rec want = gen((uint32_t)(total + i));
			*same &= rec_eq(&recs[i], &want);
		}
		total += k;
	}
	return k < 0 ? -1 : total;
}

typedef struct drip {
	const uint8_t *p;
	size_t n, at;
	int fail_at;
} drip;

/* A read callback returning 1 to 7 bytes at a time, or an error past fail_at. */
static long drip_read(void *ctx, void *buf, size_t n, coli_err *e)
{
	drip *d = ctx;
	size_t k = 1 + d->at % 7;
	if (d->fail_at >= 0 && d->at >= (size_t)d->fail_at)
		return coli_errf(e, COLI_EIO, "archive member: damaged archive");
	k = k > n ? n : k;
	k = k > d->n - d->at ? d->n - d->at : k;
	memcpy(buf, d->p + d->at, k);
	d->at += k;
	return (long)k;
}

static uint64_t ns_of(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

/* The header as read equals what was written; its start time lies in [t0, t1]. */
static void check_info(const coli_trace_info *in, uint64_t t0, uint64_t t1)
{
	coli_trace_info want = info_of(meta_full);
	int ok = !memcmp(in->identity, want.identity, 32) && in->n_layers == L && in->n_experts == E &&
		 in->top_k == 8 && in->n_copies == NC && !strcmp(in->meta, meta_full) &&
		 in->start_unix_ns >= t0 && in->start_unix_ns <= t1;
	for (int c = 0; ok && c < NC; c++)
		ok = !strcmp(in->copies[c].dir, copies[c].dir) && !strcmp(in->copies[c].dev, copies[c].dev);
	T_CHECK("read: header fields, copies and metadata round trip", ok, "n_layers %d copies %d meta '%s'",
		in->n_layers, in->n_copies, in->meta);
}

/* The file written by roundtrip() again, from a buffer and through callbacks. */
static void read_other_inputs(uint32_t n)
{
	coli_err e = {0, ""};
	coli_trace_reader *r = NULL;
	size_t len;
	int same;
	uint8_t *buf = slurp(path, &len);
	int rc = coli_trace_reader_open_mem(&r, buf, len, "mem.coli_trace", &e);
	long got = rc == 0 ? read_all(r, 1, &same, &e) : -1;
	T_CHECK("read: from a memory buffer, one record at a time", got == (long)n && same, "%ld: %s", got, e.msg);
	coli_trace_reader_close(r);
	drip d = {buf, len, 0, -1};
	rc = coli_trace_reader_open_cb(&r, drip_read, &d, "drip", &e);
	got = rc == 0 ? read_all(r, 512, &same, &e) : -1;
	T_CHECK("read: from a callback giving 1..7 bytes a call", got == (long)n && same, "%ld: %s", got, e.msg);
	coli_trace_reader_close(r);
	d = (drip){buf, len, 0, (int)len / 2};
	rc = coli_trace_reader_open_cb(&r, drip_read, &d, "t.tar.gz:run.coli_trace", &e);
	got = rc == 0 ? read_all(r, 512, &same, &e) : 0;
	T_CHECK("read: a callback's error is an I/O error naming the input and the cause",
		got == -1 && e.code == COLI_EIO && strstr(e.msg, "t.tar.gz:run.coli_trace: archive member: damaged"),
		"%ld: %s", got, e.msg);
	coli_trace_reader_close(r);
	free(buf);
}

static void roundtrip(void)
{
	uint32_t n = COLI_TRACE_BUF_RECORDS * 7 / 2 + 17;
	long mid = -1;
	coli_err e = {0, ""};
	struct timespec a, b;
	clock_gettime(CLOCK_REALTIME, &a);
	int rc = write_trace(meta_full, n, &mid, &e);
	clock_gettime(CLOCK_REALTIME, &b);
	T_CHECK("write: 3.5 buffers of records of every kind", rc == 0, "%s", e.msg);
	T_CHECK("write: records reach the temporary before close, the final name absent", mid > COLI_TRACE_HEADER,
		"temporary size %ld mid-run (-2: final name existed)", mid);
	T_CHECK("close: the file is in place, no temporary left", access(path, F_OK) == 0 && access(tmp, F_OK) != 0,
		"path %d tmp %d", access(path, F_OK), access(tmp, F_OK));
	T_CHECK("write: deflate compresses the records", file_size(path) < (long)(n * COLI_TRACE_REC_SIZE / 2),
		"%ld bytes for %u records", file_size(path), n);
	coli_trace_reader *r = NULL;
	rc = coli_trace_reader_open(&r, path, &e);
	T_CHECK("read: opens the file", rc == 0, "%s", e.msg);
	if (rc < 0)
		return;
	check_info(coli_trace_reader_info(r), ns_of(&a), ns_of(&b));
	int same;
	long got = read_all(r, 300, &same, &e);
	T_CHECK("read: every record round trips exactly (batches of 300)", got == (long)n && same,
		"%ld of %u records, same %d: %s", got, n, same, e.msg);
	coli_trace_rec x;
	T_CHECK("read: the end stays the end", coli_trace_next(r, &x, &e) == 0, "%s", e.msg);
	coli_trace_reader_close(r);
	read_other_inputs(n);
}

static void empty_and_abort(void)
{
	coli_err e = {0, ""};
	coli_trace_reader *r = NULL;
	coli_trace_info in = info_of(NULL);
	int same;
	int rc = write_trace(NULL, 0, NULL, &e);
	rc = rc == 0 ? coli_trace_reader_open(&r, path, &e) : -1;
	long got = rc == 0 ? read_all(r, 10, &same, &e) : -1;
	T_CHECK("empty: no records and metadata {} round trip", got == 0 && !strcmp(coli_trace_reader_info(r)->meta, "{}"),
		"%ld: %s", got, e.msg);
	coli_trace_reader_close(r);
	unlink(path);

	coli_trace_writer *w;
	coli_trace_rec x = gen(3);
	rc = coli_trace_writer_open(&w, path, &in, &e);
	for (int i = 0; rc == 0 && i < COLI_TRACE_BUF_RECORDS + 10; i++)
		rc = coli_trace_append(w, &x, &e);
	int tmp_seen = access(tmp, F_OK) == 0;
	coli_trace_writer_abort(w);
	T_CHECK("abort: the temporary existed, and neither it nor the file remains",
		rc == 0 && tmp_seen && access(path, F_OK) != 0 && access(tmp, F_OK) != 0, "rc %d tmp %d: %s", rc, tmp_seen,
		e.msg);
	coli_trace_writer_abort(NULL);
	T_CHECK("close: accepts NULL", coli_trace_writer_close(NULL, &e) == 0, "close(NULL) failed");
}

static void writer_refuses(void)
{
	coli_err e = {0, ""};
	coli_trace_writer *w;
	coli_trace_info in = info_of("[1]");
	int rc = coli_trace_writer_open(&w, path, &in, &e);
	T_CHECK("writer: refuses metadata that is not a JSON object", rc == -1 && e.code == COLI_EUSAGE &&
		strstr(e.msg, "metadata") && access(tmp, F_OK) != 0, "rc %d: %s", rc, e.msg);
	in = info_of(NULL), in.top_k = E + 1;
	rc = coli_trace_writer_open(&w, path, &in, &e);
	T_CHECK("writer: refuses top_k above n_experts", rc == -1 && e.code == COLI_EUSAGE && strstr(e.msg, "top_k 129"),
		"rc %d: %s", rc, e.msg);
	in.top_k = 8;
	rc = coli_trace_writer_open(&w, path, &in, &e);
	coli_trace_rec x[3] = {gen(0), gen(1), gen(2)};
	x[2].kind = 9;
	rc = rc == 0 ? coli_trace_append_n(w, x, 3, &e) : 0;
	T_CHECK("writer: refuses an invalid record, naming its index",
		rc == -1 && e.code == COLI_EUSAGE && strstr(e.msg, "record 2: kind 9 is not a v3 record kind"), "rc %d: %s",
		rc, e.msg);
	rc = coli_trace_writer_close(w, &e);
	coli_trace_reader *r = NULL;
	int same;
	long got = rc == 0 && coli_trace_reader_open(&r, path, &e) == 0 ? read_all(r, 10, &same, &e) : -1;
	T_CHECK("writer: the records before the refused one are kept", got == 2 && same, "%ld: %s", got, e.msg);
	coli_trace_reader_close(r);
	uint64_t t = coli_trace_writer_open(&w, path, &in, &e) == 0 ? coli_trace_now(w) : ~0ull;
	T_CHECK("writer: its clock starts at open", t < 1000000000ull, "now %llu ns", (unsigned long long)t);
	coli_trace_writer_abort(w);
}

/* A trace of recs written (version 3), then its header made an older version: read by that
 * version's rules. */
static void older_case(const char *name, int version, const coli_trace_rec *recs, size_t n, const char *want)
{
	coli_err e = {0, ""};
	coli_trace_info in = info_of(NULL);
	coli_trace_writer *w;
	coli_trace_reader *r = NULL;
	coli_trace_rec x[8];
	size_t len;
	char as[32];
	int rc = coli_trace_writer_open(&w, path, &in, &e);
	rc = rc == 0 ? coli_trace_append_n(w, recs, n, &e) : -1;
	rc = rc == 0 ? coli_trace_writer_close(w, &e) : (coli_trace_writer_abort(w), -1);
	uint8_t *b = slurp(path, &len);
	int was3 = rc == 0 && le_get32(b + 8) == 3;
	le_put32(b + 8, (uint32_t)version);
	le_put32(b + 124, (uint32_t)crc32(0, b, 124));
	snprintf(as, sizeof(as), "v%d.coli_trace", version);
	long got = coli_trace_reader_open_mem(&r, b, len, as, &e) == 0 ? 0 : -2, k = 0;
	while (got >= 0 && (k = coli_trace_next_n(r, x, 8, &e)) > 0)
		got += k;
	got = k < 0 ? -1 : got;
	int read_as = r ? coli_trace_reader_info(r)->version : 0;
	T_CHECK(name, was3 && (want ? got == -1 && strstr(e.msg, want) != NULL : got == (long)n && read_as == version),
		"written as version 3: %d; got %ld, version %d: %s", was3, got, read_as, e.msg);
	coli_trace_reader_close(r);
	free(b);
	unlink(path);
}

/* Version 3 is written; version 1 and 2 files are still read, and a span kind a later version
 * added (BETWEEN in 2, INDEXER and MIX in 3) is refused by the older version's rules. */
static void versions(void)
{
	const coli_trace_rec v1[2] = {{COLI_TR_SPAN, COLI_SPAN_OTHER, 0, 0, -1, -1, 10, 30, 0},
				      {COLI_TR_TOKEN, COLI_PHASE_DECODE, 0, 0, -1, -1, 10, 30, 1}};
	const coli_trace_rec v2[3] = {{COLI_TR_SPAN, COLI_SPAN_OTHER, 0, 0, -1, -1, 10, 20, 0},
				      {COLI_TR_SPAN, COLI_SPAN_BETWEEN, 0, 0, -1, -1, 20, 30, 0},
				      {COLI_TR_TOKEN, COLI_PHASE_DECODE, 0, 0, -1, -1, 10, 30, 1}};
	const coli_trace_rec v3[4] = {{COLI_TR_SPAN, COLI_SPAN_INDEXER, 0, 0, 0, -1, 10, 15, 0},
				      {COLI_TR_SPAN, COLI_SPAN_ATTENTION, 0, 0, 0, -1, 15, 20, 0},
				      {COLI_TR_SPAN, COLI_SPAN_MIX, 0, 0, 0, -1, 20, 30, 0},
				      {COLI_TR_TOKEN, COLI_PHASE_DECODE, 0, 0, -1, -1, 10, 30, 1}};
	older_case("version 1: a file without BETWEEN spans is read, its version said", 1, v1, 2, NULL);
	older_case("version 1: a BETWEEN span is refused by version 1's rules", 1, v2, 3,
		   "v1.coli_trace: record 1: sub (span kind) 5 out of range [0, 4] for version 1");
	const coli_trace_rec wall[3] = {v1[0], v1[1], {COLI_TR_WALL, COLI_PHASE_DECODE, 0, 1, -1, -1, 5, 30, 1}};
	older_case("version 1: a WALL record is refused by version 1's rules", 1, wall, 3,
		   "v1.coli_trace: record 2: kind 5 is not a v1 record kind");
	older_case("version 2: a file with BETWEEN spans and a WALL is read, its version said", 2, wall, 3, NULL);
	older_case("version 2: an INDEXER span is refused by version 2's rules", 2, v3, 4,
		   "v2.coli_trace: record 0: sub (span kind) 7 out of range [0, 6] for version 2");
	older_case("version 3: INDEXER and MIX spans are read", 3, v3, 4, NULL);
}

/* ---- the engine's tracer: the caller's wall ---- */

static coli_trace_rec seen[64];
static int n_seen;

static void collect(void *ctx, const coli_trace_rec *r)
{
	(void)ctx;
	if (n_seen < 64)
		seen[n_seen++] = *r;
}

/* Each TOKEN's spans: contiguous from its t0, summing to its duration; 1 when all are. */
static int spans_tile(void)
{
	uint64_t at = 0, sum = 0;
	int open = 0;
	for (int i = 0; i < n_seen; i++) {
		const coli_trace_rec *r = &seen[i];
		if (r->kind == COLI_TR_SPAN && ((open && r->t0 != at) || r->layer < -1))
			return 0;
		if (r->kind == COLI_TR_SPAN)
			sum += r->t1 - r->t0, at = r->t1, open = 1;
		if (r->kind == COLI_TR_TOKEN && (sum != r->t1 - r->t0 || at != r->t1))
			return 0;
		if (r->kind == COLI_TR_TOKEN)
			sum = 0, open = 0;
	}
	return 1;
}

static const coli_trace_rec *token_rec(int k)
{
	for (int i = 0; i < n_seen; i++)
		if (seen[i].kind == COLI_TR_TOKEN && seen[i].token == k)
			return &seen[i];
	return NULL;
}

static int between_spans(int k)
{
	int n = 0;
	for (int i = 0; i < n_seen; i++)
		n += seen[i].kind == COLI_TR_SPAN && seen[i].sub == COLI_SPAN_BETWEEN && seen[i].token == k &&
		     seen[i].layer == -1;
	return n;
}

/* Until t's clock has moved 1000 ns on: each interval between marks lasts (no timing asserted). */
static void tick(const coli_tracer *t)
{
	uint64_t a = coli_tracer_now(t);
	while (coli_tracer_now(t) < a + 1000)
		;
}

/* Defect 6: a call without a wall is its forward pass (version 1's records); within a wall the
 * calls tile the caller's interval (the time between them BETWEEN spans), so their durations
 * sum to the caller's seconds, and a read between calls belongs to the call before. */
static void tracer_wall(void)
{
	coli_tracer t;
	coli_tracer_init(&t, collect, NULL);
	n_seen = 0;
	coli_tracer_wall_begin(NULL, COLI_PHASE_DECODE, coli_now()); /* NULL and an unused tracer: no-ops */
	coli_tracer spare = {0};
	coli_tracer_wall_begin(&spare, COLI_PHASE_DECODE, coli_now());
	coli_tracer_wall_end(&spare, coli_now(), 1);
	coli_tracer_begin(&t);
	coli_tracer_mark(&t, COLI_SPAN_OTHER, -1);
	coli_tracer_end(&t, 3);
	int before = n_seen;
	double w0 = coli_now();
	coli_tracer_wall_begin(&t, COLI_PHASE_DECODE, w0);
	for (int c = 0; c < 2; c++) {
		tick(&t);
		coli_tracer_begin(&t);
		tick(&t);
		coli_tracer_mark(&t, COLI_SPAN_ATTENTION, 0);
		tick(&t);
		coli_tracer_mark(&t, COLI_SPAN_EXPERTS, 0);
		coli_tracer_end(&t, 1);
		uint64_t now = coli_tracer_now(&t);
		coli_tracer_emit(&t, COLI_TR_READ, COLI_READ_OK, 0, 0, 5, now, now, 4096);
	}
	tick(&t);
	double w1 = coli_now();
	coli_tracer_wall_end(&t, w1, 2);
	const coli_trace_rec *k0 = token_rec(0), *k1 = token_rec(1), *k2 = token_rec(2);
	T_CHECK("tracer: a call without a wall: one TOKEN when it ends, its spans its forward pass, no BETWEEN",
		before == 2 && k0 && k0->sub == COLI_PHASE_PREFILL && k0->n == 3 && between_spans(0) == 0, "%d records",
		before);
	uint64_t want = (uint64_t)(floor(w1 * 1e9 + 0.5) - floor(w0 * 1e9 + 0.5));
	T_CHECK("tracer: within a wall the calls tile the caller's interval to the nanosecond",
		k1 && k2 && k1->t1 == k2->t0 && k2->t1 - k1->t0 == want && k1->sub == COLI_PHASE_DECODE &&
		k2->sub == COLI_PHASE_DECODE, "calls [%llu, %llu] [%llu, %llu], the wall %llu ns",
		k1 ? (unsigned long long)k1->t0 : 0, k1 ? (unsigned long long)k1->t1 : 0, k2 ? (unsigned long long)k2->t0 : 0,
		k2 ? (unsigned long long)k2->t1 : 0, (unsigned long long)want);
	T_CHECK("tracer: the time between calls in BETWEEN spans (layer -1), every call's spans tile it",
		between_spans(1) == 2 && between_spans(2) == 1 && spans_tile(), "between %d %d, tile %d", between_spans(1),
		between_spans(2), spans_tile());
	int read_ok = 0;
	for (int i = 0; i < n_seen; i++)
		if (seen[i].kind == COLI_TR_READ)
			read_ok += seen[i].token == (read_ok ? 2 : 1) && (read_ok || seen + i < k1);
	T_CHECK("tracer: a read between calls is the earlier call's, written before its TOKEN", read_ok == 2,
		"%d reads placed right", read_ok);
	const coli_trace_rec *w = &seen[n_seen - 1];
	T_CHECK("tracer: the wall's record last: its phase, the caller's interval, the tokens it counted",
		k1 && k2 && w->kind == COLI_TR_WALL && w->sub == COLI_PHASE_DECODE && w->t0 == k1->t0 && w->t1 == k2->t1 &&
		w->n == 2 && w->token == 3 && w->layer == -1 && w->expert == -1, "kind %d n %llu token %d", w->kind,
		(unsigned long long)w->n, w->token);
}

/* ---- corrupt inputs ---- */

static uint8_t *base;      /* a small valid trace: meta {"k":1}, 50 records */
static size_t base_len, hsz; /* its length, header + extension */

static void fix_crcs(uint8_t *b)
{
	le_put32(b + 84, (uint32_t)crc32(0, b + COLI_TRACE_HEADER, (uInt)(hsz - COLI_TRACE_HEADER)));
	le_put32(b + 124, (uint32_t)crc32(0, b, 124));
}

static void fix_trailer(uint8_t *t)
{
	le_put32(t + 28, (uint32_t)crc32(0, t, 28));
}

/* Reading b must fail as corrupt data (or truncated: want_trunc) with a message naming want. */
static void refused(const char *name, const uint8_t *b, size_t len, const char *want, int want_trunc)
{
	coli_err e = {0, ""};
	coli_trace_reader *r = NULL;
	int same;
	long got = coli_trace_reader_open_mem(&r, b, len, "run.coli_trace", &e) == 0 ? read_all(r, 64, &same, &e) : -1;
	coli_trace_reader_close(r);
	int trunc = strstr(e.msg, "truncated") != NULL;
	T_CHECK(name, got == -1 && e.code == COLI_EDATA && strstr(e.msg, "run.coli_trace: ") && strstr(e.msg, want) &&
		trunc == want_trunc, "got %ld, message '%s' (want '%s')", got, e.msg, want);
}

/* A copy of base with `width` bytes at off set to v, little-endian (wider than 8: each byte v). */
static uint8_t *patched(size_t off, int width, uint64_t v)
{
	uint8_t *b = malloc(base_len);
	memcpy(b, base, base_len);
	for (int i = 0; i < width; i++)
		b[off + (size_t)i] = (uint8_t)(width > 8 ? v : v >> (8 * i));
	return b;
}

static void header_case(const char *name, size_t off, int width, uint64_t v, int fix, const char *want)
{
	uint8_t *b = patched(off, width, v);
	if (fix)
		fix_crcs(b);
	refused(name, b, base_len, want, 0);
	free(b);
}

static void trailer_case(const char *name, size_t off, int width, uint64_t v, int fix, const char *want)
{
	uint8_t *b = patched(base_len - COLI_TRACE_TRAILER + off, width, v);
	if (fix)
		fix_trailer(b + base_len - COLI_TRACE_TRAILER);
	refused(name, b, base_len, want, 0);
	free(b);
}

/* base with record idx's bytes [off, off + width) set to v, recompressed with a consistent
 * trailer, so that only the record rule can refuse it; extra: bytes appended to the records. */
static void record_case(const char *name, int idx, int off, int width, uint64_t v, size_t extra, const char *want)
{
	size_t n = le_get64(base + base_len - 24) * COLI_TRACE_REC_SIZE, zn = compressBound((uLong)(n + extra));
	uLongf rn = (uLongf)n;
	uint8_t *recs = calloc(1, n + extra), *b = malloc(hsz + zn + COLI_TRACE_TRAILER);
	uncompress(recs, &rn, base + hsz, (uLong)(base_len - hsz - COLI_TRACE_TRAILER));
	for (int i = 0; i < width; i++)
		recs[(size_t)idx * COLI_TRACE_REC_SIZE + (size_t)(off + i)] = (uint8_t)(v >> (8 * i));
	uLongf zlen = (uLongf)zn;
	compress2(b + hsz, &zlen, recs, (uLong)(n + extra), 6);
	memcpy(b, base, hsz);
	uint8_t *t = b + hsz + zlen;
	memcpy(t, base + base_len - COLI_TRACE_TRAILER, COLI_TRACE_TRAILER);
	le_put32(t + 16, (uint32_t)crc32(0, recs, (uInt)(n + extra)));
	fix_trailer(t);
	refused(name, b, hsz + zlen + COLI_TRACE_TRAILER, want, 0);
	free(recs);
	free(b);
}

static void truncations(void)
{
	static const struct { long cut; const char *where; } cuts[] = {
		{0, "empty file"}, {5, "inside the magic"}, {60, "inside the header"}, {COLI_TRACE_HEADER + 10, "inside the extension"},
		{-3, "in the middle of the record stream"}, {-(long)COLI_TRACE_TRAILER - 2, "at the end of the record stream"},
		{-(long)COLI_TRACE_TRAILER, "before the trailer"}, {-10, "inside the trailer"}, {-1, "one byte short"}};
	char name[160];
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		size_t len = cuts[i].cut == -3 ? (hsz + base_len) / 2 : cuts[i].cut < 0 ? base_len - (size_t)-cuts[i].cut :
											   (size_t)cuts[i].cut;
		snprintf(name, sizeof(name), "truncated %s (%zu of %zu bytes): refused as truncated", cuts[i].where, len,
			 base_len);
		refused(name, base, len, "truncated", 1);
	}
	coli_err e = {0, ""};
	coli_trace_reader *r = NULL;
	coli_trace_rec x;
	int same, got = 0, rc = coli_trace_reader_open_mem(&r, base, base_len - 40, "cut", &e);
	while (rc >= 0 && (rc = coli_trace_next(r, &x, &e)) == 1)
		got++;
	T_CHECK("truncated: records before the cut are yielded, then the error, again on the next call",
		rc == -1 && got > 0 && coli_trace_next(r, &x, &e) == -1 && strstr(e.msg, "truncated"), "%d records: %s",
		got, e.msg);
	coli_trace_reader_close(r);
	FILE *f = fopen(path, "wb");
	fwrite(base, 1, base_len / 2, f);
	fclose(f);
	T_CHECK("truncated: a cut file on disk, through coli_trace_reader_open",
		coli_trace_reader_open(&r, path, &e) == 0 && read_all(r, 64, &same, &e) == -1 && strstr(e.msg, path) &&
		strstr(e.msg, "truncated"), "%s", e.msg);
	coli_trace_reader_close(r);
}

static void header_cases(void)
{
	header_case("header: bad magic", 1, 1, 'X', 0, "bad magic");
	header_case("header: a future version", 8, 4, 4, 1, "version 4 unsupported (this reader knows 1 to 3)");
	header_case("header: version 0", 8, 4, 0, 1, "version 0 unsupported");
	header_case("header: a flipped byte (header_crc32)", 50, 1, 0x7f, 0, "header_crc32");
	header_case("header: header_size", 12, 4, 256, 1, "header_size 256");
	header_case("header: flags nonzero", 60, 4, 1, 1, "flags 0x00000001");
	header_case("header: reserved byte nonzero", 100, 1, 3, 1, "reserved byte 100 is 3");
	header_case("header: record_size", 72, 4, 48, 1, "record_size 48");
	header_case("header: n_layers 0", 48, 4, 0, 1, "n_layers 0 out of range");
	header_case("header: n_experts too large", 52, 4, 1u << 20, 1, "n_experts 1048576 out of range");
	header_case("header: top_k above n_experts", 56, 4, E + 1, 1, "top_k 129 out of range");
	header_case("header: n_copies 0", 76, 4, 0, 1, "n_copies 0 out of range");
	header_case("header: ext_size beyond its bound", 80, 4, 0xffffffffu, 1, "ext_size 4294967295 exceeds");
	uint8_t *b = patched(80, 4, 20);
	le_put32(b + 84, (uint32_t)crc32(0, b + COLI_TRACE_HEADER, 20));
	le_put32(b + 124, (uint32_t)crc32(0, b, 124));
	refused("extension: ext_size ending inside the copy table", b, base_len, "copy[0]: the extension ends", 0);
	free(b);
	header_case("extension: a flipped byte (ext_crc32)", COLI_TRACE_HEADER + 40, 1, 'Z', 0, "ext_crc32");
	header_case("extension: copy dev not NUL-terminated", COLI_TRACE_HEADER + 7, 25, 'A', 1,
		    "copy[0].dev: not NUL-terminated");
	header_case("extension: copy dev bytes after its NUL", COLI_TRACE_HEADER + 20, 1, 'x', 1,
		    "copy[0].dev: byte 20 after the NUL");
	header_case("extension: copy dir_len 0", COLI_TRACE_HEADER + 32, 2, 0, 1, "copy[0].dir_len 0");
	header_case("extension: copy dir with a NUL", COLI_TRACE_HEADER + 36, 1, 0, 1, "copy[0].dir: holds a NUL");
	header_case("extension: meta_size disagrees with ext_size", hsz - 11, 4, 6, 1, "meta_size 6");
	header_case("extension: metadata not JSON", hsz - 7, 1, 'x', 1, "metadata: not JSON");
	header_case("extension: metadata a JSON array", hsz - 7, 7, 0x5d332c322c315bull, 1, "metadata: a JSON array");
}

static void record_cases(void)
{
	record_case("record: an unknown kind", 7, 0, 1, 9, 0, "record 7: kind 9 is not a v3 record kind");
	record_case("record: kind 0", 3, 0, 1, 0, 0, "record 3: kind 0 is not");
	record_case("record: TOKEN phase out of range", 0, 1, 1, 2, 0, "record 0: sub (phase) 2 out of range");
	record_case("record: SPAN kind out of range", 1, 1, 1, COLI_SPAN_N, 0, "record 1: sub (span kind) 9 out of range [0, 8] for version 3");
	record_case("record: READ reserved flag bits", 2, 1, 1, 0x09, 0, "record 2: sub (read flags) 0x09: reserved");
	record_case("record: EXPERT outcome out of range", 3, 1, 1, COLI_X_N, 0, "record 3: sub (outcome) 6");
	record_case("record: READ copy beyond n_copies", 6, 2, 2, NC, 0, "record 6: copy 3 out of range [0, 2] for kind READ");
	record_case("record: copy nonzero outside READ", 4, 2, 2, 1, 0, "record 4: copy 1 out of range [0, 0]");
	record_case("record: negative token", 5, 4, 4, 0xfffffffeu, 0, "record 5: token -2");
	record_case("record: layer beyond n_layers", 3, 8, 4, L, 0, "record 3: layer 48 out of range [0, 47]");
	record_case("record: a TOKEN with a layer", 4, 8, 4, 0, 0, "record 4: layer 0 out of range [-1, -1]");
	record_case("record: expert beyond n_experts", 7, 12, 4, E, 0, "record 7: expert 128 out of range [0, 127]");
	record_case("record: a SPAN with an expert", 9, 12, 4, 3, 0, "record 9: expert 3 out of range [-1, -1]");
	record_case("record: t1 before t0", 8, 24, 8, 0, 0, "record 8: t1 0 is before t0");
	record_case("record: an EXPERT lasting", 11, 24, 8, 1ull << 40, 0, "record 11: t1 1099511627776 differs from t0 11019: an EXPERT record is an instant");
	record_case("record: a TOKEN of no positions", 12, 32, 8, 0, 0, "record 12: n 0: a TOKEN record counts");
	record_case("record: a SPAN with n", 13, 32, 8, 7, 0, "record 13: n 7, must be 0 for kind SPAN");
	record_case("stream: a partial record at the end", 0, 0, 0, 0, 17, "ends with 17 bytes, not a whole 40-byte record");
}

static void trailer_cases(void)
{
	trailer_case("trailer: n_records disagrees", 8, 8, 51, 1, "n_records 51, the stream holds 50");
	trailer_case("trailer: records_crc32 disagrees", 16, 1, 0x5a, 1, "records_crc32");
	trailer_case("trailer: a flipped byte (trailer_crc32)", 9, 1, 0x40, 0, "trailer_crc32");
	trailer_case("trailer: bad magic", 2, 1, 'x', 1, "trailer: bad magic");
	trailer_case("trailer: reserved byte nonzero", 22, 1, 1, 1, "trailer: reserved byte 22 is 1");
	uint8_t *b = malloc(base_len + 1);
	memcpy(b, base, base_len);
	b[base_len] = 0;
	refused("trailer: data after it", b, base_len + 1, "data after the trailer", 0);
	memcpy(b, base, base_len);
	b[hsz + (base_len - hsz) / 3] ^= 0x10;
	refused("stream: a flipped byte of deflate data is corrupt, not truncated", b, base_len, "run.coli_trace", 0);
	free(b);
}

int main(void)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, sizeof(path), "%s/coli-test-trace.%d.coli_trace", dir, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	roundtrip();
	empty_and_abort();
	writer_refuses();
	versions();
	tracer_wall();

	coli_err e = {0, ""};
	int rc = write_trace("{\"k\":1}", 50, NULL, &e);
	base = slurp(path, &base_len);
	hsz = COLI_TRACE_HEADER + le_get32(base + 80);
	T_CHECK("corrupt inputs: the base trace is written", rc == 0 && base_len > hsz, "%s", e.msg);
	coli_trace_reader *r = NULL;
	int same;
	long got = coli_trace_reader_open_mem(&r, base, base_len, "base", &e) == 0 ? read_all(r, 64, &same, &e) : -1;
	T_CHECK("corrupt inputs: control, the base reads", got == 50 && same, "%ld: %s", got, e.msg);
	coli_trace_reader_close(r);
	truncations();
	header_cases();
	record_cases();
	trailer_cases();

	rc = coli_trace_reader_open(&r, "/nonexistent/x.coli_trace", &e);
	T_CHECK("read: a missing file is an I/O error", rc == -1 && e.code == COLI_EIO && strstr(e.msg, "/nonexistent"),
		"rc %d: %s", rc, e.msg);
	free(base);
	unlink(path);
	T_EXIT();
}
