/* plots.h: the report's plots, drawn by gnuplot as PNG and SVG: the attribution per token, the hit
 * rate over the calls, a layer x call hit heatmap, tokens/s over time, each disk's bandwidth
 * against the probe's, and predicted against measured when a plan is given. */
#ifndef COLI_PROFILE_PLOTS_H
#define COLI_PROFILE_PLOTS_H

#include "attrib.h"
#include "error.h"
#include "plan.h"
#include "tracesum.h"

enum { PLOT_ATTRIBUTION, PLOT_HITRATE, PLOT_HEATMAP, PLOT_TOKENS, PLOT_DISKS, PLOT_PREDICTED, PLOT_N };

typedef struct prof_plot {
	const char *name;    /* file stem: "attribution" gives attribution.png and .svg */
	const char *title;   /* its title (also the caption in the report) */
} prof_plot;
extern const prof_plot prof_plots_all[PLOT_N];

/* The gnuplot program on PATH, into path (size n); 0, or -1 when there is none. */
int prof_gnuplot_find(const char *path_env, char *path, size_t n);

/* gnuplot (at the path given) runs script in dir, its messages in dir/gnuplot.log; -1 with e when
 * it fails. */
int prof_gnuplot_run(const char *gnuplot, const char *dir, const char *script, coli_err *e);

/* dir/NAME.EXT.tmp (what a script's "set output" wrote) renamed to NAME.EXT; -1 with e when
 * gnuplot left it missing or empty. */
int prof_plot_publish(const char *dir, const char *name, const char *ext, coli_err *e);

/* Draws every plot that has data (the predicted one only with plan) into dir as NAME.png and
 * NAME.svg with gnuplot at the path given (its data and script as NAME.dat and plots.gp, its
 * messages in gnuplot.log); made[i] set for each drawn. -1 with e when a file cannot be written or
 * gnuplot fails (e names gnuplot.log). */
int prof_plots_draw(const char *gnuplot, const char *dir, const prof_trace *t, const prof_attrib *a,
		    const coli_plan *plan, int made[PLOT_N], coli_err *e);

#endif
