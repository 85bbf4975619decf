/* policy/shares.c: each copy's share of the bytes read, from the copies' sustained rates: the
 * rule coli-plan's cost model and the streaming store's choice of copy share (policy.h). */
#include "policy.h"

/* The rate a copy counts at: its own, else the mean of the known ones (1 when none is). */
static double rate_of(int n, const double *bps, int i)
{
	if (bps[i] > 0)
		return bps[i];
	double sum = 0;
	int known = 0;
	for (int j = 0; j < n; j++)
		if (bps[j] > 0)
			sum += bps[j], known++;
	return known ? sum / known : 1;
}

/* Water-filling: the copies whose rate share exceeds what they hold take what they hold; the
 * rest is spread again over the others, until no cap binds (at most n rounds). */
void coli_copy_shares(int n, const double *bps, const double *held, double *share)
{
	unsigned capped = 0;
	for (int round = 0; round <= n; round++) {
		double left = 1, rates = 0;
		for (int i = 0; i < n; i++)
			if (capped & (1u << i))
				left -= held[i];
			else
				rates += rate_of(n, bps, i);
		int more = 0;
		for (int i = 0; i < n; i++) {
			if (capped & (1u << i)) {
				share[i] = held[i];
				continue;
			}
			share[i] = rates > 0 && left > 0 ? left * rate_of(n, bps, i) / rates : 0;
			if (held && held[i] < share[i])
				capped |= 1u << i, more = 1;
		}
		if (!more)
			return;
	}
}
