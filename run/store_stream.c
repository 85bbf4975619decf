/* store_stream.c: the streaming expert store: records read from experts.bin on demand into
 * per-layer LRU cache slots, each read's CRC checked against the manifest. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "fileio.h"
#include "store.h"

/* One cache slot: a 4096-aligned buffer holding one expert record, and its views. */
typedef struct slot {
	uint8_t *buf;             /* record_size bytes, allocated on first use */
	int expert;               /* -1 when empty */
	int refs;                 /* gets not yet released: never evicted while > 0 */
	uint64_t last;            /* LRU tick of the last get */
	coli_expert view;
} slot;

/* The slots of one MoE layer. */
typedef struct stream_layer {
	const coli_lexperts *x;
	slot *slots;              /* [n_work] */
	int *where;               /* [n_experts] -> slot index, -1 when not resident */
	int resident;             /* slots holding an expert */
} stream_layer;

typedef struct stream_store {
	coli_store base;
	const coli_container *c;
	char *path;               /* <dir>/experts.bin, for errors */
	int fd;                   /* O_DIRECT descriptor, or the container's buffered one */
	int own_fd;
	int keep, work;           /* slots resident after release; slots usable while in use */
	stream_layer *layers;     /* [container layer]; x NULL when not MoE */
	int n_layers;
	uint64_t tick;
	store_stats st;
} stream_store;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Drops slot i's expert (its buffer stays for reuse). */
static void evict(stream_layer *L, int i)
{
	L->where[L->slots[i].expert] = -1;
	L->slots[i].expert = -1;
	L->resident--;
}

/* The least recently used slot holding a released expert; -1 when none. */
static int lru_released(const stream_store *s, const stream_layer *L)
{
	int lru = -1;
	for (int i = 0; i < s->work; i++)
		if (L->slots[i].expert >= 0 && L->slots[i].refs == 0 && (lru < 0 || L->slots[i].last < L->slots[lru].last))
			lru = i;
	return lru;
}

/* A slot for a new expert: an empty one (one with a buffer first), else the least recently
 * used released one, evicted; -1 when every slot is in use. */
static int pick_slot(const stream_store *s, stream_layer *L)
{
	int empty = -1;
	for (int i = 0; i < s->work; i++)
		if (L->slots[i].expert < 0 && (empty < 0 || (L->slots[i].buf && !L->slots[empty].buf)))
			empty = i;
	if (empty >= 0)
		return empty;
	int lru = lru_released(s, L);
	if (lru >= 0)
		evict(L, lru);
	return lru;
}

/* Reads expert x's whole record into p and checks its CRC; p stays empty on error. */
static int load(stream_store *s, stream_layer *L, slot *p, int x, coli_err *e)
{
	const coli_lexperts *lx = L->x;
	uint64_t off = coli_record_offset(lx, x);
	void *buf = NULL;
	if (!p->buf && posix_memalign(&buf, 4096, lx->record_size) != 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating a %llu-byte cache slot for layer %d",
				 (unsigned long long)lx->record_size, lx->layer);
	if (buf)
		p->buf = buf;
	double t = now_s();
	if (coli_pread_full(s->fd, p->buf, lx->record_size, off, s->path, e) < 0)
		return -1;
	s->st.read_s += now_s() - t;
	s->st.bytes_read += lx->record_size;
	uint32_t crc = (uint32_t)crc32_z(0, p->buf, lx->record_size);
	if (crc != lx->crc[x])
		return coli_errf(e, COLI_EDATA,
				 "%s: expert record [layer %d][expert %d] at offset %llu: crc32 0x%08x, expected 0x%08x",
				 s->path, lx->layer, x, (unsigned long long)off, crc, lx->crc[x]);
	p->view.gate = coli_mat_of(&lx->part[0], p->buf + lx->part_off[0]);
	p->view.up = coli_mat_of(&lx->part[1], p->buf + lx->part_off[1]);
	p->view.down = coli_mat_of(&lx->part[2], p->buf + lx->part_off[2]);
	return 0;
}

static const coli_expert *stream_get(coli_store *base, int layer, int expert, coli_err *e)
{
	stream_store *s = (stream_store *)base;
	stream_layer *L = layer >= 0 && layer < s->n_layers ? &s->layers[layer] : NULL;
	if (!L || !L->x)
		return coli_errf(e, COLI_EUSAGE, "expert store: layer %d has no experts", layer), NULL;
	if (expert < 0 || expert >= L->x->n_experts)
		return coli_errf(e, COLI_EUSAGE, "expert store: expert %d of layer %d out of range", expert, layer), NULL;
	int i = L->where[expert];
	if (i >= 0) {
		s->st.hits++;
	} else {
		if ((i = pick_slot(s, L)) < 0)
			return coli_errf(e, COLI_EUSAGE, "expert store: layer %d: all %d cache slots in use", layer, s->work), NULL;
		s->st.misses++;
		if (load(s, L, &L->slots[i], expert, e) < 0)
			return NULL;
		L->slots[i].expert = expert;
		L->where[expert] = i;
		L->resident++;
	}
	L->slots[i].refs++;
	L->slots[i].last = ++s->tick;
	return &L->slots[i].view;
}

/* Releases one use; then evicts released slots, least recently used first, down to keep. */
static void stream_release(coli_store *base, int layer, int expert)
{
	stream_store *s = (stream_store *)base;
	stream_layer *L = &s->layers[layer];
	int i = L->where[expert];
	if (i < 0 || L->slots[i].refs == 0)
		return;
	L->slots[i].refs--;
	for (int lru; L->resident > s->keep && (lru = lru_released(s, L)) >= 0;)
		evict(L, lru);
}

static void stream_close(coli_store *base)
{
	stream_store *s = (stream_store *)base;
	for (int l = 0; s->layers && l < s->n_layers; l++) {
		for (int i = 0; s->layers[l].slots && i < s->work; i++)
			free(s->layers[l].slots[i].buf);
		free(s->layers[l].slots);
		free(s->layers[l].where);
	}
	free(s->layers);
	if (s->own_fd)
		close(s->fd);
	free(s->path);
	free(s);
}

static const coli_store_ops stream_ops = {stream_get, stream_release, stream_close};

/* experts.bin with O_DIRECT, probed with one aligned read of its header; the container's
 * buffered descriptor when the filesystem refuses (tmpfs). */
static int open_direct(stream_store *s, coli_err *e)
{
	void *probe = NULL;
	s->fd = s->c->fd[COLI_SEC_EXPERTS];
	int fd = open(s->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno != EINVAL)
		return coli_errf(e, COLI_EIO, "%s: %s", s->path, strerror(errno));
	if (fd < 0)
		return 0;
	if (posix_memalign(&probe, 4096, 4096) != 0) {
		close(fd);
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating 4096 bytes");
	}
	if (pread(fd, probe, 4096, 0) == 4096) {
		s->fd = fd;
		s->own_fd = 1;
	} else {
		close(fd);
	}
	free(probe);
	return 0;
}

static int init_layer(stream_store *s, const coli_lexperts *x, coli_err *e)
{
	stream_layer *L = &s->layers[x->layer];
	L->x = x;
	L->slots = coli_calloc((size_t)s->work, sizeof(*L->slots), e);
	L->where = coli_malloc((size_t)x->n_experts * sizeof(*L->where), e);
	if (!L->slots || !L->where)
		return -1;
	for (int i = 0; i < s->work; i++)
		L->slots[i].expert = -1;
	for (int k = 0; k < x->n_experts; k++)
		L->where[k] = -1;
	return 0;
}

int store_stream_open(coli_store **out, const coli_container *c, const store_stream_opts *o, coli_err *e)
{
	int top_k = c->model.top_k > 0 ? c->model.top_k : 1, n = o ? o->cache_slots : 0;
	if (n < 0)
		return coli_errf(e, COLI_EUSAGE, "cache slots: %d is negative", n);
	stream_store *s = coli_calloc(1, sizeof(*s), e);
	if (!s)
		return -1;
	s->base.ops = &stream_ops;
	s->c = c;
	s->keep = n ? n : top_k * 4;
	s->work = s->keep > top_k ? s->keep : top_k;
	s->n_layers = c->model.n_layers + c->model.n_mtp_layers;
	s->path = coli_path_join(c->dir, "experts.bin");
	int rc = s->path ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0)
		rc = (s->layers = coli_calloc((size_t)s->n_layers, sizeof(*s->layers), e)) ? 0 : -1;
	if (rc == 0)
		rc = open_direct(s, e);
	for (int i = 0; rc == 0 && i < c->layout.n_elayers; i++)
		rc = init_layer(s, &c->layout.elayers[i], e);
	if (rc < 0) {
		stream_close(&s->base);
		return -1;
	}
	*out = &s->base;
	return 0;
}

int store_stream_stats(const coli_store *s, store_stats *st)
{
	if (!s || s->ops != &stream_ops)
		return -1;
	*st = ((const stream_store *)s)->st;
	return 0;
}
