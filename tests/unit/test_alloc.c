/* test_alloc.c: decode allocates nothing per token: a decode loop runs under an allocator that
 * counts calls (malloc, calloc, realloc, posix_memalign, aligned_alloc, from every thread), for
 * GQA and MLA models, in RAM and streamed (after a warm-up that gives every cache slot its
 * buffer). Under AddressSanitizer the counts come from its allocator hooks instead. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "nn/ws.h"
#include "t.h"

static _Atomic long allocs;
static _Atomic int counting;

static void count(void)
{
	if (atomic_load(&counting))
		atomic_fetch_add(&allocs, 1);
}

#if defined(__SANITIZE_ADDRESS__)
/* libasan's (sanitizer/allocator_interface.h, which gcc does not install). */
int __sanitizer_install_malloc_and_free_hooks(void (*m)(const volatile void *, size_t), void (*f)(const volatile void *));

static void on_malloc(const volatile void *p, size_t n)
{
	(void)p, (void)n;
	count();
}
static void on_free(const volatile void *p)
{
	(void)p;
}
static void install(void)
{
	__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}
#else
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t sz);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);

void *malloc(size_t n)
{
	count();
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t sz)
{
	count();
	return __libc_calloc(n, sz);
}

void *realloc(void *p, size_t n)
{
	count();
	return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	count();
	return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	count();
	void *p = __libc_memalign(align, n);
	if (!p)
		return 12; /* ENOMEM */
	*out = p;
	return 0;
}

static void install(void)
{
}
#endif

/* Greedy: the id of the largest logit. */
static int32_t argmax(const float *v, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		best = v[i] > v[best] ? i : best;
	return best;
}

/* Prefill and 3 decode tokens (warm-up), then 8 decode tokens counted; the allocations made
 * during those 8 into *n. */
static int decode_allocs(coli_engine *m, long *n, coli_err *e)
{
	coli_kv kv;
	int V = m->cfg->vocab_size, rc = coli_kv_init(&kv, m, 64, e);
	float *logits = malloc((size_t)V * sizeof(float));
	int32_t prompt[6] = {1, 2, 3, 4, 5, 6}, id;
	rc = rc == 0 && logits ? coli_forward(m, &kv, prompt, 6, NULL, logits, NULL, e) : -1;
	for (int t = 0; rc == 0 && t < 11; t++) {
		if (t == 3)
			atomic_store(&allocs, 0), atomic_store(&counting, 1);
		id = argmax(logits, V);
		rc = coli_forward(m, &kv, &id, 1, NULL, logits, NULL, e);
	}
	atomic_store(&counting, 0);
	*n = atomic_load(&allocs);
	free(logits);
	coli_kv_release(&kv);
	return rc;
}

/* Speculative decoding's path: prefill, then rounds of 3 draft steps, a verify of 4 tokens and
 * a rollback to 2 of them; the allocations of the rounds after the first 2 into *n. */
static int draft_allocs(coli_engine *m, long *n, coli_err *e)
{
	coli_kv kv;
	coli_mtp s;
	int V = m->cfg->vocab_size;
	memset(&s, 0, sizeof(s));
	int rc = coli_kv_init(&kv, m, 64, e) == 0 && coli_kv_keep(&kv, m, e) == 0 && coli_mtp_init(&s, m, 64, 0, e) == 0
			 ? 0
			 : -1;
	float *logits = malloc((size_t)4 * V * sizeof(float));
	int32_t prompt[6] = {1, 2, 3, 4, 5, 6}, toks[4] = {7, 0, 0, 0};
	rc = rc == 0 && logits ? coli_forward_mtp(m, &kv, &s, prompt, 6, NULL, logits, e) : -1;
	for (int t = 0; rc == 0 && t < 8; t++) {
		if (t == 2)
			atomic_store(&allocs, 0), atomic_store(&counting, 1);
		for (int j = 0; rc == 0 && j < 3; j++)
			if ((rc = coli_mtp_step(m, &s, toks[j], logits, e)) == 0)
				toks[j + 1] = argmax(logits, V);
		int n0 = kv.n;
		if (rc == 0)
			rc = coli_forward_mtp(m, &kv, &s, toks, 4, logits, NULL, e);
		if (rc == 0)
			rc = coli_kv_rollback(m, &kv, n0 + 2, e);
		coli_mtp_truncate(m, &s, kv.n);
		toks[0] = argmax(logits + V, V);
	}
	atomic_store(&counting, 0);
	*n = atomic_load(&allocs);
	free(logits);
	coli_mtp_release(&s);
	coli_kv_release(&kv);
	return rc;
}

static void check(const char *fam, const char *path, int stream)
{
	char name[160];
	coli_engine m;
	coli_err e = {0, ""};
	coli_engine_opts o = {.stream = stream, .so = {.cache_slots = 1}};
	long n = -1;
	int rc = coli_engine_open(&m, path, &o, &e);
	if (rc == 0 && !stream) {
		uint64_t want = coli_engine_work_bytes(m.cfg, 0), got = m.ws->bytes + coli_kernels_reserve_bytes(ws_max_cols(m.cfg, m.w));
		snprintf(name, sizeof(name), "alloc: %s: coli_engine_work_bytes is what the engine allocated", fam);
		T_CHECK(name, want == got && want > 0, "predicted %llu, allocated %llu", (unsigned long long)want,
			(unsigned long long)got);
	}
	long nd = -1;
	int rd = -1;
	if (rc == 0) {
		coli_store_set_predict(m.store, 1);
		rc = decode_allocs(&m, &n, &e);
		rd = m.cfg->n_mtp_layers > 0 ? draft_allocs(&m, &nd, &e) : 1;
		coli_engine_close(&m);
	}
	snprintf(name, sizeof(name), "alloc: %s %s: 8 decode tokens allocate nothing", fam, stream ? "streamed" : "in RAM");
	T_CHECK(name, rc == 0 && n == 0, "rc %d, %ld allocations: %s", rc, n, e.msg);
	snprintf(name, sizeof(name), "alloc: %s %s: 6 rounds of drafts, verify and rollback allocate nothing", fam,
		 stream ? "streamed" : "in RAM");
	if (rd != 1)
		T_CHECK(name, rd == 0 && nd == 0, "rc %d, %ld allocations: %s", rd, nd, e.msg);
}

int main(void)
{
	static const char *const fams[] = {"qwen3_moe", "deepseek_v3", "glm4_moe", "deepseek_v4"};
	char dir[] = "/tmp/coli-test-alloc.XXXXXX", path[600], cmd[1400];
	install();
	if (!mkdtemp(dir))
		return 1;
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		if (t_convert_fixture(dir, fams[i], path, sizeof(path)) < 0)
			continue;
		check(fams[i], path, 0);
		check(fams[i], path, 1);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("alloc: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
}
