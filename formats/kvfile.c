/* kvfile.c: writing and validating .coli_kv conversation snapshots. */
#include "crc32.h"
#include "kvfile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "le.h"

static const uint8_t kv_magic[8] = {0x89, 'C', 'O', 'L', 'I', 'K', 'V', '\n'};

static uint64_t payload_bytes(const coli_kvfile *f)
{
	return (uint64_t)f->n_tokens * 4 +
	       (uint64_t)f->n_layers * (uint64_t)f->n_cached * (uint64_t)(f->k_width + f->v_width) * 4;
}

static void header(uint8_t h[COLI_KV_HEADER], const coli_kvfile *f, uint32_t crc)
{
	uint64_t n = payload_bytes(f);
	memset(h, 0, COLI_KV_HEADER);
	memcpy(h, kv_magic, 8);
	le_put32(h + 8, COLI_KV_VERSION);
	le_put32(h + 12, COLI_KV_HEADER);
	memcpy(h + 16, f->identity, 32);
	le_put32(h + 48, (uint32_t)f->n_layers);
	le_put32(h + 52, (uint32_t)f->k_width);
	le_put32(h + 56, (uint32_t)f->v_width);
	le_put32(h + 60, (uint32_t)f->n_tokens);
	le_put32(h + 64, (uint32_t)f->n_cached);
	le_put64(h + 72, n);
	le_put32(h + 80, crc);
	le_put32(h + 124, coli_crc32(0, h, 124));
}

/* The payload pieces in file order: tokens, then k and v of each layer. */
static int write_payload(int fd, const coli_kvfile *f, const char *tmp, uint32_t *crc, coli_err *e)
{
	uint64_t off = COLI_KV_HEADER;
	size_t n = (size_t)f->n_tokens * 4;
	if (coli_pwrite_full(fd, f->tokens, n, off, tmp, e) < 0)
		return -1;
	*crc = coli_crc32(*crc, f->tokens, n);
	off += n;
	for (int l = 0; l < f->n_layers; l++)
		for (int kv = 0; kv < 2; kv++) {
			n = (size_t)f->n_cached * (size_t)(kv ? f->v_width : f->k_width) * 4;
			const float *p = kv ? f->v[l] : f->k[l];
			if (coli_pwrite_full(fd, p, n, off, tmp, e) < 0)
				return -1;
			*crc = coli_crc32(*crc, p, n);
			off += n;
		}
	return 0;
}

/* The payload, then the header with its CRC. */
static int fill(int fd, const char *tmp, void *ctx, coli_err *e)
{
	const coli_kvfile *f = ctx;
	uint8_t h[COLI_KV_HEADER];
	uint32_t crc = 0;
	if (write_payload(fd, f, tmp, &crc, e) < 0)
		return -1;
	header(h, f, (uint32_t)crc);
	return coli_pwrite_full(fd, h, sizeof(h), 0, tmp, e);
}

int coli_kvfile_write(const char *path, const coli_kvfile *f, coli_err *e)
{
	return coli_write_atomic_by(path, fill, (void *)f, e);
}

static int check_header(const uint8_t *h, uint64_t size, const uint8_t identity[32], const char *path,
			coli_kvfile *f, coli_err *e)
{
	if (size < COLI_KV_HEADER || memcmp(h, kv_magic, 8) != 0)
		return coli_errf(e, COLI_EDATA, "%s: not a coli KV session (bad magic)", path);
	if (le_get32(h + 124) != coli_crc32(0, h, 124))
		return coli_errf(e, COLI_EDATA, "%s: header crc32 mismatch (torn or corrupt session file)", path);
	if (le_get32(h + 8) != COLI_KV_VERSION)
		return coli_errf(e, COLI_EDATA, "%s: version %u unsupported (this reader knows %u)", path, le_get32(h + 8),
				 COLI_KV_VERSION);
	if (le_get32(h + 12) != COLI_KV_HEADER)
		return coli_errf(e, COLI_EDATA, "%s: header_size %u, expected %u", path, le_get32(h + 12), COLI_KV_HEADER);
	for (int i = 68; i < 124; i = i == 71 ? 84 : i + 1)
		if (h[i])
			return coli_errf(e, COLI_EDATA, "%s: reserved byte %d is %u, must be 0", path, i, h[i]);
	if (memcmp(h + 16, identity, 32) != 0)
		return coli_errf(e, COLI_EDATA, "%s: identity: a session of another model or another conversion of it", path);
	memcpy(f->identity, h + 16, 32);
	f->n_layers = (int)le_get32(h + 48), f->k_width = (int)le_get32(h + 52), f->v_width = (int)le_get32(h + 56);
	f->n_tokens = (int)le_get32(h + 60), f->n_cached = (int)le_get32(h + 64);
	if (f->n_layers <= 0 || f->k_width <= 0 || f->v_width <= 0 || f->n_tokens < 0 || f->n_cached < 0 ||
	    f->n_cached > f->n_tokens || f->n_tokens > f->n_cached + 1 || f->n_layers > 4096 || f->k_width > (1 << 20) || f->v_width > (1 << 20))
		return coli_errf(e, COLI_EDATA, "%s: shape fields out of range (layers %d, widths %d/%d, tokens %d, cached %d)",
				 path, f->n_layers, f->k_width, f->v_width, f->n_tokens, f->n_cached);
	uint64_t n = le_get64(h + 72);
	if (n != payload_bytes(f) || COLI_KV_HEADER + n != size)
		return coli_errf(e, COLI_EDATA, "%s: payload length %llu, file size %llu, shape implies %llu", path,
				 (unsigned long long)n, (unsigned long long)size, (unsigned long long)payload_bytes(f));
	return 0;
}

/* After the CRC: every token id in [0, vocab) (vocab 0: only >= 0), every float finite. */
static int check_values(const char *path, const coli_kvfile *f, int vocab, coli_err *e)
{
	for (int t = 0; t < f->n_tokens; t++)
		if (f->tokens[t] < 0 || (vocab > 0 && f->tokens[t] >= vocab))
			return coli_errf(e, COLI_EDATA, "%s: tokens[%d]: id %d outside the vocabulary [0, %d)", path, t,
					 (int)f->tokens[t], vocab > 0 ? vocab : INT32_MAX);
	for (int l = 0; l < f->n_layers; l++)
		for (int kv = 0; kv < 2; kv++) {
			int w = kv ? f->v_width : f->k_width;
			const float *p = kv ? f->v[l] : f->k[l];
			for (size_t i = 0; i < (size_t)f->n_cached * (size_t)w; i++)
				if (!isfinite(p[i]))
					return coli_errf(e, COLI_EDATA, "%s: %s[layer %d][token %zu][%zu]: value %g is not finite",
							 path, kv ? "v" : "k", l, i / (size_t)w, i % (size_t)w, (double)p[i]);
		}
	return 0;
}

static int read_payload(int fd, const char *path, coli_kvfile *f, uint32_t want, coli_err *e)
{
	uint64_t off = COLI_KV_HEADER;
	uint32_t crc = 0;
	f->tokens = coli_malloc((size_t)f->n_tokens * 4 + 4, e);
	f->k = coli_calloc((size_t)f->n_layers, sizeof(float *), e);
	f->v = coli_calloc((size_t)f->n_layers, sizeof(float *), e);
	if (!f->tokens || !f->k || !f->v || coli_pread_full(fd, f->tokens, (size_t)f->n_tokens * 4, off, path, e) < 0)
		return -1;
	crc = coli_crc32(crc, f->tokens, (size_t)f->n_tokens * 4);
	off += (uint64_t)f->n_tokens * 4;
	for (int l = 0; l < f->n_layers; l++)
		for (int kv = 0; kv < 2; kv++) {
			size_t n = (size_t)f->n_cached * (size_t)(kv ? f->v_width : f->k_width) * 4;
			float **p = kv ? &f->v[l] : &f->k[l];
			if (!(*p = coli_malloc(n + 4, e)) || coli_pread_full(fd, *p, n, off, path, e) < 0)
				return -1;
			crc = coli_crc32(crc, *p, n);
			off += n;
		}
	if ((uint32_t)crc != want)
		return coli_errf(e, COLI_EDATA, "%s: payload crc32 0x%08x, expected 0x%08x (corrupt session file)", path,
				 (unsigned)crc, want);
	return 0;
}

int coli_kvfile_load(const char *path, const uint8_t identity[32], int vocab, coli_kvfile *f, coli_err *e)
{
	uint8_t h[COLI_KV_HEADER];
	uint64_t size = 0;
	int fd = -1;
	memset(f, 0, sizeof(*f));
	if (coli_open_header(path, h, sizeof(h), &fd, &size, e) < 0)
		return -1;
	int rc = 0;
	if (rc == 0)
		rc = check_header(h, size, identity, path, f, e);
	if (rc == 0)
		rc = read_payload(fd, path, f, le_get32(h + 80), e);
	if (rc == 0)
		rc = check_values(path, f, vocab, e);
	close(fd);
	if (rc < 0)
		coli_kvfile_release(f);
	return rc;
}

void coli_kvfile_release(coli_kvfile *f)
{
	for (int l = 0; (f->k || f->v) && l < f->n_layers; l++) {
		if (f->k)
			free(f->k[l]);
		if (f->v)
			free(f->v[l]);
	}
	free(f->k);
	free(f->v);
	free(f->tokens);
	memset(f, 0, sizeof(*f));
}
