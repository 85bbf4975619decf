/* replica.c: the copies of experts.bin a streaming store reads from, checked and chosen. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fileio.h"
#include "policy.h"
#include "store/replica.h"

/* The block device holding path, by its sysfs name ("vda1", "loop3"), else MAJ:MIN. */
static void device_name(const char *path, char *out, size_t size)
{
	struct stat st;
	char link[64], target[256];
	snprintf(out, size, "?");
	if (stat(path, &st) < 0)
		return;
	snprintf(out, size, "%u:%u", major(st.st_dev), minor(st.st_dev));
	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = 0;
		const char *base = strrchr(target, '/');
		snprintf(out, size, "%.31s", base ? base + 1 : target);
	}
}

/* Opens r's experts.bin with O_DIRECT, probed by one aligned read; buffered when the
 * filesystem refuses O_DIRECT (tmpfs). */
static int open_copy(replica *r, coli_err *e)
{
	void *probe = NULL;
	int fd = open(r->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno != EINVAL)
		return coli_errf(e, COLI_EIO, "%s: %s", r->path, strerror(errno));
	if (fd >= 0 && posix_memalign(&probe, 4096, 4096) != 0) {
		close(fd);
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating 4096 bytes");
	}
	if (fd >= 0 && pread(fd, probe, 4096, 0) != 4096) {
		close(fd);
		fd = -1;
	}
	free(probe);
	if (fd < 0 && (fd = open(r->path, O_RDONLY | O_CLOEXEC)) < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", r->path, strerror(errno));
	r->fd = fd, r->own_fd = 1;
	return 0;
}

/* A mirror must hold the same container: manifest.coli byte for byte, experts.bin as long. */
static int same_container(const coli_container *c, const char *mirror, const char *experts, coli_err *e)
{
	struct stat s0, s1;
	int rc = coli_container_same(mirror, c->dir, "--mirror", e);
	char *our_experts = rc == 0 ? coli_path_join(c->dir, "experts.bin") : NULL;
	if (rc == 0 && (!our_experts || stat(our_experts, &s0) < 0 || stat(experts, &s1) < 0))
		rc = coli_errf(e, COLI_EIO, "--mirror %s: %s", experts, strerror(errno));
	if (rc == 0 && s1.st_size != s0.st_size)
		rc = coli_errf(e, COLI_EDATA, "--mirror %s: size %lld bytes, %s has %lld", experts, (long long)s1.st_size,
			       our_experts, (long long)s0.st_size);
	free(our_experts);
	return rc;
}

/* The last copy opened must be another file than the ones before (a mirror naming the model,
 * or twice the same folder, would only split one disk's reads). */
static int distinct(const replica_set *rs, coli_err *e)
{
	const replica *r = &rs->r[rs->n - 1];
	struct stat a, b;
	if (fstat(r->fd, &a) < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", r->path, strerror(errno));
	for (int i = 0; i < rs->n - 1; i++)
		if (fstat(rs->r[i].fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return coli_errf(e, COLI_EUSAGE, "--mirror %s: the same file as %s, not another copy", r->path,
					 rs->r[i].path);
	return 0;
}

/* "--mirror " (or "-m " for the model's own folder) before e's message, which names the file. */
static void name_option(coli_err *e, int i)
{
	char tmp[sizeof(e->msg)];
	memcpy(tmp, e->msg, sizeof(tmp));
	snprintf(e->msg, sizeof(e->msg), "%s %.*s", i ? "--mirror" : "-m", (int)sizeof(e->msg) - 16, tmp);
}

/* r's mirror.coli, when its folder has one: a partial copy's map (the model's own copy, i 0,
 * must hold every record). */
static int read_map(replica *r, int i, const coli_container *c, uint64_t n_records, coli_err *e)
{
	char *path = coli_path_join(r->d.dir, COLI_MIRROR_FILE);
	struct stat st;
	int rc = path ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	int present = rc == 0 && stat(path, &st) == 0;
	if (rc == 0 && !present && errno != ENOENT)
		rc = coli_errf(e, COLI_EIO, "%s: %s", path, strerror(errno));
	if (rc == 0 && present && (rc = coli_mirror_map_read(path, c->identity, n_records, &r->map, e)) < 0)
		name_option(e, i);
	if (rc == 0 && present && r->map.held < r->map.n_records) {
		r->partial = 1;
		if (i == 0)
			rc = coli_errf(e, COLI_EUSAGE, "-m %s: a partial mirror (%u of %u expert records): give it as --mirror, "
				       "with the model itself as -m", path, r->map.held, r->map.n_records);
	}
	free(path);
	return rc;
}

int replicas_open(replica_set *rs, const coli_container *c, const char *const *mirrors, int n_mirrors,
		  uint64_t n_records, const double *bps, coli_err *e)
{
	memset(rs, 0, sizeof(*rs));
	rs->n_records = n_records;
	if (n_mirrors + 1 > STORE_MAX_COPIES)
		return coli_errf(e, COLI_EUSAGE, "--mirror: %d mirrors, at most %d", n_mirrors, STORE_MAX_COPIES - 1);
	for (int i = 0; i <= n_mirrors; i++) {
		replica *r = &rs->r[rs->n];
		r->d.dir = i ? mirrors[i - 1] : c->dir;
		r->fd = -1;
		if (!(r->path = coli_path_join(r->d.dir, "experts.bin")))
			return coli_errf(e, COLI_ENOMEM, "out of memory");
		rs->n++;
		if ((i && same_container(c, r->d.dir, r->path, e) < 0) || read_map(r, i, c, n_records, e) < 0 ||
		    open_copy(r, e) < 0 || distinct(rs, e) < 0)
			return -1;
		device_name(r->path, r->d.dev, sizeof(r->d.dev));
		r->d.rate_bps = bps && bps[i] > 0 ? bps[i] : 0;
		r->sustained = r->d.rate_bps > 0;
	}
	replicas_share(rs);
	return 0;
}

void replicas_close(replica_set *rs)
{
	for (int i = 0; i < rs->n; i++) {
		if (rs->r[i].own_fd)
			close(rs->r[i].fd);
		free(rs->r[i].path);
		free(rs->r[i].bad);
		coli_mirror_map_release(&rs->r[i].map);
	}
	rs->n = 0;
}

int replica_holds(const replica_set *rs, int i, uint64_t rec)
{
	return !rs->r[i].partial || coli_mirror_has(&rs->r[i].map, rec);
}

void replicas_share(replica_set *rs)
{
	double bps[STORE_MAX_COPIES], share[STORE_MAX_COPIES];
	for (int i = 0; i < rs->n; i++)
		bps[i] = rs->r[i].d.rate_bps;
	coli_copy_shares(rs->n, bps, NULL, share);
	for (int i = 0; i < rs->n; i++)
		rs->r[i].d.share = share[i];
}

/* How far past its share copy r would be with len more bytes: its recent bytes over its share. */
static double over_share(const replica *r, uint64_t len)
{
	return r->d.share > 0 ? (r->load + (double)len) / r->d.share : HUGE_VAL;
}

int replica_pick(const replica_set *rs, uint64_t rec, uint64_t len, unsigned tried)
{
	int best = -1, best_bad = 1;
	double best_t = 0;
	for (int i = 0; i < rs->n; i++) {
		if ((tried & (1u << i)) || !replica_holds(rs, i, rec))
			continue;
		const replica *r = &rs->r[i];
		int bad = r->bad && rec < rs->n_records && r->bad[rec];
		double t = over_share(r, len);
		if (best < 0 || bad < best_bad || (bad == best_bad && t < best_t))
			best = i, best_t = t, best_bad = bad;
	}
	return best;
}

/* r's window brought up to now: the time it had a read in flight since the last mark. */
static void busy_to(replica *r, double now)
{
	if (r->inflight > 0 && now > r->mark)
		r->win_busy += now - r->mark;
	r->mark = now;
}

void replica_issue(replica_set *rs, int i, uint64_t len, double now)
{
	replica *r = &rs->r[i];
	double decay = now > rs->load_t ? exp(-(now - rs->load_t) / REPLICA_MEMORY_S) : 1;
	for (int j = 0; j < rs->n; j++)
		rs->r[j].load *= decay;
	rs->load_t = now > rs->load_t ? now : rs->load_t;
	r->load += (double)len;
	busy_to(r, now);
	if (r->win_bytes == 0 && r->inflight == 0) /* a window starts with a read */
		r->win_t0 = now;
	r->issued += len;
	if (r->inflight++ == 0)
		r->busy_since = now;
}

/* A window of r's reads closes (long enough, enough read): bytes over busy time is what r
 * sustains when it was busy nearly throughout; else its reads met a refilled allowance or
 * waited on their own latency, which says nothing of what it sustains, and is taken only while
 * r's rate is unknown (module comment). 1 when r's rate changed. */
static int learn(replica *r, double now)
{
	double wall = now - r->win_t0;
	if (wall < REPLICA_WINDOW_S || r->win_bytes < REPLICA_WINDOW_BYTES || r->win_busy <= 0)
		return 0;
	double m = (double)r->win_bytes / r->win_busy, old = r->d.rate_bps;
	if (r->win_busy >= REPLICA_SATURATED * wall)
		r->d.rate_bps = m, r->sustained = 1;
	else if (!r->sustained)
		r->d.rate_bps = m;
	r->win_t0 = now, r->win_busy = 0, r->win_bytes = 0;
	return r->d.rate_bps != old;
}

void replica_done(replica_set *rs, int i, uint64_t len, int ok, double now)
{
	replica *r = &rs->r[i];
	busy_to(r, now);
	r->issued -= len;
	r->d.bytes_read += ok ? len : 0;
	r->win_bytes += ok ? len : 0;
	if (--r->inflight == 0)
		r->d.busy_s += now - r->busy_since;
	if (learn(r, now))
		replicas_share(rs);
}

void replica_mark_bad(replica_set *rs, int i, uint64_t rec)
{
	replica *r = &rs->r[i];
	r->d.failures++;
	if (!r->bad)
		r->bad = calloc(rs->n_records ? rs->n_records : 1, 1); /* none: only the avoidance is lost */
	if (r->bad && rec < rs->n_records)
		r->bad[rec] = 1;
}
