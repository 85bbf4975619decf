/* mounts.c: /proc/self/mountinfo lines into coli_mount. */
#include "mounts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies a mountinfo field, undoing its octal escapes (\040 for a space). */
static void unescape(char *out, size_t size, const char *in)
{
	size_t n = 0;
	while (*in && n + 1 < size) {
		if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' && in[3] >= '0' &&
		    in[3] <= '7') {
			out[n++] = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
			in += 4;
		} else {
			out[n++] = *in++;
		}
	}
	out[n] = 0;
}

/* "36 35 98:0 /root /point opts [optional...] - fstype source superopts" into m; -1 when the
 * line does not parse. */
static int parse_line(char *line, coli_mount *m)
{
	char *f[6], *save = NULL, *t;
	int n = 0;
	line[strcspn(line, "\n")] = 0;
	while (n < 6 && (t = strtok_r(n ? NULL : line, " ", &save)))
		f[n++] = t;
	if (n < 6 || sscanf(f[2], "%u:%u", &m->major, &m->minor) != 2)
		return -1;
	unescape(m->root, sizeof(m->root), f[3]);
	unescape(m->point, sizeof(m->point), f[4]);
	while ((t = strtok_r(NULL, " ", &save)) && strcmp(t, "-"))
		; /* optional fields */
	char *type = strtok_r(NULL, " ", &save), *src = strtok_r(NULL, " ", &save), *opts = strtok_r(NULL, " ", &save);
	if (!t || !type || !src)
		return -1;
	snprintf(m->fstype, sizeof(m->fstype), "%s", type);
	unescape(m->source, sizeof(m->source), src);
	snprintf(m->options, sizeof(m->options), "%s", opts ? opts : "");
	return 0;
}

/* Calls want(m, ctx) for each mount in order; the last it took (returned 1 for) stays in *out.
 * 0 when one was taken, -1 when none (or mountinfo cannot be read). */
typedef int (*mount_pick_fn)(const coli_mount *m, const void *ctx);
static int scan(mount_pick_fn want, const void *ctx, coli_mount *out)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char *line = NULL;
	size_t cap = 0;
	int found = -1;
	coli_mount *m = f ? malloc(sizeof(*m)) : NULL;
	while (m && getline(&line, &cap, f) > 0)
		if (parse_line(line, m) == 0 && want(m, ctx)) {
			*out = *m;
			found = 0;
		}
	free(m);
	free(line);
	if (f)
		fclose(f);
	return found;
}

/* Takes a mount whose point is a prefix of the path at least as long as the one taken before. */
typedef struct prefix {
	const char *path;
	size_t *best;
} prefix;

static int holds(const coli_mount *m, const void *ctx)
{
	const prefix *p = ctx;
	size_t n = strlen(m->point);
	int under = !strcmp(m->point, "/") || (!strncmp(p->path, m->point, n) && (p->path[n] == '/' || !p->path[n]));
	if (!under || (*p->best != (size_t)-1 && n < *p->best))
		return 0;
	*p->best = n;
	return 1;
}

int coli_mount_of(const char *path, coli_mount *m, coli_err *e)
{
	size_t best = (size_t)-1;
	prefix p = {path, &best};
	if (scan(holds, &p, m) < 0)
		return coli_errf(e, COLI_EIO, "%s: no mount in /proc/self/mountinfo holds it: %s", path, strerror(errno));
	return 0;
}

typedef struct cgroup_want {
	const char *fstype, *ctl;
} cgroup_want;

static int is_cgroup(const coli_mount *m, const void *ctx)
{
	const cgroup_want *w = ctx;
	if (strcmp(m->fstype, w->fstype))
		return 0;
	if (!*w->ctl)
		return 1;
	char opts[1024];
	snprintf(opts, sizeof(opts), "%s", m->options);
	char *save = NULL;
	for (char *t = strtok_r(opts, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (!strcmp(t, w->ctl))
			return 1;
	return 0;
}

int coli_mount_find_cgroup(const char *fstype, const char *ctl, coli_mount *m)
{
	cgroup_want w = {fstype, ctl};
	return scan(is_cgroup, &w, m);
}
