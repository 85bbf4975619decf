/* prefetch.c: --prefetch auto: the next-layer prediction kept on or off as measured decode steps
 * say (run.h). */
#include "run.h"

void prefetch_auto_init(prefetch_auto *a)
{
	*a = (prefetch_auto){.on = 1, .probing = 1, .held = 1, .hold = PREFETCH_HOLD0};
}

/* Both modes have their tokens: the faster by mean seconds per token is held, for twice as long
 * as before when it was already held, for PREFETCH_HOLD0 tokens after a change. */
static void end_probe(prefetch_auto *a)
{
	for (int m = 0; m < 2; m++)
		a->last_s[m] = a->s[m] / a->n[m];
	int best = a->last_s[1] <= a->last_s[0], first = a->probes++ == 0;
	if (!first && best == a->held)
		a->hold = a->hold * 2 < PREFETCH_HOLD_MAX ? a->hold * 2 : PREFETCH_HOLD_MAX;
	else if (!first)
		a->hold = PREFETCH_HOLD0, a->switches++;
	a->held = a->on = best;
	a->probing = 0, a->left = a->hold;
}

int prefetch_auto_step(prefetch_auto *a, double seconds, int tokens)
{
	if (tokens <= 0)
		return a->on;
	a->tokens[a->on] += tokens;
	if (!a->probing) {
		if ((a->left -= tokens) <= 0) { /* probe again, the other mode first */
			a->probing = 1, a->slice = 0, a->on = !a->held;
			a->s[0] = a->s[1] = 0, a->n[0] = a->n[1] = 0;
		}
		return a->on;
	}
	a->s[a->on] += seconds, a->n[a->on] += tokens, a->slice += tokens;
	if (a->n[0] >= PREFETCH_PROBE && a->n[1] >= PREFETCH_PROBE)
		end_probe(a);
	else if ((a->slice >= PREFETCH_SLICE || a->n[a->on] >= PREFETCH_PROBE) && a->n[!a->on] < PREFETCH_PROBE)
		a->on = !a->on, a->slice = 0;
	return a->on;
}
