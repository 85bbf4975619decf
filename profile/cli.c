/* cli.c: the subcommands' failure messages and figures' statistics (cli.h). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int prof_fail(const coli_err *e)
{
	fprintf(stderr, "coli-profile: %s\n", e->msg);
	return coli_err_exit_status(e);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void prof_stats(double *v, int n, double out[3])
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	out[0] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, out[1] = v[0], out[2] = v[n - 1];
}

void prof_shell_word(FILE *f, const char *s)
{
	if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-") == strlen(s)) {
		fputs(s, f);
		return;
	}
	fputc('\'', f);
	for (; *s; s++)
		*s == '\'' ? fputs("'\\''", f) : fputc(*s, f);
	fputc('\'', f);
}
