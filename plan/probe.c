/* probe.c: `coli-plan probe`: measures this machine (or reuses what probe.json already holds for
 * the same CPU and devices), writes probe.json and prints a summary. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"
#include "options.h"
#include "probe.h"
#include "probe_cmd.h"
#include "probe_measure.h"

/* A Qwen3-30B-A3B expert at gs64 int4: gate and up [768, 2048], down [2048, 768], each 786432
 * bytes of codes + 49152 of fp16 scales, the record rounded up to 4096 (formats/layout.h). */
#define QWEN3_RECORD 2510848ull
#define MIB (1024.0 * 1024.0)

typedef struct probe_opts {
	const char *disks[COLI_PROBE_MAX_DISKS];
	int n_disks;
	const char *out, *qd_list;
	uint64_t record_bytes;
	int disk_mib, weights_mib;
	double seconds;
	int force, json, quiet, help;
} probe_opts;

static probe_opts o;

static const char *const synopsis[] = {
	"coli-plan probe [--disk DIR]... [-o probe.json] [options]",
	NULL,
};

static const coli_option options[] = {
	COLI_OPT_TEXT("Measures this machine for the planner: CPU model, ISA flags and cores; RAM and the "
		      "memory cgroup limit; the engine's int4, int8 and FP4 kernels and the memory read speed; "
		      "GPUs; and for each --disk folder its device, filesystem, free space and O_DIRECT "
		      "random-read speed at the expert record size (buffered reads apart). Writes probe.json; "
		      "what it already holds for this CPU and these devices is reused, not measured again."),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRINGS(0, "disk", o.disks, &o.n_disks, COLI_PROBE_MAX_DISKS, "DIR",
			 "a folder on a disk to measure (up to 8); a scratch file is written there and removed"),
	COLI_OPT_STRING('o', "output", &o.out, "FILE", "the probe file (default probe.json)"),
	COLI_OPT_U64(0, "record-bytes", &o.record_bytes, "N",
		     "bytes per random read, a multiple of 4096 (default 2510848: a Qwen3-30B-A3B int4 "
		     "expert record)"),
	COLI_OPT_STRING(0, "qd", &o.qd_list, "LIST", "queue depths, ascending, 1..64 (default 1,4,8,16)"),
	COLI_OPT_INT(0, "disk-mib", &o.disk_mib, "N", 1, 1 << 20, "the scratch file's size (default 512)"),
	COLI_OPT_INT(0, "weights-mib", &o.weights_mib, "N", 8, 1 << 16,
		     "expert weights streamed through the kernels (default 256)"),
	COLI_OPT_DOUBLE(0, "seconds", &o.seconds, "S", 0, 60, "time of each measurement (default 0.5)", .open_lo = 1),
	COLI_OPT_FLAG(0, "force", &o.force, "measure everything again, and replace a probe file that cannot be reused"),
	COLI_OPT_FLAG(0, "json", &o.json, "print the probe file's content (one line) instead of the summary"),
	COLI_OPT_FLAG('q', "quiet", &o.quiet, "no progress line, no notes, no summary"),
	COLI_OPT_HELP(&o.help),
	COLI_OPT_END(),
};

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	if (o.quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	probe_progress_done();
	fputs("coli-plan probe: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static const char *when(double t, char *buf, size_t size)
{
	time_t s = (time_t)t;
	struct tm tm;
	strftime(buf, size, "%Y-%m-%d %H:%M:%S", localtime_r(&s, &tm));
	return buf;
}

/* ---- SIGINT and SIGTERM ----
 * Nothing is written before the end but the scratch file of the disk being measured: the
 * handler removes it, says so in one line, and exits with 128 + the signal. While probe.json is
 * written (a temporary, then a rename) the signals wait, so the file is the old one or the new
 * one, never a torn one; a signal after that says the file was written. Messages are composed
 * before, since the handler may only call async-signal-safe functions. */

static char sig_msg[2][3][640];             /* [SIGTERM?][0: before, 1: before, a scratch file removed, 2: after] */
static volatile sig_atomic_t out_written;

static void on_signal(int sig)
{
	int removed = probe_disk_cleanup();
	const char *m = sig_msg[sig == SIGTERM][out_written ? 2 : removed];
	ssize_t w = probe_progress_showing() ? write(2, "\r\033[K", 4) : 0;
	w = write(2, m, strlen(m));
	(void)w;
	_exit(128 + sig);
}

static void catch_signals(const char *path)
{
	for (int t = 0; t < 2; t++) {
		const char *what = t ? "terminated (SIGTERM)" : "interrupted (SIGINT)";
		for (int r = 0; r < 2; r++)
			snprintf(sig_msg[t][r], sizeof(sig_msg[t][r]), "coli-plan probe: %s before the end: nothing written, %s "
				 "left as it was%s\n", what, path, r ? "; the scratch file of the disk being measured removed" : "");
		snprintf(sig_msg[t][2], sizeof(sig_msg[t][2]), "coli-plan probe: %s after %s was written\n", what, path);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Writes path with the signals held back: they land after the rename (or the failure). */
static int write_probe(const char *path, const coli_probe *p, coli_err *e)
{
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, &old);
	int rc = coli_probe_write(path, p, e);
	out_written = rc == 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* ---- options ---- */

static int usage(const char *msg)
{
	char *text = coli_opts_usage("coli-plan probe", msg, synopsis, options);
	fputs(text ? text : "coli-plan probe: out of memory\n", msg ? stderr : stdout);
	free(text);
	return msg ? 2 : 0;
}

static int parse_qd(probe_disk_opts *d, coli_err *e)
{
	char list[256], *save = NULL;
	snprintf(list, sizeof(list), "%s", o.qd_list ? o.qd_list : "1,4,8,16");
	d->n_qd = 0;
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (d->n_qd == COLI_PROBE_MAX_QD)
			return coli_errf(e, COLI_EUSAGE, "--qd: more than %d queue depths", COLI_PROBE_MAX_QD);
		if (coli_opts_int(t, 1, 64, &d->qd[d->n_qd], e) < 0) {
			coli_err_prefix(e, "--qd");
			return -1;
		}
		if (d->n_qd > 0 && d->qd[d->n_qd] <= d->qd[d->n_qd - 1])
			return coli_errf(e, COLI_EUSAGE, "--qd: '%s' is not ascending", o.qd_list);
		d->n_qd++;
	}
	return d->n_qd ? 0 : coli_errf(e, COLI_EUSAGE, "--qd: no queue depth in '%s'", o.qd_list);
}

static int check_opts(probe_disk_opts *d, probe_cpu_opts *c, coli_err *e)
{
	if (parse_qd(d, e) < 0)
		return -1;
	d->record_bytes = o.record_bytes ? o.record_bytes : QWEN3_RECORD;
	if (d->record_bytes % 4096 || d->record_bytes > (1ull << 30))
		return coli_errf(e, COLI_EUSAGE, "--record-bytes: %llu is not a multiple of 4096 in 4096..1073741824",
				 (unsigned long long)d->record_bytes);
	d->file_bytes = (uint64_t)(o.disk_mib ? o.disk_mib : 512) << 20;
	if (d->file_bytes / d->record_bytes < COLI_PROBE_BURST_RECORDS)
		return coli_errf(e, COLI_EUSAGE, "--disk-mib: %llu MiB hold %llu records of %llu bytes; at least 4 wanted",
				 (unsigned long long)(d->file_bytes >> 20), (unsigned long long)(d->file_bytes / d->record_bytes),
				 (unsigned long long)d->record_bytes);
	d->seconds = c->seconds = o.seconds > 0 ? o.seconds : 0.5;
	c->weights_bytes = (uint64_t)(o.weights_mib ? o.weights_mib : 256) << 20;
	return 0;
}

/* ---- what probe.json already holds ---- */

/* Appends text to e's message; -1. */
static int hint(coli_err *e, const char *text)
{
	size_t n = strlen(e->msg);
	snprintf(e->msg + n, sizeof(e->msg) - n, "%s", text);
	return -1;
}

/* The probe file at path as a cache: 1 read, 0 none (no file, or --force), -1 unusable. */
static int load_cache(const char *path, const coli_probe *now, coli_probe *old, coli_err *e)
{
	if (o.force || access(path, F_OK) != 0)
		return 0;
	if (coli_probe_read(path, old, e) < 0)
		return hint(e, "; --force measures anew and replaces it");
	coli_err me = {0, ""};
	if (strcmp(old->cpu_model, now->cpu_model))
		coli_errf(&me, COLI_EDATA, "%s: cpu_model '%s' is not this machine's '%s'", path, old->cpu_model, now->cpu_model);
	else if (old->physical_cores != now->physical_cores || old->logical_cpus != now->logical_cpus)
		coli_errf(&me, COLI_EDATA, "%s: %d physical cores and %d logical CPUs, this machine has %d and %d", path,
			  old->physical_cores, old->logical_cpus, now->physical_cores, now->logical_cpus);
	if (me.code) {
		*e = me;
		return hint(e, ": a probe of another machine; --force measures anew and replaces it");
	}
	return 1;
}

/* The CPU measurements of old, when taken with the kernel variant this CPU runs (and complete:
 * a probe of revision 1.0 lacks the attention core's, one before 1.2 the FP4 kernels'). */
static int reuse_cpu(coli_probe *p, const coli_probe *old, const char *path)
{
	char variant[32], t[32];
	coli_err e = {0, ""};
	if (old->attn_fma_per_s <= 0 || old->fp4_bps_all <= 0 || old->q8_int4_bps_all <= 0 || probe_cpu_variant(variant, sizeof(variant), &e) < 0 || strcmp(variant, old->kernels))
		return 0;
	memcpy(p->kernels, old->kernels, sizeof(p->kernels));
	p->mem_bps_1 = old->mem_bps_1, p->mem_bps_all = old->mem_bps_all;
	p->int4_bps_1 = old->int4_bps_1, p->int4_bps_all = old->int4_bps_all;
	p->int8_bps_1 = old->int8_bps_1, p->int8_bps_all = old->int8_bps_all;
	p->int4_prefill_bps_all = old->int4_prefill_bps_all, p->int8_prefill_bps_all = old->int8_prefill_bps_all;
	p->q8_int4_bps_1 = old->q8_int4_bps_1, p->q8_int4_bps_all = old->q8_int4_bps_all;
	p->q8_int8_bps_1 = old->q8_int8_bps_1, p->q8_int8_bps_all = old->q8_int8_bps_all;
	p->attn_fma_per_s = old->attn_fma_per_s;
	p->fp4_bps_1 = old->fp4_bps_1, p->fp4_bps_all = old->fp4_bps_all, p->fp4_prefill_bps_all = old->fp4_prefill_bps_all;
	p->cpu_taken = old->cpu_taken;
	note("reused from %s: the CPU measurements (%s, %s kernels) taken %s; --force measures anew", path,
	     old->cpu_model, old->kernels, when(old->cpu_taken, t, sizeof(t)));
	return 1;
}

/* The entry of list[0..n) for the same device (at the same record size unless record is 0), or NULL. */
static const coli_probe_disk *same_device(const coli_probe_disk *d, const coli_probe_disk *list, int n, double record)
{
	for (int i = 0; i < n; i++)
		if (list[i].major == d->major && list[i].minor == d->minor && !strcmp(list[i].identity, d->identity) &&
		    (record == 0 || list[i].record_bytes == record))
			return &list[i];
	return NULL;
}

/* Says so when old measured d's folder on another device (another disk mounted there). */
static void moved(const coli_probe_disk *d, const coli_probe *old, const char *path)
{
	for (int i = 0; old && i < old->n_disks; i++) {
		const coli_probe_disk *was = &old->disks[i];
		if (!strcmp(was->dir, d->dir) && (was->major != d->major || was->minor != d->minor || strcmp(was->identity, d->identity)))
			note("%s is on %s (%u:%u, %s) now, %s measured %s (%u:%u, %s) there: measured again", d->dir, d->dev,
			     d->major, d->minor, d->identity, path, was->dev, was->major, was->minor, was->identity);
	}
}

/* Copies the measured fields of src into d (d keeps its folder, filesystem and free space). */
static void take_measurement(coli_probe_disk *d, const coli_probe_disk *src)
{
	coli_probe_disk id = *d;
	*d = *src;
	memcpy(d->dir, id.dir, sizeof(d->dir));
	memcpy(d->fs, id.fs, sizeof(d->fs));
	d->free_bytes = id.free_bytes;
}

/* ---- measuring ---- */

/* Identifies every --disk folder and decides which to measure (todo[i]) and which to reuse. */
static int plan_disks(coli_probe *p, const coli_probe *old, const probe_disk_opts *d, int *todo, const char *path,
		      coli_err *e)
{
	for (int i = 0; i < o.n_disks; i++) {
		coli_probe_disk *k = &p->disks[i];
		const coli_probe_disk *src;
		char t[32];
		if (coli_probe_disk_ident(o.disks[i], k, e) < 0) {
			coli_err_prefix(e, "--disk");
			return -1;
		}
		for (int j = 0; j < i; j++)
			if (!strcmp(p->disks[j].dir, k->dir))
				return coli_errf(e, COLI_EUSAGE, "--disk %s: given twice (as %s)", o.disks[i], o.disks[j]);
		p->n_disks = i + 1;
		todo[i] = 0;
		if ((src = same_device(k, p->disks, i, 0)) && !todo[src - p->disks]) {
			take_measurement(k, src);
			note("%s is on %s, like %s: its measurement serves both", k->dir, k->dev, src->dir);
		}
		else if (src)
			todo[i] = 2 + (int)(src - p->disks); /* measured once, for the first folder on it */
		else if (old && (src = same_device(k, old->disks, old->n_disks, (double)d->record_bytes)) && src->burst_bps > 0) {
			take_measurement(k, src);
			note("reused from %s: %s on %s (%u:%u), measured %s; --force measures anew", path, k->dir, k->dev,
			     k->major, k->minor, when(src->taken, t, sizeof(t)));
		} else if (probe_disk_check(k, d, e) < 0) {
			return -1;
		} else {
			moved(k, old, path);
			todo[i] = 1;
		}
	}
	return 0;
}

static int measure_disks(coli_probe *p, const probe_disk_opts *d, const int *todo, coli_err *e)
{
	for (int i = 0; i < p->n_disks; i++)
		if (todo[i] == 1 && probe_disk_measure(&p->disks[i], d, e) < 0)
			return -1;
	for (int i = 0; i < p->n_disks; i++)
		if (todo[i] >= 2) {
			take_measurement(&p->disks[i], &p->disks[todo[i] - 2]);
			note("%s is on %s, like %s: its measurement serves both", p->disks[i].dir, p->disks[i].dev,
			     p->disks[todo[i] - 2].dir);
		}
	return 0;
}

/* ---- the summary ---- */

/* bytes as "50.2 MiB" or "55.2 GiB". */
static const char *human(double bytes, char *buf, size_t size)
{
	int gib = bytes >= 1024 * MIB;
	snprintf(buf, size, "%.1f %s", bytes / (gib ? 1024 * MIB : MIB), gib ? "GiB" : "MiB");
	return buf;
}

static void print_summary(const coli_probe *p)
{
	const double G = 1e9;
	printf("cpu      %s: %d physical cores, %d logical CPUs\n", p->cpu_model, p->physical_cores, p->logical_cpus);
	printf("isa      %s\n", *p->isa ? p->isa : "(none of the flags the kernels use)");
	printf("memory   read %.1f GB/s (1 thread), %.1f GB/s (%d threads)\n", p->mem_bps_1 / G, p->mem_bps_all / G,
	       p->physical_cores);
	printf("kernels  %s: decode int4 %.1f / %.1f GB/s, int8 %.1f / %.1f GB/s (1 / %d threads); prefill "
	       "(%d tokens) int4 %.1f, int8 %.1f GB/s\n", p->kernels, p->int4_bps_1 / G, p->int4_bps_all / G,
	       p->int8_bps_1 / G, p->int8_bps_all / G, p->physical_cores, COLI_PROBE_PREFILL_TOKENS,
	       p->int4_prefill_bps_all / G, p->int8_prefill_bps_all / G);
	printf("kernels  fp4: decode %.1f / %.1f GB/s (1 / %d threads); prefill (%d tokens) %.1f GB/s\n", p->fp4_bps_1 / G,
	       p->fp4_bps_all / G, p->physical_cores, COLI_PROBE_PREFILL_TOKENS, p->fp4_prefill_bps_all / G);
	printf("q8       decode with 8-bit activations (--precision q8): int4 %.1f / %.1f GB/s, int8 %.1f / %.1f GB/s\n",
	       p->q8_int4_bps_1 / G, p->q8_int4_bps_all / G, p->q8_int8_bps_1 / G, p->q8_int8_bps_all / G);
	printf("attention core: %.2f G multiply-adds/s (1 thread)\n", p->attn_fma_per_s / G);
	char a[32], b[32], c[32];
	printf("ram      %s total, %s available; memory cgroup limit %s\n", human(p->ram_total, a, sizeof(a)),
	       human(p->ram_available, b, sizeof(b)), p->cgroup_limit > 0 ? human(p->cgroup_limit, c, sizeof(c)) : "none");
	printf("gpus     %s\n", p->gpus);
	for (int i = 0; i < p->n_disks; i++) {
		const coli_probe_disk *d = &p->disks[i];
		printf("disk     %s: %s (%u:%u), %s, %s free; O_DIRECT reads of %.0f KiB:", d->dir, d->dev, d->major,
		       d->minor, d->fs, human(d->free_bytes, a, sizeof(a)), d->record_bytes / 1024);
		for (int q = 0; q < d->n_qd; q++)
			printf(" qd %d %.0f MB/s%s", d->qd[q], d->direct_bps[q] / 1e6, q + 1 < d->n_qd ? "," : ";");
		printf(" bursts of %d after idle time %.0f MB/s; buffered %.0f MB/s; 4 KiB read %.0f us\n",
		       COLI_PROBE_BURST_RECORDS, d->burst_bps / 1e6, d->buffered_bps / 1e6, d->latency_s * 1e6);
	}
	if (!p->n_disks)
		printf("disks    none probed (--disk DIR)\n");
}

static int output(const coli_probe *p, const char *path, coli_err *e)
{
	if (write_probe(path, p, e) < 0)
		return -1;
	if (o.json) {
		char *text = coli_probe_json(p, 0, e);
		if (!text)
			return -1;
		fputs(text, stdout);
		free(text);
	} else if (!o.quiet) {
		print_summary(p);
	}
	return fflush(stdout) == 0 ? 0 : coli_errf(e, COLI_EIO, "stdout: %s", strerror(errno));
}

static int run(const probe_disk_opts *d, const probe_cpu_opts *c, coli_err *e)
{
	const char *path = o.out ? o.out : "probe.json";
	coli_probe *p = coli_calloc(1, sizeof(*p), e), *old = coli_calloc(1, sizeof(*old), e);
	int todo[COLI_PROBE_MAX_DISKS], rc = p && old ? coli_probe_machine(p, e) : -1, have = 0;
	if (rc == 0)
		rc = have = load_cache(path, p, old, e);
	if (rc >= 0)
		rc = plan_disks(p, have ? old : NULL, d, todo, path, e);
	if (rc == 0 && !(have && reuse_cpu(p, old, path)))
		rc = probe_cpu_measure(p, c, e);
	if (rc == 0)
		rc = measure_disks(p, d, todo, e);
	probe_progress_done();
	if (p)
		p->taken = (double)time(NULL);
	if (rc == 0)
		rc = output(p, path, e);
	free(p);
	free(old);
	return rc;
}

int plan_probe_main(int argc, char **argv)
{
	coli_err e = {0, ""};
	probe_disk_opts d;
	probe_cpu_opts c;
	int n = coli_opts_parse(options, argc, argv, &e);
	if (o.help)
		return usage(NULL);
	if (n < 0 || check_opts(&d, &c, &e) < 0)
		return usage(e.msg);
	if (n > 0)
		return usage("coli-plan probe takes no operands (folders come with --disk)");
	probe_progress_show(!o.quiet && isatty(2));
	catch_signals(o.out ? o.out : "probe.json");
	if (run(&d, &c, &e) < 0) {
		fflush(stdout);
		fprintf(stderr, "coli-plan probe: %s\n", e.msg);
		return coli_err_exit_status(&e);
	}
	return 0;
}
