/* tok/bpe.c: BPE merging of one pre-token (HF's Word::merge_all), with a word cache.
 *
 * The word starts as one symbol per byte (the id of its byte-level character). A min-heap
 * holds candidate merges ordered by (rank, position); the top one is applied if the pair at
 * that position is still the one it was queued for, and the pairs it forms with its
 * neighbours are queued. This is the "lowest rank first, leftmost on ties" rule. */
#include <stdlib.h>
#include <string.h>

#include "tok/internal.h"

#define CACHE_MAX_ENTRIES (1u << 17)
#define CACHE_MAX_IDS (1u << 22)

typedef struct hent {
	int32_t rank, pos, merged;
} hent;

struct tok_bpe_scratch {
	int32_t *c, *prev, *next;
	uint8_t *alive;
	size_t cap;
	hent *heap;
	size_t nheap, heap_cap;
	tok_buf mapped;
};

static int before(const hent *a, const hent *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(struct tok_bpe_scratch *w, hent h, coli_err *e)
{
	if (w->nheap == w->heap_cap) {
		size_t c = w->heap_cap ? w->heap_cap * 2 : 256;
		hent *q = realloc(w->heap, c * sizeof(*q));
		if (!q)
			return coli_errf(e, COLI_ENOMEM, "tokenizer: cannot allocate %zu bytes",
					 c * sizeof(*q));
		w->heap = q;
		w->heap_cap = c;
	}
	size_t i = w->nheap++;
	while (i > 0 && before(&h, &w->heap[(i - 1) / 2])) {
		w->heap[i] = w->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	w->heap[i] = h;
	return 0;
}

static hent heap_pop(struct tok_bpe_scratch *w)
{
	hent top = w->heap[0], last = w->heap[--w->nheap];
	size_t i = 0, n = w->nheap;
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		const hent *best = &last;
		if (l < n && before(&w->heap[l], best))
			m = l, best = &w->heap[l];
		if (l + 1 < n && before(&w->heap[l + 1], best))
			m = l + 1;
		if (m == i)
			break;
		w->heap[i] = w->heap[m];
		i = m;
	}
	if (n)
		w->heap[i] = last;
	return top;
}

static int scratch_reserve(coli_tok *t, size_t n, coli_err *e)
{
	if (!t->bpe) {
		t->bpe = tok_alloc(1, sizeof(*t->bpe), "tokenizer: BPE scratch", e);
		if (!t->bpe)
			return -1;
	}
	struct tok_bpe_scratch *w = t->bpe;
	if (n <= w->cap)
		return 0;
	size_t c = w->cap ? w->cap : 256;
	while (c < n)
		c *= 2;
	int32_t *a = realloc(w->c, c * sizeof(*a));
	if (a)
		w->c = a;
	int32_t *p = realloc(w->prev, c * sizeof(*p));
	if (p)
		w->prev = p;
	int32_t *q = realloc(w->next, c * sizeof(*q));
	if (q)
		w->next = q;
	uint8_t *al = realloc(w->alive, c);
	if (al)
		w->alive = al;
	if (!a || !p || !q || !al)
		return coli_errf(e, COLI_ENOMEM, "tokenizer: cannot allocate %zu bytes", c * 13);
	w->cap = c;
	return 0;
}

void tok_bpe_release(coli_tok *t)
{
	struct tok_bpe_scratch *w = t->bpe;
	if (w) {
		free(w->c);
		free(w->prev);
		free(w->next);
		free(w->alive);
		free(w->heap);
		free(w->mapped.p);
		free(w);
	}
	t->bpe = NULL;
	tok_strmap_release(&t->cache.words);
	free(t->cache.off);
	free(t->cache.n);
	free(t->cache.ids.p);
	memset(&t->cache, 0, sizeof(t->cache));
}

/* Initial symbols: one per byte; bytes missing from the vocabulary become the unk token
 * (fused into one when fuse_unk) or are dropped when there is none, as in HF. */
static size_t init_symbols(coli_tok *t, const uint8_t *s, size_t n)
{
	struct tok_bpe_scratch *w = t->bpe;
	size_t m = 0;
	int last_unk = 0;
	for (size_t i = 0; i < n; i++) {
		int32_t id = t->byte_id[s[i]];
		if (id < 0) {
			if (t->unk_id < 0 || (t->fuse_unk && last_unk))
				continue;
			id = t->unk_id;
			last_unk = 1;
		} else
			last_unk = 0;
		w->c[m] = id;
		w->alive[m] = 1;
		m++;
	}
	for (size_t i = 0; i < m; i++) {
		w->prev[i] = (int32_t)i - 1;
		w->next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
	}
	return m;
}

static int queue_pair(coli_tok *t, int32_t pos, coli_err *e)
{
	struct tok_bpe_scratch *w = t->bpe;
	int32_t nx = w->next[pos], rank, merged;
	if (nx < 0 || !tok_merges_get(&t->merges, w->c[pos], w->c[nx], &rank, &merged))
		return 0;
	return heap_push(w, (hent){rank, pos, merged}, e);
}

static int merge_all(coli_tok *t, size_t m, coli_err *e)
{
	struct tok_bpe_scratch *w = t->bpe;
	w->nheap = 0;
	for (size_t i = 0; i + 1 < m; i++)
		if (queue_pair(t, (int32_t)i, e))
			return -1;
	while (w->nheap) {
		hent top = heap_pop(w);
		int32_t pos = top.pos, nx = w->next[pos], rank, merged;
		if (!w->alive[pos] || nx < 0)
			continue;
		if (!tok_merges_get(&t->merges, w->c[pos], w->c[nx], &rank, &merged) ||
		    merged != top.merged)
			continue; /* stale entry */
		w->c[pos] = merged;
		w->alive[nx] = 0;
		w->next[pos] = w->next[nx];
		if (w->next[nx] >= 0)
			w->prev[w->next[nx]] = pos;
		if (w->prev[pos] >= 0 && queue_pair(t, w->prev[pos], e))
			return -1;
		if (queue_pair(t, pos, e))
			return -1;
	}
	return 0;
}

static int cache_get(coli_tok *t, const uint8_t *s, size_t n, tok_ids *out, coli_err *e)
{
	tok_cache *c = &t->cache;
	int32_t i = tok_strmap_find(&c->words, (const char *)s, n);
	if (i < 0)
		return 0;
	return tok_ids_put(out, c->ids.p + c->off[i], c->n[i], e) ? -1 : 1;
}

/* Remembers the ids of a word; the cache is emptied when full. Failures only skip caching. */
static void cache_put(coli_tok *t, const uint8_t *s, size_t n, const int32_t *ids, size_t k)
{
	tok_cache *c = &t->cache;
	if (c->words.count >= CACHE_MAX_ENTRIES || c->ids.n + k > CACHE_MAX_IDS) {
		tok_strmap_release(&c->words);
		c->ids.n = 0;
	}
	if (!c->words.slots && tok_strmap_init(&c->words, 4096, NULL))
		return;
	if (c->words.count >= c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4096;
		uint32_t *o = realloc(c->off, cap * sizeof(*o));
		if (o)
			c->off = o;
		uint32_t *l = realloc(c->n, cap * sizeof(*l));
		if (l)
			c->n = l;
		if (!o || !l)
			return;
		c->cap = cap;
	}
	size_t at = c->ids.n;
	if (tok_ids_put(&c->ids, ids, k, NULL))
		return;
	int added;
	int32_t i = tok_strmap_put(&c->words, (const char *)s, n, 0, &added, NULL);
	if (i < 0) {
		c->ids.n = at;
		return;
	}
	c->off[i] = (uint32_t)at;
	c->n[i] = (uint32_t)k;
}

/* ignore_merges: a word that is itself in the vocabulary is one token. */
static int32_t whole_word_id(coli_tok *t, const uint8_t *s, size_t n, coli_err *e)
{
	tok_buf *b = &t->bpe->mapped;
	b->n = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t u[4];
		if (tok_buf_put(b, u, (size_t)tok_utf8_put(u, tok_bl_cp[s[i]]), e))
			return -2;
	}
	int32_t i = tok_strmap_find(&t->vocab, b->p, b->n);
	return i < 0 ? -1 : t->vocab.val[i];
}

int tok_bpe_word(coli_tok *t, const uint8_t *s, size_t n, tok_ids *out, coli_err *e)
{
	if (!n)
		return 0;
	int cacheable = n < TOK_CACHE_MAX_WORD;
	if (cacheable) {
		int rc = cache_get(t, s, n, out, e);
		if (rc)
			return rc < 0 ? -1 : 0;
	}
	if (scratch_reserve(t, n, e))
		return -1;
	size_t start = out->n;
	int32_t whole = t->ignore_merges ? whole_word_id(t, s, n, e) : -1;
	if (whole == -2)
		return -1;
	if (whole >= 0) {
		if (tok_ids_push(out, whole, e))
			return -1;
	} else {
		size_t m = init_symbols(t, s, n);
		if (merge_all(t, m, e))
			return -1;
		struct tok_bpe_scratch *w = t->bpe;
		for (int32_t i = m ? 0 : -1; i >= 0; i = w->next[i])
			if (tok_ids_push(out, w->c[i], e))
				return -1;
	}
	if (cacheable && out->n > start) /* a word of no ids (out->p may still be NULL) is not cached */
		cache_put(t, s, n, out->p + start, out->n - start);
	return 0;
}
