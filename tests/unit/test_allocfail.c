/* test_allocfail.c: allocation-failure injection (after Lua's ltests.c): each loader is run again
 * and again with its k-th allocation failing, k = 1, 2, ... until a run makes fewer than k
 * allocations. Every failing run must return an error (code and message set), never crash, and
 * free everything it allocated; a successful load, once closed, too. malloc, calloc, realloc,
 * posix_memalign and aligned_alloc of the test binary are replaced (every library's calls come
 * here, jansson's and PCRE2's included) and the live allocations kept in a table, which is how
 * leaks are found without a sanitizer; under AddressSanitizer the replacements forward to its
 * allocator, so LeakSanitizer checks the same runs (only coli's own allocations are failed there).
 *
 * Allocations made by jansson itself are never failed: its lexer ignores a failed append to its
 * token buffer and then trips an assert (jansson 2.14, load.c lex_scan_string), a defect of
 * jansson's, not coli's; they are counted, and jansson's NULL results are still exercised through
 * the allocations coli makes around them. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "engine.h"
#include "fileio.h"
#include "kvfile.h"
#include "model.h"
#include "safetensors.h"
#include "t.h"
#include "tokenizer.h"
#include "usage.h"

/* ---- the allocator ------------------------------------------------------------------------ */

#define LIVE_SLOTS (1u << 17) /* open addressing: live pointers of the current run */
#define MAX_SURVEY (1u << 22) /* allocations of one run whose failability is recorded */

static atomic_flag lock = ATOMIC_FLAG_INIT;
static void *live[LIVE_SLOTS];
static const void *live_caller[LIVE_SLOTS]; /* who allocated live[i] */
static long n_live, n_allocs;  /* live pointers in the table; allocations since arm() */
static long fail_at;           /* the allocation that fails (1-based); 0: none */
static int tracking, failed_one;
static uint8_t failable[MAX_SURVEY]; /* of the survey run: allocation i + 1 is not jansson's */
static int surveying;

static void acquire(void)
{
	while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire))
		;
}
static void release_lock(void) { atomic_flag_clear_explicit(&lock, memory_order_release); }

static size_t slot_of(const void *p)
{
	return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 44) & (LIVE_SLOTS - 1);
}

static void table_add(void *p, const void *caller)
{
	size_t i = slot_of(p);
	if (n_live >= (long)LIVE_SLOTS * 3 / 4)
		abort(); /* the test's table is too small for this loader */
	while (live[i] && live[i] != (void *)1)
		i = (i + 1) & (LIVE_SLOTS - 1);
	live[i] = p, live_caller[i] = caller, n_live++;
}

/* Removes p if it is there (tombstone 1 keeps the probe chains). */
static void table_del(void *p)
{
	for (size_t i = slot_of(p); live[i]; i = (i + 1) & (LIVE_SLOTS - 1))
		if (live[i] == p) {
			live[i] = (void *)1, n_live--;
			return;
		}
}

/* Code ranges (found at start): libjansson's, whose allocations never fail; the dynamic
 * loader's, whose allocations (the TLS of new threads, kept with glibc's cache of thread stacks)
 * may fail but are not tracked. */
typedef struct code_range {
	const char *lib;
	uintptr_t lo, hi;
} code_range;
static code_range jansson = {"libjansson", 0, 0}, loader_code = {"ld-linux", 0, 0};
#if defined(__SANITIZE_ADDRESS__)
/* Under ASan only coli's own allocations fail (the test binary's code: libcoli and the engine
 * are linked in): ASan's thread start allocates through libc and CHECK-fails when it cannot. */
static code_range exe_code = {"", 0, 0}; /* dl_iterate_phdr lists the program first */
#define NEVER_FAILED(c) (!in_range(&exe_code, c))
#else
#define NEVER_FAILED(c) in_range(&jansson, c)
#endif

static int find_code(struct dl_phdr_info *info, size_t size, void *ctx)
{
	code_range *r = ctx;
	(void)size;
	if (!strstr(info->dlpi_name, r->lib))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (!r->lo || a < r->lo)
			r->lo = a;
		if (a + ph->p_memsz > r->hi)
			r->hi = a + ph->p_memsz;
	}
	return 1;
}

static int in_range(const code_range *r, const void *p)
{
	return (uintptr_t)p >= r->lo && (uintptr_t)p < r->hi;
}

/* Whether this allocation (called from caller) fails; counts it. */
static int should_fail_from(const void *caller)
{
	acquire();
	int mine = !NEVER_FAILED(caller);
	long i = tracking ? ++n_allocs : 0;
	if (surveying && i > 0 && i <= (long)MAX_SURVEY)
		failable[i - 1] = (uint8_t)mine;
	int f = tracking && i == fail_at && mine;
	failed_one |= f;
	release_lock();
	if (f)
		errno = ENOMEM; /* as a real failure does (glibc's pthread_create asserts it) */
	return f;
}

static void note_alloc_from(void *p, const void *caller)
{
	if (!p || in_range(&loader_code, caller))
		return;
	acquire();
	if (tracking)
		table_add(p, caller);
	release_lock();
}
#define note_alloc(p) note_alloc_from(p, __builtin_return_address(0))

/* Where a live allocation was made ("function+offset" of its caller), for the report. */
static void first_live(char *out, size_t n)
{
	for (size_t i = 0; i < LIVE_SLOTS; i++)
		if (live[i] && live[i] != (void *)1) {
			Dl_info d;
			if (dladdr(live_caller[i], &d) && d.dli_sname)
				snprintf(out, n, "%s+%#lx", d.dli_sname, (unsigned long)((uintptr_t)live_caller[i] - (uintptr_t)d.dli_saddr));
			else
				snprintf(out, n, "%p in %s", live_caller[i], d.dli_fname ? d.dli_fname : "?");
			return;
		}
}

static void note_free(void *p)
{
	if (!p)
		return;
	acquire();
	if (n_live)
		table_del(p);
	release_lock();
}

#define should_fail() should_fail_from(__builtin_return_address(0))

#if defined(__SANITIZE_ADDRESS__)
/* Under ASan: its allocator, found with dlsym (which may itself allocate: from a small arena
 * meanwhile, never freed). */
static void *(*real_malloc)(size_t), *(*real_calloc)(size_t, size_t), *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_memalign)(void **, size_t, size_t);
static char arena[1 << 16];
static size_t arena_used;
static int resolving;

static void *arena_alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (arena_used + n > sizeof(arena))
		return NULL;
	arena_used += n;
	return memset(arena + arena_used - n, 0, n);
}

static void resolve(void)
{
	if (real_malloc || resolving)
		return;
	resolving = 1;
	real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	real_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
	real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	resolving = 0;
}
#define BOOT(n) (resolve(), !real_malloc)
static int in_arena(const void *p) { return (const char *)p >= arena && (const char *)p < arena + sizeof(arena); }
static void *sys_malloc(size_t n) { return BOOT(n) ? arena_alloc(n) : real_malloc(n); }
static void *sys_calloc(size_t n, size_t s) { return BOOT(n) ? arena_alloc(n * s) : real_calloc(n, s); }
static void *sys_realloc(void *p, size_t n) { return real_realloc(p, n); }
static void sys_free(void *p)
{
	if (!in_arena(p))
		real_free(p);
}
static int sys_memalign(void **out, size_t a, size_t n) { return real_memalign(out, a, n); }
#else
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t sz);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);
static void *sys_malloc(size_t n) { return __libc_malloc(n); }
static void *sys_calloc(size_t n, size_t s) { return __libc_calloc(n, s); }
static void *sys_realloc(void *p, size_t n) { return __libc_realloc(p, n); }
static void sys_free(void *p) { __libc_free(p); }
static int sys_memalign(void **out, size_t a, size_t n)
{
	return (*out = __libc_memalign(a, n)) ? 0 : ENOMEM;
}
#endif

void *malloc(size_t n)
{
	void *p = should_fail() ? NULL : sys_malloc(n);
	note_alloc(p);
	return p;
}

void *calloc(size_t n, size_t sz)
{
	void *p = should_fail() ? NULL : sys_calloc(n, sz);
	note_alloc(p);
	return p;
}

void *realloc(void *p, size_t n)
{
	if (!p)
		return malloc(n);
	if (should_fail())
		return NULL;
	void *q = sys_realloc(p, n);
	if (q) {
		note_free(p);
		note_alloc(q);
	}
	return q;
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (should_fail())
		return ENOMEM;
	int rc = sys_memalign(out, align, n);
	if (rc == 0)
		note_alloc(*out);
	return rc;
}

void *aligned_alloc(size_t align, size_t n)
{
	void *p = NULL;
	return posix_memalign(&p, align, n) == 0 ? p : NULL;
}

void free(void *p)
{
	note_free(p);
	sys_free(p);
}

/* From now on allocations are counted and tracked, the k-th fails (0: none). */
static void arm(long k)
{
	acquire();
	if (n_live == 0) /* clears the tombstones */
		memset(live, 0, sizeof(live));
	n_allocs = 0, fail_at = k, failed_one = 0, tracking = 1;
	release_lock();
}

/* Stops counting; the allocations made since arm() and still live. */
static long disarm(long *allocs)
{
	acquire();
	tracking = 0;
	*allocs = n_allocs;
	long n = n_live;
	release_lock();
	return n;
}

/* Forgets the table (after a leak was reported, so the next run starts clean). */
static void forget(void)
{
	acquire();
	memset(live, 0, sizeof(live));
	n_live = 0;
	release_lock();
}

/* ---- the loaders -------------------------------------------------------------------------- */

static char dir[] = "/tmp/coli-test-allocfail.XXXXXX";
static char ct_path[600], usage_path[700], kv_path[700], tok_path[600], ckpt_path[600];
static char *config_text;
static uint8_t identity[32];

/* A loader: loads, and on success releases what it loaded; 0 or -1 with e filled. */
typedef int (*loader)(coli_err *e);

static int load_container(coli_err *e)
{
	coli_container *c = NULL;
	int rc = coli_container_open(&c, ct_path, e);
	coli_container_close(c);
	return rc;
}

static int load_usage(coli_err *e)
{
	coli_usage u;
	memset(&u, 0, sizeof(u));
	int rc = coli_usage_read(usage_path, identity, &u, e);
	coli_usage_release(&u);
	return rc;
}

static int load_kv(coli_err *e)
{
	coli_kvfile f;
	memset(&f, 0, sizeof(f));
	int rc = coli_kvfile_load(kv_path, identity, 512, NULL, 0, &f, e); /* any valid part table */
	coli_kvfile_release(&f);
	return rc;
}

static int load_ckpt(coli_err *e)
{
	coli_ckpt *c = NULL;
	int rc = coli_ckpt_open(&c, ckpt_path, e);
	coli_ckpt_close(c);
	return rc;
}

static int load_model(coli_err *e)
{
	coli_model m;
	return coli_model_parse(&m, config_text, "config.json", e);
}

static int load_tok(coli_err *e)
{
	coli_tok *t = NULL;
	int rc = coli_tok_load(&t, tok_path, e);
	coli_tok_free(t);
	return rc;
}

static int open_engine(int stream, coli_err *e)
{
	coli_engine m;
	coli_engine_opts o = {.stream = stream, .threads = 2, .so = {.cache_slots = 2}};
	int rc = coli_engine_open(&m, ct_path, &o, e);
	if (rc == 0)
		coli_engine_close(&m);
	return rc;
}
static int load_engine_ram(coli_err *e) { return open_engine(0, e); }
static int load_engine_stream(coli_err *e) { return open_engine(1, e); }

/* Runs f with its k-th allocation failing for k = 1, 2, ...; one PASS/FAIL line for it. */
static void drive(const char *name, loader f)
{
	char what[200];
	long k, allocs = 0, bad_k = 0, leaks = 0, recovered = 0;
	char why[2400] = "";
	coli_err e = {0, ""};
	f(&e); /* warm-up: whatever libraries allocate once (stdio, locale) is allocated now */
	surveying = 1, arm(0);
	f(&e);
	disarm(&allocs);
	surveying = 0;
	long n_fail = 0, total = allocs;
	for (long i = 0; i < allocs && i < (long)MAX_SURVEY; i++)
		n_fail += failable[i];
	for (k = 1;; k++) {
		if (k <= allocs && k <= (long)MAX_SURVEY && !failable[k - 1])
			continue; /* jansson's: never failed, the same run as the survey */
		e = (coli_err){0, ""};
		arm(k);
		int rc = f(&e), hit = failed_one;
		long left = disarm(&allocs);
		if (left) {
			if (!leaks++) {
				char where[300] = "?";
				first_live(where, sizeof(where));
				snprintf(why, sizeof(why), "allocation %ld failing: %ld allocations not freed, one from %s (rc %d: %s)",
					 k, left, where, rc, e.msg);
			}
			forget();
		}
		if (allocs < k) /* the k-th allocation was never made: the last run was whole */
			break;
		if (hit && rc == 0)
			recovered++;
		if (hit && rc != 0 && (e.code == 0 || !e.msg[0]) && !bad_k++)
			snprintf(why, sizeof(why), "allocation %ld failing: rc %d without an error (code %d, '%s')", k, rc,
				 e.code, e.msg);
	}
	int ok = e.code == 0 && !leaks && !bad_k;
	snprintf(what, sizeof(what), "allocfail: %s: each of its %ld allocations failing (%ld of jansson's never): an error, no leak",
		 name, n_fail, total - n_fail);
	T_CHECK(what, ok, "%s%s", why[0] ? why : "the load without failures failed: ", why[0] ? "" : e.msg);
	if (recovered)
		printf("  (%s: %ld failed allocations recovered from)\n", name, recovered);
}

static int setup(void)
{
	char cmd[4096];
	if (!mkdtemp(dir))
		return -1;
	snprintf(ct_path, sizeof(ct_path), "%s/q.coli", dir);
	snprintf(usage_path, sizeof(usage_path), "%s/u.coli_usage", dir);
	snprintf(kv_path, sizeof(kv_path), "%s/s.coli_kv", dir);
	snprintf(ckpt_path, sizeof(ckpt_path), "%s/qwen3_moe-tiny/checkpoint", t_fixtures());
	snprintf(tok_path, sizeof(tok_path), "tests/fuzz/corpus/tokenizer/qwen3-cut.json");
	snprintf(cmd, sizeof(cmd),
		 "bin/coli-convert -q %s %s && bin/coli-run -q -m %s --prompt-ids '1 2 3 4' -n 4 --print-ids "
		 "--usage %s --session %s >/dev/null",
		 ckpt_path, ct_path, ct_path, usage_path, kv_path);
	coli_container *c = NULL;
	coli_err e;
	size_t len;
	char cfg[700];
	snprintf(cfg, sizeof(cfg), "%s/config.json", ckpt_path);
	if (system(cmd) != 0 || coli_container_open(&c, ct_path, &e) < 0 ||
	    coli_read_file(cfg, &config_text, &len, &e) < 0)
		return -1;
	memcpy(identity, c->identity, sizeof(identity));
	coli_container_close(c);
	return 0;
}

int main(void)
{
	printf("allocfail: setup\n"); /* stdout's buffer allocated before any failure */
	dl_iterate_phdr(find_code, &jansson);
	dl_iterate_phdr(find_code, &loader_code);
#if defined(__SANITIZE_ADDRESS__)
	dl_iterate_phdr(find_code, &exe_code);
#endif
	T_CHECK("allocfail: setup (a container, its usage and session files)", setup() == 0, "setup failed");
	drive("coli_container_open", load_container);
	drive("coli_usage_read", load_usage);
	drive("coli_kvfile_load", load_kv);
	drive("coli_ckpt_open", load_ckpt);
	drive("coli_model_parse", load_model);
	drive("coli_tok_load", load_tok);
#if defined(__SANITIZE_ADDRESS__)
	/* ASan's start of a new thread (the engine's kernel and I/O threads) CHECK-fails on an
	 * allocation failure made while it starts: the engine is driven without ASan only. */
	(void)load_engine_ram, (void)load_engine_stream;
	printf("allocfail: coli_engine_open not driven under AddressSanitizer\n");
#else
	drive("coli_engine_open (RAM store)", load_engine_ram);
	drive("coli_engine_open (streaming store)", load_engine_stream);
#endif
	free(config_text);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("allocfail: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
}
