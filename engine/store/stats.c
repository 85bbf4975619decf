/* store/stats.c: the difference of two statistics snapshots of one store. */
#include "store.h"

void coli_store_stats_sub(const coli_store_stats *a, const coli_store_stats *b, coli_store_stats *d)
{
	*d = *a;
	d->hits -= b->hits, d->misses -= b->misses, d->pin_hits -= b->pin_hits, d->evictions -= b->evictions;
	d->bytes_read -= b->bytes_read, d->read_s -= b->read_s;
	d->predicted -= b->predicted, d->predict_hits -= b->predict_hits;
	d->predict_wasted_bytes -= b->predict_wasted_bytes, d->coalesced -= b->coalesced;
	for (int i = 0; i < a->n_disks && i < b->n_disks; i++) {
		d->disks[i].bytes_read -= b->disks[i].bytes_read;
		d->disks[i].busy_s -= b->disks[i].busy_s;
		d->disks[i].failures -= b->disks[i].failures;
	}
}
