/* test_prefetch.c: --prefetch auto's decisions (run/prefetch.c) on made-up step timings: the
 * probe's alternation, the faster mode held, holds doubling while a probe confirms them and
 * reset by a change, steps of several tokens, empty steps ignored. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run.h"
#include "t.h"

static int near(double a, double b)
{
	return fabs(a - b) < 1e-12;
}

/* Runs n one-token steps, each mode taking its seconds; the modes used, as '1'/'0', into seq. */
static void steps(prefetch_auto *a, int n, double on_s, double off_s, char *seq)
{
	for (int i = 0; i < n; i++) {
		int on = a->on;
		if (seq)
			seq[i] = on ? '1' : '0', seq[i + 1] = 0;
		prefetch_auto_step(a, on ? on_s : off_s, 1);
	}
}

int main(void)
{
	prefetch_auto a;
	char seq[600];
	prefetch_auto_init(&a);
	T_CHECK("starts probing with prediction on", a.on == 1 && a.probing && a.probes == 0, "on %d probing %d", a.on,
		a.probing);
	steps(&a, 16, 0.10, 0.12, seq);
	T_CHECK("a probe alternates two tokens at a time until each mode has 8",
		!strcmp(seq, "1100110011001100") && a.probes == 1, "%s, probes %d", seq, a.probes);
	T_CHECK("the faster mode (on) is held, PREFETCH_HOLD0 tokens", a.on == 1 && !a.probing && a.left == PREFETCH_HOLD0,
		"on %d probing %d left %d", a.on, a.probing, a.left);
	T_CHECK("the probe's seconds per token", near(a.last_s[1], 0.10) && near(a.last_s[0], 0.12), "%g %g", a.last_s[1],
		a.last_s[0]);
	steps(&a, PREFETCH_HOLD0, 0.10, 0.12, seq);
	T_CHECK("after the hold it probes again, the other mode first", a.probing && a.on == 0, "probing %d on %d", a.probing,
		a.on);
	steps(&a, 16, 0.10, 0.12, seq);
	T_CHECK("a probe that confirms the mode doubles the hold", a.probes == 2 && a.on == 1 && a.left == 2 * PREFETCH_HOLD0 &&
			a.switches == 0, "probes %d on %d left %d switches %d", a.probes, a.on, a.left, a.switches);
	steps(&a, 2 * PREFETCH_HOLD0 + 16, 0.15, 0.12, NULL);
	T_CHECK("prediction that got slower is turned off, the hold reset",
		a.probes == 3 && a.on == 0 && a.left == PREFETCH_HOLD0 && a.switches == 1, "probes %d on %d left %d switches %d",
		a.probes, a.on, a.left, a.switches);
	int before = a.tokens[0] + a.tokens[1];
	T_CHECK("every token counted in its mode", before == 16 + PREFETCH_HOLD0 + 16 + 2 * PREFETCH_HOLD0 + 16, "%d", before);
	prefetch_auto_step(&a, 1.0, 0);
	T_CHECK("a step of no tokens changes nothing", a.tokens[0] + a.tokens[1] == before && a.left == PREFETCH_HOLD0,
		"tokens %d left %d", a.tokens[0] + a.tokens[1], a.left);

	steps(&a, 1500, 0.15, 0.12, NULL); /* holds double up to the cap while off stays faster */
	T_CHECK("holds stop growing at PREFETCH_HOLD_MAX", a.hold == PREFETCH_HOLD_MAX && a.on == 0, "hold %d on %d", a.hold,
		a.on);

	prefetch_auto_init(&a); /* drafting: steps of 3 tokens */
	for (int i = 0; i < 6; i++)
		prefetch_auto_step(&a, a.on ? 0.3 : 0.6, 3);
	T_CHECK("steps of several tokens: per-token means, each mode its 8 tokens", a.probes == 1 && a.on == 1 &&
			near(a.last_s[1], 0.1) && near(a.last_s[0], 0.2), "probes %d on %d %g %g", a.probes, a.on, a.last_s[1],
		a.last_s[0]);
	prefetch_auto_init(&a);
	steps(&a, 16, 0.1, 0.1, NULL);
	T_CHECK("a tie keeps prediction on", a.on == 1 && a.probes == 1, "on %d", a.on);
	T_EXIT();
}
