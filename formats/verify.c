/* verify.c: the full integrity pass over a container: every byte is covered by a CRC or by the
 * rule that padding is zero. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32.h"
#include "container.h"
#include "fileio.h"
#include "manifest.h"

#define CHUNK (8u << 20)

/* One checked span of a section file, in file order. */
typedef struct span {
	uint64_t offset, len;
	uint32_t crc;
	const char *tensor; /* dense/MTP tensor name, or NULL for a record */
	int layer, expert;
} span;

typedef struct pass {
	const coli_container *c;
	int fd;
	const char *file;
	uint8_t *buf;
	uint64_t done, total;
	coli_progress_fn fn;
	void *ctx;
	coli_err *e;
} pass;

static int read_chunk(pass *p, uint64_t off, size_t n)
{
	if (coli_pread_full(p->fd, p->buf, n, off, p->file, p->e) < 0)
		return -1;
	p->done += n;
	if (p->fn)
		p->fn(p->ctx, p->done, p->total);
	return 0;
}

static int check_zero(pass *p, uint64_t from, uint64_t to)
{
	for (uint64_t off = from; off < to;) {
		size_t n = to - off < CHUNK ? (size_t)(to - off) : CHUNK;
		if (read_chunk(p, off, n) < 0)
			return -1;
		for (size_t i = 0; i < n; i++)
			if (p->buf[i])
				return coli_errf(p->e, COLI_EDATA, "%s: padding byte at offset %llu is 0x%02x, must be 0",
						 p->file, (unsigned long long)(off + i), p->buf[i]);
		off += n;
	}
	return 0;
}

static int check_span(pass *p, const span *s)
{
	uint32_t crc = 0;
	for (uint64_t off = s->offset; off < s->offset + s->len;) {
		size_t n = s->offset + s->len - off < CHUNK ? (size_t)(s->offset + s->len - off) : CHUNK;
		if (read_chunk(p, off, n) < 0)
			return -1;
		crc = coli_crc32(crc, p->buf, n);
		off += n;
	}
	if ((uint32_t)crc == s->crc)
		return 0;
	if (s->tensor)
		return coli_errf(p->e, COLI_EDATA, "%s: tensor '%s' at offset %llu (%llu bytes): crc32 0x%08x, expected 0x%08x",
				 p->file, s->tensor, (unsigned long long)s->offset, (unsigned long long)s->len,
				 (unsigned)crc, s->crc);
	return coli_errf(p->e, COLI_EDATA,
			 "%s: expert record [layer %d][expert %d] at offset %llu (%llu bytes): crc32 0x%08x, expected 0x%08x",
			 p->file, s->layer, s->expert, (unsigned long long)s->offset, (unsigned long long)s->len,
			 (unsigned)crc, s->crc);
}

/* Spans of section s in file order (the layout is placed in order, so no sort is needed). */
static span *section_spans(const coli_container *c, coli_section s, int *n, coli_err *e)
{
	const coli_layout *L = &c->layout;
	int cap = L->n_tensors;
	for (int i = 0; i < L->n_elayers; i++)
		cap += L->elayers[i].n_experts;
	span *v = coli_calloc((size_t)cap, sizeof(*v), e);
	*n = 0;
	for (int i = 0; v && i < L->n_tensors; i++)
		if (L->tensors[i].section == s)
			v[(*n)++] = (span){L->tensors[i].offset, L->tensors[i].blob.nbytes, L->tensors[i].crc,
					   L->tensors[i].name, L->tensors[i].layer, -1};
	for (int i = 0; v && s == COLI_SEC_EXPERTS && i < L->n_elayers; i++)
		for (int x = 0; x < L->elayers[i].n_experts; x++)
			v[(*n)++] = (span){coli_record_offset(&L->elayers[i], x), L->elayers[i].record_size,
					   L->elayers[i].crc[x], NULL, L->elayers[i].layer, x};
	return v;
}

static int verify_section(pass *p, coli_section s)
{
	int n = 0, rc = 0;
	span *v = section_spans(p->c, s, &n, p->e);
	if (!v)
		return -1;
	uint64_t at = COLI_SECTION_HEADER;
	if (read_chunk(p, 0, COLI_SECTION_HEADER) < 0 ||
	    coli_section_header_check(p->buf, s, p->c->identity, p->file, p->e) < 0)
		rc = -1;
	for (int i = 0; rc == 0 && i < n; i++) {
		rc = check_zero(p, at, v[i].offset);
		if (rc == 0)
			rc = check_span(p, &v[i]);
		at = v[i].offset + v[i].len;
	}
	if (rc == 0)
		rc = check_zero(p, at, p->c->layout.section_size[s]);
	free(v);
	return rc;
}

int coli_container_verify(const coli_container *c, coli_progress_fn fn, void *ctx, coli_err *e)
{
	pass p = {c, -1, NULL, NULL, 0, 0, fn, ctx, e};
	if (!(p.buf = coli_malloc(CHUNK, e)))
		return -1;
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		p.total += c->layout.section_size[s];
	int rc = 0;
	for (int s = 0; rc == 0 && s < COLI_SEC_COUNT; s++) {
		char *path = coli_path_join(c->dir, coli_section_file((coli_section)s));
		p.fd = c->fd[s];
		p.file = path;
		rc = path ? verify_section(&p, (coli_section)s) : coli_errf(e, COLI_ENOMEM, "out of memory");
		free(path);
	}
	for (int i = 0; rc == 0 && i < c->n_carried; i++)
		rc = coli_carried_check(c->dir, &c->carried[i], e);
	free(p.buf);
	return rc;
}
