/* progress.c: coli-plan probe's progress line on stderr: what the measurements (probe_cpu.c,
 * probe_disk.c) report as they go, shown only when the command asked for it (probe.c). */
#include <stdarg.h>
#include <stdio.h>

#include "clock.h"
#include "probe_measure.h"

static int showing;

void probe_progress_show(int on)
{
	showing = on;
}

int probe_progress_showing(void)
{
	return showing;
}

/* A new phase shows at once; updates of one phase (the same fmt) at most 4 times a second. */
void probe_progress(const char *fmt, ...)
{
	static double last;
	static const char *last_fmt;
	double t = coli_now();
	if (!showing || (fmt == last_fmt && t - last < 0.25))
		return;
	last = t, last_fmt = fmt;
	va_list ap;
	va_start(ap, fmt);
	fputs("\r\033[Kcoli-plan probe: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

void probe_progress_done(void)
{
	if (showing)
		fputs("\r\033[K", stderr);
}
