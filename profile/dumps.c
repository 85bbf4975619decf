/* dumps.c: routing dumps of coli-run --dump-routing, read and checked (dumps.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "dumps.h"

const int32_t *rp_dump_at(const rp_dumps *d, const rp_dump *t, int l, int pos)
{
	return t->ids + ((size_t)l * (size_t)t->n + (size_t)pos) * (size_t)d->K;
}

int rp_listed(int32_t x, const int32_t *set, int n)
{
	for (int j = 0; j < n; j++)
		if (set[j] == x)
			return 1;
	return 0;
}

/* Every id in 0..E-1 and none twice in a position. */
static int check_ids(const rp_dumps *d, const rp_dump *t, coli_err *e)
{
	for (int l = 0; l < d->L; l++)
		for (int pos = 0; pos < t->n; pos++) {
			const int32_t *set = rp_dump_at(d, t, l, pos);
			for (int j = 0; j < d->K; j++) {
				if (set[j] < 0 || set[j] >= d->E)
					return coli_errf(e, COLI_EDATA, "%s: expert [layer %d][position %d][%d]: %d out of range "
							 "0..%d (--experts %d)", t->path, l, pos, j, set[j], d->E - 1, d->E);
				if (rp_listed(set[j], set, j))
					return coli_errf(e, COLI_EDATA, "%s: expert [layer %d][position %d][%d]: %d chosen twice "
							 "(--top-k %d?)", t->path, l, pos, j, set[j], d->K);
			}
		}
	return 0;
}

static int load_one(const rp_dumps *d, rp_dump *t, coli_err *e)
{
	char *buf;
	size_t len, row = (size_t)d->L * (size_t)d->K * sizeof(int32_t);
	if (coli_read_file(t->path, &buf, &len, e) < 0)
		return -1;
	t->ids = (int32_t *)(void *)buf;
	if (len == 0 || len % row != 0 || len / row > INT_MAX)
		return coli_errf(e, COLI_EDATA, "%s: size %zu is not a positive multiple of layers x top_k x 4 = %d x %d x 4 "
				 "= %zu (truncated, or not --layers %d --top-k %d)", t->path, len, d->L, d->K, row, d->L, d->K);
	t->n = (int)(len / row);
	if (t->n > INT_MAX / d->L)
		return coli_errf(e, COLI_EDATA, "%s: %d positions x %d layers exceed %d decode steps", t->path, t->n, d->L,
				 INT_MAX);
	return check_ids(d, t, e);
}

int rp_dumps_load(rp_dumps *d, int L, int E, int K, char *const *paths, int n, coli_err *e)
{
	*d = (rp_dumps){L, E, K, n, NULL};
	if (!(d->runs = coli_calloc((size_t)n, sizeof(*d->runs), e)))
		return -1;
	for (int r = 0; r < n; r++) {
		d->runs[r].path = paths[r];
		if (load_one(d, &d->runs[r], e) < 0)
			return rp_dumps_release(d), -1;
	}
	return 0;
}

void rp_dumps_release(rp_dumps *d)
{
	for (int r = 0; d->runs && r < d->n_runs; r++)
		free(d->runs[r].ids);
	free(d->runs);
	d->runs = NULL, d->n_runs = 0;
}
