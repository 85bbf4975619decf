/* probe_machine.c: what ties a probe to a machine (CPU, cores, each folder's device), and the
 * check that refuses another machine's probe. */
#include "probe.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fileio.h"
#include "machine.h"
#include "mounts.h"

int coli_probe_machine(coli_probe *p, coli_err *e)
{
	p->version = COLI_PROBE_VERSION;
	if (coli_machine_cpu(p->cpu_model, sizeof(p->cpu_model), p->isa, sizeof(p->isa), e) < 0 ||
	    coli_machine_memory(&p->ram_total, &p->ram_available, e) < 0)
		return -1;
	p->physical_cores = coli_machine_physical_cores();
	p->logical_cpus = coli_machine_logical_cpus();
	p->cgroup_limit = coli_machine_cgroup_limit();
	coli_machine_gpus(p->gpus, sizeof(p->gpus));
	return 0;
}

/* ---- a folder's block device ---- */

/* The first line of dir/leaf, trimmed, non-printable bytes as '?'; "" when unreadable. */
static void sys_line(const char *dir, const char *leaf, char *out, size_t size)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", dir, leaf);
	FILE *f = fopen(path, "r");
	out[0] = 0;
	if (f && !fgets(out, (int)size, f))
		out[0] = 0;
	if (f)
		fclose(f);
	size_t n = strlen(out);
	while (n && isspace((unsigned char)out[n - 1]))
		out[--n] = 0;
	for (size_t i = 0; i < n; i++)
		if (!isprint((unsigned char)out[i]) || out[i] == ' ')
			out[i] = out[i] == ' ' ? '_' : '?';
}

/* Appends " key=value" for what sysfs says of the device in dir (or, for a partition, of the
 * disk it is on): what tells it from another device given the same MAJ:MIN later. */
static void device_identity(const char *dir, char *out, size_t size)
{
	static const char *const leaves[] = {"serial", "device/serial", "wwid", "device/wwid", "device/model",
					     "loop/backing_file", NULL};
	char v[1024], parent[PATH_MAX + 8], part[16];
	size_t at = 0;
	sys_line(dir, "size", v, sizeof(v));
	at += (size_t)snprintf(out, size, "size=%s", *v ? v : "?");
	sys_line(dir, "partition", part, sizeof(part));
	snprintf(parent, sizeof(parent), "%s/..", dir);
	for (int i = 0; leaves[i]; i++) {
		sys_line(*part ? parent : dir, leaves[i], v, sizeof(v));
		if (*v && at < size)
			at += (size_t)snprintf(out + at, size - at, " %s=%s", strrchr(leaves[i], '/') ? strrchr(leaves[i], '/') + 1 : leaves[i], v);
	}
	if (at >= size)
		out[size - 1] = 0;
}

/* d's dev and identity from /sys/dev/block/MAJ:MIN; -1 when there is no such block device. */
static int sysfs_device(coli_probe_disk *d)
{
	char link[64], target[PATH_MAX];
	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", d->major, d->minor);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return -1;
	target[n] = 0;
	const char *base = strrchr(target, '/');
	snprintf(d->dev, sizeof(d->dev), "%.31s", base ? base + 1 : target);
	device_identity(link, d->identity, sizeof(d->identity));
	return 0;
}

/* The device of a folder: the one its files' st_dev names, else (btrfs and others report an
 * anonymous st_dev) the block device the mount was made from, else none. */
static void find_device(const struct stat *st, const coli_mount *m, coli_probe_disk *d)
{
	struct stat src;
	d->major = major(st->st_dev), d->minor = minor(st->st_dev);
	if (sysfs_device(d) == 0)
		return;
	if (!strncmp(m->source, "/dev/", 5) && stat(m->source, &src) == 0 && S_ISBLK(src.st_mode)) {
		d->major = major(src.st_rdev), d->minor = minor(src.st_rdev);
		if (sysfs_device(d) == 0)
			return;
		d->major = major(st->st_dev), d->minor = minor(st->st_dev);
	}
	snprintf(d->dev, sizeof(d->dev), "none");
	snprintf(d->identity, sizeof(d->identity), "fs=%.60s source=%.180s", m->fstype, m->source);
}

int coli_probe_disk_ident(const char *dir, coli_probe_disk *d, coli_err *e)
{
	char abs[PATH_MAX];
	struct stat st;
	struct statvfs vfs;
	coli_mount *m = coli_calloc(1, sizeof(*m), e);
	if (!m)
		return -1;
	int rc = 0;
	if (!realpath(dir, abs) || stat(abs, &st) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: %s", dir, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		rc = coli_errf(e, COLI_EIO, "%s: not a folder", dir);
	else if (statvfs(abs, &vfs) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: statvfs: %s", dir, strerror(errno));
	else if (strlen(abs) >= sizeof(d->dir))
		rc = coli_errf(e, COLI_EUSAGE, "%s: path longer than %zu bytes", dir, sizeof(d->dir) - 1);
	if (rc == 0)
		rc = coli_mount_of(abs, m, e);
	if (rc == 0) {
		memset(d, 0, sizeof(*d));
		snprintf(d->dir, sizeof(d->dir), "%s", abs);
		snprintf(d->fs, sizeof(d->fs), "%.31s", m->fstype);
		d->free_bytes = (double)vfs.f_bavail * (double)vfs.f_frsize;
		find_device(&st, m, d);
	}
	free(m);
	return rc;
}

/* ---- another machine's probe ---- */

static int check_disk(const coli_probe_disk *d, int i, const char *path, coli_err *e)
{
	coli_probe_disk now;
	coli_err ie = {0, ""};
	if (coli_probe_disk_ident(d->dir, &now, &ie) < 0)
		return coli_errf(e, COLI_EDATA, "%s: disks[%d].dir: %s: the probe's folder is not here (another machine?)",
				 path, i, ie.msg);
	if (now.major != d->major || now.minor != d->minor || strcmp(now.identity, d->identity))
		return coli_errf(e, COLI_EDATA, "%s: disks[%d]: %s is on %s (%u:%u, %s) here, the probe measured %s "
				 "(%u:%u, %s): another machine or another disk; probe it again",
				 path, i, d->dir, now.dev, now.major, now.minor, now.identity, d->dev, d->major, d->minor,
				 d->identity);
	return 0;
}

int coli_probe_check_machine(const coli_probe *p, const char *path, coli_err *e)
{
	coli_probe *m = coli_calloc(1, sizeof(*m), e);
	int rc = m ? coli_probe_machine(m, e) : -1;
	if (rc == 0 && strcmp(p->cpu_model, m->cpu_model))
		rc = coli_errf(e, COLI_EDATA, "%s: cpu_model '%s' is not this machine's '%s'", path, p->cpu_model,
			       m->cpu_model);
	else if (rc == 0 && p->physical_cores != m->physical_cores)
		rc = coli_errf(e, COLI_EDATA, "%s: physical_cores %d is not this machine's %d", path, p->physical_cores,
			       m->physical_cores);
	else if (rc == 0 && p->logical_cpus != m->logical_cpus)
		rc = coli_errf(e, COLI_EDATA, "%s: logical_cpus %d is not this machine's %d", path, p->logical_cpus,
			       m->logical_cpus);
	for (int i = 0; rc == 0 && i < p->n_disks; i++)
		rc = check_disk(&p->disks[i], i, path, e);
	free(m);
	return rc;
}
