/* eiofs.c: a read-only pass-through FUSE 3 file system for the fault tests: it mirrors a source
 * folder and answers EIO to reads that overlap chosen byte ranges of chosen files.
 *
 *   eiofs [--eio FILE:OFFSET:LEN[:AFTER]]... [--cut FILE:SIZE]... [--log LOG] SRC MNT
 *
 * FILE is a path relative to SRC ("model.coli/experts.bin"), or a bare name matching that name
 * in any folder. A read overlapping [OFFSET, OFFSET + LEN) fails with EIO once AFTER such reads
 * have succeeded (default 0: every one fails). --cut makes FILE's data end at SIZE while its
 * size stays what it is: reads beyond SIZE come back short (0 bytes at or past it). Files are opened with direct_io, so no read is
 * served from the page cache: every read reaches eiofs. Each EIO returned is appended to LOG as
 * "eio PATH OFFSET SIZE". eiofs daemonizes once mounted; unmount with umount or fusermount3 -u. */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#define MAX_RULES 64

typedef struct rule {
	char file[PATH_MAX];
	uint64_t off, len;        /* --cut: data ends at off (len unused) */
	long after;               /* overlapping reads still to succeed before the EIOs */
	int cut;                  /* 1: a --cut rule */
} rule;

static struct {
	char src[PATH_MAX];
	rule rules[MAX_RULES];
	int n_rules;
	char log[PATH_MAX];       /* absolute (the daemon runs in /); "" for none */
	pthread_mutex_t mu;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The source path of a path of the mount ("/a/b" -> "SRC/a/b"). */
static void src_path(char *out, const char *path)
{
	snprintf(out, PATH_MAX, "%s%s", g.src, path);
}

/* Whether rule r names path (a path of the mount, "/" first). */
static int rule_names(const rule *r, const char *path)
{
	if (strchr(r->file, '/'))
		return strcmp(path + 1, r->file) == 0;
	const char *base = strrchr(path, '/');
	return strcmp(base ? base + 1 : path, r->file) == 0;
}

static void log_eio(const char *path, off_t off, size_t size)
{
	FILE *f = g.log[0] ? fopen(g.log, "a") : NULL;
	if (f) {
		fprintf(f, "eio %s %lld %zu\n", path + 1, (long long)off, size);
		fclose(f);
	}
}

/* Whether a read of size bytes at off of path fails (counting it against the rules' AFTER). */
static int read_fails(const char *path, off_t off, size_t size)
{
	int fail = 0;
	pthread_mutex_lock(&g.mu);
	for (int i = 0; i < g.n_rules; i++) {
		rule *r = &g.rules[i];
		if (r->cut || !rule_names(r, path) || (uint64_t)off >= r->off + r->len || (uint64_t)off + size <= r->off)
			continue;
		if (r->after > 0)
			r->after--;
		else
			fail = 1;
	}
	if (fail)
		log_eio(path, off, size);
	pthread_mutex_unlock(&g.mu);
	return fail;
}

/* The bytes of a read of n bytes at off of path that a --cut rule leaves. */
static size_t cut_read(const char *path, off_t off, size_t n)
{
	for (int i = 0; i < g.n_rules; i++) {
		const rule *r = &g.rules[i];
		if (r->cut && rule_names(r, path))
			n = (uint64_t)off >= r->off ? 0 : n < r->off - (uint64_t)off ? n : (size_t)(r->off - (uint64_t)off);
	}
	return n;
}

static int eio_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	(void)fi;
	src_path(p, path);
	if (lstat(p, st) < 0)
		return -errno;
	st->st_mode &= ~(mode_t)0222;
	return 0;
}

static int eio_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
		       enum fuse_readdir_flags flags)
{
	char p[PATH_MAX];
	(void)off, (void)fi, (void)flags;
	src_path(p, path);
	DIR *d = opendir(p);
	if (!d)
		return -errno;
	for (struct dirent *de; (de = readdir(d));)
		if (fill(buf, de->d_name, NULL, 0, 0))
			break;
	closedir(d);
	return 0;
}

static int eio_open(const char *path, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EROFS;
	src_path(p, path);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	fi->direct_io = 1;
	return 0;
}

static int eio_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (read_fails(path, off, size))
		return -EIO;
	ssize_t n = pread((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)cut_read(path, off, (size_t)n);
}

static int eio_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static int eio_readlink(const char *path, char *buf, size_t size)
{
	char p[PATH_MAX];
	src_path(p, path);
	ssize_t n = readlink(p, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

static const struct fuse_operations ops = {
	.getattr = eio_getattr, .readdir = eio_readdir, .open = eio_open, .read = eio_read,
	.release = eio_release, .readlink = eio_readlink,
};

static int usage(void)
{
	fprintf(stderr, "usage: eiofs [--eio FILE:OFFSET:LEN[:AFTER]]... [--cut FILE:SIZE]... [--log LOG] SRC MNT\n");
	return 2;
}

/* "FILE:OFFSET:LEN[:AFTER]" into a new rule; -1 when malformed or one too many. */
static int add_rule(const char *arg)
{
	char file[PATH_MAX];
	unsigned long long off, len;
	long after = 0;
	if (g.n_rules == MAX_RULES || sscanf(arg, "%4095[^:]:%llu:%llu:%ld", file, &off, &len, &after) < 3 ||
	    len == 0 || after < 0)
		return -1;
	rule *r = &g.rules[g.n_rules++];
	snprintf(r->file, sizeof(r->file), "%s", file);
	r->off = off, r->len = len, r->after = after;
	return 0;
}

/* "FILE:SIZE" into a new --cut rule; -1 when malformed or one too many. */
static int add_cut(const char *arg)
{
	char file[PATH_MAX];
	unsigned long long size;
	if (g.n_rules == MAX_RULES || sscanf(arg, "%4095[^:]:%llu", file, &size) != 2)
		return -1;
	rule *r = &g.rules[g.n_rules++];
	snprintf(r->file, sizeof(r->file), "%s", file);
	r->off = size, r->cut = 1;
	return 0;
}

/* LOG made absolute: the daemon's working folder is /. */
static int set_log(const char *path)
{
	char cwd[PATH_MAX];
	if (path[0] == '/')
		return snprintf(g.log, sizeof(g.log), "%s", path) < (int)sizeof(g.log) ? 0 : -1;
	if (!getcwd(cwd, sizeof(cwd)))
		return -1;
	return snprintf(g.log, sizeof(g.log), "%s/%s", cwd, path) < (int)sizeof(g.log) ? 0 : -1;
}

int main(int argc, char **argv)
{
	int i = 1;
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (strcmp(argv[i], "--eio") == 0 && add_rule(argv[i + 1]) == 0)
			continue;
		if (strcmp(argv[i], "--cut") == 0 && add_cut(argv[i + 1]) == 0)
			continue;
		if (strcmp(argv[i], "--log") == 0 && set_log(argv[i + 1]) == 0)
			continue;
		fprintf(stderr, "eiofs: bad option '%s %s'\n", argv[i], argv[i + 1]);
		return usage();
	}
	if (argc - i != 2 || !realpath(argv[i], g.src))
		return usage();
	char *fargv[] = {argv[0], "-o", "ro,fsname=eiofs,subtype=eiofs", argv[i + 1], NULL};
	return fuse_main(4, fargv, &ops, NULL);
}
