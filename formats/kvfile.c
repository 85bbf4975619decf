/* kvfile.c: writing and validating .coli_kv conversation snapshots (formats/kv.md). */
#include "crc32.h"
#include "kvfile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "frame.h"
#include "le.h"

static const coli_frame kv_frame = {
	.kind = "coli KV session",
	.foreign = "a session of another model or another conversion of it",
	.magic = {0x89, 'C', 'O', 'L', 'I', 'K', 'V', '\n'},
	.header_size = COLI_KV_HEADER,
	.version_min = 1,
	.version = COLI_KV_VERSION,
};
static const char *const part_field[4] = {"layer", "kind", "width", "fixed"};

enum { PART_ENTRY = 16 }; /* bytes of a part table entry */

/* ---- the part table ---- */

static uint64_t part_floats(const coli_state_part *p, int n_cached)
{
	return p->width ? (uint64_t)n_cached * (uint64_t)p->width : (uint64_t)p->fixed;
}

static int same_part(const coli_state_part *a, const coli_state_part *b)
{
	return a->layer == b->layer && a->kind == b->kind && a->width == b->width && a->fixed == b->fixed;
}

/* "layer 1 key width 32", "layer 3 latent fixed 4096". */
static const char *part_str(char *buf, size_t n, const coli_state_part *p)
{
	snprintf(buf, n, "layer %d %s %s %d", p->layer, coli_state_kind_name(p->kind), p->width ? "width" : "fixed",
		 p->width ? p->width : p->fixed);
	return buf;
}

/* Entry i against the rules of formats/kv.md ("Part table"), prev being entry i - 1 (NULL for
 * the first). what names the table in errors; code: COLI_EDATA for a file's, COLI_EUSAGE for a
 * caller's. */
static int check_part(const coli_state_part *p, const coli_state_part *prev, int i, const char *what, int code,
		      coli_err *e)
{
	int size = p->width ? p->width : p->fixed;
	if (p->layer < 0 || p->layer > COLI_KV_MAX_LAYER)
		return coli_errf(e, code, "%s: parts[%d].layer %d outside [0, %d]", what, i, p->layer, COLI_KV_MAX_LAYER);
	if (p->kind < 1 || p->kind > COLI_STATE_KIND_MAX)
		return coli_errf(e, code, "%s: parts[%d].kind %d unknown (kinds 1..%d)", what, i, p->kind, COLI_STATE_KIND_MAX);
	if ((p->width != 0) == (p->fixed != 0))
		return coli_errf(e, code, "%s: parts[%d]: width %d and fixed %d, exactly one must be non-zero", what, i,
				 p->width, p->fixed);
	if (size < 0 || size > COLI_KV_MAX_WIDTH)
		return coli_errf(e, code, "%s: parts[%d].%s %d outside [1, %d]", what, i, p->width ? "width" : "fixed", size,
				 COLI_KV_MAX_WIDTH);
	if (prev && (p->layer < prev->layer || (p->layer == prev->layer && p->kind <= prev->kind)))
		return coli_errf(e, code, "%s: parts[%d] (layer %d %s) does not follow parts[%d] (layer %d %s): "
				 "the table must be strictly increasing by layer, then kind", what, i, p->layer,
				 coli_state_kind_name(p->kind), i - 1, prev->layer, coli_state_kind_name(prev->kind));
	return 0;
}

static int check_parts(const coli_state_part *p, int n, const char *what, int code, coli_err *e)
{
	if (n < 1 || n > COLI_KV_MAX_PARTS)
		return coli_errf(e, code, "%s: n_parts %d outside [1, %d]", what, n, COLI_KV_MAX_PARTS);
	for (int i = 0; i < n; i++)
		if (check_part(p + i, i ? p + i - 1 : NULL, i, what, code, e) < 0)
			return -1;
	return 0;
}

/* The file's table must be the model's: names the first entry that differs. */
static int check_want(const coli_kvfile *f, const coli_state_part *want, int n_want, const char *path, coli_err *e)
{
	char a[96], b[96];
	int n = f->n_parts < n_want ? f->n_parts : n_want;
	for (int i = 0; i < n; i++)
		if (!same_part(&f->parts[i], &want[i]))
			return coli_errf(e, COLI_EDATA, "%s: parts[%d] is %s, this model's is %s", path, i,
					 part_str(a, sizeof(a), &f->parts[i]), part_str(b, sizeof(b), &want[i]));
	if (f->n_parts > n_want)
		return coli_errf(e, COLI_EDATA, "%s: n_parts %d, this model keeps %d (parts[%d], %s, is the file's only)", path,
				 f->n_parts, n_want, n, part_str(a, sizeof(a), &f->parts[n]));
	if (f->n_parts < n_want)
		return coli_errf(e, COLI_EDATA, "%s: n_parts %d, this model keeps %d (parts[%d], %s, is missing)", path,
				 f->n_parts, n_want, n, part_str(a, sizeof(a), &want[n]));
	return 0;
}

/* ---- writing ---- */

static int put(int fd, const void *p, uint64_t n, uint64_t *off, uint32_t *crc, const char *tmp, coli_err *e)
{
	if (n && coli_pwrite_full(fd, p, (size_t)n, *off, tmp, e) < 0)
		return -1;
	if (n)
		*crc = coli_crc32(*crc, p, (size_t)n);
	*off += n;
	return 0;
}

static void header(uint8_t h[COLI_KV_HEADER], const coli_kvfile *f, uint64_t payload, uint32_t crc)
{
	coli_frame_put(&kv_frame, h, f->identity);
	le_put32(h + 48, (uint32_t)f->n_parts);
	le_put32(h + 60, (uint32_t)f->n_tokens);
	le_put32(h + 64, (uint32_t)f->n_cached);
	le_put64(h + 72, payload);
	le_put32(h + 80, crc);
	coli_frame_seal(&kv_frame, h);
}

/* The part table as stored: 16 bytes per entry, little-endian. */
static int put_table(int fd, const coli_kvfile *f, uint64_t *off, uint32_t *crc, const char *tmp, coli_err *e)
{
	size_t n = (size_t)f->n_parts * PART_ENTRY;
	uint8_t *t = coli_malloc(n, e);
	if (!t)
		return -1;
	for (int i = 0; i < f->n_parts; i++) {
		const coli_state_part *p = &f->parts[i];
		int v[4] = {p->layer, p->kind, p->width, p->fixed};
		for (int k = 0; k < 4; k++)
			le_put32(t + (size_t)i * PART_ENTRY + 4 * k, (uint32_t)v[k]);
	}
	int rc = put(fd, t, n, off, crc, tmp, e);
	free(t);
	return rc;
}

/* The payload (table, tokens, each part's floats), then the header with its CRC. */
static int fill(int fd, const char *tmp, void *ctx, coli_err *e)
{
	const coli_kvfile *f = ctx;
	uint8_t h[COLI_KV_HEADER];
	uint64_t off = COLI_KV_HEADER;
	uint32_t crc = 0;
	int rc = put_table(fd, f, &off, &crc, tmp, e);
	if (rc == 0)
		rc = put(fd, f->tokens, (uint64_t)f->n_tokens * 4, &off, &crc, tmp, e);
	for (int i = 0; rc == 0 && i < f->n_parts; i++)
		rc = put(fd, f->data[i], part_floats(&f->parts[i], f->n_cached) * 4, &off, &crc, tmp, e);
	if (rc < 0)
		return -1;
	header(h, f, off - COLI_KV_HEADER, crc);
	return coli_pwrite_full(fd, h, sizeof(h), 0, tmp, e);
}

int coli_kvfile_write(const char *path, const coli_kvfile *f, coli_err *e)
{
	if (check_parts(f->parts, f->n_parts, path, COLI_EUSAGE, e) < 0)
		return -1;
	if (f->n_cached < 0 || f->n_tokens < f->n_cached || f->n_tokens > f->n_cached + 1)
		return coli_errf(e, COLI_EUSAGE, "%s: n_cached %d with n_tokens %d: must be n_tokens or n_tokens - 1", path,
				 f->n_cached, f->n_tokens);
	return coli_write_atomic_by(path, fill, (void *)f, e);
}

/* ---- reading: the header ---- */

/* The frame (frame.h: magic, version, length, header CRC, header_size, identity), then the
 * reserved bytes: 52..59 (version 2; v1's widths), 68..71, 84..123. */
static int check_frame(const uint8_t *h, uint64_t size, const uint8_t identity[32], const char *path, coli_err *e)
{
	if (coli_frame_check(&kv_frame, h, size, identity, path, e) < 0)
		return -1;
	if (le_get32(h + 8) == 2 && coli_frame_reserved(h, 52, 60, path, e) < 0)
		return -1;
	if (coli_frame_reserved(h, 68, 72, path, e) < 0 || coli_frame_reserved(h, 84, 124, path, e) < 0)
		return -1;
	return 0;
}

/* n_tokens and n_cached (n_cached is n_tokens, or n_tokens - 1: the last token chosen, not run). */
static int check_counts(const uint8_t *h, const char *path, coli_kvfile *f, coli_err *e)
{
	uint32_t t = le_get32(h + 60), c = le_get32(h + 64);
	if (t > INT32_MAX - 1)
		return coli_errf(e, COLI_EDATA, "%s: n_tokens %u exceeds %d", path, t, INT32_MAX - 1);
	if (c > t || t > c + 1)
		return coli_errf(e, COLI_EDATA, "%s: n_cached %u with n_tokens %u: must be n_tokens or n_tokens - 1", path, c,
				 t);
	f->n_tokens = (int)t, f->n_cached = (int)c;
	return 0;
}

/* Version 1 held two growing parts per layer for layers 0..n-1: GQA key and value, or MLA latent
 * and rope key. Is want that? */
static int v1_shaped(const coli_state_part *w, int n)
{
	if (!w || n < 2 || n % 2)
		return 0;
	for (int i = 0; i < n; i += 2) {
		const coli_state_part *k = &w[i], *v = &w[i + 1];
		int gqa = k->kind == COLI_STATE_KEY && v->kind == COLI_STATE_VALUE;
		int mla = k->kind == COLI_STATE_LATENT && v->kind == COLI_STATE_ROPE_KEY;
		if (!(gqa || mla) || k->kind != w[0].kind || k->layer != i / 2 || v->layer != i / 2 || !k->width || !v->width)
			return 0;
	}
	return 1;
}

/* The kinds want keeps, each once, in table order: "latent, rope_key and index_key". */
static const char *kinds_of(char *buf, size_t n, const coli_state_part *w, int n_w)
{
	int seen[2][COLI_STATE_KIND_MAX + 1] = {{0}}, list[2 * COLI_STATE_KIND_MAX], m = 0;
	for (int i = 0; i < n_w; i++)
		if (!seen[w[i].fixed != 0][w[i].kind]++)
			list[m++] = w[i].kind * 2 + (w[i].fixed != 0);
	buf[0] = 0;
	for (int i = 0; i < m; i++)
		snprintf(buf + strlen(buf), n - strlen(buf), "%s%s%s", i == 0 ? "" : i == m - 1 ? " and " : ", ",
			 coli_state_kind_name(list[i] / 2), list[i] % 2 ? " (fixed size)" : "");
	return buf;
}

/* A version 1 file: its parts are want's, when want is what version 1 held, of the header's
 * n_layers (48), k_width (52) and v_width (56). */
static int v1_parts(const uint8_t *h, const coli_state_part *want, int n_want, const char *path, coli_kvfile *f,
		    coli_err *e)
{
	char buf[256];
	uint32_t layers = le_get32(h + 48), width[2] = {le_get32(h + 52), le_get32(h + 56)};
	if (!want)
		return coli_errf(e, COLI_EDATA, "%s: version 1: readable only with the model's state", path);
	if (!v1_shaped(want, n_want))
		return coli_errf(e, COLI_EDATA, "%s: version 1 holds keys and values only, and this model's layers keep %s: "
				 "run the conversation again", path, kinds_of(buf, sizeof(buf), want, n_want));
	if (layers != (uint32_t)n_want / 2)
		return coli_errf(e, COLI_EDATA, "%s: n_layers %u, this model has %d", path, layers, n_want / 2);
	for (int i = 0; i < n_want; i++)
		if (width[i % 2] != (uint32_t)want[i].width)
			return coli_errf(e, COLI_EDATA, "%s: %s %u, this model's parts[%d] is %s", path,
					 i % 2 ? "v_width" : "k_width", width[i % 2], i, part_str(buf, sizeof(buf), &want[i]));
	if (!(f->parts = coli_malloc((size_t)n_want * sizeof(*want), e)))
		return -1;
	memcpy(f->parts, want, (size_t)n_want * sizeof(*want));
	f->n_parts = n_want;
	return 0;
}

/* payload_size (72) against the file size, and long enough for the part table and tokens. */
static int check_size(const uint8_t *h, uint64_t size, uint64_t table, const char *path, const coli_kvfile *f,
		      coli_err *e)
{
	uint64_t n = le_get64(h + 72), head = table + (uint64_t)f->n_tokens * 4;
	if (n != size - COLI_KV_HEADER)
		return coli_errf(e, COLI_EDATA, "%s: payload length %llu, but the file holds %llu bytes after the header "
				 "(truncated or extended)", path, (unsigned long long)n, (unsigned long long)(size - COLI_KV_HEADER));
	if (n < head || n > SIZE_MAX - 1)
		return coli_errf(e, COLI_EDATA, "%s: payload length %llu, the part table and tokens alone take %llu", path,
				 (unsigned long long)n, (unsigned long long)head);
	return 0;
}

/* ---- reading: the payload ---- */

/* The whole payload into f->block, its CRC checked before anything in it is used. */
static int read_block(int fd, const uint8_t *h, const char *path, coli_kvfile *f, coli_err *e)
{
	size_t n = (size_t)le_get64(h + 72);
	uint32_t want = le_get32(h + 80), crc;
	if (!(f->block = coli_malloc(n + 1, e)) || coli_pread_full(fd, f->block, n, COLI_KV_HEADER, path, e) < 0)
		return -1;
	crc = coli_crc32(0, f->block, n);
	if (crc != want)
		return coli_errf(e, COLI_EDATA, "%s: payload crc32 0x%08x, expected 0x%08x (corrupt session file)", path,
				 (unsigned)crc, (unsigned)want);
	return 0;
}

/* A version 2 file's part table (payload bytes 0..16 x n_parts): parsed, checked, compared
 * with want. */
static int v2_parts(const uint8_t *h, const coli_state_part *want, int n_want, const char *path, coli_kvfile *f,
		    coli_err *e)
{
	const uint8_t *t = f->block;
	f->n_parts = (int)le_get32(h + 48);
	if (!(f->parts = coli_calloc((size_t)f->n_parts, sizeof(*f->parts), e)))
		return -1;
	for (int i = 0; i < f->n_parts; i++) {
		uint32_t v[4];
		for (int k = 0; k < 4; k++)
			if ((v[k] = le_get32(t + (size_t)i * PART_ENTRY + 4 * k)) > INT32_MAX)
				return coli_errf(e, COLI_EDATA, "%s: parts[%d].%s %u out of range", path, i, part_field[k], v[k]);
		f->parts[i] = (coli_state_part){(int)v[0], (int)v[1], (int)v[2], (int)v[3]};
		if (check_part(&f->parts[i], i ? &f->parts[i - 1] : NULL, i, path, COLI_EDATA, e) < 0)
			return -1;
	}
	return want ? check_want(f, want, n_want, path, e) : 0;
}

/* Points tokens and data into the block, after the table's `table` bytes; the sizes the parts
 * imply (summed saturating: no overflow) must be the payload's. */
static int place(const uint8_t *h, uint64_t table, const char *path, coli_kvfile *f, coli_err *e)
{
	uint64_t n = le_get64(h + 72), off = table + (uint64_t)f->n_tokens * 4, end = off;
	for (int i = 0; i < f->n_parts; i++) {
		uint64_t b = part_floats(&f->parts[i], f->n_cached) * 4;
		end = end > UINT64_MAX - b ? UINT64_MAX : end + b;
	}
	if (end != n)
		return coli_errf(e, COLI_EDATA, "%s: payload length %llu, the part table, n_tokens and n_cached imply %llu",
				 path, (unsigned long long)n, (unsigned long long)end);
	if (!(f->data = coli_calloc((size_t)f->n_parts, sizeof(*f->data), e)))
		return -1;
	f->tokens = (int32_t *)(void *)((uint8_t *)f->block + table);
	for (int i = 0; i < f->n_parts; i++) {
		f->data[i] = (float *)(void *)((uint8_t *)f->block + off);
		off += part_floats(&f->parts[i], f->n_cached) * 4;
	}
	return 0;
}

/* Part i's floats, each finite. */
static int check_floats(const char *path, const coli_kvfile *f, int i, coli_err *e)
{
	const coli_state_part *p = &f->parts[i];
	size_t n = (size_t)part_floats(p, f->n_cached), w = (size_t)p->width;
	char at[64];
	for (size_t j = 0; j < n; j++) {
		if (isfinite(f->data[i][j]))
			continue;
		if (w)
			snprintf(at, sizeof(at), "[token %zu][%zu]", j / w, j % w);
		else
			snprintf(at, sizeof(at), "[%zu]", j);
		return coli_errf(e, COLI_EDATA, "%s: data[part %d (layer %d %s)]%s: value %g is not finite", path, i, p->layer,
				 coli_state_kind_name(p->kind), at, (double)f->data[i][j]);
	}
	return 0;
}

/* After the CRC: every token id in [0, vocab) (vocab 0: only >= 0), every float finite. */
static int check_values(const char *path, const coli_kvfile *f, int vocab, coli_err *e)
{
	for (int t = 0; t < f->n_tokens; t++)
		if (f->tokens[t] < 0 || (vocab > 0 && f->tokens[t] >= vocab))
			return coli_errf(e, COLI_EDATA, "%s: tokens[%d]: id %d outside the vocabulary [0, %d)", path, t,
					 (int)f->tokens[t], vocab > 0 ? vocab : INT32_MAX);
	for (int i = 0; i < f->n_parts; i++)
		if (check_floats(path, f, i, e) < 0)
			return -1;
	return 0;
}

/* Everything after the open, in the order of formats/kv.md ("Reading"). */
static int load(int fd, const uint8_t *h, uint64_t size, const char *path, const uint8_t identity[32], int vocab,
		const coli_state_part *want, int n_want, coli_kvfile *f, coli_err *e)
{
	uint32_t version = le_get32(h + 8);
	uint64_t table = 0;
	if (check_frame(h, size, identity, path, e) < 0 || check_counts(h, path, f, e) < 0)
		return -1;
	memcpy(f->identity, h + 16, 32);
	if (version == 1 && v1_parts(h, want, n_want, path, f, e) < 0)
		return -1;
	if (version == 2 && (le_get32(h + 48) < 1 || le_get32(h + 48) > COLI_KV_MAX_PARTS))
		return coli_errf(e, COLI_EDATA, "%s: n_parts %u outside [1, %d]", path, le_get32(h + 48), COLI_KV_MAX_PARTS);
	if (version == 2)
		table = (uint64_t)le_get32(h + 48) * PART_ENTRY;
	if (check_size(h, size, table, path, f, e) < 0 || read_block(fd, h, path, f, e) < 0)
		return -1;
	if (version == 2 && v2_parts(h, want, n_want, path, f, e) < 0)
		return -1;
	if (place(h, table, path, f, e) < 0)
		return -1;
	return check_values(path, f, vocab, e);
}

int coli_kvfile_load(const char *path, const uint8_t identity[32], int vocab, const coli_state_part *want, int n_want,
		     coli_kvfile *f, coli_err *e)
{
	uint8_t h[COLI_KV_HEADER];
	char what[1024];
	uint64_t size = 0;
	int fd = -1;
	memset(f, 0, sizeof(*f));
	snprintf(what, sizeof(what), "%s: the model's state", path);
	if (want && check_parts(want, n_want, what, COLI_EUSAGE, e) < 0)
		return -1;
	if (coli_open_header(path, h, sizeof(h), &fd, &size, e) < 0)
		return -1;
	int rc = load(fd, h, size, path, identity, vocab, want, n_want, f, e);
	close(fd);
	if (rc < 0)
		coli_kvfile_release(f);
	return rc;
}

void coli_kvfile_release(coli_kvfile *f)
{
	free(f->data);
	free(f->parts);
	free(f->block);
	memset(f, 0, sizeof(*f));
}
