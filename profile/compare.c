/* compare.c: coli-profile compare: two commands run alternately (A B A B ...), each printing coli-run's
 * --json line; the medians, minima and maxima of their decode tokens/s and of the paired ratio B / A. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "datapoint.h"
#include "fileio.h"
#include "options.h"
#include "spawn.h"
#include "tool.h"

#define CMP_MAX_RUNS 1000

static struct {
	int runs, drop, json, quiet, help;
} o = {.runs = 5};

/* The decode tokens/s on the last JSON line of path; 0 when there is none. */
static double tokens_per_s(const char *path)
{
	char *buf, *line = NULL;
	size_t len;
	coli_err e;
	if (coli_read_file(path, &buf, &len, &e) < 0)
		return 0;
	for (char *p = strtok(buf, "\n"); p; p = strtok(NULL, "\n"))
		if (*p == '{')
			line = p;
	json_t *j = line ? json_loads(line, 0, NULL) : NULL;
	double v = json_number_value(json_object_get(json_object_get(j, "decode"), "tokens_per_s"));
	json_decref(j);
	free(buf);
	return v;
}

/* One run of cmd through sh -c: its tokens/s, or -1 with e. */
static int one(const char *cmd, const char *tag, int i, const char *out, double *ts, coli_err *e)
{
	char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
	coli_err de = {0, ""};
	if (o.drop && prof_drop_caches(&de) < 0)
		return coli_errf(e, de.code, "--drop-caches: %s", de.msg);
	int st = prof_spawn(argv, out, NULL, e);
	if (st < 0)
		return -1;
	if (st != 0)
		return coli_errf(e, COLI_EIO, "run %d of %s ('%s') exited %d", i + 1, tag, cmd, st);
	if (!((*ts = tokens_per_s(out)) > 0))
		return coli_errf(e, COLI_EDATA, "run %d of %s ('%s'): no decode.tokens_per_s on a JSON line of its stdout "
				 "(give coli-run --json)", i + 1, tag, cmd);
	if (!o.quiet)
		fprintf(stderr, "coli-profile: %s run %d: %.3f tokens/s\n", tag, i + 1, *ts);
	return 0;
}

static void print(const char *a, const char *b, double s[3][3])
{
	if (o.json) {
		json_t *j = json_pack("{s:i, s:{s:s, s:f, s:f, s:f}, s:{s:s, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}", "runs", o.runs,
				      "a", "command", a, "median", s[0][0], "min", s[0][1], "max", s[0][2], "b", "command", b,
				      "median", s[1][0], "min", s[1][1], "max", s[1][2], "ratio", "median", s[2][0], "min",
				      s[2][1], "max", s[2][2]);
		char *t = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
		puts(t ? t : "{}");
		free(t), json_decref(j);
		return;
	}
	printf("| | command | runs | median tokens/s | min | max |\n|---|---|---:|---:|---:|---:|\n");
	printf("| A | `%s` | %d | %.3f | %.3f | %.3f |\n", a, o.runs, s[0][0], s[0][1], s[0][2]);
	printf("| B | `%s` | %d | %.3f | %.3f | %.3f |\n\n", b, o.runs, s[1][0], s[1][1], s[1][2]);
	printf("B / A: %.3fx (median of %d paired runs; min %.3fx, max %.3fx)\n", s[2][0], o.runs, s[2][1], s[2][2]);
}

static int compare(const char *a, const char *b, coli_err *e)
{
	double *v = coli_calloc(3 * (size_t)o.runs, sizeof(double), e), s[3][3];
	char out[] = "/tmp/coli-profile-compare.XXXXXX";
	int fd = v ? mkstemp(out) : -1, rc = fd >= 0 ? 0 : (v ? coli_errf(e, COLI_EIO, "%s: cannot create: %s", out, strerror(errno)) : -1);
	if (fd >= 0)
		close(fd);
	for (int i = 0; rc == 0 && i < o.runs; i++) {
		rc = one(a, "A", i, out, &v[i], e);
		rc = rc ? rc : one(b, "B", i, out, &v[o.runs + i], e);
		if (rc == 0)
			v[2 * o.runs + i] = v[o.runs + i] / v[i];
	}
	if (fd >= 0)
		unlink(out);
	for (int k = 0; rc == 0 && k < 3; k++)
		prof_stats(v + k * o.runs, o.runs, s[k]);
	if (rc == 0)
		print(a, b, s);
	free(v);
	return rc;
}

static const char *const synopsis[] = {"coli-profile compare 'CMD A' 'CMD B' [-r N] [--drop-caches] [--json]", NULL};

static const coli_option options[] = {
	COLI_OPT_TEXT("Runs two commands alternately, A B A B ..., each through sh -c and each printing coli-run's "
		      "--json line, and prints the median, min and max of their decode tokens/s and of the paired "
		      "ratio B / A."),
	COLI_OPT_TEXT(""),
	COLI_OPT_INT('r', "runs", &o.runs, "N", 1, CMP_MAX_RUNS, "runs of each command (default 5)"),
	COLI_OPT_FLAG(0, "drop-caches", &o.drop, "drop the page cache before every run (root)"),
	COLI_OPT_FLAG(0, "json", &o.json, "print the figures as one JSON object"),
	COLI_OPT_FLAG('q', "quiet", &o.quiet, "no line per run on stderr"),
	COLI_OPT_HELP(&o.help),
	COLI_OPT_END(),
};

static int usage(const char *msg)
{
	return tool_usage("coli-profile compare", msg, synopsis, options);
}

int prof_compare_main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(options, argc, argv, &e);
	if (o.help)
		return usage(NULL);
	if (n < 0)
		return usage(e.msg);
	if (n != 2)
		return usage("give two commands, 'CMD A' and 'CMD B'");
	if (compare(argv[0], argv[1], &e) < 0) {
		return prof_fail(&e);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
