/* replica.h: the copies of a container's experts.bin the streaming store reads from (the
 * model's own and each --mirror), checked identical at open, with the bookkeeping that shares
 * the reads out among them.
 *
 * Each copy has a target share of the bytes read, coli_copy_shares (policy.h) of the copies'
 * sustained rates: the rule coli-plan predicts the shares with. A read goes to the copy, among
 * those that may serve it, whose bytes issued recently (decayed with REPLICA_MEMORY_S) plus this
 * read are the smallest multiple of its share: the copies' bytes follow their shares, whatever a
 * copy reads at for a moment (a throttled device lets a burst after idle time through far above
 * what it sustains; sent by how fast it looked, it would take the reads its allowance cannot
 * keep up with). A copy's rate starts at what coli-plan measured (store_stream_opts.copy_bps;
 * none: the mean of the others', all equal when none is known) and is corrected by windows of
 * its own reads (REPLICA_WINDOW_S of wall time, REPLICA_WINDOW_BYTES at least): bytes over busy
 * time. When the copy was busy nearly all the window (REPLICA_SATURATED) that is what it
 * sustains: its rate. When it idled between reads, its reads met a refilled allowance (faster
 * than it sustains) or waited on their own latency at a shallow queue (slower), so the figure
 * says nothing of what it sustains and stands only for a rate not yet known. A copy slower than
 * its rate gets more than it can read, is kept busy, and is corrected; one faster keeps its rate
 * (bench-plan on a loaded machine: windows with idle time put throttles of 400 and 200 MB/s at
 * 222 and 135 MB/s, which would have moved the mirror's share from the plan's 29% to 38%).
 * Copies of a record known bad (a failed read or CRC there) are avoided for that record. A
 * mirror may be partial (its mirror.coli map, formats/mirror.md, says which records it holds): it
 * is never picked for a record it lacks (the others then take those, so its share is at most
 * what it holds, as coli-plan's held caps it); the model's own copy is always full. */
#ifndef COLI_REPLICA_H
#define COLI_REPLICA_H

#include <stdint.h>

#include "container.h"
#include "mirrormap.h"
#include "store.h"

typedef struct replica {
	store_disk d;             /* dir (not owned), device, bytes delivered, busy time, failures:
				   * what the statistics report */
	char *path;               /* <dir>/experts.bin */
	int fd, own_fd;           /* O_DIRECT when the filesystem allows it */
	uint64_t issued;          /* bytes of reads issued, not yet done */
	int inflight;
	double busy_since;        /* when inflight last became nonzero */
	double load;              /* bytes issued, decayed by exp(-dt / REPLICA_MEMORY_S) */
	double win_t0, win_busy;  /* the measuring window: its start, its busy time so far */
	double mark;              /* when win_busy was last brought up to date */
	uint64_t win_bytes;       /* bytes delivered in the window */
	int sustained;            /* 1: d.rate_bps is a sustained rate (the plan's, or a window busy
				   * throughout); 0: unknown, or a window's with idle time in it */
	uint8_t *bad;             /* [record] 1: this copy of the record failed; NULL: none yet */
	int partial;              /* 1: holds only the records of map */
	coli_mirror_map map;      /* partial: the records held */
} replica;

typedef struct replica_set {
	replica r[STORE_MAX_COPIES];
	int n;
	uint64_t n_records;       /* records in experts.bin, for the bad maps */
	double load_t;            /* when the loads were last decayed */
} replica_set;

#define REPLICA_MEMORY_S 1.0          /* s: how long a read counts against its copy's share */
#define REPLICA_WINDOW_S 1.0          /* s: a window of a copy's reads, long beside a throttle's burst */
#define REPLICA_WINDOW_BYTES (8ull << 20) /* and at least this much read in it */
#define REPLICA_SATURATED 0.9         /* busy this share of the window: it measured what it sustains */

/* The model's experts.bin, then each mirror's, after checking that the mirror's manifest.coli
 * is byte-identical to the model's (else an error naming both and the first differing byte)
 * and that its experts.bin is as long, and reading the mirror's mirror.coli when it has one
 * (a map of another container, or a damaged one, is an error naming the file and the field;
 * none: a full copy). The model's own folder may hold a map only when it claims every record.
 * n_records: the container's expert records. bps: NULL, or [1 + n_mirrors] each copy's
 * sustained rate as coli-plan measured it (bytes/s, 0: unknown), the rates' starting point. */
int replicas_open(replica_set *rs, const coli_container *c, const char *const *mirrors, int n_mirrors,
		  uint64_t n_records, const double *bps, coli_err *e);
void replicas_close(replica_set *rs);

/* The copy a read of len bytes of record rec goes to: the one furthest below its share (above),
 * among those that hold rec, not in the bit mask tried and not known bad for rec (any not tried
 * when all are bad); -1 when every copy holding rec was tried. Caller holds the store's lock, as
 * for the functions below. */
int replica_pick(const replica_set *rs, uint64_t rec, uint64_t len, unsigned tried);
/* A read of len bytes issued to / ended on copy i (ok: it delivered them), at time now (seconds,
 * any origin, never decreasing): the loads, the windows and, when a window closes, the rates and
 * shares (d.rate_bps, d.share). */
void replica_issue(replica_set *rs, int i, uint64_t len, double now);
void replica_done(replica_set *rs, int i, uint64_t len, int ok, double now);
/* Copy i of record rec failed (a read error or CRC mismatch): counted, avoided from now on. */
void replica_mark_bad(replica_set *rs, int i, uint64_t rec);
/* Whether copy i holds record rec (a full copy holds every one). */
int replica_holds(const replica_set *rs, int i, uint64_t rec);
/* Each copy's share (d.share) from the rates (d.rate_bps), by coli_copy_shares. */
void replicas_share(replica_set *rs);

#endif
