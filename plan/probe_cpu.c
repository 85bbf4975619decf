/* probe_cpu.c: the engine's kernels timed on Qwen3-30B-A3B expert matrices (gate and up
 * 768 x 2048, down 2048 x 768, gs64 int4 and int8, FP4), decode (a token's 8 experts per dispatch,
 * as the MoE block does) and prefill (64 tokens per product); its attention core (a head of 128
 * against 256 positions); and the memory read bandwidth. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "engine.h"
#include "fileio.h"
#include "hot.h"
#include "kernels.h"
#include "layout.h"
#include "machine.h"
#include "probe_measure.h"

#define HIDDEN 2048
#define FFN 768
#define TOP_K 8       /* experts per decode token (Qwen3-30B-A3B) */
#define ATT_DIM 128   /* head_dim of the attention core's timing */
#define ATT_POS 256   /* cached positions it attends to */

/* ---- memory read bandwidth ---- */

typedef uint64_t line64 __attribute__((vector_size(64))); /* one cache line */

typedef struct stream {
	const line64 *lines;
	atomic_uint_fast64_t sink; /* keeps the sums live */
} stream;

/* Sums lines [b, e) in four independent accumulators: several loads in flight, vector width
 * as the CPU allows. */
COLI_HOT static void sum_lines(void *arg, int64_t b, int64_t e)
{
	stream *s = arg;
	line64 a[4] = {{0}, {0}, {0}, {0}};
	int64_t i = b;
	for (; i + 4 <= e; i += 4)
		for (int k = 0; k < 4; k++)
			a[k] += s->lines[i + k];
	for (; i < e; i++)
		a[0] += s->lines[i];
	line64 t = a[0] + a[1] + a[2] + a[3];
	uint64_t v = 0;
	for (int k = 0; k < 8; k++)
		v ^= t[k];
	atomic_fetch_xor(&s->sink, v);
}

/* The best of passes over the buffer within seconds (at least two), on the kernels' threads:
 * the read bandwidth the engine's pool can get. */
static double mem_rate(coli_kernels *k, const uint8_t *buf, uint64_t bytes, double seconds)
{
	stream s = {.lines = (const line64 *)buf};
	int64_t n = (int64_t)(bytes / 64), grain = n / (4 * coli_kernels_threads(k)) + 1;
	double best = 0, end = coli_now() + seconds;
	for (int pass = 0; pass < 2 || coli_now() < end; pass++) {
		double t0 = coli_now();
		coli_kernels_for(k, n, grain, sum_lines, &s);
		double r = (double)n * 64 / (coli_now() - t0);
		best = r > best ? r : best;
	}
	return best;
}

/* ---- the kernels ---- */

/* Experts laid end to end in one buffer: gate, up, down blobs of one encoding each. */
typedef struct experts {
	coli_mat (*m)[3];
	int count;
	uint64_t expert_bytes;
	float *x, *h, *y;    /* activations: x [HIDDEN], h [FFN] inputs; y outputs [2 TOP_K][HIDDEN] */
} experts;

static uint64_t align64(uint64_t v)
{
	return (v + 63) & ~(uint64_t)63;
}

static int layout_experts(experts *X, coli_enc enc, uint8_t *buf, uint64_t bytes, coli_err *e)
{
	coli_blob b[3];
	const int64_t none[2] = {0, 0};
	if (coli_blob_init(&b[0], enc, FFN, HIDDEN, none, e) < 0 || coli_blob_init(&b[2], enc, HIDDEN, FFN, none, e) < 0)
		return -1;
	b[1] = b[0];
	X->expert_bytes = 2 * align64(b[0].nbytes) + align64(b[2].nbytes);
	X->count = (int)(bytes / X->expert_bytes);
	if (X->count < 1)
		return coli_errf(e, COLI_EUSAGE, "--weights-mib: %llu bytes hold no expert of %llu bytes",
				 (unsigned long long)bytes, (unsigned long long)X->expert_bytes);
	if (!(X->m = coli_calloc((size_t)X->count, sizeof(*X->m), e)))
		return -1;
	for (int i = 0; i < X->count; i++) {
		uint8_t *at = buf + (uint64_t)i * X->expert_bytes;
		X->m[i][0] = coli_mat_of(&b[0], at);
		X->m[i][1] = coli_mat_of(&b[1], at + align64(b[0].nbytes));
		X->m[i][2] = coli_mat_of(&b[2], at + 2 * align64(b[0].nbytes));
	}
	return 0;
}

/* One decode token over experts first .. first + n: gate and up in one dispatch, then down. */
static void token(coli_kernels *k, const experts *X, int first, int n)
{
	const coli_mat *W[2 * TOP_K] = {0};
	const float *xs[2 * TOP_K] = {0};
	float *ys[2 * TOP_K] = {0};
	for (int i = 0; i < n; i++) {
		W[2 * i] = &X->m[first + i][0], W[2 * i + 1] = &X->m[first + i][1];
		xs[2 * i] = xs[2 * i + 1] = X->x;
		ys[2 * i] = X->y + (2 * i) * HIDDEN, ys[2 * i + 1] = X->y + (2 * i + 1) * HIDDEN;
	}
	coli_mat_vec_batch(k, W, xs, ys, 2 * n);
	for (int i = 0; i < n; i++)
		W[i] = &X->m[first + i][2], xs[i] = X->h, ys[i] = X->y + i * HIDDEN;
	coli_mat_vec_batch(k, W, xs, ys, n);
}

/* Weight bytes per second of decode tokens streaming every expert once per pass, the best pass. */
static double decode_rate(coli_kernels *k, const experts *X, double seconds)
{
	double best = 0, end = coli_now() + seconds;
	int per = X->count < TOP_K ? X->count : TOP_K, used = X->count / per * per;
	for (int pass = 0; pass < 2 || coli_now() < end; pass++) {
		double t0 = coli_now();
		for (int i = 0; i < used; i += per)
			token(k, X, i, per);
		double r = (double)used * (double)X->expert_bytes / (coli_now() - t0);
		best = r > best ? r : best;
	}
	return best;
}

/* Weight bytes x tokens per second of 64-token products over the matrices in turn. */
static double prefill_rate(coli_kernels *k, const experts *X, float *Xin, float *Y, double seconds)
{
	double bytes = 0, t0 = coli_now(), end = t0 + seconds;
	for (long i = 0; i < 3 || coli_now() < end; i++) {
		const coli_mat *W = &X->m[(i / 3) % X->count][i % 3];
		coli_mat_mul(k, W, Xin, COLI_PROBE_PREFILL_TOKENS, Y);
		bytes += (double)X->expert_bytes / 3 * COLI_PROBE_PREFILL_TOKENS; /* the three blobs are equal */
	}
	return bytes / (coli_now() - t0);
}

/* ---- the whole CPU part ---- */

typedef struct cpu_run {
	uint8_t *buf;
	uint64_t bytes;
	coli_kernels *k1, *kall; /* 1 thread, the physical cores */
	float *x, *X, *Y;        /* decode x/h/y; prefill [64][HIDDEN] in and out */
	int threads;
} cpu_run;

int probe_cpu_variant(char *out, size_t size, coli_err *e)
{
	coli_kernels *k;
	if (coli_kernels_open(&k, NULL, 1, e) < 0)
		return -1;
	snprintf(out, size, "%s", coli_kernels_isa(k));
	coli_kernels_close(k);
	return 0;
}

static void release(cpu_run *r)
{
	coli_kernels_close(r->k1);
	coli_kernels_close(r->kall);
	free(r->buf);
	free(r->x);
	free(r->X);
	free(r->Y);
}

static int setup(cpu_run *r, const probe_cpu_opts *o, coli_err *e)
{
	size_t act = (size_t)HIDDEN * (2 * TOP_K + 2), big = (size_t)COLI_PROBE_PREFILL_TOKENS * HIDDEN;
	r->bytes = o->weights_bytes & ~(uint64_t)4095;
	r->threads = coli_machine_physical_cores();
	if (!(r->buf = aligned_alloc(4096, r->bytes)))
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating %llu bytes of weights (--weights-mib)",
				 (unsigned long long)r->bytes);
	if (!(r->x = coli_calloc(act, sizeof(float), e)) || !(r->X = coli_calloc(big, sizeof(float), e)) ||
	    !(r->Y = coli_calloc(big, sizeof(float), e)))
		return -1;
	memset(r->buf, 0x11, r->bytes); /* int4/int8 codes 1, fp16 scales 0x1111: small normal numbers */
	for (size_t i = 0; i < big; i++)
		r->X[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
	memcpy(r->x, r->X, 2 * HIDDEN * sizeof(float));
	if (coli_kernels_open(&r->k1, NULL, 1, e) < 0 || coli_kernels_open(&r->kall, NULL, r->threads, e) < 0)
		return -1;
	return coli_kernels_reserve(r->k1, HIDDEN, e) < 0 || coli_kernels_reserve(r->kall, HIDDEN, e) < 0 ? -1 : 0;
}

/* The decode rates (1 thread, all), the prefill rate of one encoding, and the decode rates with
 * --precision q8. */
static int kernels_of(cpu_run *r, coli_enc enc, double seconds, double out[5], coli_err *e)
{
	experts X = {.x = r->x, .h = r->x + HIDDEN, .y = r->x + 2 * HIDDEN};
	const char *name = enc == COLI_ENC_Q4 ? "int4" : enc == COLI_ENC_FP4 ? "fp4" : "int8";
	if (layout_experts(&X, enc, r->buf, r->bytes, e) < 0)
		return -1;
	probe_progress("cpu: %s decode products, 1 thread", name);
	out[0] = decode_rate(r->k1, &X, seconds);
	probe_progress("cpu: %s decode products, %d threads", name, r->threads);
	out[1] = r->threads > 1 ? decode_rate(r->kall, &X, seconds) : out[0];
	probe_progress("cpu: %s prefill products (%d tokens), %d threads", name, COLI_PROBE_PREFILL_TOKENS, r->threads);
	out[2] = prefill_rate(r->kall, &X, r->X, r->Y, seconds);
	out[3] = out[4] = 0;
	if (enc == COLI_ENC_Q4 || enc == COLI_ENC_Q8) { /* the encodings --precision q8 multiplies */
		probe_progress("cpu: %s decode products with q8 activations", name);
		coli_kernels_set_precision(r->k1, COLI_PREC_Q8);
		coli_kernels_set_precision(r->kall, COLI_PREC_Q8);
		out[3] = decode_rate(r->k1, &X, seconds);
		out[4] = r->threads > 1 ? decode_rate(r->kall, &X, seconds) : out[3];
		coli_kernels_set_precision(r->k1, COLI_PREC_EXACT);
		coli_kernels_set_precision(r->kall, COLI_PREC_EXACT);
	}
	free(X.m);
	return 0;
}

int probe_cpu_measure(coli_probe *p, const probe_cpu_opts *o, coli_err *e)
{
	cpu_run r = {0};
	double q4[5], q8[5], fp4[5];
	int rc = setup(&r, o, e);
	if (rc == 0) {
		probe_progress("cpu: memory read, 1 thread");
		p->mem_bps_1 = mem_rate(r.k1, r.buf, r.bytes, o->seconds);
		probe_progress("cpu: memory read, %d threads", r.threads);
		p->mem_bps_all = r.threads > 1 ? mem_rate(r.kall, r.buf, r.bytes, o->seconds) : p->mem_bps_1;
		rc = kernels_of(&r, COLI_ENC_Q4, o->seconds, q4, e);
	}
	if (rc == 0)
		rc = kernels_of(&r, COLI_ENC_Q8, o->seconds, q8, e);
	if (rc == 0)
		rc = kernels_of(&r, COLI_ENC_FP4, o->seconds, fp4, e);
	if (rc == 0) {
		probe_progress("cpu: attention core, 1 thread");
		if (!(p->attn_fma_per_s = coli_attn_core_rate(ATT_DIM, ATT_POS, o->seconds)))
			rc = coli_errf(e, COLI_ENOMEM, "out of memory timing the attention core");
	}
	if (rc == 0) {
		snprintf(p->kernels, sizeof(p->kernels), "%s", coli_kernels_isa(r.kall));
		p->int4_bps_1 = q4[0], p->int4_bps_all = q4[1], p->int4_prefill_bps_all = q4[2];
		p->int8_bps_1 = q8[0], p->int8_bps_all = q8[1], p->int8_prefill_bps_all = q8[2];
		p->fp4_bps_1 = fp4[0], p->fp4_bps_all = fp4[1], p->fp4_prefill_bps_all = fp4[2];
		p->q8_int4_bps_1 = q4[3], p->q8_int4_bps_all = q4[4], p->q8_int8_bps_1 = q8[3], p->q8_int8_bps_all = q8[4];
		p->cpu_taken = (double)time(NULL);
	}
	release(&r);
	return rc;
}
