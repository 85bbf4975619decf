/* usage.c: writing and validating .coli_usage routing statistics. */
#include "crc32.h"
#include "usage.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "frame.h"
#include "le.h"

static const coli_frame usage_frame = {
	.kind = "coli usage file",
	.foreign = "usage statistics of another model or another conversion of it",
	.magic = {0x89, 'C', 'O', 'L', 'I', 'U', 'S', '\n'},
	.header_size = COLI_USAGE_HEADER,
	.version_min = COLI_USAGE_VERSION,
	.version = COLI_USAGE_VERSION,
};

static void putf64(uint8_t *p, double d)
{
	uint64_t v;
	memcpy(&v, &d, 8);
	le_put64(p, v);
}

static double getf64(const uint8_t *p)
{
	uint64_t v = le_get64(p);
	double d;
	memcpy(&d, &v, 8);
	return d;
}

static uint64_t payload_bytes(int n_layers, int n_experts)
{
	return (uint64_t)n_layers * (uint64_t)n_experts * 8;
}

int coli_usage_init(coli_usage *u, const uint8_t identity[32], int n_layers, int n_experts, coli_err *e)
{
	memset(u, 0, sizeof(*u));
	if (n_layers <= 0 || n_experts <= 0 || n_layers > COLI_USAGE_MAX_LAYERS || n_experts > COLI_USAGE_MAX_EXPERTS)
		return coli_errf(e, COLI_EUSAGE, "usage table: shape %d x %d out of range", n_layers, n_experts);
	memcpy(u->identity, identity, 32);
	u->n_layers = n_layers, u->n_experts = n_experts, u->decay = 1.0;
	u->counts = coli_calloc((size_t)n_layers * (size_t)n_experts, sizeof(double), e);
	return u->counts ? 0 : -1;
}

void coli_usage_fold(coli_usage *u, const double *run, double decay)
{
	size_t n = (size_t)u->n_layers * (size_t)u->n_experts;
	for (size_t i = 0; i < n; i++)
		u->counts[i] = u->counts[i] * decay + run[i];
	u->runs++;
	u->decay = decay;
}

void coli_usage_release(coli_usage *u)
{
	free(u->counts);
	memset(u, 0, sizeof(*u));
}

int coli_usage_write(const char *path, const coli_usage *u, coli_err *e)
{
	uint64_t n = payload_bytes(u->n_layers, u->n_experts);
	uint8_t *buf = coli_malloc((size_t)(COLI_USAGE_HEADER + n), e), *h = buf;
	if (!buf)
		return -1;
	for (uint64_t i = 0; i < n / 8; i++)
		putf64(buf + COLI_USAGE_HEADER + 8 * i, u->counts[i]);
	coli_frame_put(&usage_frame, h, u->identity);
	le_put32(h + 48, (uint32_t)u->n_layers);
	le_put32(h + 52, (uint32_t)u->n_experts);
	le_put32(h + 56, u->runs);
	putf64(h + 64, u->decay);
	le_put64(h + 72, n);
	le_put32(h + 80, coli_crc32(0, buf + COLI_USAGE_HEADER, n));
	coli_frame_seal(&usage_frame, h);
	int rc = coli_write_atomic(path, buf, (size_t)(COLI_USAGE_HEADER + n), e);
	free(buf);
	return rc;
}

static int check_header(const uint8_t *h, uint64_t size, const uint8_t identity[32], const char *path,
			coli_usage *u, coli_err *e)
{
	if (coli_frame_check(&usage_frame, h, size, identity, path, e) < 0)
		return -1;
	uint32_t nl = le_get32(h + 48), ne = le_get32(h + 52);
	if (nl == 0 || ne == 0 || nl > COLI_USAGE_MAX_LAYERS || ne > COLI_USAGE_MAX_EXPERTS)
		return coli_errf(e, COLI_EDATA, "%s: n_layers %u / n_experts %u out of range [1, %d] / [1, %d]", path, nl, ne,
				 COLI_USAGE_MAX_LAYERS, COLI_USAGE_MAX_EXPERTS);
	double decay = getf64(h + 64);
	if (!(decay >= 0.0 && decay <= 1.0))
		return coli_errf(e, COLI_EDATA, "%s: decay %g out of range [0, 1]", path, decay);
	if (coli_frame_reserved(h, 60, 64, path, e) < 0 || coli_frame_reserved(h, 84, 124, path, e) < 0)
		return -1;
	uint64_t n = le_get64(h + 72), want = payload_bytes((int)nl, (int)ne);
	if (n != want || COLI_USAGE_HEADER + n != size)
		return coli_errf(e, COLI_EDATA, "%s: payload_size %llu, file size %llu, shape implies %llu%s", path,
				 (unsigned long long)n, (unsigned long long)size, (unsigned long long)want,
				 COLI_USAGE_HEADER + want > size ? " (truncated)" : "");
	memcpy(u->identity, h + 16, 32);
	u->n_layers = (int)nl, u->n_experts = (int)ne, u->runs = le_get32(h + 56), u->decay = decay;
	return 0;
}

static int read_payload(int fd, const char *path, coli_usage *u, uint32_t want, coli_err *e)
{
	size_t n = (size_t)payload_bytes(u->n_layers, u->n_experts);
	uint8_t *buf = coli_malloc(n, e);
	u->counts = coli_malloc(n, e);
	int rc = buf && u->counts ? coli_pread_full(fd, buf, n, COLI_USAGE_HEADER, path, e) : -1;
	uint32_t crc = rc == 0 ? coli_crc32(0, buf, n) : 0;
	if (rc == 0 && crc != want)
		rc = coli_errf(e, COLI_EDATA, "%s: payload crc32 0x%08x, expected 0x%08x (corrupt usage file)", path,
			       (unsigned)crc, (unsigned)want);
	for (size_t i = 0; rc == 0 && i < n / 8; i++) {
		double c = getf64(buf + 8 * i);
		if (!(c >= 0.0 && isfinite(c)))
			rc = coli_errf(e, COLI_EDATA, "%s: counts[%zu][%zu] = %g, must be finite and >= 0", path,
				       i / (size_t)u->n_experts, i % (size_t)u->n_experts, c);
		u->counts[i] = c;
	}
	free(buf);
	return rc;
}

int coli_usage_read(const char *path, const uint8_t identity[32], coli_usage *u, coli_err *e)
{
	uint8_t h[COLI_USAGE_HEADER];
	uint64_t size = 0;
	int fd = -1;
	memset(u, 0, sizeof(*u));
	if (coli_open_header(path, h, sizeof(h), &fd, &size, e) < 0)
		return -1;
	int rc = 0;
	if (rc == 0)
		rc = check_header(h, size, identity, path, u, e);
	if (rc == 0)
		rc = read_payload(fd, path, u, le_get32(h + 80), e);
	close(fd);
	if (rc < 0)
		coli_usage_release(u);
	return rc;
}
