/* collapse.c: the routing collapse table of routing dumps (collapse.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "collapse.h"

static int cmp_desc(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x < y) - (x > y);
}

typedef struct collapse_row {
	double distinct, overlap, share; /* sums over the layers */
	int least;
} collapse_row;

/* One layer of run t into *row; cnt is E ints of scratch. */
static void add_layer(const rp_dumps *d, const rp_dump *t, int l, int *cnt, collapse_row *row)
{
	int d_l = 0, in_top = 0, top = (d->E + 9) / 10;
	memset(cnt, 0, (size_t)d->E * sizeof(int));
	for (int pos = 0; pos < t->n; pos++) {
		const int32_t *set = rp_dump_at(d, t, l, pos);
		for (int j = 0; j < d->K; j++) {
			cnt[set[j]]++;
			row->overlap += pos > 0 && rp_listed(set[j], rp_dump_at(d, t, l, pos - 1), d->K);
		}
	}
	for (int x = 0; x < d->E; x++)
		d_l += cnt[x] > 0;
	qsort(cnt, (size_t)d->E, sizeof(int), cmp_desc);
	for (int x = 0; x < top; x++)
		in_top += cnt[x];
	row->distinct += d_l, row->least = d_l < row->least ? d_l : row->least;
	row->share += (double)in_top / ((double)t->n * d->K);
}

int rp_collapse_print(const rp_dumps *d, coli_err *e)
{
	int *cnt = coli_calloc((size_t)d->E, sizeof(int), e);
	if (!cnt)
		return -1;
	printf("| run | trace | positions | distinct experts/layer (mean, min) | prev-token overlap | top-10%% share |\n");
	printf("|---:|---|---:|---:|---:|---:|\n");
	for (int r = 0; r < d->n_runs; r++) {
		const rp_dump *t = &d->runs[r];
		collapse_row row = {0, 0, 0, d->E};
		for (int l = 0; l < d->L; l++)
			add_layer(d, t, l, cnt, &row);
		printf("| %d | %s | %d | %.1f, %d of %d | %.3f | %.3f |\n", r + 1, t->path, t->n, row.distinct / d->L,
		       row.least, d->E, t->n > 1 ? row.overlap / ((double)d->L * (t->n - 1) * d->K) : 0.0, row.share / d->L);
	}
	free(cnt);
	return 0;
}
