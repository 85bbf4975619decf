/* kernbench.c: the median time of one kernel product, for one variant, encoding, shape and token
 * count: weight GB/s for a matrix-vector product, GFLOP/s for a batched one. It uses the public
 * kernels.h only, so the same source built against two commits' libraries compares their kernels
 * (tests/bench/kernels.sh alternates them; docs/benchmarks.md, "Kernels").
 * usage: coli-kernbench [--precision exact|q8] ISA ENC ROWS COLS N REPS [THREADS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "kernels.h"
#include "layout.h"
#include "quant.h"

static const char usage[] =
	"usage: coli-kernbench [--precision exact|q8] ISA ENC ROWS COLS N REPS [THREADS]\n"
	"\n"
	"The median time of REPS (1..1000) calls of one product over a ROWS x COLS matrix (each 1..65536)\n"
	"of encoding ENC (f32, bf16, f16, fp8 with 128x128 blocks, q8, q4, fp4) with kernel variant ISA (scalar,\n"
	"avx2, avx512, amx) on THREADS threads (default 1): N = 0 is coli_mat_vec (prints \"X GB/s\" of weight\n"
	"bytes), N = 1..512 is coli_mat_mul of N tokens (prints \"X GFLOP/s\"). The matrix is in cache when\n"
	"it fits. Codes are random, scales moderate, fp8 codes never NaN. One thread is timed by its CPU time\n"
	"(a shared machine's other work then counts only through the caches), more threads by the clock.\n"
	"\n"
	"  --precision P  the activations of q4 and q8 products: exact (float32, the default) or q8\n"
	"                 (8-bit; the q8 products' variant goes to stderr)\n"
	"  -h, --help  this text\n";

static uint64_t rng_state = 88172645463325252ull;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

/* The calling thread's CPU time in seconds. */
static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Random codes the encoding can hold, moderate scales. */
static void fill(const coli_blob *b, uint8_t *buf)
{
	for (uint64_t i = 0; i < b->nbytes; i++)
		buf[i] = (uint8_t)rng();
	if (b->enc == COLI_ENC_Q4 || b->enc == COLI_ENC_Q8)
		for (uint64_t i = 0; i < b->scales_bytes / 2; i++) {
			uint16_t h = coli_f32_to_f16(0.01f * (float)(1 + rng() % 100));
			memcpy(buf + b->scales_off + 2 * i, &h, 2);
		}
	if (b->enc == COLI_ENC_FP4) /* UE8M0 scales 2^-7 .. 2^7 (never 0's subnormal or 255's NaN) */
		for (uint64_t i = 0; i < b->scales_bytes; i++)
			buf[b->scales_off + i] = (uint8_t)(120 + rng() % 15);
	if (b->enc == COLI_ENC_FP8) {
		float s = 0.01f;
		for (uint64_t i = 0; i < b->scales_bytes / 4; i++)
			memcpy(buf + b->scales_off + 4 * i, &s, 4);
		for (uint64_t i = 0; i < b->codes_bytes; i++)
			if ((buf[i] & 0x7F) == 0x7F)
				buf[i] = 0;
	}
	if (b->enc == COLI_ENC_F32)
		for (uint64_t i = 0; i < b->codes_bytes / 4; i++) {
			float f = (float)(rng() % 1000) / 1000.0f;
			memcpy(buf + 4 * i, &f, 4);
		}
	if (b->enc == COLI_ENC_BF16 || b->enc == COLI_ENC_F16)
		for (uint64_t i = 0; i < b->codes_bytes / 2; i++) {
			uint16_t h = (uint16_t)(0x3C00 | (rng() & 0x3FF));
			memcpy(buf + 2 * i, &h, 2);
		}
}

static long arg(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == 0 || *end || v < lo || v > hi) {
		fprintf(stderr, "coli-kernbench: %s '%s': expected %ld..%ld\n%s", what, s, lo, hi, usage);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	coli_precision prec = COLI_PREC_EXACT;
	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return fputs(usage, stdout), 0;
	if (argc > 2 && strcmp(argv[1], "--precision") == 0) {
		if (coli_precision_parse(argv[2], &prec) < 0)
			return fprintf(stderr, "coli-kernbench: --precision '%s': expected exact or q8\n%s", argv[2], usage), 2;
		argc -= 2, argv += 2;
	}
	if (argc < 7 || argc > 8)
		return fputs(usage, stderr), 2;
	int enc = coli_enc_parse(argv[2]);
	if (enc < 0)
		return fprintf(stderr, "coli-kernbench: ENC '%s': unknown\n%s", argv[2], usage), 2;
	int64_t rows = arg(argv[3], 1, 65536, "ROWS"), cols = arg(argv[4], 1, 65536, "COLS");
	int n = (int)arg(argv[5], 0, 512, "N"), reps = (int)arg(argv[6], 1, 1000, "REPS");
	int threads = argc > 7 ? (int)arg(argv[7], 1, 256, "THREADS") : 1;
	coli_kernels *K;
	coli_err e;
	coli_blob b;
	int64_t block[2] = {enc == COLI_ENC_FP8 ? 128 : 0, enc == COLI_ENC_FP8 ? 128 : 0};
	if (coli_kernels_open(&K, argv[1], threads, &e) < 0 || coli_kernels_reserve(K, cols, &e) < 0 ||
	    coli_blob_init(&b, (coli_enc)enc, rows, cols, block, &e) < 0)
		return fprintf(stderr, "coli-kernbench: %s\n", e.msg), 1;
	coli_kernels_set_precision(K, prec);
	if (prec == COLI_PREC_Q8)
		fprintf(stderr, "q8 products: %s\n", coli_kernels_q8_isa(K));
	int nt = n ? n : 1;
	uint8_t *buf = aligned_alloc(64, (b.nbytes + 63) / 64 * 64);
	float *X = malloc(sizeof(float) * (size_t)(nt * cols)), *Y = malloc(sizeof(float) * (size_t)(nt * rows));
	double *t = malloc(sizeof(double) * (size_t)reps);
	if (!buf || !X || !Y || !t)
		return fprintf(stderr, "coli-kernbench: out of memory\n"), 1;
	fill(&b, buf);
	coli_mat m = coli_mat_of(&b, buf);
	for (int64_t i = 0; i < nt * cols; i++)
		X[i] = (float)(rng() % 2000) / 1000.0f - 1.0f;
	for (int i = 0; i < reps + 3; i++) { /* three calls to warm up */
		double t0 = threads == 1 ? cpu_now() : coli_now();
		if (n == 0)
			coli_mat_vec(K, &m, X, Y);
		else
			coli_mat_mul(K, &m, X, n, Y);
		if (i >= 3)
			t[i - 3] = (threads == 1 ? cpu_now() : coli_now()) - t0;
	}
	qsort(t, (size_t)reps, sizeof(double), cmp_double);
	double med = t[reps / 2];
	if (n == 0)
		printf("%.2f GB/s\n", (double)b.nbytes / med / 1e9);
	else
		printf("%.1f GFLOP/s\n", 2.0 * (double)(rows * cols) * n / med / 1e9);
	coli_kernels_close(K);
	free(buf), free(X), free(Y), free(t);
	return 0;
}
