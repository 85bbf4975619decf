/* test_pool.c: the kernels' thread pool (engine/kernels/pool.h): every index of a range run once,
 * pieces starting at multiples of the unit and at most the grain, smaller ones toward the end,
 * on 1 to 4 threads and ranges that end inside a unit. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/pool.h"
#include "t.h"

#define MAX_TOTAL 5000
#define MAX_PIECES 4096

typedef struct seen {
	_Atomic int hits[MAX_TOTAL];
	_Atomic int n;
	int64_t b[MAX_PIECES], e[MAX_PIECES];
} seen;

static void note(void *arg, int64_t b, int64_t e)
{
	seen *s = arg;
	for (int64_t i = b; i < e; i++)
		atomic_fetch_add(&s->hits[i], 1);
	int k = atomic_fetch_add(&s->n, 1);
	if (k < MAX_PIECES)
		s->b[k] = b, s->e[k] = e;
}

/* One range: each index once; on one thread one piece, else the pieces aligned to the unit (0 or
 * above grain: grain) and within grain; *smaller: some piece other than the one ending the range
 * is shorter than grain. */
static int check(kpool *P, int threads, int64_t total, int64_t grain, int64_t unit, int *smaller)
{
	static seen s;
	for (int64_t i = 0; i < total; i++)
		atomic_store(&s.hits[i], 0);
	atomic_store(&s.n, 0);
	kpool_for(P, threads, total, grain, unit, note, &s);
	int ok = atomic_load(&s.n) <= MAX_PIECES;
	for (int64_t i = 0; i < total; i++)
		ok &= atomic_load(&s.hits[i]) == 1;
	*smaller = 0;
	if (threads == 1)
		return ok && atomic_load(&s.n) == 1;
	unit = unit > 0 && unit <= grain ? unit : grain;
	for (int k = 0; ok && k < atomic_load(&s.n); k++) {
		ok &= s.b[k] % unit == 0 && s.e[k] - s.b[k] >= 1 && s.e[k] - s.b[k] <= grain;
		ok &= s.e[k] == total || (s.e[k] - s.b[k]) % unit == 0;
		*smaller |= s.e[k] != total && s.e[k] - s.b[k] < grain;
	}
	return ok;
}

int main(void)
{
	kpool *P = kpool_new();
	static const int64_t totals[] = {1, 15, 16, 17, 100, 1000, 4099, MAX_TOTAL};
	int ok = P != NULL, shrank = 0, bad_threads = 0;
	int64_t bad_total = 0;
	for (int threads = 1; ok && threads <= 4; threads++)
		for (size_t i = 0; ok && i < sizeof(totals) / sizeof(totals[0]); i++) {
			int64_t total = totals[i], unit = 16, grain = (total + 4 * threads - 1) / (4 * threads);
			grain = (grain + unit - 1) / unit * unit;
			int smaller = 0;
			ok &= check(P, threads, total, grain, unit, &smaller);
			shrank |= threads > 1 && total >= 1000 && smaller;
			if (!ok)
				bad_threads = threads, bad_total = total;
		}
	T_CHECK("pool: every index once, pieces aligned to the unit and at most the grain", ok,
		"%d threads, a range of %lld", bad_threads, (long long)bad_total);
	T_CHECK("pool: pieces shorter than the grain toward a long range's end", shrank, "every piece was the grain");
	int smaller = 0;
	T_CHECK("pool: a unit of 0 or above the grain means pieces of the grain",
		P && check(P, 2, 1000, 64, 0, &smaller) && !smaller && check(P, 2, 1000, 64, 128, &smaller) && !smaller,
		"smaller pieces %d", smaller);
	kpool_free(P);
	T_EXIT();
}
