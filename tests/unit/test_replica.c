/* test_replica.c: which copy of experts.bin a read goes to (engine/store/replica.c). */
#include <string.h>

#include "store/replica.h"
#include "t.h"

#define MiB (1ull << 20)

/* Two copies that have delivered: a at bw_a bytes/s, b at bw_b, nothing in flight. */
static void two(replica_set *rs, double bw_a, double bw_b)
{
	memset(rs, 0, sizeof(*rs));
	rs->n = 2, rs->n_records = 16;
	rs->r[0].d.bytes_read = 100 * MiB, rs->r[0].d.busy_s = (double)(100 * MiB) / bw_a;
	rs->r[1].d.bytes_read = 100 * MiB, rs->r[1].d.busy_s = (double)(100 * MiB) / bw_b;
}

/* Issues n reads of len bytes, each to the copy picked; counts per copy. */
static void spread(replica_set *rs, int n, uint64_t len, int *count)
{
	for (int i = 0; i < n; i++) {
		int r = replica_pick(rs, 0, len, 0);
		replica_issue(rs, r, len, 0);
		count[r]++;
	}
}

int main(void)
{
	replica_set rs;
	int count[2] = {0, 0};

	two(&rs, 300e6, 150e6);
	spread(&rs, 30, 4 * MiB, count);
	T_CHECK("reads in flight split by bandwidth (300 vs 150 MB/s: 2 to 1)", count[0] == 20 && count[1] == 10,
		"%d and %d of 30", count[0], count[1]);

	two(&rs, 150e6, 150e6);
	T_CHECK("equal copies, nothing in flight: the first", replica_pick(&rs, 0, MiB, 0) == 0, "picked %d",
		replica_pick(&rs, 0, MiB, 0));
	replica_issue(&rs, 0, MiB, 0);
	T_CHECK("equal copies, one busy: the other", replica_pick(&rs, 0, MiB, 0) == 1, "picked %d",
		replica_pick(&rs, 0, MiB, 0));
	replica_done(&rs, 0, MiB, 1, 0);
	T_CHECK("a read done frees its copy", rs.r[0].issued == 0 && rs.r[0].inflight == 0 && replica_pick(&rs, 0, MiB, 0) == 0,
		"issued %llu, inflight %d", (unsigned long long)rs.r[0].issued, rs.r[0].inflight);

	two(&rs, 300e6, 150e6);
	replica_mark_bad(&rs, 0, 5);
	T_CHECK("a copy bad for a record is avoided for it", replica_pick(&rs, 5, MiB, 0) == 1, "picked %d",
		replica_pick(&rs, 5, MiB, 0));
	T_CHECK("... and only for it", replica_pick(&rs, 6, MiB, 0) == 0, "picked %d", replica_pick(&rs, 6, MiB, 0));
	replica_mark_bad(&rs, 1, 5);
	T_CHECK("every copy bad: still one (the faster)", replica_pick(&rs, 5, MiB, 0) == 0, "picked %d",
		replica_pick(&rs, 5, MiB, 0));
	T_CHECK("tried copies are skipped; all tried: -1",
		replica_pick(&rs, 6, MiB, 1u) == 1 && replica_pick(&rs, 6, MiB, 3u) == -1, "picked %d, %d",
		replica_pick(&rs, 6, MiB, 1u), replica_pick(&rs, 6, MiB, 3u));
	T_CHECK("failures counted", rs.r[0].d.failures == 1 && rs.r[1].d.failures == 1, "%llu, %llu",
		(unsigned long long)rs.r[0].d.failures, (unsigned long long)rs.r[1].d.failures);
	free(rs.r[0].bad), free(rs.r[1].bad);

	memset(&rs, 0, sizeof(rs));
	rs.n = 2, rs.n_records = 1;
	rs.r[0].d.bytes_read = MiB, rs.r[0].d.busy_s = 1e-3; /* 1 GB/s, but under 8 MiB: the prior */
	rs.r[1].d.bytes_read = 0;
	replica_issue(&rs, 0, MiB, 0);
	T_CHECK("before 8 MiB delivered a copy counts at the 1 GB/s prior", replica_pick(&rs, 0, MiB, 0) == 1,
		"picked %d", replica_pick(&rs, 0, MiB, 0));
	T_EXIT();
}
