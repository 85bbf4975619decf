/* test_replica.c: which copy of experts.bin a read goes to (engine/store/replica.c): the shares
 * coli-plan predicts (coli_copy_shares), kept by the store's choice, and the copies' sustained
 * rates learned from reads through a throttle's bursts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../plan/planner.h"
#include "policy.h"
#include "store/replica.h"
#include "t.h"

#define MiB (1ull << 20)
#define MB 1e6

/* n full copies at sustained rates bps (0: unknown), nothing issued yet. */
static void copies(replica_set *rs, int n, const double *bps)
{
	memset(rs, 0, sizeof(*rs));
	rs->n = n, rs->n_records = 16;
	for (int i = 0; i < n; i++)
		rs->r[i].d.rate_bps = bps ? bps[i] : 0, rs->r[i].sustained = bps && bps[i] > 0;
	replicas_share(rs);
}

/* Issues n reads of len bytes at time 0, each to the copy picked; counts per copy. */
static void spread(replica_set *rs, int n, uint64_t len, int *count)
{
	for (int i = 0; i < n; i++) {
		int r = replica_pick(rs, 0, len, 0);
		replica_issue(rs, r, len, 0);
		count[r]++;
	}
}

static void shares_rule(void)
{
	double s[3];
	coli_copy_shares(3, (double[]){400 * MB, 200 * MB, 200 * MB}, NULL, s);
	T_CHECK("shares: by the sustained rates", fabs(s[0] - 0.5) < 1e-12 && fabs(s[1] - 0.25) < 1e-12, "%g %g %g", s[0],
		s[1], s[2]);
	coli_copy_shares(3, (double[]){400 * MB, 200 * MB, 200 * MB}, (double[]){1, 0.1, 1}, s);
	T_CHECK("shares: a partial copy capped at what it holds, the rest by rate",
		fabs(s[1] - 0.1) < 1e-12 && fabs(s[0] - 0.6) < 1e-12 && fabs(s[2] - 0.3) < 1e-12, "%g %g %g", s[0], s[1],
		s[2]);
	coli_copy_shares(2, (double[]){300 * MB, 0}, NULL, s);
	T_CHECK("shares: an unknown rate counts as the others' mean", fabs(s[0] - 0.5) < 1e-12, "%g %g", s[0], s[1]);
	coli_copy_shares(2, (double[]){0, 0}, NULL, s);
	T_CHECK("shares: none known: equal", s[0] == 0.5 && s[1] == 0.5, "%g %g", s[0], s[1]);
}

static void pick_rules(void)
{
	replica_set rs;
	int count[2] = {0, 0};

	copies(&rs, 2, (double[]){300 * MB, 150 * MB});
	spread(&rs, 30, 4 * MiB, count);
	T_CHECK("reads split by the shares (300 vs 150 MB/s: 2 to 1)", count[0] == 20 && count[1] == 10, "%d and %d of 30",
		count[0], count[1]);

	copies(&rs, 2, (double[]){150 * MB, 150 * MB});
	T_CHECK("equal copies, nothing issued: the first", replica_pick(&rs, 0, MiB, 0) == 0, "picked %d",
		replica_pick(&rs, 0, MiB, 0));
	replica_issue(&rs, 0, MiB, 0);
	T_CHECK("equal copies, one read issued: the other", replica_pick(&rs, 0, MiB, 0) == 1, "picked %d",
		replica_pick(&rs, 0, MiB, 0));
	replica_done(&rs, 0, MiB, 1, 0.001);
	T_CHECK("a read done is counted", rs.r[0].issued == 0 && rs.r[0].inflight == 0 && rs.r[0].d.bytes_read == MiB,
		"issued %llu, inflight %d", (unsigned long long)rs.r[0].issued, rs.r[0].inflight);
	replica_issue(&rs, 1, MiB, 10);
	T_CHECK("reads long past count no more against their copy", replica_pick(&rs, 0, MiB, 0) == 0, "picked %d",
		replica_pick(&rs, 0, MiB, 0));

	copies(&rs, 2, (double[]){300 * MB, 150 * MB});
	replica_mark_bad(&rs, 0, 5);
	T_CHECK("a copy bad for a record is avoided for it", replica_pick(&rs, 5, MiB, 0) == 1, "picked %d",
		replica_pick(&rs, 5, MiB, 0));
	T_CHECK("... and only for it", replica_pick(&rs, 6, MiB, 0) == 0, "picked %d", replica_pick(&rs, 6, MiB, 0));
	replica_mark_bad(&rs, 1, 5);
	T_CHECK("every copy bad: still one (the larger share)", replica_pick(&rs, 5, MiB, 0) == 0, "picked %d",
		replica_pick(&rs, 5, MiB, 0));
	T_CHECK("tried copies are skipped; all tried: -1",
		replica_pick(&rs, 6, MiB, 1u) == 1 && replica_pick(&rs, 6, MiB, 3u) == -1, "picked %d, %d",
		replica_pick(&rs, 6, MiB, 1u), replica_pick(&rs, 6, MiB, 3u));
	T_CHECK("failures counted", rs.r[0].d.failures == 1 && rs.r[1].d.failures == 1, "%llu, %llu",
		(unsigned long long)rs.r[0].d.failures, (unsigned long long)rs.r[1].d.failures);
	free(rs.r[0].bad), free(rs.r[1].bad);

	copies(&rs, 2, NULL);
	T_CHECK("no rate known: equal shares", rs.r[0].d.share == 0.5 && rs.r[1].d.share == 0.5, "%g %g",
		rs.r[0].d.share, rs.r[1].d.share);
}

/* A throttled device (blk-throttle, a cloud volume's token bucket): an allowance of up to bucket
 * bytes refilled at rate, what it sustains; reads served one at a time, at burst while the
 * allowance lasts, then at rate. */
typedef struct device {
	double rate, burst, bucket;
	double tokens, t_tokens, free_at;
} device;

/* When a read of len bytes issued at t ends. */
static double device_read(device *d, double t, double len)
{
	double start = t > d->free_at ? t : d->free_at;
	d->tokens = fmin(d->bucket, d->tokens + (start - d->t_tokens) * d->rate);
	double fast = fmin(d->tokens, len), dur = fast / d->burst + (len - fast) / d->rate;
	d->tokens = len > fast ? 0 : fmin(d->bucket, d->tokens - fast + dur * d->rate);
	d->t_tokens = d->free_at = start + dur;
	return start + dur;
}

typedef struct done_ev {
	double t;
	int copy;
} done_ev;

static int by_time(const void *a, const void *b)
{
	double x = ((const done_ev *)a)->t, y = ((const done_ev *)b)->t;
	return x < y ? -1 : x > y;
}

/* Decode against copies on devs: each layer issues m reads of rec bytes at once (each picked
 * by the store's rule) and waits for them, then computes for gap seconds; for secs simulated
 * seconds. share[i]: each copy's share of the bytes read in the second half. */
static void decode(replica_set *rs, device *devs, int m, double rec, double gap, double secs, double *share)
{
	double t = 1, bytes[STORE_MAX_COPIES] = {0}, total = 0;
	done_ev ev[64];
	while (t < 1 + secs) {
		for (int k = 0; k < m; k++) {
			int r = replica_pick(rs, 0, (uint64_t)rec, 0);
			replica_issue(rs, r, (uint64_t)rec, t);
			ev[k] = (done_ev){device_read(&devs[r], t, rec), r};
		}
		qsort(ev, (size_t)m, sizeof(*ev), by_time);
		for (int k = 0; k < m; k++) {
			replica_done(rs, ev[k].copy, (uint64_t)rec, 1, ev[k].t);
			if (t > 1 + secs / 2)
				bytes[ev[k].copy] += rec, total += rec;
		}
		t = ev[m - 1].t + gap;
	}
	for (int i = 0; i < rs->n; i++)
		share[i] = bytes[i] / total;
}

/* Loop devices throttled to 400 and 200 MB/s, as bench-plan's: bursts after idle time read at
 * 1 and 1.2 GB/s. */
static void throttled(device *d)
{
	d[0] = (device){.rate = 400 * MB, .burst = 1000 * MB, .bucket = 16 * MB};
	d[1] = (device){.rate = 200 * MB, .burst = 1200 * MB, .bucket = 16 * MB};
	d[0].tokens = d[0].bucket, d[1].tokens = d[1].bucket;
}

static void bursts(void)
{
	replica_set rs;
	device d[2];
	double s[2];

	throttled(d);
	copies(&rs, 2, (double[]){400 * MB, 200 * MB});
	decode(&rs, d, 6, 2.4 * MiB, 0.004, 30, s);
	T_CHECK("bursts, the plan's rates: the bytes follow the sustained shares (2:1), the rates kept",
		fabs(s[0] - 2.0 / 3) < 0.02 && fabs(rs.r[0].d.rate_bps - 400 * MB) < 40 * MB &&
		fabs(rs.r[1].d.rate_bps - 200 * MB) < 20 * MB, "A %.3f, B %.3f; rates %.0f and %.0f MB/s", s[0], s[1],
		rs.r[0].d.rate_bps / MB, rs.r[1].d.rate_bps / MB);

	throttled(d);
	copies(&rs, 2, NULL);
	decode(&rs, d, 6, 2.4 * MiB, 0.004, 30, s);
	T_CHECK("bursts, no rate known: learned through the bursts, the bytes converge to the sustained shares",
		fabs(s[0] - 2.0 / 3) < 0.04, "A %.3f, B %.3f; rates %.0f and %.0f MB/s", s[0], s[1],
		rs.r[0].d.rate_bps / MB, rs.r[1].d.rate_bps / MB);

	throttled(d);
	copies(&rs, 2, (double[]){400 * MB, 200 * MB});
	decode(&rs, d, 1, 2.4 * MiB, 0.010, 30, s);
	T_CHECK("bursts, light load (one read per layer, every read a burst): the sustained shares and rates still",
		fabs(s[0] - 2.0 / 3) < 0.02 && rs.r[0].d.rate_bps == 400 * MB && rs.r[1].d.rate_bps == 200 * MB,
		"A %.3f, B %.3f; rates %.0f and %.0f MB/s", s[0], s[1], rs.r[0].d.rate_bps / MB, rs.r[1].d.rate_bps / MB);

	throttled(d);
	d[1].rate = 100 * MB; /* B sustains half what the plan says */
	copies(&rs, 2, (double[]){400 * MB, 200 * MB});
	decode(&rs, d, 6, 2.4 * MiB, 0.004, 30, s);
	T_CHECK("a copy slower than planned: its measured rate corrects its share (4:1)",
		fabs(s[1] - 0.2) < 0.04 && fabs(rs.r[1].d.rate_bps - 100 * MB) < 15 * MB,
		"A %.3f, B %.3f; B at %.0f MB/s", s[0], s[1], rs.r[1].d.rate_bps / MB);
}

/* The plan's shares (plan_shares, from the probe's rates) against the store's: its targets from
 * the same rates, and the bytes its choice sends each copy, a partial one included. */
static void plan_agrees(void)
{
	static plan p;
	static coli_probe_disk disk[3];
	double mbs[3] = {400, 200, 100};
	memset(&p, 0, sizeof(p));
	p.n_copies = 3, p.qd = 8;
	for (int i = 0; i < 3; i++) {
		disk[i].n_qd = 2, disk[i].qd[0] = 4, disk[i].qd[1] = 8;
		disk[i].direct_bps[0] = disk[i].direct_bps[1] = mbs[i] * MB;
		p.copies[i].disk = &disk[i], p.copies[i].held = 1;
	}
	p.copies[2].held = 0.05; /* a partial mirror where 5% of the misses fall */
	plan_shares(&p);

	replica_set rs;
	copies(&rs, 3, (double[]){p.copies[0].bps, p.copies[1].bps, p.copies[2].bps});
	double full[3];
	coli_copy_shares(3, (double[]){p.copies[0].bps, p.copies[1].bps, p.copies[2].bps}, NULL, full);
	T_CHECK("plan and store: the same targets from the same rates (full copies)",
		rs.r[0].d.share == full[0] && rs.r[1].d.share == full[1] && rs.r[2].d.share == full[2],
		"store %g %g %g, coli_copy_shares %g %g %g", rs.r[0].d.share, rs.r[1].d.share, rs.r[2].d.share, full[0],
		full[1], full[2]);

	coli_err e = {0, ""};
	rs.r[2].partial = 1;
	T_CHECK("plan and store: a partial map", coli_mirror_map_init(&rs.r[2].map, (uint8_t[32]){0}, 100, &e) == 0, "%s",
		e.msg);
	for (uint64_t x = 0; x < 5; x++)
		coli_mirror_set(&rs.r[2].map, x); /* 5 of 100 records, drawn uniformly: 5% of the reads */
	double bytes[3] = {0}, t = 1;
	srand(7);
	for (int k = 0; k < 20000; k++, t += 0.001) {
		uint64_t rec = (uint64_t)(rand() % 100);
		int r = replica_pick(&rs, rec, MiB, 0);
		replica_issue(&rs, r, MiB, t);
		replica_done(&rs, r, MiB, 1, t + 0.0005);
		bytes[r] += 1.0 / 20000;
	}
	T_CHECK("plan and store: the bytes the store sends each copy are the plan's shares, partial mirror included",
		fabs(bytes[0] - p.copies[0].share) < 0.01 && fabs(bytes[1] - p.copies[1].share) < 0.01 &&
		fabs(bytes[2] - p.copies[2].share) < 0.01, "store %.3f %.3f %.3f, plan %.3f %.3f %.3f", bytes[0], bytes[1],
		bytes[2], p.copies[0].share, p.copies[1].share, p.copies[2].share);
	coli_mirror_map_release(&rs.r[2].map);
}

int main(void)
{
	shares_rule();
	pick_rules();
	bursts();
	plan_agrees();
	T_EXIT();
}
