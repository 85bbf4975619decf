/* membench.c: memory read bandwidth with 1..N threads over a buffer far larger than the caches,
 * the physical limit of warm decoding (every weight byte read once per token).
 * usage: coli-membench [--cpu-time] [SIZE_MIB [THREADS]]   prints "threads=T read_gbs=X" per thread count */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "hot.h"

typedef struct part {
	const uint64_t *p;
	size_t n;
	uint64_t sum;
} part;

/* Eight independent sums: the loop vectorises and keeps several loads in flight. */
COLI_HOT static void *reader(void *arg)
{
	part *p = arg;
	uint64_t s[8] = {0};
	for (size_t i = 0; i + 8 <= p->n; i += 8)
		for (int j = 0; j < 8; j++)
			s[j] += p->p[i + j];
	for (int j = 0; j < 8; j++)
		p->sum += s[j];
	return NULL;
}

/* One pass in the calling thread timed by its CPU time: the machine's other work then counts only
 * through the memory system (coli-kernbench times one thread so; tests/bench/roofline.sh sets
 * one against the other). */
static double pass_cpu(const uint64_t *buf, size_t n)
{
	struct timespec a, b;
	part p = {buf, n, 0};
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	reader(&p);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	if (p.sum == 42) /* keeps the sums alive */
		fputc(' ', stderr);
	return (double)n * 8 / ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9) / 1e9;
}

static double pass(const uint64_t *buf, size_t n, int threads)
{
	pthread_t tid[64];
	part parts[64];
	double t0 = coli_now();
	for (int i = 0; i < threads; i++) {
		parts[i] = (part){buf + n / threads * i, n / threads, 0};
		pthread_create(&tid[i], NULL, reader, &parts[i]);
	}
	uint64_t sum = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(tid[i], NULL);
		sum += parts[i].sum;
	}
	double dt = coli_now() - t0;
	if (sum == 42) /* keeps the sums alive */
		fputc(' ', stderr);
	return (double)(n / threads * threads) * 8 / dt / 1e9;
}

static const char usage[] =
	"usage: coli-membench [--cpu-time] [SIZE_MIB [THREADS]]\n"
	"\n"
	"Memory read bandwidth over a buffer of SIZE_MIB (>= 64, default 2048) with 1 to THREADS (1..64,\n"
	"default 2) threads, the best of 5 passes each; prints \"threads=T read_gbs=X\" per thread count.\n"
	"\n"
	"  --cpu-time  one thread only (THREADS must be 1), timed by its CPU time, as coli-kernbench times\n"
	"              one thread: on a shared machine the wall clock also counts the time others ran\n"
	"  -h, --help  this text\n";

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return fputs(usage, stdout), 0;
	int cpu = argc > 1 && !strcmp(argv[1], "--cpu-time");
	argc -= cpu, argv += cpu;
	size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 2048;
	int max_threads = argc > 2 ? atoi(argv[2]) : (cpu ? 1 : 2);
	if (mib < 64 || max_threads < 1 || max_threads > 64 || argc > 3 || (cpu && max_threads != 1)) {
		fprintf(stderr, "coli-membench: bad arguments\n%s", usage);
		return 2;
	}
	size_t n = (mib << 20) / 8;
	uint64_t *buf = malloc(n * 8);
	if (!buf) {
		fprintf(stderr, "coli-membench: cannot allocate %zu MiB\n", mib);
		return 1;
	}
	memset(buf, 1, n * 8);
	for (int t = 1; t <= max_threads; t++) {
		double best = 0;
		for (int rep = 0; rep < 5; rep++) {
			double g = cpu ? pass_cpu(buf, n) : pass(buf, n, t);
			best = g > best ? g : best;
		}
		printf("threads=%d read_gbs=%.1f\n", t, best);
	}
	free(buf);
	return 0;
}
