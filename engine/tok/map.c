/* tok/map.c: open-addressing hash tables: byte string -> int32, and BPE merge pairs. */
#include <stdlib.h>
#include <string.h>

#include "tok/internal.h"

static uint32_t hash_bytes(const char *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)k[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ (h >> 32));
}

static int strmap_alloc_slots(tok_strmap *m, uint32_t nslots, coli_err *e)
{
	uint32_t *s = tok_alloc(nslots, sizeof(*s), "tokenizer: hash table", e);
	if (!s)
		return -1;
	free(m->slots);
	m->slots = s;
	m->mask = nslots - 1;
	for (uint32_t i = 0; i < m->count; i++) {
		uint32_t h = hash_bytes(m->keys + m->koff[i], m->klen[i]) & m->mask;
		while (s[h])
			h = (h + 1) & m->mask;
		s[h] = i + 1;
	}
	return 0;
}

int tok_strmap_init(tok_strmap *m, size_t expect, coli_err *e)
{
	memset(m, 0, sizeof(*m));
	if (expect < 16)
		expect = 16;
	if (expect > UINT32_MAX / 4)
		return coli_errf(e, COLI_EUSAGE, "tokenizer: %zu entries exceed the limit", expect);
	uint32_t nslots = 32;
	while (nslots < 2 * expect)
		nslots *= 2;
	m->cap = (uint32_t)expect;
	m->koff = tok_alloc(m->cap, sizeof(*m->koff), "tokenizer: hash table", e);
	m->klen = tok_alloc(m->cap, sizeof(*m->klen), "tokenizer: hash table", e);
	m->val = tok_alloc(m->cap, sizeof(*m->val), "tokenizer: hash table", e);
	if (!m->koff || !m->klen || !m->val || strmap_alloc_slots(m, nslots, e)) {
		tok_strmap_release(m);
		return -1;
	}
	return 0;
}

void tok_strmap_release(tok_strmap *m)
{
	free(m->keys);
	free(m->koff);
	free(m->klen);
	free(m->val);
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

size_t tok_strmap_bytes(const tok_strmap *m)
{
	size_t slots = m->slots ? (size_t)m->mask + 1 : 0;
	return m->keys_cap + (size_t)m->cap * (sizeof(*m->koff) + sizeof(*m->klen) + sizeof(*m->val)) +
	       slots * sizeof(*m->slots);
}

int32_t tok_strmap_find(const tok_strmap *m, const char *k, size_t n)
{
	if (!m->slots)
		return -1;
	uint32_t h = hash_bytes(k, n) & m->mask;
	for (uint32_t s; (s = m->slots[h]) != 0; h = (h + 1) & m->mask) {
		uint32_t i = s - 1;
		if (m->klen[i] == n && memcmp(m->keys + m->koff[i], k, n) == 0)
			return (int32_t)i;
	}
	return -1;
}

/* Room for one more entry and its key of n bytes. */
static int strmap_reserve(tok_strmap *m, size_t n, coli_err *e)
{
	if (m->count == m->cap) {
		uint32_t c = m->cap * 2;
		uint32_t *ko = realloc(m->koff, c * sizeof(*ko));
		if (ko)
			m->koff = ko;
		uint32_t *kl = realloc(m->klen, c * sizeof(*kl));
		if (kl)
			m->klen = kl;
		int32_t *v = realloc(m->val, c * sizeof(*v));
		if (v)
			m->val = v;
		if (!ko || !kl || !v)
			return coli_errf(e, COLI_ENOMEM, "tokenizer: cannot allocate %zu bytes",
					 (size_t)c * 12);
		m->cap = c;
	}
	if ((size_t)(m->count + 1) * 2 > (size_t)m->mask + 1 &&
	    strmap_alloc_slots(m, (m->mask + 1) * 2, e))
		return -1;
	if (m->keys_n + n + 1 > UINT32_MAX)
		return coli_errf(e, COLI_EUSAGE, "tokenizer: token strings exceed 4 GiB");
	if (m->keys_n + n + 1 > m->keys_cap) {
		size_t c = m->keys_cap ? m->keys_cap : 4096;
		while (c < m->keys_n + n + 1)
			c *= 2;
		char *k = realloc(m->keys, c);
		if (!k)
			return coli_errf(e, COLI_ENOMEM, "tokenizer: cannot allocate %zu bytes", c);
		m->keys = k;
		m->keys_cap = c;
	}
	return 0;
}

int32_t tok_strmap_put(tok_strmap *m, const char *k, size_t n, int32_t val, int *added,
		       coli_err *e)
{
	int32_t i = tok_strmap_find(m, k, n);
	*added = 0;
	if (i >= 0)
		return i;
	if (strmap_reserve(m, n, e))
		return -1;
	i = (int32_t)m->count++;
	m->koff[i] = (uint32_t)m->keys_n;
	m->klen[i] = (uint32_t)n;
	m->val[i] = val;
	if (n)
		memcpy(m->keys + m->keys_n, k, n);
	m->keys[m->keys_n + n] = '\0';
	m->keys_n += n + 1;
	uint32_t h = hash_bytes(k, n) & m->mask;
	while (m->slots[h])
		h = (h + 1) & m->mask;
	m->slots[h] = (uint32_t)i + 1;
	*added = 1;
	return i;
}

static uint32_t hash_pair(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (uint32_t)k;
}

int tok_merges_init(tok_merges *m, size_t expect, coli_err *e)
{
	memset(m, 0, sizeof(*m));
	uint32_t nslots = 32;
	while (nslots < 2 * expect)
		nslots *= 2;
	m->key = tok_alloc(nslots, sizeof(*m->key), "tokenizer: merge table", e);
	m->rank = tok_alloc(nslots, sizeof(*m->rank), "tokenizer: merge table", e);
	m->merged = tok_alloc(nslots, sizeof(*m->merged), "tokenizer: merge table", e);
	if (!m->key || !m->rank || !m->merged) {
		tok_merges_release(m);
		return -1;
	}
	memset(m->key, 0xFF, nslots * sizeof(*m->key));
	m->mask = nslots - 1;
	return 0;
}

size_t tok_merges_bytes(const tok_merges *m)
{
	return m->key ? ((size_t)m->mask + 1) * (sizeof(*m->key) + sizeof(*m->rank) + sizeof(*m->merged)) : 0;
}

void tok_merges_release(tok_merges *m)
{
	free(m->key);
	free(m->rank);
	free(m->merged);
	memset(m, 0, sizeof(*m));
}

/* The table is sized for all merges at init, so it never fills. */
void tok_merges_set(tok_merges *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
	uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	uint32_t h = hash_pair(k) & m->mask;
	while (m->key[h] != UINT64_MAX && m->key[h] != k)
		h = (h + 1) & m->mask;
	if (m->key[h] == UINT64_MAX)
		m->count++;
	m->key[h] = k;
	m->rank[h] = rank;
	m->merged[h] = merged;
}

int tok_merges_get(const tok_merges *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged)
{
	uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	uint32_t h = hash_pair(k) & m->mask;
	for (; m->key[h] != UINT64_MAX; h = (h + 1) & m->mask) {
		if (m->key[h] == k) {
			*rank = m->rank[h];
			*merged = m->merged[h];
			return 1;
		}
	}
	return 0;
}
