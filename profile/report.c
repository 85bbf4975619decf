/* report.c: coli-profile report: the attribution, the verdict, the disks, the plan, the plots, as
 * markdown and self-contained HTML (report.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "fileio.h"
#include "html.h"
#include "options.h"
#include "plots.h"
#include "report.h"
#include "tool.h"

static void run_line(FILE *f, const prof_trace *t)
{
	json_t *argv = json_object_get(t->meta, "argv"), *v;
	size_t i;
	time_t start = (time_t)(t->start_unix_ns / 1000000000u);
	char when[64];
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&start));
	fprintf(f, "Trace `%s`: %d layers, %d experts, top-k %d, %d cop%s of the experts; started %s.\n", t->name,
		t->n_layers, t->n_experts, t->top_k, t->n_copies, t->n_copies == 1 ? "y" : "ies", when);
	const char *ver = json_string_value(json_object_get(t->meta, "coli_version"));
	if (json_array_size(argv)) { /* as a shell would take it back; `` when a word holds a backtick */
		int tick = 0;
		json_array_foreach(argv, i, v) tick |= json_string_value(v) && strchr(json_string_value(v), '`');
		fprintf(f, "Command: %s", tick ? "`` " : "`");
		json_array_foreach(argv, i, v) {
			fputs(i ? " " : "", f);
			prof_shell_word(f, json_string_value(v) ? json_string_value(v) : "?");
		}
		fprintf(f, "%s%s", tick ? " ``" : "`", ver ? "; " : ".\n");
	}
	if (ver)
		fprintf(f, "version: %s.\n", ver);
	fprintf(f, "\n");
}

/* x, or 0 when it is within rounding of 0 (no "-0.000000"). */
static double clean(double x) { return fabs(x) < 5e-10 ? 0 : x; }

static void pct(FILE *f, double x, double of) { fprintf(f, " %.1f%% |", of > 0 ? clean(100 * x / of) : 0); }

static void attribution(FILE *f, const prof_attrib *a, int version)
{
	const prof_phase *pf = &a->ph[0], *dc = &a->ph[1];
	double per = dc->positions > 0 ? 1e3 / dc->positions : 0;
	fprintf(f, "## Attribution\n\n| part | prefill s | prefill | decode s | decode | decode ms/token |\n"
		"|---|---:|---:|---:|---:|---:|\n");
	for (int k = 0; k < PART_N; k++) {
		fprintf(f, "| %s | %.6f |", prof_part_names[k], clean(pf->part[k]));
		pct(f, pf->part[k], pf->wall);
		fprintf(f, " %.6f |", clean(dc->part[k]));
		pct(f, dc->part[k], dc->wall);
		fprintf(f, " %.4f |\n", clean(per * dc->part[k]));
	}
	fprintf(f, "| **wall** | **%.6f** | 100%% | **%.6f** | 100%% | **%.4f** |\n", pf->wall, dc->wall, per * dc->wall);
	fprintf(f, "| disk service (apart: overlaps the rest) | %.6f | | %.6f | | %.4f |\n\n", pf->disk_service,
		dc->disk_service, per * dc->disk_service);
	fprintf(f, "Prefill: %d call%s, %.0f tokens, %.1f tokens/s, hit rate %.1f%%. Decode: %d calls, %.0f tokens, %.2f "
		"tokens/s, hit rate %.1f%%, %.3f MiB read per token. The spans tile every call within %.3f%% (untraced: "
		"the difference).\n\n",
		pf->calls, pf->calls == 1 ? "" : "s", pf->positions, pf->wall > 0 ? pf->positions / pf->wall : 0,
		100 * prof_hit_rate(pf->out), dc->calls, dc->positions, dc->wall > 0 ? dc->positions / dc->wall : 0,
		100 * prof_hit_rate(dc->out), dc->positions > 0 ? dc->read_bytes / 1048576 / dc->positions : 0,
		100 * a->span_error);
	if (version == 1)
		fprintf(f, "A version 1 trace: the time between forward calls (sampling, printing) is in no record, so the "
			"wall is the calls' only and tokens/s is above the run's own (coli-run `--json`).\n\n");
}

static void disks(FILE *f, const prof_attrib *a, int has_probe)
{
	fprintf(f, "## Disks\n\n| copy | folder | device | reads | failed | MiB read | busy s | MB/s busy | probe MB/s "
		"| of probe |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int k = 0; k < a->n_disks; k++) {
		const prof_disk *d = &a->disks[k];
		double bw = d->busy > 0 ? d->bytes / d->busy : 0;
		fprintf(f, "| %d | `%s` | %s | %ld | %ld | %.3f | %.4f | %.1f |", k, d->dir, d->dev, d->reads, d->failed,
			d->bytes / 1048576, d->busy, bw / 1e6);
		if (d->probe_bps > 0)
			fprintf(f, " %.1f | %.0f%% |\n", d->probe_bps / 1e6, 100 * bw / d->probe_bps);
		else
			fprintf(f, " - | - |\n");
	}
	fprintf(f, "\n%s\n\n", has_probe ? "Probe: the best O_DIRECT bandwidth `coli-plan probe` measured on the device."
				       : "No probe given (`--probe probe.json`): no bandwidth to compare with.");
}

static void predicted(FILE *f, const prof_attrib *a, const coli_plan *p)
{
	const prof_phase *d = &a->ph[COLI_PHASE_DECODE];
	if (!p || d->positions <= 0)
		return;
	double per = 1e3 / d->positions;
	fprintf(f, "## Predicted against measured\n\n| decode | tokens/s | disk ms/token | expert products ms | attention "
		"ms | other ms |\n|---|---:|---:|---:|---:|---:|\n");
	fprintf(f, "| plan, warm | %.2f | %.4f | %.4f | %.4f | %.4f |\n", p->warm.tok_s, 1e3 * p->warm.disk_s,
		1e3 * p->warm.experts_s, 1e3 * p->warm.attention_s, 1e3 * p->warm.other_s);
	fprintf(f, "| plan, cold | %.2f | %.4f | %.4f | %.4f | %.4f |\n", p->cold.tok_s, 1e3 * p->cold.disk_s,
		1e3 * p->cold.experts_s, 1e3 * p->cold.attention_s, 1e3 * p->cold.other_s);
	fprintf(f, "| measured | %.2f | %.4f | %.4f | %.4f | %.4f |\n\n", d->positions / d->wall,
		per * d->part[PART_IO_WAIT], per * d->part[PART_EXPERTS], per * prof_attention_s(d), per * prof_other_s(d));
	fprintf(f, "Measured against the warm prediction: %.2fx; hit rate %.1f%% against the plan's %.1f%%.\n\n",
		d->positions / d->wall / (p->warm.tok_s > 0 ? p->warm.tok_s : 1), 100 * prof_hit_rate(d->out),
		100 * p->hit_rate);
}

static void bundle_part(FILE *f, const prof_inputs *in)
{
	json_t *runs = json_object_get(in->manifest, "runs"), *r;
	size_t i;
	if (!in->manifest)
		return;
	fprintf(f, "## Datapoint\n\n| run | kind | decode tokens/s |\n|---|---|---:|\n");
	json_array_foreach(runs, i, r) fprintf(f, "| %s | %s | %.3f |\n", json_string_value(json_object_get(r, "name")),
					       json_string_value(json_object_get(r, "kind")),
					       json_number_value(json_object_get(r, "tokens_per_s")));
	json_t *h = json_object_get(in->manifest, "headline");
	fprintf(f, "\nHeadline (the median of the rotating prompts): **%.3f tokens/s**, run `%s` (the trace reported "
		"here). coli %s, commit %s.\n\n", json_number_value(json_object_get(h, "tokens_per_s")),
		json_string_value(json_object_get(h, "run")),
		json_string_value(json_object_get(in->manifest, "coli_version")),
		json_string_value(json_object_get(in->manifest, "git_commit")));
	if (in->env)
		fprintf(f, "Machine: %s, %d CPUs online, %s of memory (cgroup limit %s), kernel %s; page cache: %s.\n\n",
			json_string_value(json_object_get(in->env, "cpu_model")),
			(int)json_integer_value(json_object_get(in->env, "online_cpus")),
			json_string_value(json_object_get(in->env, "mem_total")),
			json_string_value(json_object_get(in->env, "cgroup_memory_max")),
			json_string_value(json_object_get(in->env, "kernel")),
			json_string_value(json_object_get(in->env, "page_cache")));
}

static void plot_list(FILE *f, const int *plots, const char *no_plot)
{
	fprintf(f, "## Plots\n\n");
	if (!plots) {
		fprintf(f, "No plots: %s\n", no_plot ? no_plot : "not drawn");
		return;
	}
	for (int i = 0; i < PLOT_N; i++)
		if (plots[i])
			fprintf(f, "### %s\n\n![%s](%s.png)\n\n[SVG](%s.svg)\n\n", prof_plots_all[i].title,
				prof_plots_all[i].title, prof_plots_all[i].name, prof_plots_all[i].name);
}

static char *summary_to(FILE *f, char *buf, const prof_inputs *in, const prof_attrib *a)
{
	attribution(f, a, in->trace.version);
	fprintf(f, "## Verdict\n\n%s\n\n", a->v.text);
	return buf;
}

char *prof_report_summary(const prof_inputs *in, const prof_attrib *a)
{
	char *buf = NULL;
	size_t n;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	summary_to(f, buf, in, a);
	return fclose(f) == 0 ? buf : (free(buf), NULL);
}

char *prof_report_md(const prof_inputs *in, const prof_attrib *a, const int *plots, const char *no_plot)
{
	char *buf = NULL;
	size_t n;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	fprintf(f, "# coli-profile report\n\n");
	run_line(f, &in->trace);
	bundle_part(f, in);
	summary_to(f, buf, in, a);
	disks(f, a, in->probe != NULL);
	predicted(f, a, in->plan);
	plot_list(f, plots, no_plot);
	return fclose(f) == 0 ? buf : (free(buf), NULL);
}

/* The plots, when gnuplot is there: made[] filled; *why says why not. */
static int draw(const prof_inputs *in, const prof_attrib *a, const char *dir, int made[PLOT_N], char **why,
		coli_err *e)
{
	char gp[4200];
	const char *env = getenv("PATH");
	if (prof_gnuplot_find(env, gp, sizeof(gp)) < 0) {
		*why = strdup("gnuplot is not on PATH (Debian: apt-get install gnuplot-nox, or make deps): the text report "
			      "is complete, without its plots");
		return 0;
	}
	return prof_plots_draw(gp, dir, &in->trace, a, in->plan, made, e) < 0 ? -1 : 1;
}

int prof_report_write(const prof_inputs *in, const prof_attrib *a, const char *dir, char **warn, coli_err *e)
{
	int made[PLOT_N] = {0}, drawn;
	size_t hlen;
	*warn = NULL;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return coli_errf(e, COLI_EIO, "%s: cannot create the report folder: %s", dir, strerror(errno));
	if ((drawn = draw(in, a, dir, made, warn, e)) < 0)
		return -1;
	char *md = prof_report_md(in, a, drawn ? made : NULL, *warn), *html = NULL;
	char *pmd = coli_path_join(dir, "report.md"), *phtml = coli_path_join(dir, "report.html");
	int rc = md && pmd && phtml ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory for the report");
	if (rc == 0)
		rc = coli_write_atomic(pmd, md, strlen(md), e);
	if (rc == 0 && !(html = prof_html(md, dir, "coli-profile report", &hlen, e)))
		rc = -1;
	if (rc == 0)
		rc = coli_write_atomic(phtml, html, hlen, e);
	free(md), free(html), free(pmd), free(phtml);
	return rc;
}

/* ---- the subcommand ------------------------------------------------------------------------- */

static struct {
	const char *out, *probe, *plan;
	int json, quiet, help;
} o;

static const char *const synopsis[] = {"coli-profile report TRACE|BUNDLE [-o DIR] [--probe F] [--plan F] [--json]",
				       NULL};

static const coli_option options[] = {
	COLI_OPT_TEXT("Where the time of a traced run went (coli-run --trace FILE, or a coli-profile datapoint "
		      "bundle): the attribution table of prefill and decode, whose parts sum to the wall time, "
		      "the bottleneck verdict with its arithmetic, each disk's bandwidth, predicted against "
		      "measured, and plots (gnuplot), written as DIR/report.md and a self-contained "
		      "DIR/report.html; the table and the verdict also on stdout."),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRING('o', "output", &o.out, "DIR", "the report's folder (default: TRACE.report)"),
	COLI_OPT_STRING(0, "probe", &o.probe, "FILE", "the machine's probe.json (coli-plan probe): each disk's "
			"bandwidth against it (a bundle's own by default)"),
	COLI_OPT_STRING(0, "plan", &o.plan, "FILE", "the run's plan.json (coli-plan): predicted against measured "
			"(a bundle's own by default)"),
	COLI_OPT_FLAG(0, "json", &o.json, "print the attribution table and the verdict as one JSON object instead"),
	COLI_OPT_FLAG('q', "quiet", &o.quiet, "print nothing but errors (and the JSON with --json)"),
	COLI_OPT_HELP(&o.help),
	COLI_OPT_END(),
};

static int usage(const char *msg)
{
	return tool_usage("coli-profile report", msg, synopsis, options);
}

static int print_results(const prof_inputs *in, const prof_attrib *a, const char *dir)
{
	if (o.json) {
		json_t *j = prof_attrib_json(a, &in->trace);
		json_object_set_new(j, "report", json_string(dir));
		char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
		puts(s ? s : "{}");
		free(s), json_decref(j);
	} else if (!o.quiet) {
		char *s = prof_report_summary(in, a);
		fputs(s ? s : "", stdout);
		printf("Report: %s/report.html (and report.md)\n", dir);
		free(s);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

int prof_report_main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(options, argc, argv, &e);
	if (o.help)
		return usage(NULL);
	if (n < 0)
		return usage(e.msg);
	if (n != 1)
		return usage(n ? "give one TRACE or BUNDLE" : "no TRACE or BUNDLE given");
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s.report", argv[0]);
	if (o.out)
		snprintf(dir, sizeof(dir), "%s", o.out);
	prof_inputs in;
	prof_attrib a;
	char *warn = NULL;
	if (prof_inputs_open(&in, argv[0], o.probe, o.plan, &e) < 0) {
		return prof_fail(&e);
	}
	int rc = prof_attrib_make(&a, &in.trace, in.probe, &e);
	if (rc == 0)
		rc = prof_report_write(&in, &a, dir, &warn, &e);
	if (rc == 0)
		rc = -print_results(&in, &a, dir);
	if (warn)
		fprintf(stderr, "coli-profile: %s\n", warn);
	if (rc < 0 && e.code)
		fprintf(stderr, "coli-profile: %s\n", e.msg);
	free(warn);
	prof_attrib_release(&a);
	prof_inputs_release(&in);
	return rc < 0 ? (e.code ? coli_err_exit_status(&e) : 1) : 0;
}
