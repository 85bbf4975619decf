/* tool.h: what every tool's command line prints the same way (tools only: the libraries never
 * print). Header-only; tools include it, the libraries never (t0020). */
#ifndef COLI_TOOL_H
#define COLI_TOOL_H

#include <stdio.h>
#include <stdlib.h>

#include "options.h"

/* --help on stdout (msg NULL), or "<tool>: <msg>" and --help on stderr (a usage error); returns
 * the exit status: 0, or 2 for the usage error. */
static inline int tool_usage(const char *tool, const char *msg, const char *const *synopsis, const coli_option *opts)
{
	char *text = coli_opts_usage(tool, msg, synopsis, opts);
	FILE *to = msg ? stderr : stdout;
	if (text)
		fputs(text, to);
	else
		fprintf(to, "%s: out of memory\n", tool);
	free(text);
	return msg ? 2 : 0;
}

#endif
