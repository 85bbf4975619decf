/* progress.c: one progress line on stderr, only on a terminal, at most 4 updates a second. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "convert.h"

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void progress_update(uint64_t done, uint64_t total, int final)
{
	static double start, last;
	double t = mono();
	if (!isatty(2))
		return;
	if (start == 0)
		start = t;
	if (!final && t - last < 0.25)
		return;
	last = t;
	double gib = 1024.0 * 1024 * 1024, rate = (double)done / (t - start > 1e-3 ? t - start : 1e-3);
	double eta = rate > 0 ? (double)(total - done) / rate : 0;
	int width = 30, fill = total ? (int)((double)done / (double)total * width) : width;
	char bar[64];
	for (int i = 0; i < width; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[width] = 0;
	fprintf(stderr, "\r[%s] %.2f/%.2f GiB  %.2f GiB/s  ETA %d:%02d ", bar, (double)done / gib,
		(double)total / gib, rate / gib, (int)eta / 60, (int)eta % 60);
	if (final)
		fputc('\n', stderr);
	fflush(stderr);
}
