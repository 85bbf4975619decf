/* util.c: thread count and a parallel-for over independent tasks. */
#include "synth.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

int synth_nthreads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

typedef struct par {
	int (*fn)(void *ctx, int i, coli_err *e);
	void *ctx;
	int n, next, failed;
	coli_err err;
	pthread_mutex_t mu;
} par;

/* Takes tasks in index order until none is left or one failed. */
static void *par_worker(void *arg)
{
	par *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		int i = p->failed ? p->n : p->next++;
		pthread_mutex_unlock(&p->mu);
		if (i >= p->n)
			return NULL;
		coli_err e = {0};
		if (p->fn(p->ctx, i, &e) == 0)
			continue;
		pthread_mutex_lock(&p->mu);
		if (!p->failed)
			p->err = e;
		p->failed = 1;
		pthread_mutex_unlock(&p->mu);
	}
}

int synth_parallel(int n, int threads, int (*fn)(void *ctx, int i, coli_err *e), void *ctx,
		   coli_err *e)
{
	par p = {.fn = fn, .ctx = ctx, .n = n};
	pthread_t tid[256];
	int nt = threads < n ? threads : n, started = 0;
	pthread_mutex_init(&p.mu, NULL);
	for (; started < nt - 1; started++)
		if (pthread_create(&tid[started], NULL, par_worker, &p))
			break;
	par_worker(&p);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	pthread_mutex_destroy(&p.mu);
	if (p.failed && e)
		*e = p.err;
	return p.failed ? -1 : 0;
}
