/* pool.c: persistent worker threads for the kernels: pieces claimed by every thread, shrinking
 * toward a range's end; between jobs spin briefly, then sleep. */
#include "kernels/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* A worker waiting for the next job, or the caller for the workers, spins SPIN_NS, then spins
 * yielding the CPU (other threads of a loaded machine run meanwhile) until YIELD_NS, then sleeps:
 * a forward pass's products come back to back (a decode token of bench-run's model: 61
 * dispatches, 95% of the gaps between them under 200 us), and waking a sleeping thread costs more
 * than such a gap (a futex wake and, on a virtual machine, the vCPU's). Sleeping after 50 us
 * instead: 212 context switches a token, and q8 decode 0.81 of this (Zen 4, 2 threads; docs/benchmarks.md). */
#define SPIN_NS 50000
#define YIELD_NS 1000000

struct kpool {
	int want;                 /* workers asked for (some may have failed to start) */
	int workers;              /* threads besides the caller, running */
	pthread_t *tid;
	pthread_mutex_t mu;
	pthread_cond_t wake;      /* workers: a new generation */
	pthread_cond_t done;      /* caller: the last worker finished */
	_Atomic unsigned gen;     /* job generation; changed under mu */
	int sleepers;             /* workers waiting on `wake` (under mu) */
	int caller_waiting;       /* the caller waits on `done` (under mu) */
	int quit;
	/* the job, written before gen changes */
	kpool_fn fn;
	void *arg;
	int64_t total, grain, unit;
	_Atomic int64_t next;     /* start of the next unclaimed piece */
	_Atomic int active;       /* workers still in the current job */
	_Atomic int started;      /* workers that took their index */
	unsigned gen0;            /* the generation when the running workers were created */
};

static _Thread_local int self; /* 0: the caller; i + 1: worker i */

int kpool_self(void)
{
	return self;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Whether the i-th check of a wait begun at t0 goes on spinning (pausing or yielding meanwhile). */
static int keep_spinning(int i, int64_t t0)
{
	if ((i & 63) == 63) {
		int64_t d = (int64_t)coli_now_ns() - t0;
		if (d > YIELD_NS)
			return 0;
		if (d > SPIN_NS) {
			sched_yield();
			return 1;
		}
	}
	cpu_relax();
	return 1;
}

/* The next piece, [b, *end), or -1 when none is left: a share of what is left (half of it over
 * the threads), in whole units, at most grain: pieces of grain while more than threads x 2 of
 * them are left, then smaller ones down to a unit, so the threads end together within a unit's
 * time (with pieces of grain to the end, one thread waited up to a piece at every product's end:
 * a decode token's 61 products). */
static int64_t claim(kpool *P, int64_t *end)
{
	int64_t b = atomic_load_explicit(&P->next, memory_order_relaxed), two = 2 * (int64_t)(P->workers + 1);
	for (;;) {
		if (b >= P->total)
			return -1;
		int64_t n = (P->total - b + two - 1) / two;
		n = (n + P->unit - 1) / P->unit * P->unit;
		n = n > P->grain ? P->grain : n;
		if (atomic_compare_exchange_weak(&P->next, &b, b + n)) {
			*end = b + n < P->total ? b + n : P->total;
			return b;
		}
	}
}

/* Claims pieces until none is left. */
static void run_pieces(kpool *P)
{
	for (int64_t b, e; (b = claim(P, &e)) >= 0;)
		P->fn(P->arg, b, e);
}

/* Waits until the generation differs from `seen`: spinning first, then on the condvar. */
static unsigned wait_gen(kpool *P, unsigned seen)
{
	int64_t t0 = (int64_t)coli_now_ns();
	for (int i = 0;; i++) {
		unsigned g = atomic_load_explicit(&P->gen, memory_order_acquire);
		if (g != seen)
			return g;
		if (!keep_spinning(i, t0))
			break;
	}
	pthread_mutex_lock(&P->mu);
	unsigned g;
	while ((g = atomic_load_explicit(&P->gen, memory_order_acquire)) == seen) {
		P->sleepers++;
		pthread_cond_wait(&P->wake, &P->mu);
		P->sleepers--;
	}
	pthread_mutex_unlock(&P->mu);
	return g;
}

/* It starts from the generation it was created in (it may start after the first job). */
static void *worker(void *arg)
{
	kpool *P = arg;
	unsigned seen = P->gen0;
	self = atomic_fetch_add(&P->started, 1) + 1;
	for (;;) {
		seen = wait_gen(P, seen);
		if (P->quit)
			return NULL;
		run_pieces(P);
		if (atomic_fetch_sub(&P->active, 1) == 1) {
			pthread_mutex_lock(&P->mu);
			if (P->caller_waiting)
				pthread_cond_signal(&P->done);
			pthread_mutex_unlock(&P->mu);
		}
	}
}

/* Publishes a new generation (job or quit) and wakes sleeping workers. */
static void publish(kpool *P)
{
	pthread_mutex_lock(&P->mu);
	atomic_store_explicit(&P->gen, atomic_load(&P->gen) + 1, memory_order_release);
	if (P->sleepers)
		pthread_cond_broadcast(&P->wake);
	pthread_mutex_unlock(&P->mu);
}

static void wait_workers(kpool *P)
{
	int64_t t0 = (int64_t)coli_now_ns();
	for (int i = 0; atomic_load_explicit(&P->active, memory_order_acquire) != 0; i++) {
		if (!keep_spinning(i, t0)) {
			pthread_mutex_lock(&P->mu);
			P->caller_waiting = 1;
			while (atomic_load_explicit(&P->active, memory_order_acquire) != 0)
				pthread_cond_wait(&P->done, &P->mu);
			P->caller_waiting = 0;
			pthread_mutex_unlock(&P->mu);
			return;
		}
	}
}

void kpool_stop(kpool *P)
{
	if (!P->tid) {
		P->want = 0;
		return;
	}
	P->quit = 1;
	publish(P);
	for (int i = 0; i < P->workers; i++)
		pthread_join(P->tid[i], NULL);
	free(P->tid);
	P->tid = NULL;
	P->workers = 0;
	P->want = 0;
	P->quit = 0;
}

static void start(kpool *P, int workers)
{
	kpool_stop(P);
	P->want = workers;
	atomic_store(&P->started, 0);
	P->tid = calloc((size_t)workers, sizeof(*P->tid));
	if (!P->tid)
		return;
	P->gen0 = atomic_load(&P->gen);
	for (; P->workers < workers; P->workers++)
		if (pthread_create(&P->tid[P->workers], NULL, worker, P) != 0)
			break;
}

kpool *kpool_new(void)
{
	kpool *P = calloc(1, sizeof(*P));
	if (!P)
		return NULL;
	pthread_mutex_init(&P->mu, NULL);
	pthread_cond_init(&P->wake, NULL);
	pthread_cond_init(&P->done, NULL);
	return P;
}

void kpool_free(kpool *P)
{
	if (!P)
		return;
	kpool_stop(P);
	pthread_mutex_destroy(&P->mu);
	pthread_cond_destroy(&P->wake);
	pthread_cond_destroy(&P->done);
	free(P);
}

void kpool_for(kpool *P, int threads, int64_t total, int64_t grain, int64_t unit, kpool_fn fn, void *arg)
{
	if (threads > 1 && P->want != threads - 1)
		start(P, threads - 1);
	if (threads <= 1 || P->workers == 0 || total <= grain) {
		fn(arg, 0, total);
		return;
	}
	P->fn = fn;
	P->arg = arg;
	P->total = total;
	P->unit = unit > 0 && unit <= grain ? unit : grain;
	P->grain = grain;
	atomic_store(&P->next, 0);
	atomic_store(&P->active, P->workers);
	publish(P);
	run_pieces(P);
	wait_workers(P);
}
