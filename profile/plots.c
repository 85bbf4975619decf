/* plots.c: the report's data files and gnuplot script, drawn as PNG and SVG (plots.h). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "plots.h"

extern char **environ;

const prof_plot prof_plots_all[PLOT_N] = {
	{"attribution", "Where the time goes"},
	{"hitrate", "Expert cache hit rate over the run"},
	{"heatmap", "Hit rate per layer and forward call"},
	{"tokens", "Decode speed over time"},
	{"disks", "Disk bandwidth achieved against the probe"},
	{"predicted", "Predicted (plan) against measured, decode"},
};

int prof_gnuplot_find(const char *path_env, char *path, size_t n)
{
	for (const char *p = path_env; p && *p; p += strcspn(p, ":"), p += *p == ':') {
		int len = (int)strcspn(p, ":");
		if (len == 0)
			continue;
		snprintf(path, n, "%.*s/gnuplot", len, p);
		if (access(path, X_OK) == 0)
			return 0;
	}
	return -1;
}

static FILE *open_in(const char *dir, const char *name, coli_err *e)
{
	char *p = coli_path_join(dir, name);
	FILE *f = p ? fopen(p, "w") : NULL;
	if (!f)
		coli_errf(e, COLI_EIO, "%s/%s: cannot write: %s", dir, name, p ? strerror(errno) : "out of memory");
	free(p);
	return f;
}

static int close_ok(FILE *f, const char *dir, const char *name, coli_err *e)
{
	int bad = ferror(f);
	if (fclose(f) != 0 || bad)
		return coli_errf(e, COLI_EIO, "%s/%s: write failed", dir, name);
	return 0;
}

static int data_attribution(FILE *f, const prof_attrib *a)
{
	fprintf(f, "phase");
	for (int k = 0; k < PART_N; k++)
		fprintf(f, " \"%s\"", prof_part_names[k]);
	fprintf(f, "\n");
	for (int ph = 0; ph < 2; ph++) {
		if (a->ph[ph].wall <= 0)
			continue;
		fprintf(f, "%s", ph ? "decode" : "prefill");
		for (int k = 0; k < PART_N; k++) {
			double pct = 100 * a->ph[ph].part[k] / a->ph[ph].wall;
			fprintf(f, " %.4f", pct > 0 ? pct : 0);
		}
		fprintf(f, "\n");
	}
	return 1;
}

static int data_hitrate(FILE *f, const prof_trace *t)
{
	uint64_t h = 0, g = 0;
	int rows = 0;
	for (int i = 0; i < t->n_calls; i++) {
		uint64_t gi = prof_gets(t->calls[i].out), hi = t->calls[i].out[COLI_X_PIN] + t->calls[i].out[COLI_X_HIT];
		if (!gi)
			continue;
		h += hi, g += gi, rows++;
		fprintf(f, "%d %.3f %.3f\n", i, 100.0 * (double)hi / (double)gi, 100.0 * (double)h / (double)g);
	}
	return rows > 0;
}

static int data_heatmap(FILE *f, const prof_trace *t)
{
	int any = 0;
	for (int l = 0; l < t->n_layers; l++) {
		for (int i = 0; i < t->n_calls; i++) {
			size_t at = (size_t)i * (size_t)t->n_layers + (size_t)l;
			if (t->lget[at])
				fprintf(f, "%s%.1f", i ? " " : "", 100.0 * t->lhit[at] / t->lget[at]), any = 1;
			else
				fprintf(f, "%sNaN", i ? " " : "");
		}
		fprintf(f, "\n");
	}
	return any;
}

/* Each decode call's tokens/s, and over the last 8 calls (their tokens over their time). */
static int data_tokens(FILE *f, const prof_trace *t)
{
	int rows = 0;
	double win_s[8] = {0}, win_n[8] = {0}, sum_s = 0, sum_n = 0;
	for (int i = 0; i < t->n_calls; i++) {
		const prof_call *c = &t->calls[i];
		if (c->phase != COLI_PHASE_DECODE || c->t1 <= c->t0)
			continue;
		double s = (double)(c->t1 - c->t0) / 1e9, n = (double)c->n;
		sum_s += s - win_s[rows % 8], sum_n += n - win_n[rows % 8];
		win_s[rows % 8] = s, win_n[rows % 8] = n, rows++;
		fprintf(f, "%.6f %.4f %.4f\n", (double)c->t1 / 1e9, n / s, sum_n / sum_s);
	}
	return rows > 0;
}

static int data_disks(FILE *f, const prof_attrib *a)
{
	int rows = 0;
	for (int k = 0; k < a->n_disks; k++) {
		const prof_disk *d = &a->disks[k];
		if (d->reads == 0)
			continue;
		fprintf(f, "\"%d: %s\" %.3f %.3f\n", k, d->dev, d->busy > 0 ? d->bytes / d->busy / 1e6 : 0,
			d->probe_bps / 1e6);
		rows++;
	}
	return rows > 0;
}

/* The predicted plot's rows: each part's ms per token, the plan's warm and cold and the measured,
 * into v[4][3]; 1 when there is a plan and a decode (else 0, v untouched). */
static int predicted_rows(const prof_attrib *a, const coli_plan *plan, double v[4][3])
{
	const prof_phase *p = &a->ph[COLI_PHASE_DECODE];
	if (!plan || p->positions <= 0)
		return 0;
	double per = 1e3 / p->positions;
	const coli_plan_speed *w = &plan->warm, *c = &plan->cold;
	double rows[4][3] = {{w->disk_s, c->disk_s, p->part[PART_IO_WAIT]}, {w->experts_s, c->experts_s, p->part[PART_EXPERTS]},
			     {w->attention_s, c->attention_s, prof_attention_s(p)}, {w->other_s, c->other_s, prof_other_s(p)}};
	for (int r = 0; r < 4; r++)
		v[r][0] = 1e3 * rows[r][0], v[r][1] = 1e3 * rows[r][1], v[r][2] = per * rows[r][2];
	return 1;
}

static int data_predicted(FILE *f, const prof_attrib *a, const coli_plan *plan)
{
	static const char *const part[4] = {"disk (I/O wait)", "expert products", "attention", "other"};
	double v[4][3];
	if (!predicted_rows(a, plan, v))
		return 0;
	for (int r = 0; r < 4; r++)
		fprintf(f, "\"%s\" %.4f %.4f %.4f\n", part[r], v[r][0], v[r][1], v[r][2]);
	return 1;
}

/* The top of a bar plot's y axis: its tallest bar and 15% above it (a label's room), at least 1. */
static double bars_top(int i, const prof_attrib *a, const coli_plan *plan)
{
	double top = 0, v[4][3];
	if (i == PLOT_PREDICTED && predicted_rows(a, plan, v))
		for (int r = 0; r < 4; r++)
			for (int k = 0; k < 3; k++)
				top = v[r][k] > top ? v[r][k] : top;
	for (int k = 0; i == PLOT_DISKS && k < a->n_disks; k++) {
		const prof_disk *d = &a->disks[k];
		double bw = d->busy > 0 ? d->bytes / d->busy / 1e6 : 0;
		top = bw > top ? bw : top, top = d->probe_bps / 1e6 > top ? d->probe_bps / 1e6 : top;
	}
	return top > 0 ? top * 1.15 : 1;
}

/* The gnuplot commands of plot i after its terminal and output (data in NAME.dat). */
static void body(FILE *f, int i, const prof_trace *t, const prof_attrib *a, const coli_plan *plan)
{
	const char *d = prof_plots_all[i].name;
	fprintf(f, "reset\nset title \"%s\"\nset grid ytics\nset key outside right\n", prof_plots_all[i].title);
	if (i == PLOT_ATTRIBUTION)
		fprintf(f, "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 border -1\n"
			"set boxwidth 0.5\nset yrange [0:100]\nset xlabel \"phase\"\nset ylabel \"share of the phase's wall "
			"time (%%)\"\nplot for [c=2:%d] '%s.dat' using c:xtic(1) title columnheader(c)\n", PART_N + 1, d);
	else if (i == PLOT_HITRATE)
		fprintf(f, "set xlabel \"forward call (token index)\"\nset ylabel \"hit rate (%%)\"\nset yrange [0:100]\n"
			"plot '%s.dat' using 1:2 with linespoints pt 7 ps 0.4 title \"this call\", '' using 1:3 with lines "
			"lw 2 title \"cumulative\"\n", d);
	else if (i == PLOT_HEATMAP)
		fprintf(f, "set xlabel \"forward call (token index)\"\nset ylabel \"layer\"\nset cblabel \"hit rate (%%)\"\n"
			"set cbrange [0:100]\nset palette defined (0 \"#b2182b\", 50 \"#f7f7f7\", 100 \"#2166ac\")\n"
			"set xrange [-0.5:%d.5]\nset yrange [-0.5:%d.5]\nunset key\nplot '%s.dat' matrix with image\n",
			t->n_calls - 1, t->n_layers - 1, d);
	else if (i == PLOT_TOKENS)
		fprintf(f, "set xlabel \"time since the run started (s)\"\nset ylabel \"tokens/s\"\nset yrange [0:*]\n"
			"plot '%s.dat' using 1:2 with points pt 7 ps 0.5 title \"each token\", '' using 1:3 with lines lw 2 "
			"title \"over the last 8 tokens\"\n", d);
	else if (i == PLOT_DISKS)
		fprintf(f, "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.85 "
			"border -1\nset yrange [0:%g]\nset xlabel \"copy: device\"\nset ylabel \"MB/s\"\nplot '%s.dat' "
			"using 2:xtic(1) title \"achieved (bytes / busy time)\", '' using 3 title \"probe (best O_DIRECT)\"\n",
			bars_top(i, a, plan), d);
	else
		fprintf(f, "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.85 "
			"border -1\nset yrange [0:%g]\nset xlabel \"part\"\nset ylabel \"ms per token\"\nplot '%s.dat' "
			"using 2:xtic(1) title \"plan, warm\", '' using 3 title \"plan, cold\", '' using 4 title "
			"\"measured\"\n", bars_top(i, a, plan), d);
}

static int write_data(const char *dir, int i, const prof_trace *t, const prof_attrib *a, const coli_plan *plan,
		      int *has, coli_err *e)
{
	char name[64];
	snprintf(name, sizeof(name), "%s.dat", prof_plots_all[i].name);
	FILE *f = open_in(dir, name, e);
	if (!f)
		return -1;
	*has = i == PLOT_ATTRIBUTION ? data_attribution(f, a)
	     : i == PLOT_HITRATE   ? data_hitrate(f, t)
	     : i == PLOT_HEATMAP   ? data_heatmap(f, t)
	     : i == PLOT_TOKENS    ? data_tokens(f, t)
	     : i == PLOT_DISKS     ? data_disks(f, a)
				   : data_predicted(f, a, plan);
	return close_ok(f, dir, name, e);
}

static int write_script(const char *dir, const prof_trace *t, const prof_attrib *a, const coli_plan *plan,
			const int has[PLOT_N], coli_err *e)
{
	static const char *const term[2][2] = {{"png", "pngcairo size 960,540 font \"sans,11\""},
					       {"svg", "svg size 960,540 dynamic font \"sans,11\""}};
	FILE *f = open_in(dir, "plots.gp", e);
	if (!f)
		return -1;
	fprintf(f, "# coli-profile's plots: gnuplot plots.gp in this folder redraws them\nset encoding utf8\n");
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < PLOT_N; i++)
			if (has[i]) {
				fprintf(f, "set terminal %s noenhanced\nset output '%s.%s.tmp'\n", term[k][1], prof_plots_all[i].name,
					term[k][0]);
				body(f, i, t, a, plan);
				fprintf(f, "unset output\n");
			}
	return close_ok(f, dir, "plots.gp", e);
}

int prof_gnuplot_run(const char *gnuplot, const char *dir, const char *script, coli_err *e)
{
	posix_spawn_file_actions_t fa;
	char *log = coli_path_join(dir, "gnuplot.log"), *argv[] = {(char *)gnuplot, (char *)script, NULL};
	pid_t pid;
	int st = 0, rc;
	if (!log)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawn_file_actions_addchdir_np(&fa, dir);
	rc = posix_spawn(&pid, gnuplot, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc == 0 && waitpid(pid, &st, 0) < 0)
		rc = -1;
	if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		rc = coli_errf(e, COLI_EIO, "%s failed drawing the plots (its messages: %s)", gnuplot, log);
	free(log);
	return rc;
}

int prof_plot_publish(const char *dir, const char *name, const char *ext, coli_err *e)
{
	char from[4200], to[4100];
	struct stat sb;
	snprintf(to, sizeof(to), "%s/%s.%s", dir, name, ext);
	snprintf(from, sizeof(from), "%s.tmp", to);
	if (stat(from, &sb) < 0 || sb.st_size == 0 || rename(from, to) < 0)
		return coli_errf(e, COLI_EIO, "%s: gnuplot did not write it", from);
	return 0;
}

int prof_plots_draw(const char *gnuplot, const char *dir, const prof_trace *t, const prof_attrib *a,
		    const coli_plan *plan, int made[PLOT_N], coli_err *e)
{
	int has[PLOT_N] = {0};
	for (int i = 0; i < PLOT_N; i++)
		if (made[i] = 0, write_data(dir, i, t, a, plan, &has[i], e) < 0)
			return -1;
	if (write_script(dir, t, a, plan, has, e) < 0 || prof_gnuplot_run(gnuplot, dir, "plots.gp", e) < 0)
		return -1;
	for (int i = 0; i < PLOT_N; i++)
		if (has[i]) {
			if (prof_plot_publish(dir, prof_plots_all[i].name, "png", e) < 0 ||
			    prof_plot_publish(dir, prof_plots_all[i].name, "svg", e) < 0)
				return -1;
			made[i] = 1;
		}
	return 0;
}
