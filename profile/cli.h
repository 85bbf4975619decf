/* cli.h: what coli-profile's subcommands share on their command line: a failure's message and
 * status, the median, min and max of their figures (the usage text: tool/tool.h). */
#ifndef PROF_CLI_H
#define PROF_CLI_H

#include <stdio.h>

#include "error.h"

/* "coli-profile: MESSAGE" on stderr; e's exit status. */
int prof_fail(const coli_err *e);
/* s as one shell word: as it is when it holds only characters no shell treats specially, else
 * in single quotes (a ' as '\''). */
void prof_shell_word(FILE *f, const char *s);
/* The median, min and max of v[0..n), n >= 1, into out[0..2] (v sorted here). */
void prof_stats(double *v, int n, double out[3]);

#endif
