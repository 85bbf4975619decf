/* machine.c: the CPU, RAM, cgroup and GPU facts of this machine, from /proc and /sys. */
#include "machine.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mounts.h"

/* Reads one integer from a sysfs file; -1 when unreadable. */
static int read_int(const char *fmt, int cpu, const char *leaf)
{
	char path[128];
	int v = -1;
	snprintf(path, sizeof(path), fmt, cpu, leaf);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

int coli_machine_logical_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		long online = sysconf(_SC_NPROCESSORS_ONLN);
		return online > 0 ? (int)online : 1;
	}
	return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
}

int coli_machine_physical_cores(void)
{
	const char *fmt = "/sys/devices/system/cpu/cpu%d/topology/%s";
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return coli_machine_logical_cpus();
	int allowed = CPU_COUNT(&set), n = 0;
	long *seen = calloc((size_t)allowed + 1, sizeof(*seen));
	if (!seen)
		return allowed > 0 ? allowed : 1;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &set))
			continue;
		int pkg = read_int(fmt, cpu, "physical_package_id"), core = read_int(fmt, cpu, "core_id");
		if (pkg < 0 || core < 0) {
			n = -1;
			break;
		}
		long key = (long)pkg << 20 | core;
		int i = 0;
		while (i < n && seen[i] != key)
			i++;
		if (i == n && n < allowed)
			seen[n++] = key;
	}
	free(seen);
	if (n <= 0)
		n = allowed;
	return n > 0 ? n : 1;
}

/* ---- /proc/cpuinfo ---- */

static const char *const wanted_flags[] = {
	"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
	"avx512_fp16", "amx_tile", "amx_int8", "amx_bf16", NULL,
};

/* The value of a "key<tabs>: value" line, trimmed; NULL when the line is another key's. */
static char *cpuinfo_value(char *line, const char *key)
{
	size_t n = strlen(key);
	if (strncmp(line, key, n) || (line[n] != ' ' && line[n] != '\t' && line[n] != ':'))
		return NULL;
	char *v = strchr(line, ':');
	if (!v)
		return NULL;
	for (v++; *v == ' ' || *v == '\t'; v++)
		;
	size_t len = strlen(v);
	while (len && isspace((unsigned char)v[len - 1]))
		v[--len] = 0;
	return v;
}

/* The wanted flags that the flags line lists, in wanted_flags' order. */
static void pick_flags(const char *flags, char *isa, size_t size)
{
	size_t at = 0;
	isa[0] = 0;
	for (int i = 0; wanted_flags[i]; i++) {
		size_t n = strlen(wanted_flags[i]);
		for (const char *p = flags; (p = strstr(p, wanted_flags[i])); p += n)
			if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) {
				at += (size_t)snprintf(isa + at, at < size ? size - at : 0, "%s%s", at ? " " : "", wanted_flags[i]);
				break;
			}
	}
	if (at >= size)
		isa[size - 1] = 0;
}

int coli_machine_cpu(char *model, size_t model_size, char *isa, size_t isa_size, coli_err *e)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192];
	int have_model = 0, have_flags = 0;
	if (!f)
		return coli_errf(e, COLI_EIO, "/proc/cpuinfo: %s", strerror(errno));
	snprintf(model, model_size, "unknown");
	isa[0] = 0;
	while ((!have_model || !have_flags) && fgets(line, sizeof(line), f)) {
		char *v;
		if (!have_model && (v = cpuinfo_value(line, "model name")) && *v)
			snprintf(model, model_size, "%s", v), have_model = 1;
		else if (!have_flags && (v = cpuinfo_value(line, "flags")))
			pick_flags(v, isa, isa_size), have_flags = 1;
	}
	fclose(f);
	return 0;
}

/* ---- /proc/meminfo ---- */

int coli_machine_memory(double *total, double *available, coli_err *e)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb;
	*total = *available = -1;
	if (!f)
		return coli_errf(e, COLI_EIO, "/proc/meminfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			*total = (double)kb * 1024;
		else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			*available = (double)kb * 1024;
	}
	fclose(f);
	if (*total <= 0 || *available < 0)
		return coli_errf(e, COLI_EIO, "/proc/meminfo: no MemTotal or MemAvailable line");
	return 0;
}

/* ---- memory cgroups ---- */

#define UNLIMITED_V1 0x1p62 /* v1 writes 2^63 - 4096 for "no limit" */

/* The limit in one cgroup folder's file; 0 when there is none (or no such file). */
static double limit_in(const char *dir, const char *leaf)
{
	char path[8300], text[64] = "";
	snprintf(path, sizeof(path), "%s/%s", dir, leaf);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int ok = fgets(text, sizeof(text), f) != NULL;
	fclose(f);
	if (!ok || !strncmp(text, "max", 3))
		return 0;
	double v = strtod(text, NULL);
	return v > 0 && v < UNLIMITED_V1 ? v : 0;
}

/* The smallest limit from the cgroup folder mount + cgpath up to the mount's top. */
static double limit_up(const char *mount, const char *cgpath, const char *leaf)
{
	char dir[8200];
	double best = 0;
	snprintf(dir, sizeof(dir), "%s%s", mount, strcmp(cgpath, "/") ? cgpath : "");
	size_t top = strlen(mount);
	for (;;) {
		double v = limit_in(dir, leaf);
		if (v > 0 && (best == 0 || v < best))
			best = v;
		char *slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < top)
			return best;
		*slash = 0;
	}
}

/* This process's cgroup path in the hierarchy with controller ctl ("" for v2's unified one). */
static int cgroup_path(const char *ctl, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[4200];
	int found = 0;
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':'), *p = c ? strchr(c + 1, ':') : NULL;
		if (!p)
			continue;
		*c++ = 0, *p++ = 0;
		p[strcspn(p, "\n")] = 0;
		int match = !*ctl && !*c && !strcmp(line, "0");
		for (char *tok = strtok(c, ","); !match && *ctl && tok; tok = strtok(NULL, ","))
			match = !strcmp(tok, ctl);
		if (match)
			found = snprintf(out, size, "%s", p) < (int)size;
	}
	fclose(f);
	return found;
}

/* The path below a cgroup mount: the mount may show a subtree (its root), which cgpath then
 * starts with; inside a cgroup namespace the path is already relative to it. */
static const char *below_root(const char *cgpath, const char *root)
{
	size_t n = strlen(root);
	if (strcmp(root, "/") && !strncmp(cgpath, root, n) && (cgpath[n] == '/' || !cgpath[n]))
		return cgpath[n] ? cgpath + n : "/";
	return cgpath;
}

static double hierarchy_limit(const char *fstype, const char *ctl, const char *leaf)
{
	char cg[4096];
	coli_mount m;
	if (!cgroup_path(ctl, cg, sizeof(cg)) || coli_mount_find_cgroup(fstype, ctl, &m) < 0)
		return 0;
	return limit_up(m.point, below_root(cg, m.root), leaf);
}

double coli_machine_cgroup_limit(void)
{
	double v1 = hierarchy_limit("cgroup", "memory", "memory.limit_in_bytes");
	double v2 = hierarchy_limit("cgroup2", "", "memory.max");
	return v1 > 0 && (v2 == 0 || v1 < v2) ? v1 : v2;
}

/* ---- GPUs ---- */

/* Appends the device nodes matching pattern, each with what describe adds. */
static size_t add_nodes(char *out, size_t size, size_t at, const char *pattern)
{
	glob_t g;
	if (glob(pattern, 0, NULL, &g) != 0)
		return at;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *name = g.gl_pathv[i] + strlen("/dev/"), *base = strrchr(name, '/');
		char vendor[64] = "", path[300];
		snprintf(path, sizeof(path), "/sys/class/drm/%s/device/vendor", base ? base + 1 : name);
		FILE *f = strncmp(name, "dri/", 4) ? NULL : fopen(path, "r");
		if (f && fgets(vendor, sizeof(vendor), f))
			vendor[strcspn(vendor, "\n")] = 0;
		if (f)
			fclose(f);
		at += (size_t)snprintf(out + at, at < size ? size - at : 0, "%s%s%s%s%s", at ? " " : "", name,
				       *vendor ? " (vendor " : "", vendor, *vendor ? ")" : "");
	}
	globfree(&g);
	return at;
}

void coli_machine_gpus(char *out, size_t size)
{
	size_t at = 0;
	out[0] = 0;
	at = add_nodes(out, size, at, "/dev/nvidia[0-9]*");
	at = add_nodes(out, size, at, "/dev/dri/renderD*");
	at = add_nodes(out, size, at, "/dev/kfd");
	if (at == 0)
		snprintf(out, size, "none found");
	else if (at >= size)
		out[size - 1] = 0;
}
