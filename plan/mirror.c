/* mirror.c: coli-plan mirror stage and verify: their options, progress and reports. */
#include "mirror.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "mirror_stage.h"
#include "options.h"

#define GIB (1024.0 * 1024 * 1024)

/* ---- progress: one line on stderr, only on a terminal, at most 4 updates a second ---------- */

typedef struct bar {
	double start, last;
	int quiet, shown;
} bar;

/* The time left at rate bytes/s, as "1:05 left" (h:mm:ss past an hour); "" before a rate. */
static void eta(double left, double rate, char *out, size_t size)
{
	long s = rate > 0 && left > 0 ? (long)(left / rate + 0.5) : -1;
	if (s < 0)
		snprintf(out, size, "%s", left > 0 ? "" : "0:00 left");
	else if (s < 3600)
		snprintf(out, size, "%ld:%02ld left", s / 60, s % 60);
	else
		snprintf(out, size, "%ld:%02ld:%02ld left", s / 3600, s / 60 % 60, s % 60);
}

static void bar_update(void *ctx, uint64_t done, uint64_t total)
{
	bar *b = ctx;
	double t = coli_now();
	if (b->quiet || !isatty(2) || (t - b->last < 0.25 && done < total))
		return;
	b->last = t, b->shown = 1;
	double rate = done ? (double)done / (t - b->start > 1e-3 ? t - b->start : 1e-3) : 0;
	int width = 30, fill = total ? (int)((double)done / (double)total * width) : width;
	char line[64], left[32];
	for (int i = 0; i < width; i++)
		line[i] = i < fill ? '#' : '.';
	line[width] = 0;
	eta((double)(total - (done < total ? done : total)), rate, left, sizeof(left));
	fprintf(stderr, "\r\033[K[%s] %.2f/%.2f GiB  %.0f MB/s  %s", line, (double)done / GIB, (double)total / GIB,
		rate / 1e6, left);
	fflush(stderr);
}

static void bar_end(const bar *b)
{
	if (b->shown)
		fputc('\n', stderr);
}

/* --help on stdout, or the usage error msg and --help on stderr; returns the exit status. */
static int usage(const char *msg, const char *const *synopsis, const coli_option *opts)
{
	char *text = coli_opts_usage("coli-plan", msg, synopsis, opts);
	fputs(text ? text : "coli-plan: out of memory\n", msg ? stderr : stdout);
	free(text);
	return msg ? 2 : 0;
}

static int fail(const coli_err *e)
{
	fprintf(stderr, "coli-plan: %s\n", e->msg);
	return coli_err_exit_status(e);
}

/* ---- SIGINT and SIGTERM: the stage stops at the next record, claims what it wrote ---------- */

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static void catch_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* The line that says what a stopped stage kept; the exit status 128 + the signal. */
static int stopped(const char *dir, const stage_report *r)
{
	const char *what = got_signal == SIGTERM ? "terminated (SIGTERM)" : "interrupted (SIGINT)";
	if (!r->kind)
		fprintf(stderr, "coli-plan: mirror %s: %s before anything was written\n", dir, what);
	else if (!strcmp(r->kind, "full"))
		fprintf(stderr, "coli-plan: mirror %s: %s after the stage had finished: it holds %llu of %llu expert records "
			"(full: every file)\n", dir, what, (unsigned long long)r->held, (unsigned long long)r->n_records);
	else
		fprintf(stderr, "coli-plan: mirror %s: %s: %llu records copied by this run; it holds %llu of %llu expert "
			"records (%s), each one claimed synced to disk, no temporary left: rerun the same command to "
			"resume\n", dir, what, (unsigned long long)r->copied, (unsigned long long)r->held,
			(unsigned long long)r->n_records, r->kind);
	return 128 + got_signal;
}

/* ---- stage ------------------------------------------------------------------------------ */

static const char *const stage_synopsis[] = {
	"coli-plan mirror stage MODEL.coli DIR [--max GiB] [--usage FILE | --plan FILE] [--reserve GiB] [--force] [-q]",
	NULL,
};

static double max_gib, reserve_gib = -1, assume_free_gib = -1;
static stage_opts so = {.reserve = -1, .assume_free = -1};
static int stage_quiet, stage_help;

static const coli_option stage_options[] = {
	COLI_OPT_TEXT("Copies the container MODEL.coli into the existing folder DIR, on another disk, for "
		      "coli-run --mirror DIR: the whole container (a usable container itself) when it fits, "
		      "else a partial mirror holding the hottest expert records by --usage (every layer its "
		      "hottest first) in a sparse experts.bin, with mirror.coli saying which. Every record is "
		      "checked against the manifest's CRC before it is written, and claimed by mirror.coli only "
		      "once on disk: rerun the same command after a crash or a full disk to resume."),
	COLI_OPT_TEXT(""),
	COLI_OPT_DOUBLE(0, "max", &max_gib, "GiB", 0, 1e9, "at most this much on DIR's disk (default: the free "
			"space less the reserve)", .open_lo = 1),
	COLI_OPT_STRING(0, "usage", &so.usage, "FILE", "the .coli_usage of coli-run --usage: the hottest records "
			"first (default: none, records by expert id, round robin over the layers)"),
	COLI_OPT_STRING(0, "plan", &so.plan, "FILE", "the plan.json the mirror will serve (coli-plan MODEL.coli): "
			"its usage file orders the records, and the experts it pins (kept in RAM, never read "
			"from a disk) are staged last"),
	COLI_OPT_DOUBLE(0, "reserve", &reserve_gib, "GiB", 0, 1e9, "free space to leave on DIR's disk (default: 1 "
			"GiB or 5% of the disk, the smaller)"),
	COLI_OPT_FLAG(0, "force", &so.force, "restage a DIR holding another container, its mirror or other files"),
	COLI_OPT_FLAG('q', "quiet", &stage_quiet, "no progress bar and no summary"),
	COLI_OPT_GROUP("for tests:"),
	COLI_OPT_INT(0, "kill-after", &so.kill_after, "N", 1, 1 << 30, "SIGKILL itself once N records are written, "
		     "before they are synced and claimed"),
	COLI_OPT_DOUBLE(0, "assume-free", &assume_free_gib, "GiB", 0, 1e9, "take DIR's free space as this (to "
			"provoke a full disk)"),
	COLI_OPT_HELP(&stage_help),
	COLI_OPT_END(),
};

static void stage_summary(const char *dir, const stage_report *r, double secs)
{
	double mb_s = secs > 1e-6 ? (double)r->bytes / secs / 1e6 : 0;
	fprintf(stderr, "coli-plan: mirror %s: %llu records copied (%.3f GiB) in %.2f s, %.0f MB/s%s; it holds %llu of %llu "
		"expert records (%s, %.3f GiB)\n", dir, (unsigned long long)r->copied, (double)r->bytes / GIB, secs, mb_s,
		r->resumed ? " (resumed)" : "", (unsigned long long)r->held, (unsigned long long)r->n_records,
		strcmp(r->kind, "full") ? r->kind : "full: every file", (double)r->mirror_bytes / GIB);
}

static int stage_main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(stage_options, argc, argv, &e);
	if (stage_help)
		return usage(NULL, stage_synopsis, stage_options);
	if (n >= 0 && n != 2)
		n = coli_errf(&e, COLI_EUSAGE, "expected MODEL.coli and DIR");
	if (n >= 0 && so.plan && so.usage)
		n = coli_errf(&e, COLI_EUSAGE, "--usage and --plan exclude each other (the plan names its usage file)");
	if (n < 0)
		return usage(e.msg, stage_synopsis, stage_options);
	so.model = argv[0], so.dir = argv[1];
	so.max = max_gib * GIB;
	so.reserve = reserve_gib < 0 ? -1 : reserve_gib * GIB;
	so.assume_free = assume_free_gib < 0 ? -1 : assume_free_gib * GIB;
	bar b = {coli_now(), 0, stage_quiet, 0};
	so.progress = bar_update, so.progress_ctx = &b;
	so.stop = &got_signal;
	catch_signals();
	stage_report r;
	int rc = stage_run(&so, &r, &e);
	bar_end(&b);
	if (got_signal)
		return stopped(so.dir, &r);
	if (rc < 0)
		return fail(&e);
	if (!stage_quiet)
		stage_summary(so.dir, &r, coli_now() - b.start);
	return 0;
}

/* ---- verify ------------------------------------------------------------------------------ */

static const char *const verify_synopsis[] = {
	"coli-plan mirror verify DIR [-m MODEL.coli] [-q]",
	NULL,
};

static const char *verify_model;
static int verify_quiet, verify_help;

static const coli_option verify_options[] = {
	COLI_OPT_TEXT("Checks the mirror folder DIR: its mirror.coli (CRCs, the container's identity; none: a "
		      "full copy), and every expert record it claims, re-read with O_DIRECT, against the "
		      "manifest's CRC. Bad records are named by layer, expert and offset; exit 1 when any is bad."),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRING('m', "model", &verify_model, "MODEL.coli", "also check that DIR is a mirror of this "
			"container (manifest.coli byte for byte)"),
	COLI_OPT_FLAG('q', "quiet", &verify_quiet, "no progress bar and no summary"),
	COLI_OPT_HELP(&verify_help),
	COLI_OPT_END(),
};

static int verify_main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(verify_options, argc, argv, &e);
	if (verify_help)
		return usage(NULL, verify_synopsis, verify_options);
	if (n >= 0 && n != 1)
		n = coli_errf(&e, COLI_EUSAGE, "expected one mirror folder");
	if (n < 0)
		return usage(e.msg, verify_synopsis, verify_options);
	bar b = {coli_now(), 0, verify_quiet, 0};
	verify_report r;
	int rc = verify_run(argv[0], verify_model, bar_update, &b, &r, &e);
	bar_end(&b);
	if (rc < 0)
		return fail(&e);
	for (int i = 0; i < r.n_bad && i < VERIFY_MAX_BAD; i++) {
		const verify_bad *x = &r.bad[i];
		if (x->want)
			fprintf(stderr, "coli-plan: %s/experts.bin: expert record [layer %d][expert %d] at offset %llu: crc32 "
				"0x%08x, expected 0x%08x\n", argv[0], x->layer, x->expert, (unsigned long long)x->offset, x->crc,
				x->want);
		else
			fprintf(stderr, "coli-plan: %s/experts.bin: expert record [layer %d][expert %d] at offset %llu: read "
				"failed\n", argv[0], x->layer, x->expert, (unsigned long long)x->offset);
	}
	if (r.n_bad)
		fprintf(stderr, "coli-plan: %s: %d of the %llu records it claims are bad%s\n", argv[0], r.n_bad,
			(unsigned long long)r.held, r.n_bad > VERIFY_MAX_BAD ? " (the first 16 named)" : "");
	else if (!verify_quiet)
		printf("%s: %llu of %llu expert records held (%s), every one checks (%.3f GiB)\n", argv[0],
		       (unsigned long long)r.held, (unsigned long long)r.n_records, r.kind,
		       (double)r.bytes / GIB);
	return r.n_bad ? 1 : 0;
}

/* ---- coli-plan mirror --help ----------------------------------------------------------- */

static const char *const mirror_synopsis[] = {
	"coli-plan mirror stage MODEL.coli DIR [--max GiB] [--usage FILE | --plan FILE] [--reserve GiB] [--force] [-q]",
	"coli-plan mirror verify DIR [-m MODEL.coli] [-q]",
	NULL,
};

static int mirror_help;

static const coli_option mirror_options[] = {
	COLI_OPT_TEXT("Stages a copy of a container on another disk, for coli-run --mirror DIR (stage: the whole "
		      "container when it fits, else the hottest expert records that do), or checks one (verify). "
		      "Each has its --help."),
	COLI_OPT_TEXT(""),
	COLI_OPT_HELP(&mirror_help),
	COLI_OPT_END(),
};

int plan_mirror_main(int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "stage"))
		return stage_main(argc, argv);
	if (argc >= 1 && !strcmp(argv[0], "verify"))
		return verify_main(argc, argv);
	if (argc >= 1 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help")))
		return usage(NULL, mirror_synopsis, mirror_options);
	char msg[256];
	snprintf(msg, sizeof(msg), "mirror: expected stage or verify%s%.64s%s", argc ? ", not '" : "", argc ? argv[0] : "",
		 argc ? "'" : "");
	return usage(msg, mirror_synopsis, mirror_options);
}
