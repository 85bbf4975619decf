/* report.h: coli-profile report: a trace or bundle as report.md, report.html (images inlined) and
 * plots in a folder, the attribution table and verdict on stdout (or as JSON). */
#ifndef COLI_PROFILE_REPORT_H
#define COLI_PROFILE_REPORT_H

#include "attrib.h"
#include "error.h"
#include "inputs.h"

/* The markdown of the report of in (plots: which of prof_plots_all were drawn, NULL: none;
 * no_plot: why there are none, or NULL). Malloc'd; NULL when out of memory. */
char *prof_report_md(const prof_inputs *in, const prof_attrib *a, const int *plots, const char *no_plot);

/* Writes the report of in into dir (created if absent): plots (when gnuplot is on PATH; else a
 * note in *warn, malloc'd), report.md, report.html. */
int prof_report_write(const prof_inputs *in, const prof_attrib *a, const char *dir, char **warn, coli_err *e);

/* The attribution table and the verdict as markdown (what stdout shows). Malloc'd. */
char *prof_report_summary(const prof_inputs *in, const prof_attrib *a);

int prof_report_main(int argc, char **argv);

#endif
