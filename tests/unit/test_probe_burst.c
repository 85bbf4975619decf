/* test_probe_burst.c: the disk probe's rates (plan/probe_rate.c) on simulated devices, a virtual
 * clock in place of the disk: a throttled one (a token bucket: an allowance read at the device's
 * own speed, then the throttle's rate, as blk-throttle on a loop device or a cloud volume) and a
 * plain one. The probe's schedule as probe_disk.c runs it (queue depths 1, 4, 8, 16 back to back
 * from a full allowance, then the bursts) must report the throttle's rate at every depth and
 * the device's speed for the bursts, each within 3%; the whole window, what the probe counted
 * before, reads the allowance into the first depth's rate. */
#include <math.h>
#include <stdio.h>

#include "probe_rate.h"
#include "t.h"

#define RECORD 2510848.0 /* a Qwen3-30B-A3B int4 expert record */

/* The device: bytes served in order at `raw` bytes/s while the bucket holds tokens, else at
 * `rate`; the bucket (`cap` bytes) refills at `rate`. rate >= raw: no throttle. */
typedef struct sim {
	double now, tokens, cap, rate, raw;
} sim;

/* Serves b bytes from s->now on. */
static void serve(sim *s, double b)
{
	if (s->rate >= s->raw) {
		s->now += b / s->raw;
		return;
	}
	double fast = s->raw * s->tokens / (s->raw - s->rate); /* bytes read before the bucket is empty */
	if (b <= fast) {
		s->now += b / s->raw;
		s->tokens -= b * (s->raw - s->rate) / s->raw;
		return;
	}
	s->now += s->tokens / (s->raw - s->rate) + (b - fast) / s->rate;
	s->tokens = 0;
}

static double sim_now(void *ctx)
{
	return ((sim *)ctx)->now;
}

static void sim_idle(void *ctx, double seconds)
{
	sim *s = ctx;
	s->now += seconds;
	s->tokens = fmin(s->cap, s->tokens + s->rate * seconds);
}

/* qd lanes: every read in flight is served in order, a lane starts another on each completion
 * before the deadline, as probe_disk.c's lanes do. */
static int sim_read(void *ctx, int qd, long limit, double deadline, probe_window *w, coli_err *e)
{
	(void)e;
	sim *s = ctx;
	long issued = limit > 0 && limit < qd ? limit : qd;
	for (long done = 0; done < issued; done++) {
		serve(s, RECORD);
		probe_window_add(w, s->now, RECORD);
		if ((limit <= 0 || issued < limit) && s->now < deadline)
			issued++;
	}
	return 0;
}

typedef struct figures {
	double qd[4], burst, old_qd1;
} figures;

/* The probe's schedule on s: depths 1, 4, 8, 16 for `seconds` each, the bursts after them at the
 * best depth's rate; old_qd1, what the probe counted before at depth 1 (the whole window), on a
 * second device in the same state. */
static const int qds[4] = {1, 4, 8, 16};

static figures probe(sim s, double seconds)
{
	probe_reader r = {&s, RECORD, sim_now, sim_idle, sim_read};
	coli_err e = {0, ""};
	figures f;
	sim old = s;
	probe_window w = {.t0 = old.now, .cut = old.now, .first = -1, .last = old.now};
	sim_read(&old, 1, 0, old.now + seconds, &w, &e);
	f.old_qd1 = w.all / (w.last - w.t0);
	double best = 0;
	for (int i = 0; i < 4; i++) {
		f.qd[i] = probe_sustained(&r, qds[i], seconds, &e);
		best = f.qd[i] > best ? f.qd[i] : best;
	}
	f.burst = probe_bursts(&r, 4, best, &e);
	return f;
}

static int near(double got, double want, double tol)
{
	return fabs(got / want - 1) <= tol;
}

int main(void)
{
	/* blk-throttle at 400 MB/s on a 2 GB/s device, an allowance of 0.25 s at the rate (100 MB) */
	sim thr = {.now = 100, .cap = 100e6, .tokens = 100e6, .rate = 400e6, .raw = 2e9};
	figures f = probe(thr, 0.5);
	for (int i = 0; i < 4; i++) {
		char name[128];
		snprintf(name, sizeof(name), "throttled: the sustained rate at queue depth %d is the throttle's (400 MB/s)",
			 qds[i]);
		T_CHECK(name, near(f.qd[i], 400e6, 0.03), "%.0f MB/s", f.qd[i] / 1e6);
	}
	T_CHECK("throttled: bursts after idle time read at the device's speed (2 GB/s)", near(f.burst, 2e9, 0.03),
		"%.0f MB/s", f.burst / 1e6);
	T_CHECK("throttled: the whole window (the probe before) reads the allowance into depth 1's rate: 30% high or more",
		f.old_qd1 > 1.3 * 400e6, "%.0f MB/s", f.old_qd1 / 1e6);

	/* the same throttle with a blk-throttle slice's allowance (0.1 s at the rate) */
	sim slice = {.now = 100, .cap = 40e6, .tokens = 40e6, .rate = 400e6, .raw = 2e9};
	f = probe(slice, 0.5);
	T_CHECK("slice allowance: depth 1's rate is the throttle's; the bursts the device's",
		near(f.qd[0], 400e6, 0.03) && near(f.burst, 2e9, 0.03) && f.old_qd1 > 1.1 * 400e6,
		"%.0f, %.0f MB/s; whole window %.0f", f.qd[0] / 1e6, f.burst / 1e6, f.old_qd1 / 1e6);

	/* a plain disk: no throttle, bursts no faster than it sustains */
	sim plain = {.now = 100, .rate = 1e12, .raw = 1.5e9};
	f = probe(plain, 0.5);
	T_CHECK("plain disk: sustained and bursts at its speed (burst factor 1)",
		near(f.qd[0], 1.5e9, 0.03) && near(f.qd[3], 1.5e9, 0.03) && near(f.burst, 1.5e9, 0.03),
		"%.0f, %.0f, burst %.0f MB/s", f.qd[0] / 1e6, f.qd[3] / 1e6, f.burst / 1e6);

	/* a window shorter than two reads after its first third: the whole window, never 0 */
	sim slow = {.now = 100, .rate = 1e12, .raw = 50e6};
	f = probe(slow, 0.02);
	T_CHECK("a window of few reads: the rate of the whole window", near(f.qd[0], 50e6, 0.03) && f.qd[3] > 0,
		"%.1f MB/s", f.qd[0] / 1e6);

	double v[5] = {5, 1, 4, 2, 3};
	T_CHECK("probe_median", probe_median(v, 5) == 3, "%g", v[2]);
	T_EXIT();
}
