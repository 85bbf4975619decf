/* mounts.h: /proc/self/mountinfo, the mounts this process sees: which one holds a path, where
 * a cgroup hierarchy is mounted. */
#ifndef COLI_MOUNTS_H
#define COLI_MOUNTS_H

#include "error.h"

typedef struct coli_mount {
	unsigned major, minor;   /* st_dev of the files on it (an anonymous 0:N for tmpfs, btrfs) */
	char root[4096];         /* the subtree of the filesystem the mount shows */
	char point[4096];        /* where it is mounted */
	char fstype[64];
	char source[4096];       /* "/dev/vda", "tmpfs", ... */
	char options[1024];      /* superblock options ("rw,memory" for the v1 memory cgroup) */
} coli_mount;

/* The mount holding the absolute path (the last mounted of those whose mount point is the
 * longest prefix of it). */
int coli_mount_of(const char *path, coli_mount *m, coli_err *e);

/* The mount of a cgroup hierarchy: fstype "cgroup" with controller ctl among its options (v1),
 * or "cgroup2" (ctl ""). -1 when there is none (e is not filled). */
int coli_mount_find_cgroup(const char *fstype, const char *ctl, coli_mount *m);

#endif
