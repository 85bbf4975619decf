/* probe_rate.c: the disk probe's sustained and burst rates from a reader's completions
 * (probe_rate.h). */
#include <stdlib.h>

#include "probe_rate.h"

void probe_window_add(probe_window *w, double t, double bytes)
{
	w->all += bytes;
	w->last = t > w->last ? t : w->last;
	if (t < w->cut)
		return;
	if (w->first < 0) {
		w->first = t;
		return;
	}
	w->after += bytes;
	w->n_after++;
}

/* Runs r's reads from now into w, counting from cut on (cut_share of the window). */
static int run(const probe_reader *r, int qd, long limit, double seconds, double cut_share, probe_window *w,
	       coli_err *e)
{
	w->t0 = w->last = r->now(r->ctx);
	w->cut = w->t0 + seconds * cut_share;
	w->first = -1, w->all = w->after = 0, w->n_after = 0;
	return r->read(r->ctx, qd, limit, w->t0 + seconds, w, e);
}

double probe_sustained(const probe_reader *r, int qd, double seconds, coli_err *e)
{
	probe_window w;
	if (run(r, qd, 0, seconds, 1.0 / 3, &w, e) < 0)
		return -1;
	if (w.n_after >= 1 && w.last > w.first)
		return w.after / (w.last - w.first);
	return w.last > w.t0 ? w.all / (w.last - w.t0) : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double probe_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

double probe_bursts(const probe_reader *r, int records, double sustained, coli_err *e)
{
	double rate[PROBE_BURST_IDLES * PROBE_BURST_REPEATS], bytes = records * r->record;
	int n = 0;
	r->idle(r->ctx, PROBE_SETTLE_S);
	for (int j = 0; j < PROBE_BURST_REPEATS; j++)
		for (int i = 0; i < PROBE_BURST_IDLES; i++) { /* the idle times alternate: drift meets each alike */
			double idle = (double)(1 << i) * bytes / sustained;
			probe_window w;
			r->idle(r->ctx, idle > PROBE_BURST_IDLE_MIN ? idle : PROBE_BURST_IDLE_MIN);
			if (run(r, records, records, 1e9, 1, &w, e) < 0)
				return -1;
			rate[n++] = w.last > w.t0 ? w.all / (w.last - w.t0) : 0;
		}
	return probe_median(rate, n);
}
