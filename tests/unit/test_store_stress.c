/* test_store_stress.c: the streaming store (engine/store/stream.c, stream_io.c) under long random
 * sequences of request / predict / get / try_get / release / prefetch / predict_check (which drops
 * unchosen predictions) across layers, on both I/O backends, with mirrors, CRC failures (flipped
 * bytes in copies of experts.bin) and EIO (a copy on tests/fault/eiofs, when root with FUSE).
 * Every get is checked against the in-RAM store's bytes (or must fail, naming its record, when no
 * copy of it is good), and the counters against their identities: gets = hits + misses, pin hits
 * = gets of pinned experts, bytes read = the bytes of the trace's reads (= records read x their
 * size when records are read whole), one trace outcome per get; trace records are emitted by the
 * calling thread with the store's lock free, and a stalled trace writer stalls no read.
 *
 * Usage: test_store_stress [STEPS [SEED]]   (STEPS: tokens per configuration, default 150; make
 * torture runs 20000) */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/stream.h"
#include "t.h"

#define MAX_COPIES 3
#define MAX_EL 8
#define PINS 3

/* ---- the model, its copies and their faults -------------------------------------------------- */

static char scratch[] = "/tmp/coli-stress-XXXXXX";
static int mounted;               /* eiofs mounted at scratch/mnt */

typedef struct world {
	coli_container *c;        /* the pristine container (ref.coli) */
	coli_store *ram;          /* its in-RAM store: the bytes every get must return */
	int n_el, el[MAX_EL];     /* MoE layers */
	int E, k;
	uint64_t rec_size, n_rec;
	/* records faulty in a copy: [rec] 1; crc_a in a.coli, crc_b in b.coli, eio_c on c.coli */
	unsigned char *crc_a, *crc_b, *eio_c, *none;
	double *usage;            /* [layer * E + x]: pins only records good everywhere */
	unsigned char *pinned;    /* [rec] 1: pinned when a configuration pins */
} world;

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
	return rng_state;
}

static int rnd_n(int n)
{
	return (int)(rnd() % (uint64_t)n);
}

static int run_cmd(const char *cmd)
{
	int st = system(cmd);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void cleanup(void)
{
	char cmd[700];
	if (mounted) {
		snprintf(cmd, sizeof(cmd), "umount '%s/mnt' 2>/dev/null || umount -l '%s/mnt'", scratch, scratch);
		if (run_cmd(cmd) == 0)
			mounted = 0;
	}
	if (!mounted && !getenv("COLI_TEST_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
		run_cmd(cmd);
	}
}

static uint64_t rec_index(const world *w, int li, int x)
{
	return (uint64_t)li * (uint64_t)w->E + (uint64_t)x;
}

static int el_index(const world *w, int layer)
{
	for (int i = 0; i < w->n_el; i++)
		if (w->el[i] == layer)
			return i;
	return -1;
}

/* Where record r's flipped byte is, in every copy that has one: a record bad in several copies is
 * bad in the same chunk of each, so that no mixture of their chunks reads whole. */
static uint64_t flip_at(const world *w, uint64_t r)
{
	return (r * 2654435761u) % w->rec_size;
}

/* Flips one byte of each record marked in bad, in DIR/experts.bin. */
static int corrupt(const world *w, const char *dir, const unsigned char *bad)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/experts.bin", dir);
	FILE *f = fopen(path, "r+b");
	int rc = f ? 0 : -1;
	for (int li = 0; rc == 0 && li < w->n_el; li++) {
		const coli_lexperts *x = coli_container_experts(w->c, w->el[li]);
		for (int e = 0; rc == 0 && e < w->E; e++) {
			if (!bad[rec_index(w, li, e)])
				continue;
			long off = (long)(coli_record_offset(x, e) + flip_at(w, rec_index(w, li, e)));
			int b = fseek(f, off, SEEK_SET) == 0 ? fgetc(f) : EOF;
			rc = b != EOF && fseek(f, off, SEEK_SET) == 0 && fputc(b ^ 0x5a, f) != EOF ? 0 : -1;
		}
	}
	if (f && fclose(f) != 0)
		rc = -1;
	return rc;
}

/* Marks about one record in n of each layer, never a pinned one. */
static void mark(world *w, unsigned char *bad, int n)
{
	for (uint64_t r = 0; r < w->n_rec; r++)
		bad[r] = !w->pinned[r] && rnd_n(n) == 0;
}

/* The fixture converted (ref.coli), its copies a.coli and b.coli with flipped bytes, and (root
 * with FUSE) c.coli seen through eiofs at mnt/, reads of its marked records failing with EIO. */
static int make_world(world *w, coli_err *e)
{
	char cmd[2400], dir[600];
	if (!mkdtemp(scratch))
		return coli_errf(e, COLI_EIO, "mkdtemp failed");
	atexit(cleanup);
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q '%s/qwen3_moe-tiny/checkpoint' '%s/ref.coli' && cd '%s' && "
		 "cp -r ref.coli a.coli && cp -r ref.coli b.coli && mkdir src && cp -r ref.coli src/c.coli",
		 t_fixtures(), scratch, scratch);
	snprintf(dir, sizeof(dir), "%s/ref.coli", scratch);
	if (run_cmd(cmd) != 0 || coli_container_open(&w->c, dir, e) < 0 || coli_store_ram_open(&w->ram, w->c, e) < 0)
		return -1;
	const coli_model *m = &w->c->model;
	w->E = m->n_experts, w->k = m->top_k;
	for (int i = 0; i < w->c->layout.n_elayers && w->n_el < MAX_EL; i++)
		if (!w->c->layout.elayers[i].mtp)
			w->el[w->n_el++] = w->c->layout.elayers[i].layer;
	w->rec_size = coli_container_experts(w->c, w->el[0])->record_size;
	w->n_rec = (uint64_t)w->n_el * (uint64_t)w->E;
	int L = m->n_layers + m->n_mtp_layers;
	w->crc_a = calloc(w->n_rec, 1), w->crc_b = calloc(w->n_rec, 1), w->eio_c = calloc(w->n_rec, 1);
	w->none = calloc(w->n_rec, 1), w->pinned = calloc(w->n_rec, 1);
	w->usage = calloc((size_t)L * (size_t)w->E, sizeof(*w->usage));
	if (!w->crc_a || !w->crc_b || !w->eio_c || !w->none || !w->pinned || !w->usage)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	for (int li = 0; li < w->n_el; li++) /* distinct counts: the PINS highest are pinned */
		for (int x = 0; x < w->E; x++) {
			int rank = (x * 7 + li * 3) % w->E;
			w->usage[(size_t)w->el[li] * (size_t)w->E + (size_t)x] = 1 + rank;
			w->pinned[rec_index(w, li, x)] = rank >= w->E - PINS;
		}
	mark(w, w->crc_a, 6), mark(w, w->crc_b, 6), mark(w, w->eio_c, 8);
	snprintf(dir, sizeof(dir), "%s/a.coli", scratch);
	if (corrupt(w, dir, w->crc_a) < 0)
		return coli_errf(e, COLI_EIO, "%s: cannot flip bytes", dir);
	snprintf(dir, sizeof(dir), "%s/b.coli", scratch);
	if (corrupt(w, dir, w->crc_b) < 0)
		return coli_errf(e, COLI_EIO, "%s: cannot flip bytes", dir);
	if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0 || access("bin/fault/eiofs", X_OK) != 0) {
		printf("SKIP store stress over eiofs: not root, no /dev/fuse or no bin/fault/eiofs\n");
		return 0;
	}
	int n = snprintf(cmd, sizeof(cmd), "bin/fault/eiofs");
	for (int li = 0, rules = 0; li < w->n_el; li++) {
		const coli_lexperts *x = coli_container_experts(w->c, w->el[li]);
		for (int ex = 0; ex < w->E; ex++) {
			uint64_t r = rec_index(w, li, ex);
			if (!w->eio_c[r])
				continue;
			if (++rules > 60) { /* eiofs takes 64 rules */
				w->eio_c[r] = 0;
				continue;
			}
			/* the whole record, or (when no other copy is bad) only its last 4096 bytes: a chunk
			 * fails, the others read */
			uint64_t off = coli_record_offset(x, ex), len = w->rec_size;
			if (rnd_n(2) && len > 4096 && !w->crc_a[r] && !w->crc_b[r])
				off += len - 4096, len = 4096;
			n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " --eio c.coli/experts.bin:%llu:%llu",
				      (unsigned long long)off, (unsigned long long)len);
		}
	}
	snprintf(cmd + n, sizeof(cmd) - (size_t)n, " '%s/src' '%s/mnt'", scratch, scratch);
	snprintf(dir, sizeof(dir), "mkdir -p '%s/mnt'", scratch);
	if (run_cmd(dir) != 0 || run_cmd(cmd) != 0) {
		printf("SKIP store stress over eiofs: eiofs did not mount\n");
		return 0;
	}
	mounted = 1;
	return 0;
}

static void free_world(world *w)
{
	coli_store_close(w->ram);
	coli_container_close(w->c);
	free(w->crc_a), free(w->crc_b), free(w->eio_c), free(w->none), free(w->pinned), free(w->usage);
}

/* ---- the trace the store writes -------------------------------------------------------------- */

typedef struct collect {
	pthread_mutex_t mu;
	coli_trace_rec *r;
	size_t n, cap;
	stream_store *s;          /* the store whose lock must be free during emit */
	pthread_t caller;         /* the one thread calling the store (else: any but an I/O thread) */
	int any_caller;
	int io_thread_emits;      /* emit called by another thread */
	int lock_held;            /* emit called with the store's lock held */
	/* the stalled writer: the next emit waits until released */
	int stall, stalled, released;
	pthread_cond_t cv;
} collect;

static void emit(void *ctx, const coli_trace_rec *r)
{
	collect *col = ctx;
	if (!col->any_caller && !pthread_equal(pthread_self(), col->caller))
		col->io_thread_emits = 1;
	int free_lock = !col->s;
	for (int i = 0; i < 100000 && !free_lock; i++) { /* held by an I/O thread: for microseconds */
		free_lock = pthread_mutex_trylock(&col->s->mu) == 0;
		if (free_lock)
			pthread_mutex_unlock(&col->s->mu);
		else
			sched_yield();
	}
	pthread_mutex_lock(&col->mu);
	col->lock_held |= !free_lock;
	if (col->stall) {
		col->stall = 0, col->stalled = 1;
		pthread_cond_broadcast(&col->cv);
		while (!col->released)
			pthread_cond_wait(&col->cv, &col->mu);
	}
	if (col->n == col->cap) {
		col->cap = col->cap ? 2 * col->cap : 4096;
		col->r = realloc(col->r, col->cap * sizeof(*col->r));
	}
	if (col->r)
		col->r[col->n++] = *r;
	pthread_mutex_unlock(&col->mu);
}

/* ---- one configuration ----------------------------------------------------------------------- */

typedef struct cfg {
	const char *name;
	const char *copy[MAX_COPIES];   /* folders under scratch: the model's, then mirrors */
	int n_copies;
	int io;
	uint64_t chunk;                 /* 0: the store's (records read whole) */
	int slots, pins, lfu;
	int predict;                    /* 1: prediction toggled on and off along the way */
} cfg;

typedef struct tally {
	uint64_t gets, pin_gets, failed, wrong_bytes, wrong_error, unexpected;
	char first[300];                /* the first thing that went wrong */
} tally;

static const unsigned char *faults_of(const world *w, const char *copy)
{
	return !strcmp(copy, "a.coli") ? w->crc_a : !strcmp(copy, "b.coli") ? w->crc_b
		: !strcmp(copy, "mnt/c.coli") ? w->eio_c : w->none;
}

/* Whether some copy of the configuration holds record r intact. */
static int readable(const world *w, const cfg *g, uint64_t r)
{
	for (int i = 0; i < g->n_copies; i++)
		if (!faults_of(w, g->copy[i])[r])
			return 1;
	return 0;
}

static void note(tally *t, const char *fmt, int layer, int x, const char *msg)
{
	if (!t->first[0])
		snprintf(t->first, sizeof(t->first), fmt, layer, x, msg);
}

/* Checks a get's result: the RAM store's bytes, or a failure naming the record when no copy is good. */
static void check_get(const world *w, const cfg *g, tally *t, int layer, int x, const coli_expert *v, const coli_err *e)
{
	int li = el_index(w, layer);
	uint64_t r = rec_index(w, li, x);
	const coli_lexperts *lx = coli_container_experts(w->c, layer);
	t->gets++;
	t->pin_gets += g->pins && w->pinned[r];
	if (!v) {
		char want[64];
		snprintf(want, sizeof(want), "[layer %d][expert %d]", layer, x);
		t->failed++;
		if (readable(w, g, r))
			t->unexpected++, note(t, "[layer %d][expert %d]: get failed though a copy is good: %.200s", layer, x, e->msg);
		else if (!strstr(e->msg, want) || e->code == 0)
			t->wrong_error++, note(t, "[layer %d][expert %d]: the error does not name the record: %.200s", layer, x, e->msg);
		return;
	}
	coli_err re = {0, ""};
	const coli_expert *ref = coli_store_get(w->ram, layer, x, &re);
	if (!readable(w, g, r))
		t->unexpected++, note(t, "[layer %d][expert %d]: get succeeded though no copy is good%s", layer, x, "");
	else if (!ref || memcmp(v->gate.codes - lx->part_off[0], ref->gate.codes - lx->part_off[0], lx->record_size))
		t->wrong_bytes++, note(t, "[layer %d][expert %d]: bytes differ from the RAM store's%s", layer, x, "");
}

static const coli_expert *do_get(const world *w, const cfg *g, tally *t, coli_store *st, int layer, int x, int try)
{
	coli_err e = {0, ""};
	const coli_expert *v = try ? coli_store_try_get(st, layer, x, &e) : coli_store_get(st, layer, x, &e);
	if (try && !v && e.code == 0)
		return NULL; /* pending: a get follows */
	check_get(w, g, t, layer, x, v, &e);
	return v;
}

/* k distinct experts of E, skewed toward low ids of a per-layer permutation. */
static void draw(const world *w, int li, int *out, int n)
{
	for (int m = 0; m < n;) {
		int a = rnd_n(w->E), b = rnd_n(w->E), x = ((a < b ? a : b) * 5 + li * 11) % w->E, dup = 0;
		for (int j = 0; j < m; j++)
			dup |= out[j] == x;
		if (!dup)
			out[m++] = x;
	}
}

typedef struct held {
	int layer, n, x[16];
} held;

static void release_all(coli_store *st, held *h)
{
	for (int j = 0; j < h->n; j++)
		coli_store_release(st, h->layer, h->x[j]);
	h->n = 0;
}

/* A prefill-like batch on one layer: the union of a few tokens' experts, requested and
 * prefetched, then got and released one at a time. */
static void batch(const world *w, const cfg *g, tally *t, coli_store *st, int li)
{
	int want[32], n = 0, layer = w->el[li];
	for (int tok = 0; tok < 3; tok++) {
		int d[16];
		draw(w, li, d, w->k);
		for (int j = 0; j < w->k; j++) {
			int dup = 0;
			for (int i = 0; i < n; i++)
				dup |= want[i] == d[j];
			if (!dup)
				want[n++] = d[j];
		}
	}
	coli_store_request(st, layer, want, 1);
	coli_store_prefetch(st, layer, want + 1, n - 1);
	for (int i = 0; i < n; i++)
		if (do_get(w, g, t, st, layer, want[i], 0))
			coli_store_release(st, layer, want[i]);
}

/* One decoding token over every MoE layer, in random variations of what the MoE block does. */
static void token(const world *w, const cfg *g, tally *t, coli_store *st, int *predicted)
{
	int chosen[MAX_EL][16];
	held keep = {0};
	for (int li = 0; li < w->n_el; li++)
		draw(w, li, chosen[li], w->k);
	for (int li = 0; li < w->n_el; li++) {
		int layer = w->el[li], *ch = chosen[li], got[16] = {0};
		held now = {layer, 0, {0}};
		if (predicted[li]) {
			int32_t c32[16];
			for (int j = 0; j < w->k; j++)
				c32[j] = ch[j];
			coli_store_predict_check(st, layer, c32, w->k);
			predicted[li] = 0;
		}
		if (rnd_n(10) < 7)
			coli_store_request(st, layer, ch, w->k);
		if (rnd_n(4) == 0) {
			int other[16];
			draw(w, li, other, w->k);
			coli_store_prefetch(st, layer, other, 1 + rnd_n(w->k));
		}
		for (int j = 0; j < w->k; j++)
			if (rnd_n(2) && do_get(w, g, t, st, layer, ch[j], 1))
				got[j] = 1, now.x[now.n++] = ch[j];
		for (int j = 0; j < w->k; j++)
			if (!got[j] && do_get(w, g, t, st, layer, ch[j], 0))
				now.x[now.n++] = ch[j];
		if (coli_store_predicting(st) && li + 1 < w->n_el) { /* next layer: part right, part wrong */
			int guess[16], wrong[16];
			draw(w, li + 1, wrong, w->k);
			for (int j = 0; j < w->k; j++)
				guess[j] = rnd_n(3) ? chosen[li + 1][j] : wrong[j];
			for (int j = 0; j < w->k; j++)
				for (int i = 0; i < j; i++)
					if (guess[i] == guess[j])
						guess[j] = chosen[li + 1][j];
			coli_store_predict(st, w->el[li + 1], guess, w->k);
			predicted[li + 1] = 1;
		}
		release_all(st, &keep); /* held across a layer */
		if (rnd_n(3) == 0)
			keep = now;
		else
			release_all(st, &now);
	}
	release_all(st, &keep);
}

/* Until no read is queued or in flight (prefetches and predictions still being read). */
static void quiesce(stream_store *s)
{
	for (int idle = 0; !idle;) {
		pthread_mutex_lock(&s->mu);
		idle = !s->qhead && s->inflight == 0 && s->ureq_busy == 0;
		pthread_mutex_unlock(&s->mu);
		if (!idle)
			sched_yield();
	}
}

/* The statistics against the gets made and the trace written. */
static void check_counts(const world *w, const cfg *g, const tally *t, const coli_store_stats *st, const collect *col,
			 uint64_t lost)
{
	char name[256];
	uint64_t out[COLI_X_N] = {0}, rd_bytes = 0, rd_ok = 0, copy_bytes[MAX_COPIES] = {0}, bad_len = 0;
	uint64_t chunk = g->chunk ? g->chunk : STORE_CHUNK, last = w->rec_size % chunk ? w->rec_size % chunk : chunk;
	for (size_t i = 0; i < col->n; i++) {
		const coli_trace_rec *r = &col->r[i];
		if (r->kind == COLI_TR_EXPERT && r->sub < COLI_X_N)
			out[r->sub]++;
		if (r->kind != COLI_TR_READ)
			continue;
		uint64_t want1 = r->sub & 4 ? w->rec_size : chunk < w->rec_size ? chunk : w->rec_size;
		bad_len += r->n != want1 && (r->sub & 4 || r->n != last);
		if (r->sub & 1) {
			rd_ok++, rd_bytes += r->n;
			if (r->copy < MAX_COPIES)
				copy_bytes[r->copy] += r->n;
		}
	}
	uint64_t traced_gets = out[COLI_X_PIN] + out[COLI_X_HIT] + out[COLI_X_MISS] + out[COLI_X_PREFETCHED] +
			       out[COLI_X_PREDICTED];
	snprintf(name, sizeof(name), "%s: gets = hits + misses = the trace's outcomes, pin hits = gets of pins", g->name);
	T_CHECK(name, st->hits + st->misses == t->gets && traced_gets == t->gets &&
		out[COLI_X_PIN] + out[COLI_X_HIT] == st->hits && out[COLI_X_PIN] == st->pin_hits && st->pin_hits == t->pin_gets,
		"gets %llu, hits %llu + misses %llu, traced %llu (pin %llu hit %llu), pin hits %llu of %llu pinned gets",
		(unsigned long long)t->gets, (unsigned long long)st->hits, (unsigned long long)st->misses,
		(unsigned long long)traced_gets, (unsigned long long)out[COLI_X_PIN], (unsigned long long)out[COLI_X_HIT],
		(unsigned long long)st->pin_hits, (unsigned long long)t->pin_gets);
	uint64_t disks = 0;
	int copies_ok = 1;
	for (int i = 0; i < st->n_disks; i++) {
		disks += st->disks[i].bytes_read;
		copies_ok &= i < MAX_COPIES && copy_bytes[i] == st->disks[i].bytes_read;
	}
	snprintf(name, sizeof(name), "%s: bytes read = the trace's reads = the copies' bytes; each read a chunk or a record",
		 g->name);
	T_CHECK(name, rd_bytes == st->bytes_read && disks == st->bytes_read && copies_ok && bad_len == 0 && rd_ok > 0 &&
		st->n_disks == g->n_copies, "bytes %llu, traced %llu in %llu reads, copies %llu (%d), %llu reads of odd length",
		(unsigned long long)st->bytes_read, (unsigned long long)rd_bytes, (unsigned long long)rd_ok,
		(unsigned long long)disks, st->n_disks, (unsigned long long)bad_len);
	if (chunk >= w->rec_size) {
		snprintf(name, sizeof(name), "%s: records read whole: bytes read = records read x %llu bytes", g->name,
			 (unsigned long long)w->rec_size);
		T_CHECK(name, st->bytes_read == rd_ok * w->rec_size, "%llu bytes, %llu records", (unsigned long long)st->bytes_read,
			(unsigned long long)rd_ok);
	}
	int clean_ok = 1;
	uint64_t failures = 0;
	for (int i = 0; i < g->n_copies; i++) {
		clean_ok &= faults_of(w, g->copy[i]) != w->none || st->disks[i].failures == 0;
		failures += st->disks[i].failures;
	}
	snprintf(name, sizeof(name), "%s: failures counted on faulty copies only (%llu)", g->name,
		 (unsigned long long)failures);
	T_CHECK(name, clean_ok && (t->failed == 0 || failures > 0), "clean copies without failures %d, %llu failed gets",
		clean_ok, (unsigned long long)t->failed);
	snprintf(name, sizeof(name), "%s: trace records emitted by the calling thread, the store's lock free, none lost",
		 g->name);
	T_CHECK(name, !col->io_thread_emits && !col->lock_held && lost == 0, "I/O thread emitted %d, lock held %d, lost %llu",
		col->io_thread_emits, col->lock_held, (unsigned long long)lost);
}

/* A thread reading the statistics while the sequence runs (they take the store's lock). */
typedef struct poller {
	coli_store *st;
	volatile int stop;
	pthread_mutex_t mu;
} poller;

static void *poll_stats(void *arg)
{
	poller *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		int stop = p->stop;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			return NULL;
		coli_store_stats s;
		coli_store_get_stats(p->st, &s);
		sched_yield();
	}
}

static void run_cfg(const world *w, const cfg *g, int steps)
{
	char dir[600], mirrors[MAX_COPIES][600], name[256];
	const char *mp[MAX_COPIES];
	coli_err e = {0, ""};
	coli_container *c = NULL;
	coli_store *st = NULL;
	coli_tracer tr;
	collect col = {.caller = pthread_self()};
	pthread_mutex_init(&col.mu, NULL);
	pthread_cond_init(&col.cv, NULL);
	coli_tracer_init(&tr, emit, &col);
	snprintf(dir, sizeof(dir), "%s/%s", scratch, g->copy[0]);
	for (int i = 1; i < g->n_copies; i++)
		snprintf(mirrors[i], sizeof(mirrors[i]), "%s/%s", scratch, g->copy[i]), mp[i - 1] = mirrors[i];
	store_stream_opts o = {.cache_slots = g->slots, .pins = g->pins, .usage = g->pins ? w->usage : NULL, .io = g->io,
			       .cache_policy = g->lfu ? STORE_CACHE_LFU : STORE_CACHE_LRU, .mirrors = mp,
			       .n_mirrors = g->n_copies - 1, .tracer = &tr, .chunk = g->chunk};
	int rc = coli_container_open(&c, dir, &e) == 0 ? coli_store_stream_open(&st, c, &o, &e) : -1;
	snprintf(name, sizeof(name), "%s: opens", g->name);
	T_CHECK(name, rc == 0, "%s", e.msg);
	if (rc == 0) {
		stream_store *ss = (stream_store *)st;
		col.s = ss;
		if (g->io == STORE_IO_URING && ss->io != &stream_uring_backend)
			printf("SKIP %s: the kernel refused io_uring (the threads ran instead)\n", g->name);
		tally t = {0};
		int predicted[MAX_EL] = {0};
		poller p = {.st = st};
		pthread_mutex_init(&p.mu, NULL);
		pthread_t th;
		int polling = pthread_create(&th, NULL, poll_stats, &p) == 0;
		for (int i = 0; i < steps; i++) {
			if (g->predict && rnd_n(40) == 0) {
				coli_store_set_predict(st, !coli_store_predicting(st));
				memset(predicted, 0, sizeof(predicted));
			}
			if (rnd_n(25) == 0)
				batch(w, g, &t, st, rnd_n(w->n_el));
			else
				token(w, g, &t, st, predicted);
		}
		if (polling) {
			pthread_mutex_lock(&p.mu);
			p.stop = 1;
			pthread_mutex_unlock(&p.mu);
			pthread_join(th, NULL);
		}
		pthread_mutex_destroy(&p.mu);
		snprintf(name, sizeof(name), "%s: %llu gets (%llu failed): the RAM store's bytes, failures only where no copy is good",
			 g->name, (unsigned long long)t.gets, (unsigned long long)t.failed);
		T_CHECK(name, t.wrong_bytes == 0 && t.wrong_error == 0 && t.unexpected == 0 && t.gets > 0,
			"%llu wrong bytes, %llu wrong errors, %llu unexpected; first: %s", (unsigned long long)t.wrong_bytes,
			(unsigned long long)t.wrong_error, (unsigned long long)t.unexpected, t.first);
		quiesce(ss);
		stream_trace_flush(ss);
		coli_store_stats s;
		coli_store_get_stats(st, &s);
		pthread_mutex_lock(&ss->mu);
		uint64_t lost = ss->trq_lost;
		pthread_mutex_unlock(&ss->mu);
		check_counts(w, g, &t, &s, &col, lost);
	}
	coli_store_close(st);
	coli_container_close(c);
	free(col.r);
	pthread_mutex_destroy(&col.mu);
	pthread_cond_destroy(&col.cv);
}

/* ---- a stalled trace writer ------------------------------------------------------------------ */

typedef struct getter {
	coli_store *st;
	int layer, x;
	const coli_expert *v;
	coli_err e;
} getter;

static void *get_thread(void *arg)
{
	getter *g = arg;
	g->v = coli_store_get(g->st, g->layer, g->x, &g->e);
	if (g->v)
		coli_store_release(g->st, g->layer, g->x);
	return NULL;
}

/* One thread's get ends in a trace write that stalls; meanwhile another thread's get of a record
 * not resident must be read and returned (the old store emitted under its lock, from the I/O
 * thread: the second get waited for the stalled writer forever; the alarm ends that). */
static void stalled_writer(const world *w, int io)
{
	char dir[600], name[200];
	coli_err e = {0, ""};
	coli_container *c = NULL;
	coli_store *st = NULL;
	coli_tracer tr;
	collect col = {.any_caller = 1, .stall = 1};
	pthread_mutex_init(&col.mu, NULL);
	pthread_cond_init(&col.cv, NULL);
	coli_tracer_init(&tr, emit, &col);
	snprintf(dir, sizeof(dir), "%s/ref.coli", scratch);
	store_stream_opts o = {.io = io, .tracer = &tr};
	int rc = coli_container_open(&c, dir, &e) == 0 ? coli_store_stream_open(&st, c, &o, &e) : -1;
	const coli_expert *v = NULL;
	getter g = {st, w->el[0], 1, NULL, {0, ""}};
	pthread_t th;
	if (rc == 0) {
		col.s = (stream_store *)st;
		alarm(120);
		rc = pthread_create(&th, NULL, get_thread, &g);
	}
	if (rc == 0) {
		pthread_mutex_lock(&col.mu);
		while (!col.stalled)
			pthread_cond_wait(&col.cv, &col.mu);
		pthread_mutex_unlock(&col.mu);
		v = coli_store_get(st, w->el[1], 2, &e); /* the writer is stalled */
		tally t = {0};
		cfg ref = {.copy = {"ref.coli"}, .n_copies = 1};
		check_get(w, &ref, &t, w->el[1], 2, v, &e);
		rc = v && t.wrong_bytes == 0 ? 0 : -1;
		if (v)
			coli_store_release(st, w->el[1], 2);
		pthread_mutex_lock(&col.mu);
		col.released = 1;
		pthread_cond_broadcast(&col.cv);
		pthread_mutex_unlock(&col.mu);
		pthread_join(th, NULL);
		alarm(0);
	}
	snprintf(name, sizeof(name), "%s: a get is read and returned while another thread's trace write stalls",
		 io == STORE_IO_URING ? "io_uring" : "pread threads");
	T_CHECK(name, rc == 0 && g.v, "%s %s", e.msg, g.e.msg);
	coli_store_close(st);
	coli_container_close(c);
	free(col.r);
	pthread_mutex_destroy(&col.mu);
	pthread_cond_destroy(&col.cv);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 150;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 0x5eed2023;
	world w = {0};
	coli_err e = {0, ""};
	rng_state = seed ? seed : 1;
	printf("store stress: %d tokens per configuration, seed 0x%llx\n", steps, (unsigned long long)seed);
	int rc = make_world(&w, &e);
	T_CHECK("stress: the fixture converts, its copies made (flipped bytes, eiofs)", rc == 0, "%s", e.msg);
	if (rc < 0) {
		free_world(&w);
		T_EXIT();
	}
	int k = w.k, T = STORE_IO_THREADS_POOL, U = STORE_IO_URING;
	const cfg cfgs[] = {
		{"threads, one copy, 4 KiB chunks, LRU", {"ref.coli"}, 1, T, 4096, k, 0, 0, 1},
		{"io_uring, one copy, LFU + pins", {"ref.coli"}, 1, U, 0, k + 2, PINS, 1, 1},
		{"io_uring, one copy, 4 KiB chunks", {"ref.coli"}, 1, U, 4096, 2 * k, 0, 0, 1},
		{"threads, one copy with flipped bytes", {"a.coli"}, 1, T, 0, k, PINS, 0, 1},
		{"threads, a mirror, both with flipped bytes, 4 KiB chunks", {"a.coli", "b.coli"}, 2, T, 4096, k + 1, 0, 0, 1},
		{"io_uring, a mirror, both with flipped bytes", {"a.coli", "b.coli"}, 2, U, 0, k, PINS, 1, 1},
		{"threads, EIO on the model's copy, two mirrors with flipped bytes", {"mnt/c.coli", "a.coli", "b.coli"}, 3, T,
		 4096, k, 0, 0, 1},
		{"io_uring, EIO on the model's copy, two mirrors with flipped bytes", {"mnt/c.coli", "a.coli", "b.coli"}, 3, U,
		 0, k + 1, PINS, 0, 1},
		{"io_uring, EIO on the model's copy alone, 4 KiB chunks", {"mnt/c.coli"}, 1, U, 4096, k, 0, 1, 1},
	};
	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++)
		if (mounted || strncmp(cfgs[i].copy[0], "mnt/", 4))
			run_cfg(&w, &cfgs[i], steps);
	stalled_writer(&w, T);
	stalled_writer(&w, U);
	free_world(&w);
	T_EXIT();
}
