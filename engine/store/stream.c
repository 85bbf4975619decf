/* store/stream.c: the streaming expert store's cache: per-layer LRU slots and pins, the read
 * queue the I/O backends (store/stream_io.c) take records from, CRC checks and recovery from mirrors,
 * next-layer prediction, statistics (what a read notes: store/stream_note.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "crc32.h"
#include "clock.h"
#include "fileio.h"
#include "policy.h"
#include "store/stream.h"

/* Releases the lock at the end of a caller's call, then emits the trace records kept meanwhile. */
static void unlock_emit(stream_store *s)
{
	int kept = s->trq && s->trq_head != s->trq_tail;
	pthread_mutex_unlock(&s->mu);
	if (kept)
		stream_trace_flush(s);
}

/* Drops slot i's expert (its buffer stays for reuse). */
static void evict(stream_layer *L, int i)
{
	L->where[L->slots[i].expert] = -1;
	L->slots[i].expert = -1;
	L->slots[i].state = S_EMPTY;
	L->slots[i].asked = 0;
	L->resident--;
}

static int listed(int x, const int *list, int n)
{
	for (int j = 0; j < n; j++)
		if (list[j] == x)
			return 1;
	return 0;
}

/* Whether slot p may be evicted: released, not in flight; for a prefetch (only) also already
 * got once and not listed in it. */
static int evictable(const slot *p, const int *list, int n, int prefetching)
{
	if (p->expert < 0 || p->refs > 0 || p->state == S_FLIGHT || p->state == S_DRAIN)
		return 0;
	return !prefetching || ((p->state == S_READY || p->stale) && !listed(p->expert, list, n));
}

/* Whether slot a is evicted before slot b: the simulator's order (coli_evict_before, policy.h):
 * LFU the least used first (the count NULL under LRU), ties and LRU the least recently used. */
static int evicts_first(const stream_layer *L, const slot *a, const slot *b)
{
	return coli_evict_before(L->count ? COLI_SIM_LFU : COLI_SIM_LRU, L->count ? L->count[a->expert] : 0, a->last,
				 L->count ? L->count[b->expert] : 0, b->last);
}

/* The evictable slot the policy evicts first; -1 when none. */
static int lru_slot(const stream_layer *L, const int *list, int n, int prefetching)
{
	int lru = -1;
	for (int i = 0; i < L->work; i++)
		if (evictable(&L->slots[i], list, n, prefetching) && (lru < 0 || evicts_first(L, &L->slots[i], &L->slots[lru])))
			lru = i;
	return lru;
}

/* A slot for a new expert: an empty one (one with a buffer first), else the least recently
 * used evictable one, evicted; -1 when none. */
static int pick_slot(stream_layer *L, const int *list, int n, int prefetching)
{
	int empty = -1;
	for (int i = 0; i < L->work; i++)
		if (L->slots[i].expert < 0 && (empty < 0 || (L->slots[i].buf && !L->slots[empty].buf)))
			empty = i;
	if (empty >= 0)
		return empty;
	int lru = lru_slot(L, list, n, prefetching);
	if (lru >= 0)
		evict(L, lru), L->evictions++;
	return lru;
}

/* Whether a read nobody has got yet is in flight (it will become evictable), or a dropped
 * prediction's (it will become empty). */
static int unclaimed_in_flight(const stream_layer *L)
{
	for (int i = 0; i < L->work; i++)
		if ((L->slots[i].state == S_FLIGHT && L->slots[i].refs == 0) || L->slots[i].state == S_DRAIN)
			return 1;
	return 0;
}

/* Puts p in the read queue after every entry of its priority or higher. */
static void enqueue(stream_store *s, slot *p, int prio)
{
	slot **at = &s->qhead;
	p->prio = prio;
	while (*at && (*at)->prio >= prio)
		at = &(*at)->next;
	p->next = *at;
	*at = p;
	if (!p->next)
		s->qtail = p;
	pthread_cond_signal(&s->queued);
}

int stream_dequeue(stream_store *s, slot *p)
{
	slot *prev = NULL;
	for (slot **at = &s->qhead; *at; prev = *at, at = &(*at)->next)
		if (*at == p) {
			*at = p->next;
			if (s->qtail == p)
				s->qtail = prev;
			p->next = NULL;
			return 1;
		}
	return 0;
}

/* Moves p, when still queued, up to priority prio. */
static void promote(stream_store *s, slot *p, int prio)
{
	if (p->state == S_FLIGHT && p->prio < prio && stream_dequeue(s, p))
		enqueue(s, p, prio);
}

/* Virtual memory for n records of size bytes, faulted in as slots are first read into: one mapping
 * per layer, in huge pages where the kernel gives them (a fault per 2 MiB instead of per 4 KiB,
 * and fewer TLB misses in the products); NULL with e filled when the address space is short. */
static uint8_t *arena_map(size_t n, uint64_t size, coli_err *e)
{
	size_t len = n * (size_t)size;
	void *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (a == MAP_FAILED)
		return coli_errf(e, COLI_ENOMEM, "out of address space mapping %zu cache slots of %llu bytes", n,
				 (unsigned long long)size), NULL;
	(void)madvise(a, len, MADV_HUGEPAGE); /* a hint: 4 KiB pages without it */
	return a;
}

static void arena_unmap(uint8_t *a, size_t n, uint64_t size)
{
	if (a)
		munmap(a, n * (size_t)size);
}

/* p's record buffer, buf (its place in the layer's arena), and its chunk CRCs. The buffer's
 * pages are faulted in by its first read, on an I/O thread outside the store's lock: zeroing
 * them here first, under the lock, held the I/O threads up while the memory was first touched
 * (on a virtual machine whose host backs guest memory lazily, 0.5-1 GB/s). */
static int slot_buffers(slot *p, uint8_t *buf, coli_err *e)
{
	p->n_chunks = (int)((p->x->record_size + p->chunk - 1) / p->chunk);
	p->buf = buf;
	if (!(p->chunk_crc = coli_calloc((size_t)p->n_chunks, sizeof(*p->chunk_crc), e)) ||
	    !(p->chunk_t0 = coli_calloc((size_t)p->n_chunks, sizeof(*p->chunk_t0), e)))
		return -1;
	return 0;
}

/* Queues the read of expert x into slot i (its buffer placed first), at the
 * queue's order prio (Q_GET: a get waits for it). */
static int queue_read(stream_store *s, stream_layer *L, int i, int x, int prio, coli_err *e)
{
	slot *p = &L->slots[i];
	if (!p->buf && slot_buffers(p, L->arena + (size_t)i * L->x->record_size, e) < 0)
		return -1;
	p->expert = x, p->state = S_FLIGHT, p->last = ++s->tick, p->next = NULL, p->stale = 0, p->asked = 0;
	p->next_chunk = p->chunks_done = 0, p->used = 0, p->io_rc = 0, p->origin = prio;
	L->where[x] = i;
	L->resident++;
	enqueue(s, p, prio);
	return 0;
}

/* p's record failed its read or CRC, with mirrors: reads it whole from each copy its chunks
 * came from (all of them, to tell which failed), then from the others until one checks, into a
 * buffer of its own; the good copy goes to p, each failing copy is reported on stderr and
 * avoided for the record. Lock held, released while reading (p in flight meanwhile). */
static int recover(stream_store *s, slot *p, coli_err *e)
{
	const coli_lexperts *lx = p->x;
	uint64_t size = lx->record_size, off = coli_record_offset(lx, p->expert);
	uint32_t want = lx->crc[p->expert], got[STORE_MAX_COPIES] = {0};
	unsigned tried = 0, failed = 0;
	int good = -1, rc = 0;
	void *tmp = NULL;
	if (posix_memalign(&tmp, 4096, size) != 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating %llu bytes to re-read expert record [layer %d][expert %d]",
				 (unsigned long long)size, lx->layer, p->expert);
	p->state = S_FLIGHT;
	for (int r;;) {
		for (r = 0; r < s->rs.n && (!(p->used >> r & 1) || (tried >> r & 1)); r++)
			;
		if (r == s->rs.n && (good >= 0 || (r = replica_pick(&s->rs, stream_rec(p), size, tried)) < 0))
			break;
		tried |= 1u << r;
		coli_err err = {0, ""};
		stream_issue(s, r, size);
		uint64_t t0 = s->tr ? coli_tracer_now(s->tr) : 0;
		pthread_mutex_unlock(&s->mu);
		rc = coli_pread_full(s->rs.r[r].fd, tmp, size, off, s->rs.r[r].path, &err);
		got[r] = rc == 0 ? coli_crc32(0, tmp, size) : 0;
		pthread_mutex_lock(&s->mu);
		stream_retire(s, r, size, rc == 0);
		stream_trace_reread(s, p, r, t0, size, rc == 0);
		if (rc == 0 && got[r] == want && good < 0)
			memcpy(p->buf, tmp, size), good = r;
		if (rc < 0 || got[r] != want) {
			failed |= 1u << r;
			replica_mark_bad(&s->rs, r, stream_rec(p));
			if (rc < 0) {
				coli_err named;
				stream_name_error(s, p, r, &err, &named);
				stream_event(s, COLI_EV_READ_FAILED, "%s", named.msg);
			}
		}
	}
	free(tmp);
	for (int r = 0; r < s->rs.n; r++)
		if (failed >> r & 1 && got[r])
			stream_event(s, COLI_EV_CRC_FAILED, "%s: expert record [layer %d][expert %d] at offset %llu: crc32 0x%08x, expected 0x%08x%s%s%s",
				s->rs.r[r].path, lx->layer, p->expert, (unsigned long long)off, got[r], want,
				good >= 0 ? "; read from the copy in " : "", good >= 0 ? s->rs.r[good].d.dir : "", good >= 0 ? " instead" : "");
	p->state = S_FILLED;
	pthread_cond_broadcast(&s->done);
	if (good < 0)
		return coli_errf(e, COLI_EDATA, "expert record [layer %d][expert %d]: none of its %d copies reads with crc32 0x%08x",
				 lx->layer, p->expert, s->rs.n, want);
	p->io_rc = 0, p->crc = want;
	return 0;
}

/* Checks a read slot: its read's result and its CRC (with mirrors, a failure recovers from
 * another copy); then its views. Lock held. */
static int check(stream_store *s, slot *p, coli_err *e)
{
	const coli_lexperts *lx = p->x;
	int x = p->expert, bad = p->io_rc < 0 || (!s->no_crc && p->crc != lx->crc[x]);
	if (bad && s->rs.n > 1 && recover(s, p, e) < 0)
		return -1;
	if (bad && s->rs.n == 1 && p->io_rc < 0)
		return *e = p->err, -1;
	if (bad && s->rs.n == 1) {
		replica_mark_bad(&s->rs, 0, stream_rec(p)); /* counted as a read failure is */
		return coli_errf(e, COLI_EDATA,
				 "%s: expert record [layer %d][expert %d] at offset %llu: crc32 0x%08x, expected 0x%08x",
				 s->rs.r[0].path, lx->layer, x, (unsigned long long)coli_record_offset(lx, x), p->crc, lx->crc[x]);
	}
	p->view.gate = coli_mat_of(&lx->part[0], p->buf + lx->part_off[0]);
	p->view.up = coli_mat_of(&lx->part[1], p->buf + lx->part_off[1]);
	p->view.down = coli_mat_of(&lx->part[2], p->buf + lx->part_off[2]);
	p->state = S_READY;
	return 0;
}

/* The slot holding expert x, its read queued first on a miss; -1 with e filled on error. */
static int find_or_queue(stream_store *s, stream_layer *L, int x, coli_err *e)
{
	int i = L->where[x];
	if (i >= 0) {
		promote(s, &L->slots[i], Q_GET);
		return i;
	}
	while ((i = pick_slot(L, NULL, 0, 0)) < 0 && unclaimed_in_flight(L))
		pthread_cond_wait(&s->done, &s->mu);
	if (i < 0)
		return coli_errf(e, COLI_EUSAGE, "expert store: layer %d: all %d cache slots in use", L->x->layer, L->work);
	return queue_read(s, L, i, x, Q_GET, e) < 0 ? -1 : i;
}

static stream_layer *layer_of(stream_store *s, int layer, int expert, coli_err *e)
{
	stream_layer *L = layer >= 0 && layer < s->n_layers ? &s->layers[layer] : NULL;
	if (!L || !L->x)
		return coli_errf(e, COLI_EUSAGE, "expert store: layer %d has no experts", layer), NULL;
	if (expert < 0 || expert >= L->x->n_experts)
		return coli_errf(e, COLI_EUSAGE, "expert store: expert %d of layer %d out of range", expert, layer), NULL;
	return L;
}

/* A pinned expert's view (a hit), or NULL when x is not pinned. */
static const coli_expert *pinned_get(stream_store *s, stream_layer *L, int x)
{
	if (!L->pinned || L->pinned[x] < 0)
		return NULL;
	pthread_mutex_lock(&s->mu);
	s->st.hits++, s->st.pin_hits++;
	if (L->count)
		L->count[x] += 1;
	stream_trace_outcome(s, &L->pins[L->pinned[x]], 1);
	unlock_emit(s);
	return &L->pins[L->pinned[x]].view;
}

/* A get's use of slot i, counted (a hit when read and checked for an earlier get, else a miss:
 * read, or being read, for this get, a request, a prefetch or a prediction): waits for its read,
 * checks it once read. Lock held. */
static const coli_expert *use_slot(stream_store *s, stream_layer *L, int i, coli_err *e)
{
	slot *p = &L->slots[i];
	s->st.hits += p->state == S_READY;
	s->st.misses += p->state != S_READY;
	p->refs++;
	p->stale = 0;
	if (!p->asked)
		p->last = ++s->tick;
	p->asked = 0;
	if (L->count)
		L->count[p->expert] += 1;
	stream_trace_outcome(s, p, 0);
	while (p->state == S_FLIGHT)
		pthread_cond_wait(&s->done, &s->mu);
	if (p->state == S_FILLED && check(s, p, e) < 0) {
		p->refs--;
		evict(L, i);
		return NULL;
	}
	return &p->view;
}

/* A get (wait: 1) or a try_get (0: only an expert resident and read). */
static const coli_expert *get(stream_store *s, int layer, int expert, int wait, coli_err *e)
{
	stream_layer *L = layer_of(s, layer, expert, e);
	const coli_expert *v = L ? pinned_get(s, L, expert) : NULL;
	if (!L || v)
		return v;
	pthread_mutex_lock(&s->mu);
	int i = L->where[expert];
	if (wait)
		i = find_or_queue(s, L, expert, e);
	else if (i >= 0 && L->slots[i].state == S_FLIGHT)
		i = -1;
	v = i >= 0 ? use_slot(s, L, i, e) : NULL;
	unlock_emit(s);
	return v;
}

static const coli_expert *stream_get(coli_store *base, int layer, int expert, coli_err *e)
{
	return get((stream_store *)base, layer, expert, 1, e);
}

static const coli_expert *stream_try_get(coli_store *base, int layer, int expert, coli_err *e)
{
	return get((stream_store *)base, layer, expert, 0, e);
}

/* Whether expert x is one the layer's slots may hold: in range and not pinned. */
static int slotted(const stream_layer *L, int x)
{
	return x >= 0 && x < L->x->n_experts && !(L->pinned && L->pinned[x] >= 0);
}

/* Queues reads of the listed experts not resident, as many as slots allow without evicting an
 * expert in use, in flight, not yet got (unless stale) or listed; queued[j] (may be NULL): 1
 * when expert j's read was queued. Queued reads of listed experts move up to prio. A request
 * (Q_GET) is also the use's recency, in the simulator's order (policy/cachesim.c): the
 * resident experts in the list's order, then the others, whenever their reads complete and
 * their gets come (a decode step's gets follow its reads' completion: the order would vary
 * from run to run). */
static void prefetch_locked(stream_store *s, stream_layer *L, const int *experts, int n, int prio, int *queued)
{
	for (int j = 0; queued && j < n; j++)
		queued[j] = 0;
	for (int j = 0; j < n; j++)
		if (slotted(L, experts[j]) && L->where[experts[j]] >= 0) {
			slot *p = &L->slots[L->where[experts[j]]];
			promote(s, p, prio);
			if (prio == Q_GET)
				p->last = ++s->tick, p->asked = 1;
		}
	for (int j = 0, i; j < n; j++) {
		if (!slotted(L, experts[j]) || L->where[experts[j]] >= 0)
			continue;
		if ((i = pick_slot(L, experts, n, 1)) < 0 || queue_read(s, L, i, experts[j], prio, NULL) < 0)
			break;
		L->slots[i].asked = prio == Q_GET;
		if (queued)
			queued[j] = 1;
	}
}

/* Queues the listed experts' reads at order prio (Q_GET: a request, Q_PREFETCH: a hint). */
static void queue_listed(coli_store *base, int layer, const int *experts, int n, int prio)
{
	stream_store *s = (stream_store *)base;
	if (layer < 0 || layer >= s->n_layers || !s->layers[layer].x)
		return;
	pthread_mutex_lock(&s->mu);
	prefetch_locked(s, &s->layers[layer], experts, n, prio, NULL);
	unlock_emit(s);
}

static void stream_request(coli_store *base, int layer, const int *experts, int n)
{
	queue_listed(base, layer, experts, n, Q_GET);
}

static void stream_prefetch(coli_store *base, int layer, const int *experts, int n)
{
	queue_listed(base, layer, experts, n, Q_PREFETCH);
}

/* Releases one use; then evicts released slots, least recently used first, down to keep. */
static void stream_release(coli_store *base, int layer, int expert)
{
	stream_store *s = (stream_store *)base;
	stream_layer *L = &s->layers[layer];
	if (L->pinned && L->pinned[expert] >= 0)
		return;
	pthread_mutex_lock(&s->mu);
	int i = L->where[expert];
	if (i >= 0 && L->slots[i].refs > 0) {
		L->slots[i].refs--;
		for (int lru; L->resident > L->keep && (lru = lru_slot(L, NULL, 0, 1)) >= 0;)
			evict(L, lru), L->evictions++;
	}
	unlock_emit(s);
}

/* Stops the I/O threads once the queued reads are done. */
static void stop_threads(stream_store *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_broadcast(&s->queued);
	pthread_mutex_unlock(&s->mu);
	if (s->io)
		s->io->stop(s);
}

static void stream_close(coli_store *base)
{
	stream_store *s = (stream_store *)base;
	stop_threads(s);
	stream_trace_flush(s); /* the reads that ended meanwhile */
	for (int l = 0; s->layers && l < s->n_layers; l++) {
		stream_layer *L = &s->layers[l];
		for (int i = 0; L->slots && i < L->work; i++)
			free(L->slots[i].chunk_crc), free(L->slots[i].chunk_t0);
		for (int i = 0; L->pins && i < L->n_pins; i++)
			free(L->pins[i].chunk_crc), free(L->pins[i].chunk_t0);
		if (L->x) {
			arena_unmap(L->arena, (size_t)L->work, L->x->record_size);
			arena_unmap(L->pin_arena, (size_t)L->pin_cap, L->x->record_size);
		}
		free(L->slots), free(L->where), free(L->pred), free(L->pred_read), free(L->count);
		free(L->pins), free(L->pinned);
	}
	free(s->layers);
	replicas_close(&s->rs);
	free(s->ureqs), free(s->trq);
	pthread_mutex_destroy(&s->trq_mu);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->queued);
	pthread_cond_destroy(&s->done);
	pthread_cond_destroy(&s->crc_cv);
	free(s);
}

static const coli_store_ops stream_ops;

/* Layer x's slots: keep resident after release (its opts' slots, else the store's), at least
 * top_k usable while in use. */
static int init_layer(stream_store *s, const coli_lexperts *x, uint64_t rec0, int keep, coli_err *e)
{
	stream_layer *L = &s->layers[x->layer];
	L->x = x, L->rec0 = rec0;
	L->keep = keep, L->work = keep > s->top_k ? keep : s->top_k;
	L->slots = coli_calloc((size_t)L->work, sizeof(*L->slots), e);
	L->where = coli_malloc((size_t)x->n_experts * sizeof(*L->where), e);
	L->pred = coli_calloc((size_t)s->top_k, sizeof(*L->pred), e);
	L->pred_read = coli_calloc((size_t)s->top_k, sizeof(*L->pred_read), e);
	if (!L->slots || !L->where || !L->pred || !L->pred_read ||
	    !(L->arena = arena_map((size_t)L->work, x->record_size, e)))
		return -1;
	for (int i = 0; i < L->work; i++)
		L->slots[i].expert = -1, L->slots[i].x = x, L->slots[i].rec0 = rec0, L->slots[i].chunk = s->chunk;
	for (int k = 0; k < x->n_experts; k++)
		L->where[k] = -1;
	return 0;
}

/* Pins layer L's n experts of highest counts (row: its usage counts, ne of them; ties: lower
 * id; count 0 never pinned): each read into a buffer of its own and checked. */
static int pin_layer(stream_store *s, stream_layer *L, const double *row, int ne, int n, coli_err *e)
{
	const coli_lexperts *x = L->x;
	if (n > x->n_experts)
		n = x->n_experts;
	if (!(L->pinned = coli_malloc((size_t)x->n_experts * sizeof(*L->pinned), e)) ||
	    !(L->pins = coli_calloc((size_t)(n > 0 ? n : 1), sizeof(*L->pins), e)) ||
	    (n > 0 && !(L->pin_arena = arena_map((size_t)n, x->record_size, e))))
		return -1;
	L->pin_cap = n;
	for (int k = 0; k < x->n_experts; k++)
		L->pinned[k] = -1;
	int counted = x->n_experts < ne ? x->n_experts : ne;
	for (int best = -1; L->n_pins < n && (best = coli_pin_next(row, counted, best)) >= 0;) {
		slot *p = &L->pins[L->n_pins++];
		p->x = x, p->rec0 = L->rec0, p->chunk = s->chunk, p->expert = best, p->used = 1;
		if (slot_buffers(p, L->pin_arena + (size_t)(L->n_pins - 1) * x->record_size, e) < 0)
			return -1;
		/* from the model's copy, not counted in the stats (those are of the run) */
		p->io_rc = coli_pread_full(s->rs.r[0].fd, p->buf, x->record_size, coli_record_offset(x, best),
					   s->rs.r[0].path, &p->err);
		p->crc = p->io_rc == 0 ? coli_crc32(0, p->buf, x->record_size) : 0;
		if (p->io_rc < 0) {
			coli_err raw = p->err;
			stream_name_error(s, p, 0, &raw, &p->err);
		}
		pthread_mutex_lock(&s->mu);
		int rc = check(s, p, e);
		unlock_emit(s);
		if (rc < 0)
			return -1;
		L->pinned[best] = L->n_pins - 1;
	}
	return 0;
}

/* Layer's LRU slots and pins as the options give them: its entry of the per-layer lists, else
 * the uniform figure (pins only with usage). */
static int layer_slots(const store_stream_opts *o, int layer, int dflt)
{
	return o && o->layer_slots && o->layer_slots[layer] > 0 ? o->layer_slots[layer] : dflt;
}

static int layer_pins(const store_stream_opts *o, int layer)
{
	if (!o || !o->usage)
		return 0;
	return o->layer_pins ? o->layer_pins[layer] : o->pins;
}

/* LFU: the layer's use counts, starting from its usage counts (row of ne) when given. */
static int init_counts(stream_layer *L, const store_stream_opts *o, int ne, coli_err *e)
{
	const coli_lexperts *x = L->x;
	if (!(L->count = coli_calloc((size_t)x->n_experts, sizeof(*L->count), e)))
		return -1;
	for (int k = 0; o->usage && k < x->n_experts && k < ne; k++) {
		double v = o->usage[(size_t)x->layer * (size_t)ne + (size_t)k];
		L->count[k] = v > 0 ? v : 0;
	}
	return 0;
}

/* The trace ring, for the most records made between two flushes: each slot's reads of two
 * records (one ending after a flush, one queued before the next), each chunk on every copy at
 * worst (read failures) and a recovery on every copy; a call's outcome and wasted predictions. */
static int trace_ring(stream_store *s, coli_err *e)
{
	uint64_t n = 64 + 2 * (uint64_t)s->top_k;
	for (int l = 0; l < s->n_layers; l++) {
		const stream_layer *L = &s->layers[l];
		if (L->x)
			n += 2 * (uint64_t)L->work * (uint64_t)s->rs.n * ((L->x->record_size + s->chunk - 1) / s->chunk + 1);
	}
	s->trq_cap = n;
	return (s->trq = coli_calloc((size_t)n, sizeof(*s->trq), e)) ? 0 : -1;
}

/* Every MoE layer's slots, the replicas, then each layer's pins read and checked. */
static int open_layers(stream_store *s, const store_stream_opts *o, int keep, coli_err *e)
{
	const coli_container *c = s->c;
	uint64_t n_records = 0;
	int rc = (s->layers = coli_calloc((size_t)s->n_layers, sizeof(*s->layers), e)) ? 0 : -1;
	for (int i = 0; rc == 0 && i < c->layout.n_elayers; i++) {
		const coli_lexperts *x = &c->layout.elayers[i];
		rc = init_layer(s, x, n_records, layer_slots(o, x->layer, keep), e);
		if (rc == 0 && o && o->cache_policy == STORE_CACHE_LFU)
			rc = init_counts(&s->layers[x->layer], o, c->model.n_experts, e);
		n_records += (uint64_t)x->n_experts;
	}
	if (rc == 0)
		rc = replicas_open(&s->rs, c, o ? o->mirrors : NULL, o ? o->n_mirrors : 0, n_records,
				   o ? o->copy_bps : NULL, e);
	if (rc == 0 && s->tr)
		rc = trace_ring(s, e);
	int ne = c->model.n_experts;
	for (int i = 0; rc == 0 && i < c->layout.n_elayers; i++) {
		const coli_lexperts *x = &c->layout.elayers[i];
		int pins = layer_pins(o, x->layer);
		if (pins > 0)
			rc = pin_layer(s, &s->layers[x->layer], o->usage + (size_t)x->layer * (size_t)ne, ne, pins, e);
		if (rc == 0 && s->layers[x->layer].n_pins > s->st.pins)
			s->st.pins = s->layers[x->layer].n_pins;
		if (rc == 0 && (i == 0 || s->layers[x->layer].n_pins < s->st.pins_min))
			s->st.pins_min = s->layers[x->layer].n_pins;
	}
	return rc;
}

int coli_store_stream_open(coli_store **out, const coli_container *c, const store_stream_opts *o, coli_err *e)
{
	int top_k = c->model.top_k > 0 ? c->model.top_k : 1, n = o ? o->cache_slots : 0;
	if (n < 0)
		return coli_errf(e, COLI_EUSAGE, "cache slots: %d is negative", n);
	if (o && o->cache_policy != STORE_CACHE_LRU && o->cache_policy != STORE_CACHE_LFU)
		return coli_errf(e, COLI_EUSAGE, "cache policy %d is not LRU or LFU", o->cache_policy);
	if (o && (o->qd < 0 || o->qd > STORE_MAX_QD))
		return coli_errf(e, COLI_EUSAGE, "queue depth %d is not in 1..%d", o->qd, STORE_MAX_QD);
	if (o && o->chunk % 4096)
		return coli_errf(e, COLI_EUSAGE, "chunk size %llu is not a multiple of 4096", (unsigned long long)o->chunk);
	stream_store *s = coli_calloc(1, sizeof(*s), e);
	if (!s)
		return -1;
	s->base.ops = &stream_ops;
	s->c = c;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->trq_mu, NULL);
	pthread_cond_init(&s->queued, NULL);
	pthread_cond_init(&s->done, NULL);
	pthread_cond_init(&s->crc_cv, NULL);
	s->top_k = top_k;
	s->n_layers = c->model.n_layers + c->model.n_mtp_layers;
	s->no_crc = o && o->no_crc;
	s->chunk = o && o->chunk ? o->chunk : STORE_CHUNK;
	s->no_uring = o && o->no_uring;
	s->qd = o ? o->qd : 0;
	s->tr = o ? o->tracer : NULL;
	s->events = o ? o->events : (coli_events){NULL, NULL};
	int rc = open_layers(s, o, n ? n : top_k * COLI_CACHE_PER_TOP_K, e);
	if (rc == 0 && o && o->io == STORE_IO_URING) {
		coli_err ue = {0, ""};
		s->io = &stream_uring_backend;
		if (s->io->start(s, &ue) < 0) {
			stream_event(s, COLI_EV_URING_REFUSED, "--io uring: %s; using --io threads", ue.msg);
			s->io = NULL;
		}
	}
	if (rc == 0 && !s->io) {
		s->io = &stream_threads_backend;
		rc = s->io->start(s, e);
	}
	if (rc < 0) {
		stream_close(&s->base);
		return -1;
	}
	*out = &s->base;
	return 0;
}

static int stream_set_predict(coli_store *s, int on)
{
	((stream_store *)s)->predict = on;
	return 0;
}

static int stream_predicting(const coli_store *s)
{
	return ((const stream_store *)s)->predict;
}

static void stream_predict(coli_store *base, int layer, const int *experts, int n)
{
	stream_store *s = (stream_store *)base;
	if (!s->predict || layer < 0 || layer >= s->n_layers || !s->layers[layer].x || n > s->top_k)
		return;
	stream_layer *L = &s->layers[layer];
	pthread_mutex_lock(&s->mu);
	prefetch_locked(s, L, experts, n, Q_PREDICT, L->pred_read);
	memcpy(L->pred, experts, (size_t)n * sizeof(int));
	L->n_pred = n;
	unlock_emit(s);
}

static void stream_predict_check(coli_store *base, int layer, const int32_t *chosen, int n)
{
	stream_store *s = (stream_store *)base;
	if (!s->predict || layer < 0 || layer >= s->n_layers || !s->layers[layer].n_pred)
		return;
	stream_layer *L = &s->layers[layer];
	pthread_mutex_lock(&s->mu);
	s->st.predicted += (uint64_t)L->n_pred;
	for (int j = 0; j < L->n_pred; j++) {
		int hit = 0, x = L->pred[j], i = L->where[x];
		for (int t = 0; t < n && !hit; t++)
			hit = chosen[t] == x;
		s->st.predict_hits += (uint64_t)hit;
		if (hit || !L->pred_read[j] || i < 0)
			continue;
		slot *p = &L->slots[i];
		if (p->refs > 0 || p->state == S_READY) /* got since (another use): not a prediction's */
			continue;
		stream_trace_wasted(s, p);
		if (p->state == S_FLIGHT && stream_dequeue(s, p)) { /* chunks left unclaimed: none of them is read */
			uint64_t claimed = (uint64_t)p->next_chunk * p->chunk;
			s->st.predict_wasted_bytes += claimed < L->x->record_size ? claimed : L->x->record_size;
			if (p->chunks_done == p->next_chunk) { /* none claimed, or all claimed ones landed */
				evict(L, i);
			} else { /* the claimed ones land in a slot nobody can take meanwhile */
				L->where[x] = -1, L->resident--;
				p->state = S_DRAIN;
			}
			continue;
		}
		p->stale = 1;
		s->st.predict_wasted_bytes += L->x->record_size;
	}
	L->n_pred = 0;
	unlock_emit(s);
}

static int stream_stats(const coli_store *s, coli_store_stats *st)
{
	stream_store *ss = (stream_store *)s;
	pthread_mutex_lock(&ss->mu);
	*st = ss->st;
	double t = coli_now();
	for (int i = 0; i < ss->rs.n; i++) {
		const replica *r = &ss->rs.r[i];
		store_disk *d = &st->disks[i];
		*d = r->d;
		d->busy_s += r->inflight ? t - r->busy_since : 0;
	}
	st->n_disks = ss->rs.n;
	for (int l = 0; l < ss->n_layers; l++)
		st->evictions += ss->layers[l].evictions;
	pthread_mutex_unlock(&ss->mu);
	return 0;
}

static const coli_store_ops stream_ops = {
	.kind = COLI_STORE_STREAM, .streams = 1, .get = stream_get, .try_get = stream_try_get, .release = stream_release,
	.request = stream_request, .prefetch = stream_prefetch, .stats = stream_stats, .set_predict = stream_set_predict,
	.predicting = stream_predicting, .predict = stream_predict, .predict_check = stream_predict_check,
	.close = stream_close};
