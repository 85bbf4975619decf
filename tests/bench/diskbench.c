/* diskbench.c: O_DIRECT sequential write and read bandwidth of the disk holding a folder, at a
 * given queue depth (that many threads, each with one block in flight, interleaved over one
 * file): the physical limits the benchmarks compare against.
 * usage: coli-diskbench DIR SIZE_MIB [BLOCK_MIB [QUEUE_DEPTH]]   prints "write_mbs=X read_mbs=Y" */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct lane {
	int fd, writing, id, qd;
	size_t total, block;
	int failed;
} lane;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Lane i does blocks i, i+qd, i+2qd, ...: together the lanes sweep the file in order. */
static void *run_lane(void *arg)
{
	lane *l = arg;
	void *buf;
	if (posix_memalign(&buf, 4096, l->block) != 0) {
		l->failed = 1;
		return NULL;
	}
	memset(buf, 0x5a, l->block);
	for (size_t off = (size_t)l->id * l->block; off < l->total; off += (size_t)l->qd * l->block) {
		ssize_t n = l->writing ? pwrite(l->fd, buf, l->block, (off_t)off) : pread(l->fd, buf, l->block, (off_t)off);
		if (n != (ssize_t)l->block) {
			l->failed = 1;
			break;
		}
	}
	free(buf);
	return NULL;
}

/* One pass at queue depth qd; MB/s, or -1 on failure. */
static double pass(const char *path, int writing, size_t total, size_t block, int qd)
{
	int fd = open(path, (writing ? O_WRONLY | O_CREAT : O_RDONLY) | O_DIRECT, 0600);
	if (fd < 0)
		return -1;
	lane lanes[64];
	pthread_t tid[64];
	int failed = 0;
	double t0 = now();
	for (int i = 0; i < qd; i++) {
		lanes[i] = (lane){fd, writing, i, qd, total, block, 0};
		pthread_create(&tid[i], NULL, run_lane, &lanes[i]);
	}
	for (int i = 0; i < qd; i++) {
		pthread_join(tid[i], NULL);
		failed |= lanes[i].failed;
	}
	if (writing && fdatasync(fd) < 0)
		failed = 1;
	double dt = now() - t0;
	close(fd);
	return failed ? -1 : (double)total / 1e6 / dt;
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0)
		return; /* not root: O_DIRECT bypasses the page cache anyway */
	sync();
	if (write(fd, "3\n", 2) < 0)
		fprintf(stderr, "coli-diskbench: drop_caches: %s\n", strerror(errno));
	close(fd);
}

int main(int argc, char **argv)
{
	long mib = argc > 2 ? atol(argv[2]) : 0, bmib = argc > 3 ? atol(argv[3]) : 16;
	int qd = argc > 4 ? atoi(argv[4]) : 1;
	if (argc < 3 || mib <= 0 || bmib <= 0 || qd < 1 || qd > 64) {
		fprintf(stderr, "usage: coli-diskbench DIR SIZE_MIB [BLOCK_MIB [QUEUE_DEPTH 1..64]]\n");
		return 2;
	}
	size_t block = (size_t)bmib << 20, total = ((size_t)mib << 20) / block * block;
	char path[4096];
	snprintf(path, sizeof(path), "%s/.coli-diskbench.%d", argv[1], (int)getpid());
	double w = pass(path, 1, total, block, qd);
	drop_caches();
	double r = w < 0 ? -1 : pass(path, 0, total, block, qd);
	unlink(path);
	if (w < 0 || r < 0) {
		fprintf(stderr, "coli-diskbench: %s: O_DIRECT pass failed: %s\n", path, strerror(errno));
		return 1;
	}
	printf("write_mbs=%.0f read_mbs=%.0f\n", w, r);
	return 0;
}
