/* replica.h: the copies of a container's experts.bin the streaming store reads from (the
 * model's own and each --mirror), checked identical at open, with the bookkeeping that sends
 * each read to the copy expected to finish it first.
 *
 * Expected finish of a read of len bytes on copy r = (bytes already issued to r and not yet
 * done + len) / r's bandwidth, r's bandwidth being the bytes it has delivered divided by the
 * time it had a read in flight (a prior of 1 GB/s until it has delivered 8 MiB). Copies of a
 * record known bad (a failed read or CRC there) are avoided for that record. A mirror may be
 * partial (its mirror.coli map, formats/mirror.md, says which records it holds): it is never
 * picked for a record it lacks; the model's own copy is always full. */
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
	uint8_t *bad;             /* [record] 1: this copy of the record failed; NULL: none yet */
	int partial;              /* 1: holds only the records of map */
	coli_mirror_map map;      /* partial: the records held */
} replica;

typedef struct replica_set {
	replica r[STORE_MAX_COPIES];
	int n;
	uint64_t n_records;       /* records in experts.bin, for the bad maps */
} replica_set;

/* The model's experts.bin, then each mirror's, after checking that the mirror's manifest.coli
 * is byte-identical to the model's (else an error naming both and the first differing byte)
 * and that its experts.bin is as long, and reading the mirror's mirror.coli when it has one
 * (a map of another container, or a damaged one, is an error naming the file and the field;
 * none: a full copy). The model's own folder may hold a map only when it claims every record.
 * n_records: the container's expert records. */
int replicas_open(replica_set *rs, const coli_container *c, const char *const *mirrors, int n_mirrors,
		  uint64_t n_records, coli_err *e);
void replicas_close(replica_set *rs);

/* The copy expected to finish a read of len bytes of record rec first, among those that hold
 * rec, not in the bit mask tried and not known bad for rec (any not tried when all are bad);
 * -1 when every copy holding rec was tried. Caller holds the store's lock, as for the three below. */
int replica_pick(const replica_set *rs, uint64_t rec, uint64_t len, unsigned tried);
/* A read of len bytes issued to / ended on copy i (ok: it delivered them), at time now. */
void replica_issue(replica_set *rs, int i, uint64_t len, double now);
void replica_done(replica_set *rs, int i, uint64_t len, int ok, double now);
/* Copy i of record rec failed (a read error or CRC mismatch): counted, avoided from now on. */
void replica_mark_bad(replica_set *rs, int i, uint64_t rec);
/* Whether copy i holds record rec (a full copy holds every one). */
int replica_holds(const replica_set *rs, int i, uint64_t rec);

#endif
