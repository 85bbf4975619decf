/* gdnbench.c: coli-gdnbench, the Gated DeltaNet's delta rule alone (coli_gdn_rule) at Qwen3.6's
 * widths: 32 value heads on 16 key heads, head dims 128 (a layer's state: 2 MiB).
 *
 * Prefill, per token of one batch of --tokens: decode's step token by token (each token through
 * every head: the layer's state goes through the caches once a token; what prefill ran before the
 * chunked form), the same step head by head (each head's 64 KiB state stays in L1/L2 over the
 * batch: what a verify of up to COLI_EXACT_N tokens runs), and the chunked form.
 *
 * Decode: one step's time per layer, as the bandwidth of the state it reads and writes once
 * (2 x 2 MiB a layer), against the memory's measured in the same run with the same pattern (a
 * buffer read and written in place): with one layer's state again and again ("hot": the caches
 * hold it), and with --layers states in turn ("cold": more than the last-level cache, as decode
 * meets them, the weights streaming in between); the read-only bandwidth too (coli-membench's).
 *
 * Every measurement once per repetition, their order rotated each repetition; medians. Results
 * on stdout (markdown tables; with --json one JSON line after them), progress on stderr. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "hot.h"
#include "kernels.h"
#include "options.h"

enum { TOKEN_MAJOR, HEAD_MAJOR, CHUNKED, HOT, COLD, BEFORE_HOT, BEFORE_COLD, RMW_HOT, RMW_BIG, READ_BIG, MEASURES };
static const char *const measure_name[MEASURES] = {
	"recurrent token by token", "recurrent head by head", "chunked", "decode step, hot", "decode step, cold",
	"two-pass step (before), hot", "two-pass step (before), cold", "read+write 2 MiB", "read+write big", "read big"};

typedef struct bench_opts {
	const char *threads;
	int tokens, layers, reps, buffer_mib, json, help;
} bench_opts;

static bench_opts o = {.threads = "1,2", .tokens = 512, .layers = 30, .reps = 7, .buffer_mib = 512};

static const char *const synopsis[] = {
	"coli-gdnbench [--tokens N] [--layers N] [--reps N] [--threads LIST] [--buffer-mib N] [--json]",
	NULL,
};

static const coli_option options[] = {
	COLI_OPT_TEXT("The Gated DeltaNet's delta rule at Qwen3.6's widths (32 value heads, 16 key heads, head "
		      "dims 128): prefill's recurrent and chunked forms per token, and decode's step as the "
		      "bandwidth of its state against the memory's; medians of alternating repetitions."),
	COLI_OPT_TEXT(""),
	COLI_OPT_INT(0, "tokens", &o.tokens, "N", 65, 4096, "prefill batch, and decode steps timed (default 512)"),
	COLI_OPT_INT(0, "layers", &o.layers, "N", 2, 256, "states decode cycles through when cold (default 30: "
		     "Qwen3.6-35B-A3B's linear layers)"),
	COLI_OPT_INT(0, "reps", &o.reps, "N", 1, 100, "repetitions; medians (default 7)"),
	COLI_OPT_STRING(0, "threads", &o.threads, "LIST", "thread counts, comma-separated (default 1,2)"),
	COLI_OPT_INT(0, "buffer-mib", &o.buffer_mib, "N", 64, 1 << 16, "the memory bandwidth's buffer (default 512)"),
	COLI_OPT_FLAG(0, "json", &o.json, "also one JSON line of the figures after the tables"),
	COLI_OPT_HELP(&o.help),
	COLI_OPT_END(),
};

/* ---- inputs ------------------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Uniform in [0, 1) from (key, i). */
static double uni(uint64_t key, uint64_t i)
{
	return (double)(mix64(key ^ mix64(i)) >> 11) / 9007199254740992.0;
}

/* What one linear layer's rule reads and writes, and the states decode cycles through. */
typedef struct bufs {
	coli_model c;
	int C, n;                  /* conv_dim, tokens */
	float *Y, *g, *beta, *O;   /* [n][C], [n][v_heads] x 2, [n][v_heads x dv] */
	float *scratch;            /* the chunked form's */
	float **S;                 /* [layers] -> a state */
	size_t state_floats;
	float *big;                /* the bandwidth buffer */
	size_t big_floats;
	double sums[64];           /* the read pieces' sums (kept alive) */
} bufs;

/* q, k unit vectors (q over sqrt(dk)), v uniform in [-1, 1), decays about -0.05 .. -1, betas
 * about 0.5: a model's scales (the timing does not depend on them, the state's range does). */
static void fill_inputs(bufs *b)
{
	const coli_model *c = &b->c;
	int dk = c->lin_k_dim, Hv = c->lin_v_heads;
	for (int64_t t = 0; t < b->n; t++) {
		float *y = b->Y + t * b->C;
		for (int i = 0; i < b->C; i++)
			y[i] = (float)(2 * uni(1, (uint64_t)(t * b->C + i)) - 1);
		for (int h = 0; h < 2 * c->lin_k_heads; h++) {
			float ss = 0, *x = y + h * dk, scale = h < c->lin_k_heads ? 1.0f / sqrtf((float)dk) : 1.0f;
			for (int i = 0; i < dk; i++)
				ss += x[i] * x[i];
			for (int i = 0; i < dk; i++)
				x[i] *= scale / sqrtf(ss);
		}
		for (int h = 0; h < Hv; h++) {
			b->g[t * Hv + h] = -(float)(0.05 + uni(2, (uint64_t)(t * Hv + h)));
			b->beta[t * Hv + h] = (float)(0.25 + 0.5 * uni(3, (uint64_t)(t * Hv + h)));
		}
	}
}

static void bufs_free(bufs *b)
{
	for (int l = 0; b->S && l < o.layers; l++)
		free(b->S[l]);
	free(b->S), free(b->Y), free(b->g), free(b->beta), free(b->O), free(b->scratch), free(b->big);
}

static int bufs_open(bufs *b, coli_err *e)
{
	memset(b, 0, sizeof(*b));
	coli_model *c = &b->c;
	c->lin_k_heads = 16, c->lin_v_heads = 32, c->lin_k_dim = 128, c->lin_v_dim = 128, c->lin_conv = 4;
	b->C = 2 * c->lin_k_heads * c->lin_k_dim + c->lin_v_heads * c->lin_v_dim;
	b->n = o.tokens;
	b->state_floats = (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim;
	b->big_floats = (size_t)o.buffer_mib << 18;
	size_t n = (size_t)b->n, Hv = (size_t)c->lin_v_heads;
	b->Y = malloc(n * b->C * sizeof(float)), b->g = malloc(n * Hv * sizeof(float));
	b->beta = malloc(n * Hv * sizeof(float)), b->O = malloc(n * Hv * c->lin_v_dim * sizeof(float));
	b->scratch = malloc(coli_gdn_scratch_floats(c) * sizeof(float));
	b->S = calloc((size_t)o.layers, sizeof(float *));
	b->big = malloc(b->big_floats * sizeof(float));
	int ok = b->Y && b->g && b->beta && b->O && b->scratch && b->S && b->big;
	for (int l = 0; ok && l < o.layers; l++) /* zero: a fresh sequence's */
		ok = (b->S[l] = calloc(b->state_floats, sizeof(float))) != NULL;
	if (!ok)
		return coli_errf(e, COLI_ENOMEM, "cannot allocate the buffers (%d tokens, %d states, %d MiB)", o.tokens,
				 o.layers, o.buffer_mib);
	fill_inputs(b);
	for (size_t i = 0; i < b->big_floats; i++)
		b->big[i] = (float)(i & 255);
	return 0;
}

/* ---- the measurements -------------------------------------------------------------------------- */

typedef struct piece_job {
	float *x;
	double *sums;
	int64_t grain;
} piece_job;

/* 8-float vectors (GCC's extensions): the loops below are vector code at -O2 in every build. */
typedef float v8 __attribute__((vector_size(32)));
#define load8(p) ({ v8 v_; memcpy(&v_, (p), sizeof(v_)); v_; })

/* Sums over [begin, end) (a multiple of 32 long) in 32 lanes; the loads stream, and 8 KiB ahead
 * are prefetched (as decode's step prefetches its state): the best a core gets. */
static COLI_HOT void read_piece(void *arg, int64_t begin, int64_t end)
{
	const piece_job *j = arg;
	v8 a = {0}, b = {0}, c = {0}, d = {0};
	for (int64_t i = begin; i + 32 <= end; i += 32) {
		__builtin_prefetch(j->x + i + 2048), __builtin_prefetch(j->x + i + 2048 + 16);
		a += load8(j->x + i), b += load8(j->x + i + 8), c += load8(j->x + i + 16), d += load8(j->x + i + 24);
	}
	v8 s = (a + b) + (c + d);
	j->sums[(begin / j->grain) % 64] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

/* [begin, end) negated in place: read and written once, the values' sizes unchanged; prefetched
 * 8 KiB ahead. */
static COLI_HOT void rmw_piece(void *arg, int64_t begin, int64_t end)
{
	const piece_job *j = arg;
	for (int64_t i = begin; i + 32 <= end; i += 32) {
		__builtin_prefetch(j->x + i + 2048, 1), __builtin_prefetch(j->x + i + 2048 + 16, 1);
		for (int k = 0; k < 32; k += 8) {
			v8 x = -load8(j->x + i + k);
			memcpy(j->x + i + k, &x, sizeof(x));
		}
	}
}

/* GB/s of passes over floats [0, n) of b->big by fn on kc's threads; bytes: per float. */
static double bandwidth(coli_kernels *kc, bufs *b, size_t n, int passes, void (*fn)(void *, int64_t, int64_t),
			int bytes)
{
	int th = coli_kernels_threads(kc);
	piece_job j = {b->big, b->sums, (int64_t)((n / th + 31) & ~(size_t)31)};
	double t0 = coli_now();
	for (int p = 0; p < passes; p++)
		coli_kernels_for(kc, (int64_t)n, j.grain, fn, &j);
	return (double)n * bytes * passes / (coli_now() - t0) / 1e9;
}

/* Microseconds per token of the batch: token by token, head by head (scratch NULL) or chunked. */
static double prefill(coli_kernels *kc, bufs *b, int m)
{
	const coli_model *c = &b->c;
	int Hv = c->lin_v_heads;
	double t0 = coli_now();
	if (m == TOKEN_MAJOR)
		for (int64_t t = 0; t < b->n; t++)
			coli_gdn_rule(kc, c, b->S[0], b->Y + t * b->C, b->g + t * Hv, b->beta + t * Hv, 1, NULL, b->O);
	else
		coli_gdn_rule(kc, c, b->S[0], b->Y, b->g, b->beta, b->n, m == CHUNKED ? b->scratch : NULL, b->O);
	return (coli_now() - t0) * 1e6 / b->n;
}

/* Microseconds per decode step of one layer: the states 0 .. layers - 1 in turn (1: hot). */
static double decode(coli_kernels *kc, bufs *b, int layers)
{
	const coli_model *c = &b->c;
	int Hv = c->lin_v_heads;
	double t0 = coli_now();
	for (int64_t t = 0; t < b->n; t++)
		coli_gdn_rule(kc, c, b->S[t % layers], b->Y + t * b->C, b->g + t * Hv, b->beta + t * Hv, 1, NULL, b->O);
	return (coli_now() - t0) * 1e6 / b->n;
}

/* Decode's step before the state was stored transposed (commit 086b9cd's gdn_step): on S
 * [dk][dv], S decayed and S^T k in one pass, the update and S^T q in a second; the state read
 * and written twice, in scalar code (-O2 vectorises no loop whose length it does not know). */
static void step_before(float *S, const float *q, const float *k, const float *v, float g, float beta, int dk, int dv,
			float *out)
{
	float decay = expf(g), mem[4096];
	for (int j = 0; j < dv; j++)
		mem[j] = 0;
	for (int i = 0; i < dk; i++)
		for (int j = 0; j < dv; j++)
			mem[j] += (S[(int64_t)i * dv + j] *= decay) * k[i];
	for (int j = 0; j < dv; j++)
		mem[j] = (v[j] - mem[j]) * beta, out[j] = 0;
	for (int i = 0; i < dk; i++)
		for (int j = 0; j < dv; j++)
			out[j] += (S[(int64_t)i * dv + j] += k[i] * mem[j]) * q[i];
}

typedef struct before_job {
	const bufs *b;
	float *S;
	int64_t t;
} before_job;

static void before_heads(void *arg, int64_t begin, int64_t end)
{
	const before_job *j = arg;
	const coli_model *c = &j->b->c;
	int dk = c->lin_k_dim, dv = c->lin_v_dim, Hv = c->lin_v_heads, per = Hv / c->lin_k_heads;
	int64_t kd = (int64_t)c->lin_k_heads * dk;
	const float *y = j->b->Y + j->t * j->b->C;
	for (int64_t h = begin; h < end; h++)
		step_before(j->S + h * dk * dv, y + h / per * dk, y + kd + h / per * dk, y + 2 * kd + h * dv,
			    j->b->g[j->t * Hv + h], j->b->beta[j->t * Hv + h], dk, dv, j->b->O + h * dv);
}

/* decode() with the step before, its heads shared out over the threads as coli_gdn_rule does. */
static double decode_before(coli_kernels *kc, bufs *b, int layers)
{
	int Hv = b->c.lin_v_heads, th = coli_kernels_threads(kc);
	double t0 = coli_now();
	for (int64_t t = 0; t < b->n; t++) {
		before_job j = {b, b->S[t % layers], t};
		if (th < 2)
			before_heads(&j, 0, Hv);
		else
			coli_kernels_for(kc, Hv, (Hv + 4 * th - 1) / (4 * th), before_heads, &j);
	}
	return (coli_now() - t0) * 1e6 / b->n;
}

/* One measurement: microseconds (prefill, decode) or GB/s (bandwidth). */
static double measure(coli_kernels *kc, bufs *b, int m)
{
	size_t state = b->state_floats;
	switch (m) {
	case TOKEN_MAJOR:
	case HEAD_MAJOR:
	case CHUNKED: return prefill(kc, b, m);
	case HOT: return decode(kc, b, 1);
	case COLD: return decode(kc, b, o.layers);
	case BEFORE_HOT: return decode_before(kc, b, 1);
	case BEFORE_COLD: return decode_before(kc, b, o.layers);
	case RMW_HOT: return bandwidth(kc, b, state, (int)(((size_t)256 << 20) / (state * 8)), rmw_piece, 8);
	case RMW_BIG: return bandwidth(kc, b, b->big_floats, 2, rmw_piece, 8);
	default: return bandwidth(kc, b, b->big_floats, 2, read_piece, 4);
	}
}

/* ---- medians and output ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[100];
	memcpy(s, v, (size_t)n * sizeof(double));
	qsort(s, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* The figures of one thread count: [MEASURES][reps], and the share of the machine's CPUs other
 * processes took meanwhile (a loaded machine's threads wait for a core). */
typedef struct figures {
	int threads;
	double v[MEASURES][100];
	double others;
} figures;

static double med(const figures *f, int m)
{
	return median(f->v[m], o.reps);
}

/* The median over repetitions of v[a] / v[b]. */
static double med_ratio(const figures *f, int a, int b)
{
	double r[100];
	for (int i = 0; i < o.reps; i++)
		r[i] = f->v[a][i] / f->v[b][i];
	return median(r, o.reps);
}

/* GB/s of the state (read and written once) at us microseconds a step. */
static double state_gbs(const bufs *b, double us)
{
	return 2.0 * (double)b->state_floats * sizeof(float) / (us * 1e3);
}

static void print_tables(const bufs *b, const figures *f, int nf)
{
	printf("| threads | recurrent, token by token (µs/token) | recurrent, head by head (µs/token) | chunked "
	       "(µs/token) | token by token / chunked | head by head / chunked | other work, %% of the CPUs "
	       "|\n|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < nf; i++)
		printf("| %d | %.1f | %.1f | %.1f | %.2f | %.2f | %.0f |\n", f[i].threads, med(&f[i], TOKEN_MAJOR),
		       med(&f[i], HEAD_MAJOR), med(&f[i], CHUNKED), med_ratio(&f[i], TOKEN_MAJOR, CHUNKED),
		       med_ratio(&f[i], HEAD_MAJOR, CHUNKED), 100 * f[i].others);
	printf("\n| threads | state | decode step (µs/layer) | state GB/s (read + written) | memory GB/s, the same "
	       "pattern | state / memory |\n|---:|---|---:|---:|---:|---:|\n");
	double mib = (double)b->state_floats * sizeof(float) / (1 << 20);
	for (int i = 0; i < nf; i++) {
		double hot = med(&f[i], HOT), cold = med(&f[i], COLD);
		printf("| %d | hot: 1 layer, %.0f MiB | %.1f | %.1f | %.1f (read+write %.0f MiB) | %.2f |\n", f[i].threads,
		       mib, hot, state_gbs(b, hot), med(&f[i], RMW_HOT), mib, state_gbs(b, hot) / med(&f[i], RMW_HOT));
		printf("| %d | cold: %d layers, %.0f MiB | %.1f | %.1f | %.1f (read+write %d MiB) | %.2f |\n", f[i].threads,
		       o.layers, mib * o.layers, cold, state_gbs(b, cold), med(&f[i], RMW_BIG), o.buffer_mib,
		       state_gbs(b, cold) / med(&f[i], RMW_BIG));
		printf("| %d | read only | | | %.1f (read %d MiB) | |\n", f[i].threads, med(&f[i], READ_BIG), o.buffer_mib);
		hot = med(&f[i], BEFORE_HOT), cold = med(&f[i], BEFORE_COLD);
		printf("| %d | the two-pass step before, hot | %.1f | %.1f | | %.2f |\n", f[i].threads, hot,
		       state_gbs(b, hot), state_gbs(b, hot) / med(&f[i], RMW_HOT));
		printf("| %d | the two-pass step before, cold | %.1f | %.1f | | %.2f |\n", f[i].threads, cold,
		       state_gbs(b, cold), state_gbs(b, cold) / med(&f[i], RMW_BIG));
	}
}

static void print_footer(const bufs *b)
{
	long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
	printf("\nMedians of %d repetitions; prefill: one batch of %d tokens; decode: %d steps. A layer's state: "
	       "%zu floats (%.0f MiB); caches (sysconf): L2 %ld KiB (per core), L3 %ld KiB.\n",
	       o.reps, o.tokens, o.tokens, b->state_floats, (double)b->state_floats * sizeof(float) / (1 << 20),
	       l2 / 1024, l3 / 1024);
}

static json_t *figures_json(const bufs *b, const figures *f)
{
	json_t *j = json_pack("{s:i}", "threads", f->threads);
	static const char *const keys[MEASURES] = {"token_major_us", "head_major_us", "chunked_us", "decode_hot_us",
						   "decode_cold_us", "before_hot_us", "before_cold_us",
						   "rmw_state_size_gbs", "rmw_big_gbs", "read_big_gbs"};
	for (int m = 0; m < MEASURES; m++)
		json_object_set_new(j, keys[m], json_real(med(f, m)));
	json_object_set_new(j, "token_major_over_chunked", json_real(med_ratio(f, TOKEN_MAJOR, CHUNKED)));
	json_object_set_new(j, "head_major_over_chunked", json_real(med_ratio(f, HEAD_MAJOR, CHUNKED)));
	json_object_set_new(j, "decode_hot_state_gbs", json_real(state_gbs(b, med(f, HOT))));
	json_object_set_new(j, "decode_cold_state_gbs", json_real(state_gbs(b, med(f, COLD))));
	json_object_set_new(j, "other_work_cpu_share", json_real(f->others));
	return j;
}

static void print_json(const bufs *b, const figures *f, int nf)
{
	json_t *rows = json_array();
	for (int i = 0; i < nf; i++)
		json_array_append_new(rows, figures_json(b, &f[i]));
	json_t *j = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:o}", "v_heads", b->c.lin_v_heads, "k_heads",
			      b->c.lin_k_heads, "head_dim", b->c.lin_k_dim, "tokens", o.tokens, "layers", o.layers, "reps",
			      o.reps, "buffer_mib", o.buffer_mib, "results", rows);
	char *txt = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6));
	if (txt)
		puts(txt);
	free(txt);
	json_decref(j);
}

/* ---- the run ----------------------------------------------------------------------------------- */

/* Seconds the machine's CPUs were busy (all but idle and iowait, steal included) since boot,
 * and this process's own CPU seconds; -1 busy when /proc/stat does not read (as coli-dsabench). */
static void cpu_seconds(double *busy, double *own)
{
	unsigned long long v[8] = {0};
	struct rusage ru;
	FILE *f = fopen("/proc/stat", "r");
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
			   &v[5], &v[6], &v[7]) : 0;
	if (f)
		fclose(f);
	*busy = n == 8 ? (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK) : -1;
	getrusage(RUSAGE_SELF, &ru);
	*own = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec * 1e-6;
}

/* Every measurement once untimed, then the repetitions, the order rotated each time. */
static void run_threads(coli_kernels *kc, bufs *b, figures *f)
{
	double busy0, own0, busy1, own1, t0;
	for (int m = 0; m < MEASURES; m++)
		measure(kc, b, m);
	cpu_seconds(&busy0, &own0);
	t0 = coli_now();
	for (int r = 0; r < o.reps; r++)
		for (int i = 0; i < MEASURES; i++) {
			int m = (i + r) % MEASURES;
			f->v[m][r] = measure(kc, b, m);
			fprintf(stderr, "coli-gdnbench: %d thread%s, repetition %d/%d, %s: %.2f %s\n", f->threads,
				f->threads == 1 ? "" : "s", r + 1, o.reps, measure_name[m], f->v[m][r],
				m >= RMW_HOT ? "GB/s" : "µs");
		}
	double dt = coli_now() - t0;
	cpu_seconds(&busy1, &own1);
	f->others = busy0 < 0 ? 0 : (busy1 - busy0 - (own1 - own0)) / (dt * (double)sysconf(_SC_NPROCESSORS_ONLN));
	f->others = f->others < 0 ? 0 : f->others;
}

static int bench(coli_err *e)
{
	int *th = NULL, nth = 0, rc = -1;
	bufs b;
	figures *f = NULL;
	if (coli_opts_int_list(o.threads, 1, 64, &th, &nth, e) < 0) {
		coli_err_prefix(e, "--threads");
		return -1;
	}
	if (bufs_open(&b, e) == 0 && (f = calloc((size_t)nth, sizeof(*f))) != NULL) {
		rc = 0;
		for (int i = 0; rc == 0 && i < nth; i++) {
			coli_kernels *kc = NULL;
			f[i].threads = th[i];
			if ((rc = coli_kernels_open(&kc, NULL, th[i], e)) == 0)
				run_threads(kc, &b, &f[i]);
			coli_kernels_close(kc);
		}
	} else if (!f && e->code == 0) {
		coli_errf(e, COLI_ENOMEM, "out of memory");
	}
	if (rc == 0) {
		print_tables(&b, f, nth);
		print_footer(&b);
		if (o.json)
			print_json(&b, f, nth);
	}
	bufs_free(&b);
	free(f);
	free(th);
	return rc;
}

int main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(options, argc, argv, &e);
	if (n >= 0 && o.help) {
		char *h = coli_opts_help(synopsis, options);
		fputs(h ? h : "coli-gdnbench: out of memory\n", stdout);
		free(h);
		return 0;
	}
	if (n > 0)
		coli_errf(&e, COLI_EUSAGE, "unexpected argument '%s'", argv[0]);
	if (n == 0 && bench(&e) == 0)
		return 0;
	fflush(stdout);
	fprintf(stderr, "coli-gdnbench: %s\n", e.msg);
	if (e.code == COLI_EUSAGE)
		fprintf(stderr, "(see 'coli-gdnbench --help')\n");
	return coli_err_exit_status(&e);
}
