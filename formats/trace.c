/* trace.c: writing and streaming-reading .coli_trace run traces (layout: formats/trace.md). */
#include "crc32.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "fileio.h"
#include "frame.h"
#include "le.h"

#define REC COLI_TRACE_REC_SIZE
#define COPY_FIXED 34u /* dev[32], dir_len */

static const coli_frame trace_frame = {
	.kind = "coli trace",
	.magic = {0x89, 'C', 'O', 'L', 'I', 'T', 'R', '\n'},
	.header_size = COLI_TRACE_HEADER,
	.version_min = COLI_TRACE_VERSION_MIN,
	.version = COLI_TRACE_VERSION,
};
static const uint8_t trailer_magic[8] = {0x89, 'C', 'O', 'L', 'I', 'T', 'E', '\n'};
static const char *const kind_name[] = {"", "TOKEN", "SPAN", "READ", "EXPERT", "WALL"};

/* ---- shared: serialisation and the rules a record and a header keep ---- */

static void put_rec(uint8_t *p, const coli_trace_rec *r)
{
	p[0] = r->kind, p[1] = r->sub;
	p[2] = (uint8_t)r->copy, p[3] = (uint8_t)(r->copy >> 8);
	le_put32(p + 4, (uint32_t)r->token);
	le_put32(p + 8, (uint32_t)r->layer);
	le_put32(p + 12, (uint32_t)r->expert);
	le_put64(p + 16, r->t0);
	le_put64(p + 24, r->t1);
	le_put64(p + 32, r->n);
}

static void get_rec(const uint8_t *p, coli_trace_rec *r)
{
	r->kind = p[0], r->sub = p[1];
	r->copy = (uint16_t)(p[2] | p[3] << 8);
	r->token = (int32_t)le_get32(p + 4);
	r->layer = (int32_t)le_get32(p + 8);
	r->expert = (int32_t)le_get32(p + 12);
	r->t0 = le_get64(p + 16);
	r->t1 = le_get64(p + 24);
	r->n = le_get64(p + 32);
}

__attribute__((format(printf, 3, 4))) static const char *fault(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return why;
}

/* sub's range by kind; a version 1 file has no BETWEEN span, a version 2 file no INDEXER or MIX. */
static const char *sub_fault(const coli_trace_rec *r, int version, char *why, size_t n)
{
	const int spans = version == 1 ? COLI_SPAN_N_V1 : version == 2 ? COLI_SPAN_N_V2 : COLI_SPAN_N;
	const int sub_n[] = {0, 2, spans, 8, COLI_X_N, 2};
	static const char *const what[] = {"", "phase", "span kind", "read flags", "outcome", "phase"};
	if (r->kind == COLI_TR_READ && r->sub >= 8)
		return fault(why, n, "sub (read flags) 0x%02x: reserved bits 3..7 must be 0", r->sub);
	if (r->sub >= sub_n[r->kind])
		return fault(why, n, "sub (%s) %u out of range [0, %d] for version %d", what[r->kind], r->sub,
			     sub_n[r->kind] - 1, version);
	return NULL;
}

/* copy, token, layer and expert, whose ranges depend on the kind and the header's shape. */
static const char *place_fault(const coli_trace_rec *r, const coli_trace_info *s, char *why, size_t n)
{
	int io = r->kind == COLI_TR_READ || r->kind == COLI_TR_EXPERT;
	int copies = r->kind == COLI_TR_READ ? s->n_copies : 1;
	int lo = io ? 0 : -1, hi = r->kind == COLI_TR_TOKEN || r->kind == COLI_TR_WALL ? -1 : s->n_layers - 1;
	const char *k = kind_name[r->kind];
	if (r->copy >= copies)
		return fault(why, n, "copy %u out of range [0, %d] for kind %s", r->copy, copies - 1, k);
	if (r->token < 0)
		return fault(why, n, "token %d is negative", r->token);
	if (r->layer < lo || r->layer > hi)
		return fault(why, n, "layer %d out of range [%d, %d] for kind %s", r->layer, lo, hi, k);
	if (io ? r->expert < 0 || r->expert >= s->n_experts : r->expert != -1)
		return fault(why, n, "expert %d out of range [%d, %d] for kind %s", r->expert, io ? 0 : -1,
			     io ? s->n_experts - 1 : -1, k);
	return NULL;
}

static const char *time_fault(const coli_trace_rec *r, char *why, size_t n)
{
	unsigned long long t0 = r->t0, t1 = r->t1, v = r->n;
	if (t1 < t0)
		return fault(why, n, "t1 %llu is before t0 %llu", t1, t0);
	if (r->kind == COLI_TR_EXPERT && t1 != t0)
		return fault(why, n, "t1 %llu differs from t0 %llu: an EXPERT record is an instant", t1, t0);
	if (r->kind == COLI_TR_TOKEN && v == 0)
		return fault(why, n, "n 0: a TOKEN record counts at least one position");
	if ((r->kind == COLI_TR_SPAN || r->kind == COLI_TR_EXPERT) && v != 0)
		return fault(why, n, "n %llu, must be 0 for kind %s", v, kind_name[r->kind]);
	return NULL;
}

/* The first rule of s's version r breaks, in why; NULL when it keeps them all. */
static const char *rec_fault(const coli_trace_rec *r, const coli_trace_info *s, char *why, size_t n)
{
	if (r->kind < COLI_TR_TOKEN || r->kind > (s->version == 1 ? COLI_TR_EXPERT : COLI_TR_WALL))
		return fault(why, n, "kind %u is not a v%d record kind", r->kind, s->version);
	const char *f = sub_fault(r, s->version, why, n);
	if (!f)
		f = place_fault(r, s, why, n);
	return f ? f : time_fault(r, why, n);
}

static int check_rec(const coli_trace_rec *r, const coli_trace_info *s, uint64_t index, const char *name, int code,
		     coli_err *e)
{
	char why[256];
	const char *f = rec_fault(r, s, why, sizeof(why));
	return f ? coli_errf(e, code, "%s: record %llu: %s", name, (unsigned long long)index, f) : 0;
}

static int range(const char *name, const char *field, long long v, long long lo, long long hi, int code, coli_err *e)
{
	if (v < lo || v > hi)
		return coli_errf(e, code, "%s: %s %lld out of range [%lld, %lld]", name, field, v, lo, hi);
	return 0;
}

static int check_shape(const char *name, long long nl, long long nx, long long k, long long nc, int code, coli_err *e)
{
	if (range(name, "n_layers", nl, 1, COLI_TRACE_MAX_LAYERS, code, e) < 0 ||
	    range(name, "n_experts", nx, 1, COLI_TRACE_MAX_EXPERTS, code, e) < 0 ||
	    range(name, "top_k", k, 1, nx, code, e) < 0 ||
	    range(name, "n_copies", nc, 1, COLI_TRACE_MAX_COPIES, code, e) < 0)
		return -1;
	return 0;
}

static int check_meta(const char *meta, size_t len, const char *name, int code, coli_err *e)
{
	json_error_t je;
	json_t *j = json_loadb(meta, len, JSON_REJECT_DUPLICATES, &je);
	int rc = 0;
	if (!j)
		rc = coli_errf(e, code, "%s: metadata: not JSON: %s (byte %d)", name, je.text, je.position);
	else if (!json_is_object(j))
		rc = coli_errf(e, code, "%s: metadata: a JSON array, must be an object", name);
	json_decref(j);
	return rc;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- writer ---- */

struct coli_trace_writer {
	char *path, *tmp;
	int fd, failed;
	coli_trace_info shape;   /* n_layers, n_experts, n_copies: what the records are checked against */
	uint64_t off, count, mono0;
	uint32_t crc;             /* of the serialised records */
	z_stream z;
	int z_on;
	size_t nbuf;             /* bytes of records in buf */
	uint8_t buf[COLI_TRACE_BUF_RECORDS * REC];
	uint8_t out[1 << 16];
};

static int check_info(const coli_trace_info *in, const char *meta, const char *path, coli_err *e)
{
	if (check_shape(path, in->n_layers, in->n_experts, in->top_k, in->n_copies, COLI_EUSAGE, e) < 0)
		return -1;
	for (int c = 0; c < in->n_copies; c++) {
		size_t dl = in->copies && in->copies[c].dir ? strlen(in->copies[c].dir) : 0;
		if (dl < 1 || dl > COLI_TRACE_MAX_DIR)
			return coli_errf(e, COLI_EUSAGE, "%s: copy[%d].dir: length %zu out of range [1, %d]", path, c, dl,
					 COLI_TRACE_MAX_DIR);
		if (strnlen(in->copies[c].dev, 32) == 32)
			return coli_errf(e, COLI_EUSAGE, "%s: copy[%d].dev: not NUL-terminated", path, c);
	}
	size_t ml = strlen(meta);
	if (ml > COLI_TRACE_MAX_META)
		return coli_errf(e, COLI_EUSAGE, "%s: metadata: %zu bytes exceeds %u", path, ml, COLI_TRACE_MAX_META);
	return check_meta(meta, ml, path, COLI_EUSAGE, e);
}

static size_t ext_bytes(const coli_trace_info *in, size_t meta_len)
{
	size_t n = 4 + meta_len;
	for (int c = 0; c < in->n_copies; c++)
		n += COPY_FIXED + strlen(in->copies[c].dir);
	return n;
}

/* The copy table, then the length-prefixed metadata. */
static void put_ext(uint8_t *p, const coli_trace_info *in, const char *meta, size_t meta_len)
{
	for (int c = 0; c < in->n_copies; c++) {
		size_t dl = strlen(in->copies[c].dir);
		memset(p, 0, 32);
		memcpy(p, in->copies[c].dev, strnlen(in->copies[c].dev, 32));
		p[32] = (uint8_t)dl, p[33] = (uint8_t)(dl >> 8);
		memcpy(p + COPY_FIXED, in->copies[c].dir, dl);
		p += COPY_FIXED + dl;
	}
	le_put32(p, (uint32_t)meta_len);
	memcpy(p + 4, meta, meta_len);
}

static void put_header(uint8_t *h, const coli_trace_info *in, uint64_t start, size_t ext_size, uint32_t ext_crc)
{
	coli_frame_put(&trace_frame, h, in->identity);
	le_put32(h + 48, (uint32_t)in->n_layers);
	le_put32(h + 52, (uint32_t)in->n_experts);
	le_put32(h + 56, (uint32_t)in->top_k);
	le_put64(h + 64, start);
	le_put32(h + 72, REC);
	le_put32(h + 76, (uint32_t)in->n_copies);
	le_put32(h + 80, (uint32_t)ext_size);
	le_put32(h + 84, ext_crc);
	coli_frame_seal(&trace_frame, h);
}

static int put(coli_trace_writer *w, const void *data, size_t n, coli_err *e)
{
	if (coli_pwrite_full(w->fd, data, n, w->off, w->tmp, e) < 0)
		return w->failed = 1, -1;
	w->off += n;
	return 0;
}

static int write_header(coli_trace_writer *w, const coli_trace_info *in, const char *meta, coli_err *e)
{
	size_t ml = strlen(meta), es = ext_bytes(in, ml);
	uint8_t *b = coli_malloc(COLI_TRACE_HEADER + es, e);
	if (!b)
		return -1;
	put_ext(b + COLI_TRACE_HEADER, in, meta, ml);
	put_header(b, in, clock_ns(CLOCK_REALTIME), es, coli_crc32(0, b + COLI_TRACE_HEADER, es));
	int rc = put(w, b, COLI_TRACE_HEADER + es, e);
	free(b);
	return rc;
}

static int writer_init(coli_trace_writer *w, const char *path, const coli_trace_info *in, coli_err *e)
{
	size_t n = strlen(path) + 5;
	w->shape.n_layers = in->n_layers, w->shape.n_experts = in->n_experts, w->shape.n_copies = in->n_copies;
	w->shape.version = COLI_TRACE_VERSION;
	w->crc = 0;
	w->path = strdup(path);
	w->tmp = malloc(n);
	if (!w->path || !w->tmp)
		return coli_errf(e, COLI_ENOMEM, "%s: out of memory allocating %zu bytes", path, n);
	snprintf(w->tmp, n, "%s.tmp", path);
	if (deflateInit(&w->z, 1) != Z_OK)
		return coli_errf(e, COLI_ENOMEM, "%s: zlib deflateInit failed (out of memory)", path);
	w->z_on = 1;
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", w->tmp, strerror(errno));
	w->mono0 = clock_ns(CLOCK_MONOTONIC);
	return 0;
}

int coli_trace_writer_open(coli_trace_writer **out, const char *path, const coli_trace_info *info, coli_err *e)
{
	const char *meta = info->meta ? info->meta : "{}";
	*out = NULL;
	if (check_info(info, meta, path, e) < 0)
		return -1;
	coli_trace_writer *w = coli_calloc(1, sizeof(*w), e);
	if (!w)
		return -1;
	w->fd = -1;
	if (writer_init(w, path, info, e) < 0 || write_header(w, info, meta, e) < 0) {
		coli_trace_writer_abort(w);
		return -1;
	}
	*out = w;
	return 0;
}

uint64_t coli_trace_now(const coli_trace_writer *w)
{
	return clock_ns(CLOCK_MONOTONIC) - w->mono0;
}

/* Deflates the buffered records into the file; Z_FINISH also ends the stream. */
static int deflate_buf(coli_trace_writer *w, int mode, coli_err *e)
{
	int zr;
	w->crc = coli_crc32(w->crc, w->buf, w->nbuf);
	w->z.next_in = w->buf, w->z.avail_in = (uInt)w->nbuf;
	w->nbuf = 0;
	do {
		w->z.next_out = w->out, w->z.avail_out = sizeof(w->out);
		zr = deflate(&w->z, mode);
		if (zr == Z_STREAM_ERROR)
			return w->failed = 1, coli_errf(e, COLI_EIO, "%s: zlib deflate failed", w->tmp);
		if (put(w, w->out, sizeof(w->out) - w->z.avail_out, e) < 0)
			return -1;
	} while (w->z.avail_out == 0 || (mode == Z_FINISH && zr != Z_STREAM_END));
	return 0;
}

int coli_trace_append_n(coli_trace_writer *w, const coli_trace_rec *r, size_t n, coli_err *e)
{
	if (w->failed)
		return coli_errf(e, COLI_EIO, "%s: an earlier write failed", w->tmp);
	for (size_t i = 0; i < n; i++) {
		if (check_rec(&r[i], &w->shape, w->count, w->path, COLI_EUSAGE, e) < 0)
			return -1;
		put_rec(w->buf + w->nbuf, &r[i]);
		w->nbuf += REC, w->count++;
		if (w->nbuf == sizeof(w->buf) && deflate_buf(w, Z_NO_FLUSH, e) < 0)
			return -1;
	}
	return 0;
}

int coli_trace_append(coli_trace_writer *w, const coli_trace_rec *r, coli_err *e)
{
	return coli_trace_append_n(w, r, 1, e);
}

static void put_trailer(uint8_t *t, uint64_t count, uint32_t crc)
{
	memset(t, 0, COLI_TRACE_TRAILER);
	memcpy(t, trailer_magic, 8);
	le_put64(t + 8, count);
	le_put32(t + 16, crc);
	le_put32(t + 28, coli_crc32(0, t, 28));
}

/* The rest of the stream, the trailer, fsync: the temporary is complete. */
static int finish_file(coli_trace_writer *w, coli_err *e)
{
	uint8_t t[COLI_TRACE_TRAILER];
	if (w->failed)
		return coli_errf(e, COLI_EIO, "%s: not finished: an earlier write failed", w->tmp);
	if (deflate_buf(w, Z_FINISH, e) < 0)
		return -1;
	put_trailer(t, w->count, (uint32_t)w->crc);
	if (put(w, t, sizeof(t), e) < 0)
		return -1;
	if (fsync(w->fd) < 0)
		return coli_errf(e, COLI_EIO, "%s: fsync: %s", w->tmp, strerror(errno));
	return 0;
}

static void free_writer(coli_trace_writer *w)
{
	if (w->z_on)
		deflateEnd(&w->z);
	free(w->path);
	free(w->tmp);
	free(w);
}

int coli_trace_writer_close(coli_trace_writer *w, coli_err *e)
{
	if (!w)
		return 0;
	int rc = finish_file(w, e);
	if (close(w->fd) < 0 && rc == 0)
		rc = coli_errf(e, COLI_EIO, "%s: close: %s", w->tmp, strerror(errno));
	if (rc == 0 && rename(w->tmp, w->path) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: rename: %s", w->path, strerror(errno));
	if (rc < 0)
		unlink(w->tmp);
	else
		rc = coli_fsync_dir_of(w->path, e);
	free_writer(w);
	return rc;
}

void coli_trace_writer_abort(coli_trace_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0) {
		close(w->fd);
		unlink(w->tmp);
	}
	free_writer(w);
}

/* ---- reader ---- */

enum { R_STREAM, R_ENDED, R_DONE, R_FAILED };

typedef struct mem_src {
	const uint8_t *p;
	size_t n, at;
} mem_src;

struct coli_trace_reader {
	coli_trace_read_fn fn;
	void *ctx;
	char *name;
	FILE *file;              /* opened by coli_trace_reader_open */
	mem_src mem;             /* the input of coli_trace_reader_open_mem */
	coli_trace_info info;
	coli_trace_copy *copies;
	char *strs;              /* the copies' folders and the metadata, each NUL-terminated */
	z_stream z;
	int z_on, state;
	uint64_t index;          /* records yielded */
	uint32_t crc;             /* of the records inflated */
	size_t pos, len;         /* out[pos, len): inflated bytes not yet yielded */
	coli_err err;            /* sticky once state is R_FAILED */
	uint8_t in[1 << 16];
	uint8_t out[1024 * REC];
};

static long pull(coli_trace_reader *r, void *buf, size_t n, coli_err *e)
{
	coli_err ce = {0, ""};
	long k = r->fn(r->ctx, buf, n, &ce);
	if (k < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", r->name, ce.msg[0] ? ce.msg : "read failed");
	if ((size_t)k > n)
		return coli_errf(e, COLI_EIO, "%s: read callback returned %ld for %zu bytes", r->name, k, n);
	return k;
}

/* n bytes, or fewer (*got) at the end of the input. */
static int read_full(coli_trace_reader *r, uint8_t *buf, size_t n, size_t *got, coli_err *e)
{
	long k = 1;
	*got = 0;
	while (*got < n && k > 0) {
		k = pull(r, buf + *got, n - *got, e);
		if (k < 0)
			return -1;
		*got += (size_t)k;
	}
	return 0;
}

static int check_fixed(coli_trace_reader *r, const uint8_t *h, coli_err *e)
{
	uint32_t nc = le_get32(h + 76), es = le_get32(h + 80);
	uint64_t es_max = (uint64_t)nc * (COPY_FIXED + COLI_TRACE_MAX_DIR) + 4 + COLI_TRACE_MAX_META;
	if (le_get32(h + 60))
		return coli_errf(e, COLI_EDATA, "%s: flags 0x%08x: version %u defines no flag, must be 0", r->name,
				 le_get32(h + 60), le_get32(h + 8));
	if (le_get32(h + 72) != REC)
		return coli_errf(e, COLI_EDATA, "%s: record_size %u, expected %u", r->name, le_get32(h + 72), REC);
	if (coli_frame_reserved(h, 88, 124, r->name, e) < 0)
		return -1;
	if (check_shape(r->name, le_get32(h + 48), le_get32(h + 52), le_get32(h + 56), nc, COLI_EDATA, e) < 0)
		return -1;
	if (es > es_max)
		return coli_errf(e, COLI_EDATA, "%s: ext_size %u exceeds %llu (%u copies and the metadata at most)", r->name,
				 es, (unsigned long long)es_max, nc);
	return 0;
}

/* The header as far as the input goes: a short one is refused as truncated (frame.h). The reader
 * is given no container, so any identity is read. */
static int read_header(coli_trace_reader *r, uint8_t *h, coli_err *e)
{
	size_t got;
	if (read_full(r, h, COLI_TRACE_HEADER, &got, e) < 0)
		return -1;
	if (coli_frame_check(&trace_frame, h, got, NULL, r->name, e) < 0)
		return -1;
	return check_fixed(r, h, e);
}

static int parse_copy(coli_trace_reader *r, int c, const uint8_t *p, size_t left, char **s, coli_err *e)
{
	if (left < COPY_FIXED)
		return coli_errf(e, COLI_EDATA, "%s: copy[%d]: the extension ends inside the copy table", r->name, c);
	size_t dev_len = strnlen((const char *)p, 32), dl = (size_t)(p[32] | p[33] << 8);
	if (dev_len == 32)
		return coli_errf(e, COLI_EDATA, "%s: copy[%d].dev: not NUL-terminated", r->name, c);
	for (size_t i = dev_len; i < 32; i++)
		if (p[i])
			return coli_errf(e, COLI_EDATA, "%s: copy[%d].dev: byte %zu after the NUL is %u, must be 0", r->name,
					 c, i, p[i]);
	if (dl < 1 || dl > COLI_TRACE_MAX_DIR)
		return coli_errf(e, COLI_EDATA, "%s: copy[%d].dir_len %zu out of range [1, %d]", r->name, c, dl,
				 COLI_TRACE_MAX_DIR);
	if (dl > left - COPY_FIXED)
		return coli_errf(e, COLI_EDATA, "%s: copy[%d].dir_len %zu runs past the extension", r->name, c, dl);
	if (memchr(p + COPY_FIXED, 0, dl))
		return coli_errf(e, COLI_EDATA, "%s: copy[%d].dir: holds a NUL byte", r->name, c);
	memcpy(r->copies[c].dev, p, 32);
	memcpy(*s, p + COPY_FIXED, dl);
	(*s)[dl] = 0;
	r->copies[c].dir = *s;
	*s += dl + 1;
	return (int)(COPY_FIXED + dl);
}

static int parse_meta(coli_trace_reader *r, const uint8_t *p, size_t left, char *s, coli_err *e)
{
	uint32_t ms = left < 4 ? 0 : le_get32(p);
	if (left < 4)
		return coli_errf(e, COLI_EDATA, "%s: meta_size: the extension ends before it", r->name);
	if (range(r->name, "meta_size", ms, 2, COLI_TRACE_MAX_META, COLI_EDATA, e) < 0)
		return -1;
	if (ms != left - 4)
		return coli_errf(e, COLI_EDATA, "%s: meta_size %u, the extension leaves %zu bytes for it", r->name, ms,
				 left - 4);
	memcpy(s, p + 4, ms);
	s[ms] = 0;
	r->info.meta = s;
	return check_meta(s, ms, r->name, COLI_EDATA, e);
}

static int parse_ext(coli_trace_reader *r, const uint8_t *ext, size_t es, coli_err *e)
{
	size_t at = 0;
	r->copies = coli_calloc((size_t)r->info.n_copies, sizeof(*r->copies), e);
	r->strs = coli_malloc(es + 1, e);
	char *s = r->strs;
	if (!r->copies || !r->strs)
		return -1;
	r->info.copies = r->copies;
	for (int c = 0; c < r->info.n_copies; c++) {
		int n = parse_copy(r, c, ext + at, es - at, &s, e);
		if (n < 0)
			return -1;
		at += (size_t)n;
	}
	return parse_meta(r, ext + at, es - at, s, e);
}

static int read_ext(coli_trace_reader *r, const uint8_t *h, coli_err *e)
{
	size_t es = le_get32(h + 80), got = 0;
	uint8_t *ext = coli_malloc(es, e);
	int rc = ext ? read_full(r, ext, es, &got, e) : -1;
	uint32_t crc = rc == 0 ? coli_crc32(0, ext, got) : 0;
	if (rc == 0 && got < es)
		rc = coli_errf(e, COLI_EDATA, "%s: extension: %zu of %zu bytes (truncated file)", r->name, got, es);
	else if (rc == 0 && crc != le_get32(h + 84))
		rc = coli_errf(e, COLI_EDATA, "%s: ext_crc32 0x%08x, the extension hashes to 0x%08x (corrupt header)",
			       r->name, le_get32(h + 84), crc);
	if (rc == 0)
		rc = parse_ext(r, ext, es, e);
	free(ext);
	return rc;
}

static int reader_start(coli_trace_reader *r, coli_err *e)
{
	uint8_t h[COLI_TRACE_HEADER];
	if (read_header(r, h, e) < 0)
		return -1;
	memcpy(r->info.identity, h + 16, 32);
	r->info.n_layers = (int)le_get32(h + 48), r->info.n_experts = (int)le_get32(h + 52);
	r->info.top_k = (int)le_get32(h + 56), r->info.n_copies = (int)le_get32(h + 76);
	r->info.start_unix_ns = le_get64(h + 64);
	r->info.version = (int)le_get32(h + 8);
	if (read_ext(r, h, e) < 0)
		return -1;
	if (inflateInit(&r->z) != Z_OK)
		return coli_errf(e, COLI_ENOMEM, "%s: zlib inflateInit failed (out of memory)", r->name);
	r->z_on = 1;
	r->crc = 0;
	return 0;
}

static coli_trace_reader *reader_new(const char *name, coli_err *e)
{
	coli_trace_reader *r = coli_calloc(1, sizeof(*r), e);
	if (r && !(r->name = strdup(name))) {
		free(r);
		r = NULL;
		coli_errf(e, COLI_ENOMEM, "%s: out of memory", name);
	}
	return r;
}

/* Reads r's header; on failure closes r. */
static int reader_begin(coli_trace_reader **out, coli_trace_reader *r, coli_err *e)
{
	*out = NULL;
	if (reader_start(r, e) < 0) {
		coli_trace_reader_close(r);
		return -1;
	}
	*out = r;
	return 0;
}

int coli_trace_reader_open_cb(coli_trace_reader **out, coli_trace_read_fn fn, void *ctx, const char *name,
			      coli_err *e)
{
	coli_trace_reader *r = reader_new(name, e);
	*out = NULL;
	if (!r)
		return -1;
	r->fn = fn, r->ctx = ctx;
	return reader_begin(out, r, e);
}

static long mem_read(void *ctx, void *buf, size_t n, coli_err *e)
{
	mem_src *m = ctx;
	(void)e;
	if (n > m->n - m->at)
		n = m->n - m->at;
	memcpy(buf, m->p + m->at, n);
	m->at += n;
	return (long)n;
}

int coli_trace_reader_open_mem(coli_trace_reader **out, const void *data, size_t n, const char *name,
			       coli_err *e)
{
	coli_trace_reader *r = reader_new(name, e);
	*out = NULL;
	if (!r)
		return -1;
	r->mem.p = data, r->mem.n = n;
	r->fn = mem_read, r->ctx = &r->mem;
	return reader_begin(out, r, e);
}

static long file_read(void *ctx, void *buf, size_t n, coli_err *e)
{
	size_t k = fread(buf, 1, n, ctx);
	if (k == 0 && ferror((FILE *)ctx))
		return coli_errf(e, COLI_EIO, "read: %s", strerror(errno));
	return (long)k;
}

int coli_trace_sniff(const char *path, coli_err *e)
{
	uint8_t magic[8] = {0};
	FILE *f = fopen(path, "rb");
	if (!f)
		return coli_errf(e, COLI_EIO, "%s: cannot open: %s", path, strerror(errno));
	size_t got = fread(magic, 1, sizeof(magic), f);
	fclose(f);
	return got == sizeof(magic) && memcmp(magic, trace_frame.magic, sizeof(magic)) == 0;
}

int coli_trace_reader_open(coli_trace_reader **out, const char *path, coli_err *e)
{
	coli_trace_reader *r = reader_new(path, e);
	*out = NULL;
	if (!r)
		return -1;
	if (!(r->file = fopen(path, "rbe"))) {
		coli_errf(e, COLI_EIO, "%s: %s", path, strerror(errno));
		coli_trace_reader_close(r);
		return -1;
	}
	r->fn = file_read, r->ctx = r->file;
	return reader_begin(out, r, e);
}

const coli_trace_info *coli_trace_reader_info(const coli_trace_reader *r)
{
	return &r->info;
}

static uint64_t records_inflated(const coli_trace_reader *r)
{
	return r->index + (r->len - r->pos) / REC;
}

static int refill(coli_trace_reader *r)
{
	long k = pull(r, r->in, sizeof(r->in), &r->err);
	if (k < 0)
		return -1;
	if (k == 0)
		return coli_errf(&r->err, COLI_EDATA, "%s: the record stream breaks off after %llu records (truncated file)",
				 r->name, (unsigned long long)records_inflated(r));
	r->z.next_in = r->in, r->z.avail_in = (uInt)k;
	return 0;
}

/* More inflated bytes behind the partial record left in out. */
static int inflate_more(coli_trace_reader *r)
{
	if (r->z.avail_in == 0 && refill(r) < 0)
		return -1;
	memmove(r->out, r->out + r->pos, r->len - r->pos);
	r->len -= r->pos, r->pos = 0;
	r->z.next_out = r->out + r->len, r->z.avail_out = (uInt)(sizeof(r->out) - r->len);
	int zr = inflate(&r->z, Z_NO_FLUSH);
	size_t got = sizeof(r->out) - r->len - r->z.avail_out;
	r->crc = coli_crc32(r->crc, r->out + r->len, got);
	r->len += got;
	if (zr == Z_STREAM_END)
		r->state = R_ENDED;
	if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT)
		return coli_errf(&r->err, COLI_EDATA, "%s: record stream after %llu records: %s (corrupt data)", r->name,
				 (unsigned long long)records_inflated(r), r->z.msg ? r->z.msg : "not deflate data");
	if (zr == Z_MEM_ERROR)
		return coli_errf(&r->err, COLI_ENOMEM, "%s: zlib inflate: out of memory", r->name);
	return 0;
}

static int check_trailer(coli_trace_reader *r, const uint8_t *t)
{
	uint32_t crc = coli_crc32(0, t, 28), want = le_get32(t + 16);
	unsigned long long n = le_get64(t + 8);
	if (memcmp(t, trailer_magic, 8) != 0)
		return coli_errf(&r->err, COLI_EDATA, "%s: trailer: bad magic (corrupt file)", r->name);
	if (le_get32(t + 28) != crc)
		return coli_errf(&r->err, COLI_EDATA, "%s: trailer_crc32 0x%08x, the trailer hashes to 0x%08x (corrupt trailer)",
				 r->name, le_get32(t + 28), crc);
	for (int i = 20; i < 28; i++)
		if (t[i])
			return coli_errf(&r->err, COLI_EDATA, "%s: trailer: reserved byte %d is %u, must be 0", r->name, i, t[i]);
	if (n != r->index)
		return coli_errf(&r->err, COLI_EDATA, "%s: trailer: n_records %llu, the stream holds %llu (corrupt file)",
				 r->name, n, (unsigned long long)r->index);
	if (want != (uint32_t)r->crc)
		return coli_errf(&r->err, COLI_EDATA, "%s: trailer: records_crc32 0x%08x, the records hash to 0x%08x (corrupt data)",
				 r->name, want, (unsigned)r->crc);
	return 0;
}

/* After the stream: the trailer, then the end of the input. */
static int finish_read(coli_trace_reader *r)
{
	uint8_t t[COLI_TRACE_TRAILER], c;
	size_t got = r->z.avail_in < sizeof(t) ? r->z.avail_in : sizeof(t), more = 0;
	if (r->len != r->pos)
		return coli_errf(&r->err, COLI_EDATA,
				 "%s: the record stream ends with %zu bytes, not a whole %u-byte record (corrupt data)", r->name,
				 r->len - r->pos, REC);
	memcpy(t, r->z.next_in, got);
	r->z.next_in += got, r->z.avail_in -= (uInt)got;
	if (read_full(r, t + got, sizeof(t) - got, &more, &r->err) < 0)
		return -1;
	if (got + more < sizeof(t))
		return coli_errf(&r->err, COLI_EDATA, "%s: trailer: %zu of %u bytes (truncated file)", r->name, got + more,
				 COLI_TRACE_TRAILER);
	if (check_trailer(r, t) < 0)
		return -1;
	long k = r->z.avail_in ? 1 : pull(r, &c, 1, &r->err);
	if (k < 0)
		return -1;
	if (k > 0)
		return coli_errf(&r->err, COLI_EDATA, "%s: data after the trailer (corrupt file)", r->name);
	r->state = R_DONE;
	return 0;
}

/* A whole record at out + pos: 1; 0 at the end of the records (trailer checked); -1 failed. */
static int fill(coli_trace_reader *r)
{
	while (r->len - r->pos < REC) {
		if (r->state == R_ENDED)
			return finish_read(r);
		if (inflate_more(r) < 0)
			return -1;
	}
	return 1;
}

long coli_trace_next_n(coli_trace_reader *r, coli_trace_rec *recs, size_t max, coli_err *e)
{
	size_t got = 0;
	int rc = r->state == R_FAILED ? -1 : r->state == R_DONE ? 0 : 1;
	while (rc > 0 && got < max && (rc = fill(r)) > 0) {
		get_rec(r->out + r->pos, &recs[got]);
		if (check_rec(&recs[got], &r->info, r->index, r->name, COLI_EDATA, &r->err) < 0)
			rc = -1;
		else
			r->pos += REC, r->index++, got++;
	}
	if (rc < 0)
		r->state = R_FAILED;
	if (rc < 0 && got == 0) {
		if (e)
			*e = r->err;
		return -1;
	}
	return (long)got;
}

int coli_trace_next(coli_trace_reader *r, coli_trace_rec *rec, coli_err *e)
{
	return (int)coli_trace_next_n(r, rec, 1, e);
}

void coli_trace_reader_close(coli_trace_reader *r)
{
	if (!r)
		return;
	if (r->z_on)
		inflateEnd(&r->z);
	if (r->file)
		fclose(r->file);
	free(r->copies);
	free(r->strs);
	free(r->name);
	free(r);
}
