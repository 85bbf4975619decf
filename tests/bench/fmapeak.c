/* fmapeak.c: one core's float32 multiply-add peak for a kernel variant's vector width, the
 * compute limit the GEMM kernels are measured against (tests/bench/roofline.sh,
 * docs/benchmarks.md, "Kernels against the machine's limits"); for amx, its tiles' peaks.
 * usage: coli-fmapeak ISA   prints "X GFLOP/s" (one thread, its CPU time) */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

static const char usage[] =
	"usage: coli-fmapeak ISA\n"
	"\n"
	"One thread's float32 multiply-add peak at the vector width of kernel variant ISA (avx2: 8 lanes,\n"
	"avx512: 16, fused; scalar: a multiply and an add as baseline x86-64 code compiles them, as the\n"
	"scalar kernels are), counting a multiply-add as two operations: twelve independent chains (enough\n"
	"to cover the latency of two FMA units), timed by the thread's CPU time, the best of five runs of\n"
	"about 5 x 10^7 instructions. ISA amx: the bfloat16 tiles' peak (TDPBF16PS on four independent\n"
	"tiles) divided by 3, the float32 products of amx's exact GEMM (three bfloat16 parts each); amx-int8:\n"
	"the int8 tiles' peak (TDPBSSD), the q8 GEMM's limit, in operations. Prints \"X GFLOP/s\"; exit 1\n"
	"when this CPU (or the kernel, for AMX's tiles) lacks ISA.\n"
	"\n"
	"  -h, --help  this text\n";

#define CHAINS 12
#define ROUNDS (1L << 22) /* x CHAINS instructions per run */

static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Each returns the run's multiply-adds (lanes x instructions); the sums keep the chains live. */
static volatile float sink;

static double run_scalar(void)
{
	float a[CHAINS], m = 0.999999f, c = 1e-7f;
	for (int j = 0; j < CHAINS; j++)
		a[j] = (float)j;
	for (long i = 0; i < ROUNDS; i++)
#pragma GCC unroll 12 /* the chains in registers */
		for (int j = 0; j < CHAINS; j++)
			a[j] = a[j] * m + c;
	float s = 0;
	for (int j = 0; j < CHAINS; j++)
		s += a[j];
	sink = s;
	return (double)ROUNDS * CHAINS;
}

/* One run at a vector type's width: twelve chains in registers, summed once at the end. */
#define PEAK_RUN(name, isa, V, lanes, set1, fmadd, add, first)                                   \
	__attribute__((target(isa))) static double name(void)                                         \
	{                                                                                          \
		V a[CHAINS], m = set1(0.999999f), c = set1(1e-7f);                                  \
		for (int j = 0; j < CHAINS; j++)                                                    \
			a[j] = set1((float)j);                                                      \
		for (long i = 0; i < ROUNDS; i++)                                                   \
			_Pragma("GCC unroll 12") for (int j = 0; j < CHAINS; j++) a[j] = fmadd(a[j], m, c); \
		V s = a[0];                                                                         \
		for (int j = 1; j < CHAINS; j++)                                                    \
			s = add(s, a[j]);                                                           \
		sink = first(s);                                                                    \
		return (double)ROUNDS * CHAINS * lanes;                                             \
	}

PEAK_RUN(run_avx2, "avx2,fma", __m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_cvtss_f32)
PEAK_RUN(run_avx512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_cvtss_f32)

/* AMX: four independent C tiles of 16 x 16 over two A and two B tiles of 16 rows x 64 bytes, the
 * shape of amx's GEMM (whose configuration, in kernels/body_amx.h, is internal to the engine: a
 * tool sees only kernels.h); multiply-adds a run (bf16: 32 a row of A, int8: 64). */
typedef struct amx_cfg {
	uint8_t palette, start, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} amx_cfg;

__attribute__((target("amx-tile"))) static void amx_config(void)
{
	amx_cfg c;
	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int i = 0; i < 8; i++)
		c.colsb[i] = 64, c.rows[i] = 16;
	__asm__ volatile("" : : "r"(&c) : "memory"); /* GCC's _tile_loadconfig names one byte of c */
	_tile_loadconfig(&c);
}

#define AMX_RUN(name, dp, k)                                                                  \
	__attribute__((target("amx-tile,amx-bf16,amx-int8"))) static double name(void)            \
	{                                                                                     \
		static uint8_t zero[1024];                                                    \
		amx_config();                                                                 \
		_tile_zero(0);                                                                \
		_tile_zero(1);                                                                \
		_tile_zero(2);                                                                \
		_tile_zero(3);                                                                \
		_tile_loadd(4, zero, 64);                                                     \
		_tile_loadd(5, zero, 64);                                                     \
		_tile_loadd(6, zero, 64);                                                     \
		_tile_loadd(7, zero, 64);                                                     \
		for (long i = 0; i < ROUNDS / 4; i++) {                                       \
			dp(0, 4, 6);                                                          \
			dp(1, 4, 7);                                                          \
			dp(2, 5, 6);                                                          \
			dp(3, 5, 7);                                                          \
		}                                                                             \
		_tile_release();                                                              \
		return (double)ROUNDS * 16 * 16 * (k);                                        \
	}

AMX_RUN(run_amx_bf16, _tile_dpbf16ps, 32)
AMX_RUN(run_amx_int8, _tile_dpbssd, 64)

/* Exact products of amx's GEMM: three bfloat16 products each. */
static double run_amx(void)
{
	return run_amx_bf16() / 3;
}

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return fputs(usage, stdout), 0;
	if (argc != 2)
		return fputs(usage, stderr), 2;
	double (*run)(void) = NULL;
	__builtin_cpu_init();
	if (!strcmp(argv[1], "scalar"))
		run = run_scalar;
	else if (!strcmp(argv[1], "avx2"))
		run = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? run_avx2 : NULL;
	else if (!strcmp(argv[1], "avx512"))
		run = __builtin_cpu_supports("avx512f") ? run_avx512 : NULL;
	else if (!strcmp(argv[1], "amx"))
		run = coli_kernels_available("amx") ? run_amx : NULL;
	else if (!strcmp(argv[1], "amx-int8"))
		run = coli_kernels_available("amx") ? run_amx_int8 : NULL;
	else
		return fprintf(stderr, "coli-fmapeak: ISA '%s': expected scalar, avx2, avx512, amx or amx-int8\n%s", argv[1], usage),
		       2;
	if (!run)
		return fprintf(stderr, "coli-fmapeak: this CPU has no %s\n", argv[1]), 1;
	double best = 0;
	for (int r = 0; r < 5; r++) {
		double t0 = cpu_now(), n = run(), g = 2.0 * n / (cpu_now() - t0) / 1e9;
		best = g > best ? g : best;
	}
	printf("%.1f GFLOP/s\n", best);
	return 0;
}
