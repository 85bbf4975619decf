/* fileio.c: full reads/writes with precise errors, atomic replacement, path helpers. */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int coli_pwrite_full(int fd, const void *buf, size_t n, uint64_t off, const char *what, coli_err *e)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == ENOSPC)
			return coli_errf(e, COLI_EIO, "%s: disk full writing %zu bytes at offset %llu",
					 what, n, (unsigned long long)off);
		if (w <= 0)
			return coli_errf(e, COLI_EIO, "%s: write at offset %llu: %s", what,
					 (unsigned long long)off, w < 0 ? strerror(errno) : "wrote nothing");
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int coli_preadv_full(int fd, struct iovec *iov, int n, uint64_t off, const char *what, coli_err *e)
{
	size_t left = 0;
	for (int i = 0; i < n; i++)
		left += iov[i].iov_len;
	while (left > 0) {
		ssize_t r = preadv(fd, iov, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return coli_errf(e, COLI_EIO, "%s: read at offset %llu: %s", what, (unsigned long long)off,
					 strerror(errno));
		if (r == 0)
			return coli_errf(e, COLI_EIO, "%s: short read: end of file at offset %llu, %zu bytes missing",
					 what, (unsigned long long)off, left);
		off += (uint64_t)r, left -= (size_t)r;
		for (; n > 0 && (size_t)r >= iov->iov_len; n--, iov++)
			r -= (ssize_t)iov->iov_len;
		if (n > 0)
			iov->iov_base = (char *)iov->iov_base + r, iov->iov_len -= (size_t)r;
	}
	return 0;
}

int coli_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *what, coli_err *e)
{
	struct iovec v = {buf, n};
	return coli_preadv_full(fd, &v, 1, off, what, e);
}

static const char *file_kind(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a folder" : S_ISCHR(m) ? "a character device"
	     : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a plain file";
}

/* O_NONBLOCK keeps open() of a FIFO from waiting for a writer; it is cleared once the file is
 * known to be regular, so reads behave as usual. */
int coli_open_regular(const char *path, int flags, uint64_t *size, coli_err *e)
{
	struct stat st;
	int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return coli_errf(e, COLI_EIO, "%s: %s", path, strerror(err));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return coli_errf(e, COLI_EDATA, "%s: is %s, not a regular file", path, file_kind(st.st_mode));
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		int err = errno;
		close(fd);
		return coli_errf(e, COLI_EIO, "%s: %s", path, strerror(err));
	}
	if (size)
		*size = (uint64_t)st.st_size;
	return fd;
}

int coli_open_header(const char *path, void *h, size_t n, int *fd, uint64_t *size, coli_err *e)
{
	if ((*fd = coli_open_regular(path, O_RDONLY, size, e)) < 0)
		return -1;
	memset(h, 0, n);
	size_t got = *size < n ? (size_t)*size : n; /* a short file's bytes, the rest zero */
	if (got && coli_pread_full(*fd, h, got, 0, path, e) < 0) {
		close(*fd);
		*fd = -1;
		return -1;
	}
	return 0;
}

int coli_read_file(const char *path, char **out, size_t *len, coli_err *e)
{
	uint64_t size = 0;
	int fd = coli_open_regular(path, O_RDONLY, &size, e);
	if (fd < 0)
		return -1;
	char *buf = coli_malloc((size_t)size + 1, e);
	if (!buf || coli_pread_full(fd, buf, (size_t)size, 0, path, e) < 0) {
		free(buf);
		close(fd);
		return -1;
	}
	close(fd);
	buf[size] = 0;
	*out = buf;
	if (len)
		*len = (size_t)size;
	return 0;
}

int coli_fsync_dir_of(const char *path, coli_err *e)
{
	char *dir = strdup(path);
	if (!dir)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	char *slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = 0;
	else
		strcpy(dir, ".");
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = fd < 0 || fsync(fd) < 0 ? coli_errf(e, COLI_EIO, "%s: fsync: %s", dir, strerror(errno)) : 0;
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

int coli_write_atomic_by(const char *path, coli_fill_fn fill, void *ctx, coli_err *e)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", tmp, strerror(errno));
	int rc = fill(fd, tmp, ctx, e);
	if (rc == 0 && fsync(fd) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: fsync: %s", tmp, strerror(errno));
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: rename: %s", path, strerror(errno));
	if (rc < 0) {
		unlink(tmp);
		return -1;
	}
	return coli_fsync_dir_of(path, e);
}

typedef struct bytes {
	const void *data;
	size_t n;
} bytes;

static int fill_bytes(int fd, const char *tmp, void *ctx, coli_err *e)
{
	const bytes *b = ctx;
	return coli_pwrite_full(fd, b->data, b->n, 0, tmp, e);
}

int coli_write_atomic(const char *path, const void *data, size_t n, coli_err *e)
{
	bytes b = {data, n};
	return coli_write_atomic_by(path, fill_bytes, &b, e);
}

char *coli_path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

void *coli_weights_alloc(size_t n)
{
	const size_t huge = (size_t)2 << 20;
	void *p = NULL;
	if (posix_memalign(&p, n >= huge ? huge : 4096, n ? n : 4096) != 0)
		return NULL;
	if (n >= huge)
		(void)madvise(p, n, MADV_HUGEPAGE); /* advice: a kernel without THP leaves 4 KiB pages */
	return p;
}

void *coli_malloc(size_t n, coli_err *e)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		coli_errf(e, COLI_ENOMEM, "out of memory allocating %zu bytes", n);
	return p;
}

void *coli_calloc(size_t n, size_t size, coli_err *e)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		coli_errf(e, COLI_ENOMEM, "out of memory allocating %zu x %zu bytes", n, size);
	return p;
}
