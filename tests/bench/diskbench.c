/* diskbench.c: O_DIRECT read (and write) bandwidth of a disk at a given block size and queue
 * depth (that many threads, each with one block in flight): the physical limits the benchmarks
 * compare against. Two modes:
 *   coli-diskbench DIR SIZE_MIB [BLOCK_MIB [QUEUE_DEPTH]]
 *     sequential write, then read, of a new file in DIR (deleted after); the lanes interleave
 *     over the file. Prints "write_mbs=X read_mbs=Y".
 *   coli-diskbench --records FILE RECORD_BYTES QUEUE_DEPTH SECONDS [OFFSET [MAX_RECORDS [CHUNK]]]
 *     read-only: whole records of an existing file (records of RECORD_BYTES laid end to end from
 *     OFFSET, default 4096: a container's experts.bin) in a random order without repeats (then
 *     again in another order), until SECONDS have passed or MAX_RECORDS were read (0: no limit).
 *     With CHUNK (bytes, a multiple of 4096), each record is read as coli-run's store reads it:
 *     in chunks of CHUNK bytes, the lanes taking the next chunk of the next record in turn.
 *     Prints "read_mbs=X records=N seconds=S" (N counts whole records). */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "options.h"

typedef struct lane {
	int fd, writing, id, qd;
	size_t total, block;
	int failed;
} lane;

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
	double t0 = coli_now();
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
	double dt = coli_now() - t0;
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

/* The --records mode: lanes take the next index of a shared random permutation. */
typedef struct records {
	int fd, failed;
	off_t base;
	size_t size, chunk;
	long count, max, nchunks, *order;
	double deadline;
	atomic_long next;
	atomic_llong bytes;
} records;

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void shuffle(long *v, long n, uint64_t seed)
{
	for (long i = 0; i < n; i++)
		v[i] = i;
	for (long i = n - 1; i > 0; i--) {
		long j = (long)(xorshift(&seed) % (uint64_t)(i + 1)), t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

static void *records_lane(void *arg)
{
	records *r = arg;
	void *buf;
	if (posix_memalign(&buf, 4096, r->size) != 0) {
		r->failed = 1;
		return NULL;
	}
	memset(buf, 0, r->size); /* pre-faulted, as coli-run's slot buffers */
	for (;;) {
		long k = atomic_fetch_add(&r->next, 1), rec = k / r->nchunks, c = k % r->nchunks;
		if (rec >= r->max || coli_now() >= r->deadline)
			break;
		size_t at = (size_t)c * r->chunk, n = r->size - at < r->chunk ? r->size - at : r->chunk;
		off_t off = r->base + (off_t)r->order[rec % r->count] * (off_t)r->size + (off_t)at;
		if (pread(r->fd, (char *)buf + at, n, off) != (ssize_t)n) {
			r->failed = 1;
			break;
		}
		atomic_fetch_add(&r->bytes, (long long)n);
	}
	free(buf);
	return NULL;
}

static const char *const synopsis[] = {
	"coli-diskbench DIR SIZE_MIB [BLOCK_MIB [QUEUE_DEPTH]]",
	"coli-diskbench --records FILE RECORD_BYTES QUEUE_DEPTH SECONDS [OFFSET [MAX_RECORDS [CHUNK]]]",
	NULL,
};

static int records_mode, help;

static const coli_option options[] = {
	COLI_OPT_TEXT("O_DIRECT read (and write) bandwidth of a disk at a block size and queue depth "
		      "(that many threads, each with one block in flight). Without --records: a "
		      "sequential write, then read, of a new file in DIR (deleted after), blocks of "
		      "BLOCK_MIB (default 16) at QUEUE_DEPTH 1..64 (default 1); prints \"write_mbs=X "
		      "read_mbs=Y\"."),
	COLI_OPT_TEXT(""),
	COLI_OPT_FLAG(0, "records", &records_mode, "read-only: whole records of RECORD_BYTES laid end to end "
		      "in FILE from OFFSET (default 4096: a container's experts.bin), in a random order, "
		      "until SECONDS have passed or MAX_RECORDS were read (0: no limit); with CHUNK, each "
		      "record in chunks of CHUNK bytes as coli-run's store reads it; prints \"read_mbs=X "
		      "records=N seconds=S\""),
	COLI_OPT_HELP(&help),
	COLI_OPT_END(),
};

/* --help on stdout, or the usage error msg and --help on stderr; returns the exit status. */
static int usage(const char *msg)
{
	char *text = coli_opts_usage("coli-diskbench", msg, synopsis, options);
	fputs(text ? text : "coli-diskbench: out of memory\n", msg ? stderr : stdout);
	free(text);
	return msg ? 2 : 0;
}

static int records_usage(void)
{
	return usage("--records expects FILE RECORD_BYTES QUEUE_DEPTH SECONDS [OFFSET "
		     "[MAX_RECORDS [CHUNK]]]: RECORD_BYTES, OFFSET and CHUNK multiples of 4096, "
		     "QUEUE_DEPTH 1..64, SECONDS > 0");
}

/* The --records mode; its n operands are argv[0..n). */
static int records_main(int n, char **argv)
{
	if (n < 4 || n > 7)
		return records_usage();
	long long size = atoll(argv[1]), base = n > 4 ? atoll(argv[4]) : 4096;
	int qd = atoi(argv[2]);
	double secs = atof(argv[3]);
	long max = n > 5 && atol(argv[5]) ? atol(argv[5]) : LONG_MAX / 1024;
	long long chunk = n > 6 ? atoll(argv[6]) : size;
	if (size <= 0 || size % 4096 || base < 0 || base % 4096 || qd < 1 || qd > 64 || secs <= 0 || max < 1 ||
	    chunk <= 0 || chunk % 4096)
		return records_usage();
	if (chunk > size)
		chunk = size;
	int fd = open(argv[0], O_RDONLY | O_DIRECT);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "coli-diskbench: '%s': %s\n", argv[0], strerror(errno));
		return 1;
	}
	long count = (long)((st.st_size - base) / size);
	if (st.st_size < base || count < 1) {
		fprintf(stderr, "coli-diskbench: '%s': %lld bytes hold no record of %lld bytes after offset %lld\n",
			argv[0], (long long)st.st_size, size, base);
		close(fd);
		return 1;
	}
	records r = {.fd = fd, .base = (off_t)base, .size = (size_t)size, .chunk = (size_t)chunk, .count = count,
		     .max = max, .nchunks = (long)((size + chunk - 1) / chunk)};
	r.order = calloc((size_t)count, sizeof(*r.order));
	if (!r.order) {
		fprintf(stderr, "coli-diskbench: cannot allocate %ld record indices\n", count);
		return 1;
	}
	shuffle(r.order, count, (uint64_t)coli_now() * 2654435761u | 1);
	pthread_t tid[64];
	double t0 = coli_now();
	r.deadline = t0 + secs;
	for (int i = 0; i < qd; i++)
		pthread_create(&tid[i], NULL, records_lane, &r);
	for (int i = 0; i < qd; i++)
		pthread_join(tid[i], NULL);
	double dt = coli_now() - t0;
	long long bytes = atomic_load(&r.bytes);
	free(r.order);
	close(fd);
	if (r.failed) {
		fprintf(stderr, "coli-diskbench: '%s': O_DIRECT read of %lld bytes failed: %s\n", argv[0], size, strerror(errno));
		return 1;
	}
	printf("read_mbs=%.0f records=%.1f seconds=%.2f\n", (double)bytes / 1e6 / dt, (double)bytes / (double)size, dt);
	return 0;
}

int main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(options, argc, argv, &e);
	if (help)
		return usage(NULL);
	if (n < 0)
		return usage(e.msg);
	if (records_mode)
		return records_main(n, argv);
	long mib = n > 1 ? atol(argv[1]) : 0, bmib = n > 2 ? atol(argv[2]) : 16;
	int qd = n > 3 ? atoi(argv[3]) : 1;
	if (n < 2 || mib <= 0 || bmib <= 0 || qd < 1 || qd > 64)
		return usage("expected DIR SIZE_MIB [BLOCK_MIB [QUEUE_DEPTH]]: sizes > 0, "
			     "QUEUE_DEPTH 1..64");
	size_t block = (size_t)bmib << 20, total = ((size_t)mib << 20) / block * block;
	char path[4096];
	snprintf(path, sizeof(path), "%s/.coli-diskbench.%d", argv[0], (int)getpid());
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
