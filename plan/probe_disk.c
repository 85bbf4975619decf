/* probe_disk.c: a folder's read speeds: O_DIRECT random records at several queue depths (one
 * thread per request in flight, as coli-run's pread backend), the same in bursts after idle
 * time, buffered reads, 4 KiB latency; what each rate counts of the reads is probe_rate.c's. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"
#include "probe_measure.h"
#include "probe_rate.h"

#define WRITE_CHUNK (8u << 20) /* bytes per write of the scratch file */
#define LAT_READS 256          /* 4 KiB reads for the latency median, at most */
#define MIB (1024.0 * 1024.0)

/* ---- the scratch file, removed on SIGINT/SIGTERM too (probe_disk_cleanup) ---- */

static char scratch[4200];
static atomic_int scratch_on;  /* scratch holds a whole path (the handler may run on any thread) */

static void scratch_set(const char *dir)
{
	atomic_store(&scratch_on, 0);
	if (dir) {
		snprintf(scratch, sizeof(scratch), "%s/.coli-probe.%d", dir, (int)getpid());
		atomic_store(&scratch_on, 1);
	}
}

static void scratch_begin(const char *dir)
{
	scratch_set(dir);
}

static void scratch_end(void)
{
	unlink(scratch);
	scratch_set(NULL);
}

int probe_disk_cleanup(void)
{
	return atomic_load(&scratch_on) ? unlink(scratch) == 0 : 0;
}

/* ---- checks before anything is measured ---- */

/* Free space the probe leaves alone: 1% of the filesystem, at most 1 GiB. */
static double reserve_of(const char *dir)
{
	struct statvfs v;
	if (statvfs(dir, &v) < 0)
		return 0;
	double r = (double)v.f_blocks * (double)v.f_frsize / 100;
	return r < 1024 * MIB ? r : 1024 * MIB;
}

/* Opens the scratch file for O_DIRECT writing and reading; messages name d->dir. */
static int open_direct(const coli_probe_disk *d, coli_err *e)
{
	int fd = open(scratch, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	if (errno == EINVAL)
		return coli_errf(e, COLI_EIO, "--disk %s: the filesystem (%s) refuses O_DIRECT, which coli-run reads "
			       "experts with; choose a folder on a disk", d->dir, d->fs);
	return coli_errf(e, COLI_EIO, "--disk %s: cannot create a scratch file in it: %s", d->dir, strerror(errno));
}

int probe_disk_check(const coli_probe_disk *d, const probe_disk_opts *o, coli_err *e)
{
	if (!strcmp(d->fs, "tmpfs") || !strcmp(d->fs, "devtmpfs"))
		return coli_errf(e, COLI_EIO, "--disk %s: on %s, which is memory, not a disk: its reads would measure RAM",
				 d->dir, d->fs);
	void *buf = NULL;
	scratch_begin(d->dir);
	int fd = open_direct(d, e), rc = fd < 0 ? -1 : 0;
	if (rc == 0 && posix_memalign(&buf, 4096, 4096) != 0)
		rc = coli_errf(e, COLI_ENOMEM, "out of memory allocating 4096 bytes");
	if (rc == 0 && pwrite(fd, memset(buf, 0x5a, 4096), 4096, 0) != 4096)
		rc = coli_errf(e, COLI_EIO, "--disk %s: an O_DIRECT write of 4096 bytes failed: %s (filesystem %s)", d->dir,
			       strerror(errno), d->fs);
	free(buf);
	if (fd >= 0)
		close(fd);
	scratch_end();
	double keep = reserve_of(d->dir);
	if (rc == 0 && d->free_bytes < (double)o->file_bytes + keep)
		rc = coli_errf(e, COLI_EIO, "--disk %s: %.1f MiB free; the probe needs %.1f MiB for its scratch file "
			       "and leaves %.1f MiB free (--disk-mib sets the file's size)",
			       d->dir, d->free_bytes / MIB, (double)o->file_bytes / MIB, keep / MIB);
	return rc;
}

/* ---- the scratch file ---- */

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Pseudo-random bytes, every 4 KiB block stamped with its place in the file: no block the same
 * as another, so no layer below can compress or deduplicate the reads away. */
static void fill_chunk(uint8_t *buf, size_t n, uint64_t at, uint64_t *seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = xorshift(seed);
		memcpy(buf + i, &v, 8);
	}
	for (size_t b = 0; b < n; b += 4096) {
		uint64_t block = (at + b) / 4096;
		memcpy(buf + b, &block, 8);
	}
}

static int write_file(int fd, const coli_probe_disk *d, uint64_t total, coli_err *e)
{
	void *buf;
	uint64_t seed = (uint64_t)coli_now_ns() | 1;
	if (posix_memalign(&buf, 4096, WRITE_CHUNK) != 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating %u bytes", WRITE_CHUNK);
	int rc = 0;
	for (uint64_t at = 0; rc == 0 && at < total; at += WRITE_CHUNK) {
		size_t n = total - at < WRITE_CHUNK ? (size_t)(total - at) : WRITE_CHUNK;
		probe_progress("disk %s: writing a %.0f MiB scratch file, %.0f%%", d->dir, (double)total / MIB,
			       100.0 * (double)at / (double)total);
		fill_chunk(buf, n, at, &seed);
		rc = coli_pwrite_full(fd, buf, n, at, scratch, e);
	}
	if (rc == 0 && fdatasync(fd) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: fdatasync: %s", scratch, strerror(errno));
	free(buf);
	return rc;
}

/* ---- reads ---- */

/* Random whole-record reads by qd threads, each taking the next index of a pseudo-random order,
 * until the deadline; a pass over every record at the most when once is set (buffered reads:
 * a record read twice would come from the page cache), limit records when limit > 0. Each
 * completion goes to the window w (under lock). */
typedef struct reads {
	int fd, failed, once;
	long limit;
	uint64_t size;
	long count, step, start; /* record k of a pass: (start + k x step) mod count, step coprime */
	double deadline;
	const char *dir;
	atomic_long next;
	pthread_mutex_t lock;
	probe_window *w;
} reads;

static void *read_lane(void *arg)
{
	reads *r = arg;
	void *buf;
	if (posix_memalign(&buf, 4096, r->size) != 0)
		return r->failed = ENOMEM, NULL;
	memset(buf, 0, r->size);
	for (;;) {
		long k = atomic_fetch_add(&r->next, 1);
		if ((r->once && k >= r->count) || (r->limit > 0 && k >= r->limit) || (k > 0 && coli_now() >= r->deadline))
			break;
		off_t off = (off_t)((uint64_t)((r->start + k % r->count * r->step) % r->count) * r->size);
		ssize_t n = pread(r->fd, buf, r->size, off);
		if (n != (ssize_t)r->size) {
			r->failed = n < 0 ? errno : EIO;
			break;
		}
		pthread_mutex_lock(&r->lock);
		probe_window_add(r->w, coli_now(), (double)n);
		pthread_mutex_unlock(&r->lock);
	}
	free(buf);
	return NULL;
}

static long gcd(long a, long b)
{
	while (b) {
		long t = a % b;
		a = b, b = t;
	}
	return a;
}

/* The reader's read (probe_rate.h): qd lanes over r, a new pseudo-random order. */
static int lanes_read(void *ctx, int qd, long limit, double deadline, probe_window *w, coli_err *e)
{
	reads *r = ctx;
	pthread_t tid[1024];
	int started = 0;
	uint64_t seed = coli_now_ns() | 1;
	r->start = (long)(xorshift(&seed) % (uint64_t)r->count);
	do
		r->step = (long)(xorshift(&seed) % (uint64_t)r->count) | 1;
	while (gcd(r->step, r->count) != 1);
	atomic_store(&r->next, 0);
	r->failed = 0, r->limit = limit, r->deadline = deadline, r->w = w;
	while (started < qd && pthread_create(&tid[started], NULL, read_lane, r) == 0)
		started++;
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	if (r->failed || started < qd)
		return coli_errf(e, COLI_EIO, "--disk %s: %s of %llu bytes failed: %s", r->dir,
				 started < qd ? "starting the threads for reads" : "a read", (unsigned long long)r->size,
				 strerror(r->failed ? r->failed : EAGAIN));
	return 0;
}

static double clock_now(void *ctx)
{
	(void)ctx;
	return coli_now();
}

static void clock_idle(void *ctx, double s)
{
	(void)ctx;
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

/* Median time of single 4 KiB O_DIRECT reads at random places. */
static double latency(int fd, uint64_t file_bytes, double seconds, coli_err *e)
{
	double t[LAT_READS], end = coli_now() + seconds;
	uint64_t seed = coli_now_ns() | 1;
	void *buf;
	int n = 0;
	if (posix_memalign(&buf, 4096, 4096) != 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating 4096 bytes"), -1;
	while (n < LAT_READS && (n < 8 || coli_now() < end)) {
		off_t off = (off_t)(xorshift(&seed) % (file_bytes / 4096) * 4096);
		double t0 = coli_now();
		if (pread(fd, buf, 4096, off) != 4096) {
			free(buf);
			return coli_errf(e, COLI_EIO, "%s: a 4096-byte read failed: %s", scratch, strerror(errno)), -1;
		}
		t[n++] = coli_now() - t0;
	}
	free(buf);
	return probe_median(t, n);
}

/* Each queue depth's O_DIRECT rate into d, the burst rate, then the buffered rate through a new
 * descriptor. */
static int measure_reads(int fd, coli_probe_disk *d, const probe_disk_opts *o, coli_err *e)
{
	reads r = {.fd = fd, .size = o->record_bytes, .count = (long)(o->file_bytes / o->record_bytes), .dir = d->dir,
		   .lock = PTHREAD_MUTEX_INITIALIZER};
	probe_reader rd = {&r, (double)o->record_bytes, clock_now, clock_idle, lanes_read};
	int rc = 0;
	for (int i = 0; rc == 0 && i < o->n_qd; i++) {
		probe_progress("disk %s: O_DIRECT reads of %.2f MiB at queue depth %d", d->dir, (double)r.size / MIB, o->qd[i]);
		d->qd[i] = o->qd[i];
		rc = (d->direct_bps[i] = probe_sustained(&rd, o->qd[i], o->seconds, e)) < 0 ? -1 : 0;
	}
	d->n_qd = o->n_qd;
	probe_progress("disk %s: O_DIRECT bursts of %d records after idle time", d->dir, COLI_PROBE_BURST_RECORDS);
	if (rc == 0) /* the file holds 4 records at least (probe.c) */
		rc = (d->burst_bps = probe_bursts(&rd, COLI_PROBE_BURST_RECORDS, coli_probe_best_bps(d), e)) < 0 ? -1 : 0;
	probe_progress("disk %s: buffered reads", d->dir);
	r.once = 1;
	r.fd = rc == 0 ? open(scratch, O_RDONLY | O_CLOEXEC) : -1;
	if (rc == 0 && r.fd < 0)
		rc = coli_errf(e, COLI_EIO, "%s: %s", scratch, strerror(errno));
	if (rc == 0 && (posix_fadvise(r.fd, 0, 0, POSIX_FADV_DONTNEED), 1))
		rc = (d->buffered_bps = probe_sustained(&rd, 1, o->seconds, e)) < 0 ? -1 : 0;
	if (r.fd >= 0) {
		posix_fadvise(r.fd, 0, 0, POSIX_FADV_DONTNEED);
		close(r.fd);
	}
	return rc;
}

int probe_disk_measure(coli_probe_disk *d, const probe_disk_opts *o, coli_err *e)
{
	scratch_begin(d->dir);
	int fd = open_direct(d, e), rc = fd < 0 ? -1 : 0;
	if (rc == 0)
		rc = write_file(fd, d, o->file_bytes, e);
	if (rc == 0) {
		probe_progress("disk %s: 4 KiB read latency", d->dir);
		rc = (d->latency_s = latency(fd, o->file_bytes, o->seconds, e)) < 0 ? -1 : 0;
	}
	if (rc == 0)
		rc = measure_reads(fd, d, o, e);
	if (fd >= 0)
		close(fd);
	scratch_end();
	d->record_bytes = (double)o->record_bytes;
	d->file_bytes = (double)o->file_bytes;
	d->taken = (double)time(NULL);
	return rc;
}
