/* source.c: reads a job's source bytes with O_DIRECT into the worker's own aligned buffer:
 * each source byte is read once, the page cache is not filled with a checkpoint that is read
 * once, and a worker blocked on the disk leaves its core to a worker that computes. File systems
 * without O_DIRECT (tmpfs) fall back to buffered reads. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert.h"
#include "fileio.h"

#define ALIGN 4096u

int source_open(conv *cv, coli_err *e)
{
	if (!(cv->dfd = coli_calloc((size_t)cv->src->n_files, sizeof(int), e)))
		return -1;
	for (int i = 0; i < cv->src->n_files; i++) {
		const char *path = cv->src->files[i].path;
		cv->dfd[i] = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (cv->dfd[i] < 0 && errno == EINVAL)
			cv->dfd[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (cv->dfd[i] < 0)
			return coli_errf(e, COLI_EIO, "%s: %s", path, strerror(errno));
	}
	return 0;
}

void source_close(conv *cv)
{
	for (int i = 0; cv->dfd && i < cv->src->n_files; i++)
		if (cv->dfd[i] >= 0)
			close(cv->dfd[i]);
	free(cv->dfd);
	cv->dfd = NULL;
}

/* Space a range of len bytes takes in a buffer: aligned start and end around it. */
uint64_t source_span(uint64_t len) { return len + 2 * ALIGN; }

int inbuf_init(inbuf *b, uint64_t cap, coli_err *e)
{
	void *p = NULL;
	b->cap = (cap + ALIGN - 1) / ALIGN * ALIGN;
	b->used = 0;
	if (posix_memalign(&p, ALIGN, b->cap) != 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating a %llu-byte read buffer",
				 (unsigned long long)b->cap);
	b->base = p;
	return 0;
}

/* Reads bytes [off, off+len) of tensor t (off relative to the tensor) into b; returns a
 * pointer to them, NULL on error. A short read is reported with the shard and offset. With
 * `aligned`, the bytes are moved to the 4096-aligned start of their span (safetensors offsets
 * need not be multiples of 4, and f32 scales are read as floats). */
const uint8_t *source_read(const conv *cv, const coli_st_tensor *t, uint64_t off, uint64_t len, int aligned,
			   inbuf *b, coli_err *e)
{
	const coli_st_file *f = &cv->src->files[t->file];
	uint64_t start = t->offset + off, a = start / ALIGN * ALIGN;
	uint64_t z = (start + len + ALIGN - 1) / ALIGN * ALIGN, n = z - a;
	if (b->used + n > b->cap)
		return coli_errf(e, COLI_ENOMEM, "read buffer of %llu bytes too small for '%s'",
				 (unsigned long long)b->cap, t->name), NULL;
	uint8_t *dst = b->base + b->used;
	for (uint64_t got = 0; got < start + len - a;) {
		ssize_t r = pread(cv->dfd[t->file], dst + got, n - got, (off_t)(a + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return coli_errf(e, COLI_EIO, "%s: read of '%s' at offset %llu: %s", f->path, t->name,
					 (unsigned long long)(a + got), r < 0 ? strerror(errno) : "unexpected end of file"),
			       NULL;
		got += (uint64_t)r;
	}
	b->used += n;
	if (!aligned)
		return dst + (start - a);
	memmove(dst, dst + (start - a), len);
	return dst;
}
