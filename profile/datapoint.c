/* datapoint.c: coli-profile datapoint: one container measured cold, warm and over rotating prompts
 * (their median the headline), with the probe, the plan, the traces, the report, the environment
 * and the exact commands, bundled into one .tar.gz (formats/bundle.md), and a benchmarks row. */
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "bundle_io.h"
#include "machine.h"
#include "datapoint.h"
#include "fileio.h"
#include "options.h"
#include "plots.h"
#include "report.h"
#include "sha256.h"
#include "spawn.h"
#include "tool.h"

#define DP_MAX_ARGS 64

static struct {
	const char *plan, *probe, *out;
	int n_gen, prompts, prompt_len, no_drop, quiet, help;
} o = {.out = "datapoint.tar.gz", .n_gen = 64, .prompts = 3, .prompt_len = 32};

typedef struct dp {
	char dir[4200];            /* the staging folder */
	const char *model;
	char *const *extra;        /* coli-run options after -- */
	int n_extra;
	char run[4200];            /* coli-run */
	coli_bundle_manifest *man;
	char *paths[COLI_BUNDLE_MAX_FILES];
	FILE *commands;            /* commands.sh */
	char dropped[256];         /* how the cold run's page cache was dropped */
	int n_runs;                /* runs in all: cold, warm, the rotating ones */
	const char *step;          /* what is being done (a run's name, "the report", ...) */
	int mid_line;              /* a progress line waits for its end */
	int published;             /* the bundle is under its final name, complete */
} dp;

/* A file of the staging folder, listed in the manifest as name. */
static const char *add_file(dp *d, const char *name)
{
	coli_bundle_file *f = &d->man->files[d->man->n_files];
	snprintf(f->name, sizeof(f->name), "%s", name);
	d->paths[d->man->n_files] = coli_path_join(d->dir, name);
	return d->paths[d->man->n_files++];
}

/* The prompt of run r: prompt_len ids in 1..97, different per r. */
static void prompt_of(int r, char *out, size_t n)
{
	size_t at = 0;
	for (int i = 0; i < o.prompt_len && at + 8 < n; i++)
		at += (size_t)snprintf(out + at, n - at, "%s%d", i ? " " : "", 1 + (r * 31 + i * 7 + i * i) % 97);
}

static void quoted(FILE *f, const char *s)
{
	fputc('\'', f);
	for (const char *c = s; *c; c++)
		*c == '\'' ? fputs("'\\''", f) : fputc(*c, f);
	fputc('\'', f);
}

/* A run's command line for commands.sh: every word quoted, the trace and the output named as the
 * bundle's members (run from the folder the bundle is extracted into). */
static void command_line(FILE *f, char *const *argv, const char *staged_trace, const char *tr, const char *js,
			 const char *er)
{
	for (int i = 0; argv[i]; i++) {
		fputs(i ? " " : "", f);
		quoted(f, argv[i] == staged_trace ? tr : argv[i]);
	}
	fputs(" >", f), quoted(f, js), fputs(" 2>", f), quoted(f, er), fputc('\n', f);
}

/* The last line of file that is a JSON object, or NULL. */
static json_t *last_json(const char *path)
{
	char *buf, *line = NULL;
	size_t len;
	coli_err e;
	if (coli_read_file(path, &buf, &len, &e) < 0)
		return NULL;
	for (char *p = strtok(buf, "\n"); p; p = strtok(NULL, "\n"))
		if (*p == '{')
			line = p;
	json_t *j = line ? json_loads(line, 0, NULL) : NULL;
	free(buf);
	return j;
}

/* A failed run's own messages on our stderr: its lines that begin "coli-run:" (the last 20 of
 * them; a usage error's --help text after them left out), else its last 5 lines. */
static void show_errors(const char *name, const char *err_path)
{
	char *buf, *line[20];
	size_t len;
	int n = 0, mine = 0;
	coli_err e;
	if (coli_read_file(err_path, &buf, &len, &e) < 0)
		return;
	for (char *p = strtok(buf, "\n"); p; p = strtok(NULL, "\n"))
		mine += strncmp(p, "coli-run:", 9) == 0;
	for (size_t at = 0; at < len; at++) /* strtok's NULs back to newlines */
		buf[at] = buf[at] ? buf[at] : '\n';
	for (char *p = strtok(buf, "\n"); p; p = strtok(NULL, "\n"))
		if (!mine || strncmp(p, "coli-run:", 9) == 0)
			line[n++ % 20] = p;
	int keep = mine ? (n < 20 ? n : 20) : (n < 5 ? n : 5);
	if (keep)
		fprintf(stderr, "coli-profile: the %s run's messages (%s):\n", name, mine ? "coli-run's own, from its stderr"
			: "the last lines of its stderr");
	for (int k = n - keep; k < n; k++)
		fprintf(stderr, "    %s\n", line[k % 20]);
	free(buf);
}

/* The progress line of a run: its start, then (end) its figure. */
static void progress(dp *d, const char *name, int end, double tok_s)
{
	if (o.quiet)
		return;
	if (!end)
		fprintf(stderr, "coli-profile: run %d of %d (%s)... ", d->man->n_runs + 1, d->n_runs, name), d->mid_line = 1;
	else
		fprintf(stderr, "%.2f tokens/s\n", tok_s), d->mid_line = 0;
	fflush(stderr);
}

/* A run that did not end well: coli-run's messages shown, the error says how it ended. */
static int run_failed(dp *d, const char *name, int st, const char *err, coli_err *e)
{
	if (d->mid_line)
		fputs("failed\n", stderr), d->mid_line = 0;
	show_errors(name, err);
	if (st > 128)
		return coli_errf(e, COLI_EIO, "%s run: %s was killed by signal %d (%s)", name, d->run, st - 128,
				 strsignal(st - 128));
	if (st == 0)
		return coli_errf(e, COLI_EDATA, "%s run: %s printed no --json line with decode.tokens_per_s", name, d->run);
	return coli_errf(e, COLI_EIO, "%s run: %s exited %d (its messages above)", name, d->run, st);
}

/* One coli-run of the datapoint: its trace, its --json, its stderr; the command in commands.sh. */
static int one_run(dp *d, const char *name, int kind, int prompt, coli_err *e)
{
	char ids[1024], tr[COLI_BUNDLE_MAX_NAME + 1], js[COLI_BUNDLE_MAX_NAME + 1], er[COLI_BUNDLE_MAX_NAME + 1], n_gen[16];
	snprintf(tr, sizeof(tr), "traces/%.40s.coli_trace", name), snprintf(js, sizeof(js), "runs/%.40s.json", name);
	snprintf(er, sizeof(er), "runs/%.40s.stderr", name), snprintf(n_gen, sizeof(n_gen), "%d", o.n_gen);
	prompt_of(prompt, ids, sizeof(ids));
	char *argv[DP_MAX_ARGS + 24] = {d->run, "-m", (char *)d->model, "--prompt-ids", ids, "-n", n_gen, "--ignore-eos",
					"--json", "--trace", (char *)add_file(d, tr)};
	int n = 11;
	if (o.plan)
		argv[n++] = "--plan", argv[n++] = (char *)o.plan;
	for (int i = 0; i < d->n_extra; i++)
		argv[n++] = d->extra[i];
	argv[n] = NULL;
	command_line(d->commands, argv, argv[10], tr, js, er);
	const char *out = add_file(d, js), *err = add_file(d, er);
	d->step = name;
	progress(d, name, 0, 0);
	int st = prof_spawn(argv, out, err, e);
	if (prof_spawn_signal())
		return -1;
	if (st != 0)
		return st < 0 ? -1 : run_failed(d, name, st, err, e);
	json_t *j = last_json(out);
	double ts = json_number_value(json_object_get(json_object_get(j, "decode"), "tokens_per_s"));
	json_decref(j);
	if (!(ts > 0))
		return run_failed(d, name, 0, err, e);
	progress(d, name, 1, ts);
	coli_bundle_run *r = &d->man->runs[d->man->n_runs++];
	snprintf(r->name, sizeof(r->name), "%s", name), snprintf(r->trace, sizeof(r->trace), "%s", tr);
	snprintf(r->json, sizeof(r->json), "%s", js);
	r->kind = kind, r->tokens_per_s = ts;
	return 0;
}

/* The headline: the rotating run at the median of their tokens/s (the lower middle when even). */
static void headline(dp *d)
{
	double v[COLI_BUNDLE_MAX_RUNS], st[3];
	int n = 0;
	for (int i = 0; i < d->man->n_runs; i++)
		if (d->man->runs[i].kind == COLI_BUNDLE_ROTATE)
			v[n++] = d->man->runs[i].tokens_per_s;
	prof_stats(v, n, st);
	d->man->headline_tok_s = st[0];
	for (int i = 0; i < d->man->n_runs; i++)
		if (d->man->runs[i].kind == COLI_BUNDLE_ROTATE && d->man->runs[i].tokens_per_s == v[(n - 1) / 2]) {
			snprintf(d->man->headline_run, sizeof(d->man->headline_run), "%s", d->man->runs[i].name);
			snprintf(d->man->headline, sizeof(d->man->headline), "%s", d->man->runs[i].trace);
		}
}

static int runs(dp *d, coli_err *e)
{
	coli_err de = {0, ""};
	if (o.no_drop)
		snprintf(d->dropped, sizeof(d->dropped), "not dropped (--no-drop-caches)");
	else if (prof_drop_caches(&de) < 0)
		snprintf(d->dropped, sizeof(d->dropped), "%.200s", de.msg); /* the reason, cut to fit */
	else
		snprintf(d->dropped, sizeof(d->dropped), "dropped before the cold run");
	if (de.code && !o.quiet)
		fprintf(stderr, "coli-profile: %s\n", de.msg);
	int rc = one_run(d, "cold", COLI_BUNDLE_COLD, 0, e);
	rc = rc ? rc : one_run(d, "warm", COLI_BUNDLE_WARM, 0, e);
	for (int r = 1; rc == 0 && r <= o.prompts; r++) {
		char name[32];
		snprintf(name, sizeof(name), "rotate-%d", r);
		rc = one_run(d, name, COLI_BUNDLE_ROTATE, r, e);
	}
	if (rc == 0)
		headline(d);
	return rc;
}

/* A /proc-style "key: value" line's value, or "?". */
static void proc_field(const char *path, const char *key, char *out, size_t n)
{
	FILE *f = fopen(path, "r");
	char line[512];
	snprintf(out, n, "?");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key))) {
			char *v = strchr(line, ':');
			v = v ? v + 1 + strspn(v + 1, " \t") : line + strlen(key) + strspn(line + strlen(key), " \t");
			v[strcspn(v, "\n")] = 0;
			snprintf(out, n, "%s", v);
			break;
		}
	if (f)
		fclose(f);
}

static json_t *env_json(dp *d, const prof_trace *t)
{
	char cpu[256], mem[64], limit[64] = "none";
	struct utsname u;
	uname(&u);
	proc_field("/proc/cpuinfo", "model name", cpu, sizeof(cpu));
	proc_field("/proc/meminfo", "MemTotal", mem, sizeof(mem));
	double cg = coli_machine_cgroup_limit(); /* this process's cgroups, v1 or v2, ancestors included */
	if (cg > 0)
		snprintf(limit, sizeof(limit), "%.2f GiB", cg / 1073741824.0);
	json_t *disks = json_array();
	for (int k = 0; k < t->n_copies; k++)
		json_array_append_new(disks, json_pack("{s:s, s:s}", "dir", t->dir[k], "device", t->dev[k]));
	return json_pack("{s:s, s:i, s:i, s:s, s:s, s:s, s:s, s:o, s:s, s:s, s:s}", "cpu_model", cpu, "online_cpus",
			 (int)sysconf(_SC_NPROCESSORS_ONLN), "physical_pages_mib",
			 (int)((double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / 1048576), "mem_total", mem,
			 "cgroup_memory_max", limit, "kernel", u.release, "machine", u.machine, "disks", disks,
			 "page_cache", d->dropped, "coli_version", d->man->coli_version, "git_commit", d->man->git_commit);
}

/* The knobs column: "defaults", or the plan and the coli-run options after -- as given ('|'
 * escaped for the table). Malloc'd. */
static char *knobs(const dp *d)
{
	char *buf = NULL;
	size_t n;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	fputs(o.plan ? "plan" : d->n_extra ? "" : "defaults", f);
	for (int i = 0; i < d->n_extra; i++) {
		fputs(i || o.plan ? " " : "", f);
		prof_shell_word(f, d->extra[i]);
	}
	if (fclose(f) != 0)
		return free(buf), NULL;
	char *out = malloc(2 * strlen(buf) + 1), *q = out;
	for (const char *c = buf; out && *c; c++)
		*c == '|' ? (*q++ = '\\', *q++ = '|') : (*q++ = *c);
	if (out)
		*q = 0;
	free(buf);
	return out;
}

/* The row for docs/benchmarks.md (its columns: docs/coli-profile.md). */
static char *bench_row(dp *d, const prof_attrib *a, json_t *env)
{
	char *row = NULL, when[32], *k = knobs(d);
	if (!k)
		return NULL;
	time_t now = (time_t)d->man->created;
	strftime(when, sizeof(when), "%Y-%m-%d", gmtime(&now));
	const char *base = strrchr(d->model, '/') ? strrchr(d->model, '/') + 1 : d->model;
	double cold = d->man->runs[0].tokens_per_s, warm = d->man->runs[1].tokens_per_s;
	if (asprintf(&row, "| %s | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f (median of %d) | %.1f%% | %s %.0f%% | %.12s |\n",
		     when, base, json_string_value(json_object_get(env, "cpu_model")),
		     json_string_value(json_object_get(env, "cgroup_memory_max")), a->n_disks ? a->disks[0].dev : "?",
		     k, cold, warm, d->man->headline_tok_s, o.prompts, 100 * a->v.hit, prof_part_keys[a->v.bound],
		     100 * a->v.share[a->v.bound], d->man->git_commit) < 0)
		row = NULL;
	free(k);
	return row;
}

static int write_text(dp *d, const char *name, const char *text, coli_err *e)
{
	return text ? coli_write_atomic(add_file(d, name), text, strlen(text), e)
		    : coli_errf(e, COLI_ENOMEM, "out of memory for %s", name);
}

static int write_json(dp *d, const char *name, json_t *j, coli_err *e)
{
	char *s = j ? json_dumps(j, JSON_INDENT(1)) : NULL;
	int rc = write_text(d, name, s, e);
	free(s);
	return rc;
}

/* The report of the headline run into report/, each of its files listed. */
static int report(dp *d, prof_inputs *in, prof_attrib *a, coli_err *e)
{
	char *rdir = coli_path_join(d->dir, "report"), *warn = NULL;
	int rc = rdir ? prof_report_write(in, a, rdir, &warn, e) : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (warn && !o.quiet)
		fprintf(stderr, "coli-profile: %s\n", warn);
	static const char *const exts[] = {"png", "svg"};
	char name[128], *p;
	struct stat sb;
	for (int i = 0; rc == 0 && i < PLOT_N; i++)
		for (int k = 0; k < 2; k++) {
			snprintf(name, sizeof(name), "report/%s.%s", prof_plots_all[i].name, exts[k]);
			if ((p = coli_path_join(d->dir, name)) && stat(p, &sb) == 0)
				add_file(d, name);
			free(p);
		}
	if (rc == 0)
		add_file(d, "report/report.md"), add_file(d, "report/report.html");
	free(rdir), free(warn);
	return rc;
}

static int copy_in(dp *d, const char *from, const char *name, coli_err *e)
{
	char *buf;
	size_t len;
	if (coli_read_file(from, &buf, &len, e) < 0)
		return -1;
	int rc = coli_write_atomic(add_file(d, name), buf, len, e);
	free(buf);
	return rc;
}

static int inputs_and_report(dp *d, char **row, coli_err *e)
{
	prof_inputs in;
	prof_attrib a;
	char *t = coli_path_join(d->dir, d->man->headline);
	int rc = t ? prof_inputs_open(&in, t, o.probe, o.plan, e) : coli_errf(e, COLI_ENOMEM, "out of memory");
	free(t);
	if (rc < 0)
		return -1;
	const char *ver = json_string_value(json_object_get(in.trace.meta, "coli_version"));
	snprintf(d->man->coli_version, sizeof(d->man->coli_version), "%s", ver ? ver : "unknown");
	coli_hex32(in.trace.identity, d->man->identity);
	rc = prof_attrib_make(&a, &in.trace, in.probe, e);
	json_t *env = rc == 0 ? env_json(d, &in.trace) : NULL;
	if (rc == 0)
		rc = report(d, &in, &a, e);
	if (rc == 0)
		rc = write_json(d, "env.json", env, e);
	if (rc == 0 && !(*row = bench_row(d, &a, env)))
		rc = coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0)
		rc = write_text(d, "row.md", *row, e);
	json_decref(env);
	prof_attrib_release(&a);
	prof_inputs_release(&in);
	return rc;
}

static int make_dirs(dp *d, coli_err *e)
{
	static const char *const sub[] = {"traces", "runs", "report"};
	snprintf(d->dir, sizeof(d->dir), "%s.staging.XXXXXX", o.out);
	if (!mkdtemp(d->dir)) {
		coli_errf(e, COLI_EIO, "%s: cannot create a staging folder: %s", d->dir, strerror(errno));
		d->dir[0] = 0;
		return -1;
	}
	for (int i = 0; i < 3; i++) {
		char *p = coli_path_join(d->dir, sub[i]);
		int bad = !p || mkdir(p, 0755) < 0;
		free(p);
		if (bad)
			return coli_errf(e, COLI_EIO, "%s/%s: cannot create", d->dir, sub[i]);
	}
	return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

/* Removes the staging folder and everything in it (a killed coli-run's temporaries included):
 * the folder is this datapoint's own (mkdtemp), links are not followed. */
static void clean(dp *d)
{
	for (int i = 0; i < d->man->n_files; i++)
		free(d->paths[i]);
	if (d->dir[0])
		nftw(d->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The bundle written in the staging folder, then renamed to its name with the signals held, unless
 * one came: a bundle under the final name is always complete. */
static int publish(dp *d, coli_err *e)
{
	char *staged = coli_path_join(d->dir, "bundle.tar.gz");
	sigset_t hold, old;
	int rc = staged ? prof_bundle_write(staged, d->man, (const char *const *)d->paths, e)
			: coli_errf(e, COLI_ENOMEM, "out of memory");
	sigemptyset(&hold), sigaddset(&hold, SIGINT), sigaddset(&hold, SIGTERM);
	sigprocmask(SIG_BLOCK, &hold, &old);
	if (rc == 0 && !prof_spawn_signal() && rename(staged, o.out) < 0)
		rc = coli_errf(e, COLI_EIO, "%s: cannot rename to %s: %s", staged, o.out, strerror(errno));
	d->published = rc == 0 && !prof_spawn_signal();
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(staged);
	return rc;
}

static int datapoint(dp *d, char **row, coli_err *e)
{
	/* the commit of the tree coli-run was built in (git -C its folder) */
	char gdir[4200], *git[] = {"git", "-C", gdir, "rev-parse", "HEAD", NULL};
	snprintf(gdir, sizeof(gdir), "%s", d->run);
	if (strrchr(gdir, '/'))
		*strrchr(gdir, '/') = 0;
	else
		snprintf(gdir, sizeof(gdir), ".");
	if (prof_capture(git, d->man->git_commit, sizeof(d->man->git_commit)) < 0)
		snprintf(d->man->git_commit, sizeof(d->man->git_commit), "unknown");
	d->man->created = (double)time(NULL);
	snprintf(d->man->model, sizeof(d->man->model), "%s", d->model);
	const char *cmds = add_file(d, "commands.sh");
	if (!(d->commands = fopen(cmds, "w")))
		return coli_errf(e, COLI_EIO, "%s: cannot write", cmds);
	char cwd[4096];
	fprintf(d->commands, "#!/bin/sh\n# the runs of this datapoint, in order (coli-profile datapoint), as run in %s;\n"
		"# the traces and outputs named as this bundle's members: run it in the folder the bundle is extracted to\n",
		getcwd(cwd, sizeof(cwd)) ? cwd : "(the folder is unknown)");
	int rc = runs(d, e);
	if (fclose(d->commands) != 0 && rc == 0)
		rc = coli_errf(e, COLI_EIO, "%s: write failed", cmds);
	if (rc == 0 && o.probe)
		rc = copy_in(d, o.probe, "probe.json", e);
	if (rc == 0 && o.plan)
		rc = copy_in(d, o.plan, "plan.json", e);
	if (rc == 0 && !prof_spawn_signal())
		d->step = "the report", rc = inputs_and_report(d, row, e);
	if (rc == 0 && !prof_spawn_signal())
		d->step = "the bundle", rc = publish(d, e);
	return rc;
}

static const char *const synopsis[] = {
	"coli-profile datapoint MODEL.coli [--plan F] [--probe F] [-o NAME.tar.gz] [-- COLI-RUN OPTIONS]", NULL};

static const coli_option options[] = {
	COLI_OPT_TEXT("Measures a container: drops the page cache (as root), runs coli-run cold, warm, then over "
		      "rotating prompts (their median tokens/s is the headline), each traced, and bundles the "
		      "traces, the runs' --json, the probe, the plan, the report of the headline run, the "
		      "environment and the exact commands into one .tar.gz; prints a row for docs/benchmarks.md."),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRING(0, "plan", &o.plan, "FILE", "run with coli-run --plan FILE (and bundle it)"),
	COLI_OPT_STRING(0, "probe", &o.probe, "FILE", "this machine's probe.json, bundled and compared against"),
	COLI_OPT_STRING('o', "output", &o.out, "FILE", "the bundle (default datapoint.tar.gz)"),
	COLI_OPT_INT('n', NULL, &o.n_gen, "N", 1, 1 << 20, "tokens to generate per run (default 64)"),
	COLI_OPT_INT(0, "prompts", &o.prompts, "N", 1, 32, "rotating prompts after cold and warm (default 3)"),
	COLI_OPT_INT(0, "prompt-len", &o.prompt_len, "N", 1, 128, "prompt tokens per run (default 32)"),
	COLI_OPT_FLAG(0, "no-drop-caches", &o.no_drop, "leave the page cache as it is (the cold run is then not cold)"),
	COLI_OPT_FLAG('q', "quiet", &o.quiet, "no notes on stderr"),
	COLI_OPT_HELP(&o.help),
	COLI_OPT_END(),
};

static int usage(const char *msg)
{
	return tool_usage("coli-profile datapoint", msg, synopsis, options);
}

/* A signal ended the datapoint: one line saying what was kept; 128 + the signal. */
static int interrupted(dp *d, int sig, char *row)
{
	struct stat sb;
	if (d->mid_line)
		fputc('\n', stderr);
	if (d->published)
		fprintf(stderr, "coli-profile: interrupted (%s) after the bundle was written: %s kept, complete\n",
			sig == SIGINT ? "SIGINT" : "SIGTERM", o.out);
	else
		fprintf(stderr, "coli-profile: interrupted (%s) during %s%s%s: nothing kept (the runs' staging folder "
			"removed, no bundle written; %s %s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
			strncmp(d->step, "the ", 4) ? "the " : "", d->step, strncmp(d->step, "the ", 4) ? " run" : "", o.out,
			stat(o.out, &sb) == 0 ? "left as it was" : "not created");
	free(row);
	return 128 + sig;
}

int prof_datapoint_main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(options, argc, argv, &e);
	if (o.help)
		return usage(NULL);
	if (n < 0)
		return usage(e.msg);
	if (n < 1)
		return usage("no MODEL.coli given");
	if (n - 1 > DP_MAX_ARGS)
		return usage("more than 64 coli-run options after --");
	dp d = {.model = argv[0], .extra = argv + 1, .n_extra = n - 1, .n_runs = 2 + o.prompts, .step = "the start"};
	char *row = NULL;
	prof_sibling("coli-run", d.run, sizeof(d.run));
	if (prof_spawn_catch_signals() < 0)
		return fprintf(stderr, "coli-profile: cannot catch SIGINT and SIGTERM: %s\n", strerror(errno)), 1;
	if (!(d.man = calloc(1, sizeof(*d.man))))
		return fprintf(stderr, "coli-profile: out of memory\n"), 1;
	int rc = make_dirs(&d, &e);
	if (rc == 0 && !o.quiet)
		fprintf(stderr, "coli-profile: %d runs of %s, %d tokens each, into %s\n", d.n_runs, d.run, o.n_gen, o.out);
	if (rc == 0)
		rc = datapoint(&d, &row, &e);
	clean(&d);
	free(d.man);
	int sig = prof_spawn_signal();
	if (sig)
		return interrupted(&d, sig, row);
	if (rc < 0)
		return free(row), prof_fail(&e);
	fputs(row, stdout);
	if (!o.quiet)
		fprintf(stderr, "coli-profile: bundle %s (coli-profile report %s)\n", o.out, o.out);
	free(row);
	return 0;
}
