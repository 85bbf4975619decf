/* policy/pins.c: which experts to pin, from the usage counts (policy.h). */
#include <stddef.h>

#include "policy.h"

/* Whether x comes after prev in the pin order (count descending, then id ascending). */
static int after(const double *counts, int x, int prev)
{
	return counts[x] < counts[prev] || (counts[x] == counts[prev] && x > prev);
}

/* Ascending ids with a strict comparison: among equal counts the lowest id wins. */
int coli_pin_next(const double *counts, int n_experts, int prev)
{
	int best = -1;
	for (int x = 0; x < n_experts; x++)
		if (counts[x] > 0 && (prev < 0 || after(counts, x, prev)) && (best < 0 || counts[x] > counts[best]))
			best = x;
	return best;
}

/* Each pick is the next in the order after the previous one: no scratch marks needed. */
int coli_pins_choose(const double *counts, int n_experts, int n, int *out)
{
	int got = 0;
	for (int x = -1; got < n && (x = coli_pin_next(counts, n_experts, x)) >= 0;)
		out[got++] = x;
	return got;
}

int coli_usage_known(const double *counts, int n_layers, int n_experts)
{
	int best = 0;
	for (int l = 0; counts && l < n_layers; l++) {
		int n = 0;
		for (int x = 0; x < n_experts; x++)
			n += counts[(size_t)l * (size_t)n_experts + (size_t)x] > 0;
		best = n > best ? n : best;
	}
	return best;
}
