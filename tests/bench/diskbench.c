/* diskbench.c: O_DIRECT sequential write and read bandwidth of the disk holding a folder,
 * the physical limit the converter benchmark compares against.
 * usage: coli-diskbench DIR SIZE_MIB [BLOCK_MIB]   prints "write_mbs=X read_mbs=Y" */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int die(const char *what, const char *path)
{
	fprintf(stderr, "coli-diskbench: %s: %s: %s\n", path, what, strerror(errno));
	return 1;
}

/* Sequential O_DIRECT pass over the file; returns MB/s or -1. */
static double pass(const char *path, int writing, size_t total, size_t block, void *buf)
{
	int fd = open(path, (writing ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY) | O_DIRECT, 0600);
	if (fd < 0)
		return -1;
	double t0 = now();
	for (size_t off = 0; off < total; off += block) {
		ssize_t n = writing ? pwrite(fd, buf, block, (off_t)off) : pread(fd, buf, block, (off_t)off);
		if (n != (ssize_t)block) {
			close(fd);
			return -1;
		}
	}
	if (writing && fdatasync(fd) < 0) {
		close(fd);
		return -1;
	}
	double dt = now() - t0;
	close(fd);
	return (double)total / 1e6 / dt;
}

int main(int argc, char **argv)
{
	if (argc < 3 || atol(argv[2]) <= 0) {
		fprintf(stderr, "usage: coli-diskbench DIR SIZE_MIB [BLOCK_MIB]\n");
		return 2;
	}
	size_t block = (size_t)(argc > 3 ? atol(argv[3]) : 16) << 20, total = (size_t)atol(argv[2]) << 20;
	total = total / block * block;
	char path[4096];
	snprintf(path, sizeof(path), "%s/.coli-diskbench.%d", argv[1], (int)getpid());
	void *buf;
	if (posix_memalign(&buf, 4096, block) != 0)
		return die("cannot allocate the buffer", path);
	memset(buf, 0x5a, block);
	double w = pass(path, 1, total, block, buf);
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd >= 0) {
		sync();
		if (write(fd, "3\n", 2) < 0) {
			/* not root: O_DIRECT bypasses the page cache anyway */
		}
		close(fd);
	}
	double r = w < 0 ? -1 : pass(path, 0, total, block, buf);
	unlink(path);
	free(buf);
	if (w < 0 || r < 0)
		return die("O_DIRECT pass failed", path);
	printf("write_mbs=%.0f read_mbs=%.0f\n", w, r);
	return 0;
}
