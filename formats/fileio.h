/* fileio.h: whole-buffer reads and writes that report short I/O, and atomic file replacement. */
#ifndef COLI_FILEIO_H
#define COLI_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <sys/types.h>

#include "error.h"

/* pwrite/pread the whole buffer, retrying on EINTR and short counts. `what` names the file in
 * errors ("model.coli/experts.bin"); ENOSPC is reported as "disk full". A read past the end is
 * reported as a short read with the offset. */
int coli_pwrite_full(int fd, const void *buf, size_t n, uint64_t off, const char *what, coli_err *e);
int coli_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *what, coli_err *e);
/* The same into n iovecs (one request for adjacent file ranges); iov is advanced in place. */
int coli_preadv_full(int fd, struct iovec *iov, int n, uint64_t off, const char *what, coli_err *e);

/* Opens path with flags (O_RDONLY, O_RDWR) and returns the descriptor, or -1 with e filled: a
 * path that is not a regular file (a FIFO, a device, a folder) is refused (COLI_EDATA) without
 * blocking; *size (may be NULL) receives the file size. */
int coli_open_regular(const char *path, int flags, uint64_t *size, coli_err *e);

/* Opens path for reading and reads its first n bytes into h (zero-filled when the file is
 * shorter, so a format check reports the short file); *fd stays open for the payload (the caller
 * closes it), *size is the file size. */
int coli_open_header(const char *path, void *h, size_t n, int *fd, uint64_t *size, coli_err *e);

/* Reads a whole (small) file into a NUL-terminated malloc'd buffer; *len excludes the NUL. */
int coli_read_file(const char *path, char **out, size_t *len, coli_err *e);

/* Writes data to path via "<path>.tmp", fsync, rename, fsync of the folder: readers see the old
 * file or the new one, never a torn one. */
int coli_write_atomic(const char *path, const void *data, size_t n, coli_err *e);

/* The same for a file written piece by piece: fill writes the content to fd (named tmp in
 * errors); 0, or -1 with e filled (the temporary file is then removed). */
typedef int (*coli_fill_fn)(int fd, const char *tmp, void *ctx, coli_err *e);
int coli_write_atomic_by(const char *path, coli_fill_fn fill, void *ctx, coli_err *e);

/* fsync of the folder holding path (makes a rename durable). */
int coli_fsync_dir_of(const char *path, coli_err *e);

/* "<dir>/<name>" into a malloc'd string (NULL on allocation failure). */
char *coli_path_join(const char *dir, const char *name);

/* malloc/calloc that fill e with the size on failure. */
void *coli_malloc(size_t n, coli_err *e);
void *coli_calloc(size_t n, size_t size, coli_err *e);

/* n bytes for weights read once and then streamed through by the kernels (free() releases them):
 * 4096-aligned, and from 2 MiB on aligned to 2 MiB and asked of the kernel as transparent huge
 * pages (MADV_HUGEPAGE: a 2 MiB page takes one TLB entry where 512 pages of 4 KiB took 512; no
 * effect where THP is off). NULL when out of memory. */
void *coli_weights_alloc(size_t n);

#endif
