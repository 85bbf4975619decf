/* outputs.c: the files a run writes (--session, --usage, --dump-logits, --dump-routing, --trace),
 * each checked before any work, named as the user gave it: a folder or a device given as a file,
 * a folder that does not exist or is not a folder, one that cannot be written (read-only file
 * system, permissions), too little free space for what the run will write. The session and usage
 * files are locked for the run, so that two runs never both rewrite one. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "run.h"

#define GIB 1073741824.0

/* "12.3 MiB" below a GiB, "1.25 GiB" above. */
static const char *size_text(double b, char *buf, size_t n)
{
	if (b < GIB)
		snprintf(buf, n, "%.1f MiB", b / 1048576.0);
	else
		snprintf(buf, n, "%.2f GiB", b / GIB);
	return buf;
}

/* The folder holding path, into dir ("." when path names none). */
static void folder_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, n, ".");
	else if (slash == path)
		snprintf(dir, n, "/");
	else
		snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

/* The run's outputs, in the order the checks name them. */
static int list_outputs(const run_opts *o, run_output *out)
{
	int n = 0;
	const run_output all[] = {
		{"--session", o->session}, {"--usage", o->usage}, {"--dump-logits", o->dump_logits},
		{"--dump-routing", o->dump_routing}, {"--trace", o->trace},
	};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i].path)
			out[n++] = all[i];
	return n;
}

/* What is at path, if anything, may be replaced by a file; its folder takes a new file (the
 * temporary the file is written to, created and removed here). */
static int check_one(const run_output *w, coli_err *e)
{
	struct stat st;
	char dir[4096], tmp[4096];
	folder_of(w->path, dir, sizeof(dir));
	if (!*w->path)
		return coli_errf(e, COLI_EUSAGE, "%s: an empty path", w->opt);
	if (stat(w->path, &st) == 0 && S_ISDIR(st.st_mode))
		return coli_errf(e, COLI_EUSAGE, "%s %s: a folder, not a file (name a file in it)", w->opt, w->path);
	if (stat(w->path, &st) == 0 && !S_ISREG(st.st_mode))
		return coli_errf(e, COLI_EUSAGE, "%s %s: not a regular file (the output replaces it by a file)", w->opt,
				 w->path);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", w->path) >= (int)sizeof(tmp))
		return coli_errf(e, COLI_EUSAGE, "%s: a path of %zu bytes is too long", w->opt, strlen(w->path));
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), created = fd >= 0;
	if (fd < 0 && errno == EEXIST) /* a temporary left by a run that was killed: replaced later */
		fd = open(tmp, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return coli_errf(e, COLI_EIO, "%s %s: cannot be written in %s: %s", w->opt, w->path, dir, strerror(errno));
	close(fd);
	if (created)
		unlink(tmp);
	return 0;
}

/* Two options naming one file would overwrite each other (and share one lock). */
static int check_distinct(const run_output *w, int n, coli_err *e)
{
	struct stat a, b;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (strcmp(w[i].path, w[j].path) == 0 || (stat(w[i].path, &a) == 0 && stat(w[j].path, &b) == 0 &&
								   a.st_dev == b.st_dev && a.st_ino == b.st_ino))
				return coli_errf(e, COLI_EUSAGE, "%s and %s name the same file %s", w[i].opt, w[j].opt,
						 w[i].path);
	return 0;
}

int outputs_check(const run_opts *o, coli_err *e)
{
	run_output w[RUN_OUTPUTS];
	int n = list_outputs(o, w);
	for (int i = 0; i < n; i++)
		if (check_one(&w[i], e) < 0)
			return -1;
	return check_distinct(w, n, e);
}

/* Bytes free for this process on the file system holding path's folder (root may use the
 * reserved blocks); -1 when unknown. */
static double free_bytes(const char *path, dev_t *dev)
{
	char dir[4096];
	struct statvfs v;
	struct stat st;
	folder_of(path, dir, sizeof(dir));
	if (statvfs(dir, &v) < 0 || stat(dir, &st) < 0)
		return -1;
	*dev = st.st_dev;
	return (double)(geteuid() == 0 ? v.f_bfree : v.f_bavail) * (double)v.f_frsize;
}

int outputs_space(const run_opts *o, const output_sizes *z, coli_err *e)
{
	run_output w[RUN_OUTPUTS];
	double need[RUN_OUTPUTS], avail[RUN_OUTPUTS];
	dev_t dev[RUN_OUTPUTS];
	int n = list_outputs(o, w);
	for (int i = 0; i < n; i++) {
		const char *opt = w[i].opt;
		need[i] = strcmp(opt, "--session") == 0 ? z->session : strcmp(opt, "--usage") == 0 ? z->usage :
			  strcmp(opt, "--dump-logits") == 0 ? z->logits : strcmp(opt, "--dump-routing") == 0 ? z->routing : 0;
		avail[i] = free_bytes(w[i].path, &dev[i]);
	}
	for (int i = 0; i < n; i++) { /* what goes to one file system is counted together, once */
		double sum = 0;
		char names[512] = "";
		int k = 0, first = 1;
		for (int j = 0; j < n; j++) {
			if (need[j] <= 0 || avail[j] < 0 || dev[j] != dev[i])
				continue;
			size_t at = strlen(names);
			snprintf(names + at, sizeof(names) - at, "%s%s %s", at ? " and " : "", w[j].opt, w[j].path);
			first &= j >= i, sum += need[j], k++;
		}
		char a[32], b[32];
		if (need[i] > 0 && avail[i] >= 0 && first && sum > avail[i])
			return coli_errf(e, COLI_EIO, "%s: %s %s, the file system holding %s has %s free", names,
					 k > 1 ? "need up to" : "needs up to", size_text(sum, a, sizeof(a)),
					 k > 1 ? "them" : "it", size_text(avail[i], b, sizeof(b)));
	}
	return 0;
}

int run_lock_take(run_lock *l, const char *opt, const char *file, coli_err *e)
{
	l->fd = -1;
	if (!(l->path = malloc(strlen(file) + 6)))
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	sprintf(l->path, "%s.lock", file);
	for (int tries = 0; tries < 100; tries++) {
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
		struct stat a, b;
		int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return coli_errf(e, COLI_EIO, "%s %s: cannot create its lock file %s: %s", opt, file, l->path,
					 strerror(errno));
		if (fcntl(fd, F_SETLK, &fl) < 0) {
			int err = errno, held = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
			close(fd);
			if (err != EACCES && err != EAGAIN)
				return coli_errf(e, COLI_EIO, "%s %s: cannot lock %s: %s", opt, file, l->path, strerror(err));
			if (!held) /* released in between: try again */
				continue;
			return coli_errf(e, COLI_EIO, "%s %s: in use by another run (pid %ld, which holds %s): wait for it "
					 "to end, or give another file", opt, file, (long)fl.l_pid, l->path);
		}
		if (fstat(fd, &a) == 0 && stat(l->path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			char pid[32]; /* for people: who holds it */
			int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
			ssize_t put = ftruncate(fd, 0) == 0 ? pwrite(fd, pid, (size_t)len, 0) : -1;
			(void)put;
			l->fd = fd;
			run_signals_cleanup(l->path);
			return 0;
		}
		close(fd); /* its holder removed it as we opened it: lock the new one */
	}
	return coli_errf(e, COLI_EIO, "%s %s: cannot lock %s: it keeps being replaced", opt, file, l->path);
}

void run_lock_release(run_lock *l)
{
	if (l->fd >= 0) {
		unlink(l->path); /* still locked: a run waiting on it finds it gone and makes a new one */
		close(l->fd);
	}
	free(l->path);
	l->fd = -1, l->path = NULL;
}
