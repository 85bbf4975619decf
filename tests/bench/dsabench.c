/* dsabench.c: coli-dsabench, decode speed of a DSA model (glm_moe_dsa) at long contexts: with the
 * lightning indexer's selection (attention over index_topk positions) and with attention forced
 * over every position (dsa_dense), the two modes alternating in one run. One engine serves both:
 * its dsa_dense field, which coli_forward reads on every call, is set before each run, so both
 * modes use the same weights in memory and the same threads.
 *
 * The state of positions [0, context) is filled with pseudo-random N(0,1) rows instead of being
 * made by a prefill (well over half an hour at real widths on two cores): the MLA latent is
 * RMS-normalised and the index keys LayerNorm-ed, so unit scale is theirs. Then `steps` decode
 * tokens are timed, each the argmax of the previous one's logits, from the same state each time
 * (kv.n set back). A tracer
 * splits each token's time into attention on "full" layers (projections, the indexer, the core),
 * attention on "shared" layers (projections, the core) and everything else (norms, MLPs, routers,
 * experts, lm_head, and the argmax over the vocabulary).
 *
 * usage: coli-dsabench MODEL [--contexts LIST] [--steps N] [--reps N] [--threads N] [--json]
 * Results on stdout (markdown tables; with --json one JSON line after them), progress on stderr. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "options.h"

enum { SPARSE, DENSE, MODES };
static const char *const mode_name[MODES] = {"sparse", "dense"};

typedef struct bench_opts {
	const char *model, *contexts;
	int steps, reps, threads, json, help;
} bench_opts;

/* One timed run of `steps` tokens: tokens/s, milliseconds per token by where they went, and
 * the share of the machine's CPUs that other work (other processes, the hypervisor's steal)
 * took meanwhile. */
typedef struct figures {
	double tok_s, ms, ms_full, ms_shared, ms_other, others;
} figures;

/* The tracer's sums over a run (nanoseconds). */
typedef struct sums {
	const coli_model *c;
	uint64_t full, shared;
} sums;

static bench_opts o = {.contexts = "1024,8192,32768", .steps = 8, .reps = 3};

static const char *const synopsis[] = {
	"coli-dsabench MODEL [--contexts LIST] [--steps N] [--reps N] [--threads N] [--json]",
	NULL,
};

static const coli_option options[] = {
	COLI_OPT_TEXT("Decode tokens/s of a glm_moe_dsa container (all in RAM) at each context, with the "
		      "indexer's selection (sparse) and with attention over every position (dense), "
		      "alternating; the state before the context is pseudo-random N(0,1) rows."),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRING(0, "contexts", &o.contexts, "LIST", "positions already in the state, comma-separated "
			"(default 1024,8192,32768)"),
	COLI_OPT_INT(0, "steps", &o.steps, "N", 1, 4096, "decode tokens timed per run (default 8)"),
	COLI_OPT_INT(0, "reps", &o.reps, "N", 1, 100, "runs of each mode per context; medians (default 3)"),
	COLI_OPT_INT(0, "threads", &o.threads, "N", 0, 256, "compute threads (default 0: physical cores)"),
	COLI_OPT_FLAG(0, "json", &o.json, "also one JSON line of the figures after the tables"),
	COLI_OPT_HELP(&o.help),
	COLI_OPT_END(),
};

/* ---- the state ------------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Mean 0, variance 1: the sum of four 16-bit uniforms, centred and scaled (Irwin-Hall). */
static float gauss(uint64_t key, uint64_t i)
{
	uint64_t r = mix64(key ^ mix64(i));
	double s = 0;
	for (int j = 0; j < 4; j++, r >>= 16)
		s += (double)(r & 0xffff) / 65536.0;
	return (float)((s - 2.0) * 1.7320508075688772);
}

/* Every growing part's rows [0, n) filled; each part its own stream. */
static void fill_state(coli_kv *kv, int n)
{
	for (int p = 0; p < kv->n_parts; p++) {
		int64_t len = (int64_t)n * kv->parts[p].width;
		float *d = kv->part[p];
		for (int64_t i = 0; i < len; i++)
			d[i] = gauss((uint64_t)p + 1, (uint64_t)i);
	}
	kv->n = n;
}

/* ---- timing ----------------------------------------------------------------------------------- */

static void on_record(void *ctx, const coli_trace_rec *r)
{
	sums *s = ctx;
	if (r->kind == COLI_TR_SPAN && r->sub == COLI_SPAN_ATTENTION && r->layer >= 0)
		*(s->c->index_full[r->layer] ? &s->full : &s->shared) += r->t1 - r->t0;
}

/* Seconds the machine's CPUs were busy (all but idle and iowait, steal included) since boot,
 * and this process's own CPU seconds; -1 busy when /proc/stat does not read. */
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

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		b = x[i] > x[b] ? i : b;
	return b;
}

/* steps decode tokens from position ctx (the state before it left as it is). */
static int decode(coli_engine *m, coli_kv *kv, int ctx, int steps, float *logits, coli_err *e)
{
	int32_t tok = 1000 % m->cfg->vocab_size;
	kv->n = ctx;
	for (int i = 0; i < steps; i++) {
		if (coli_forward(m, kv, &tok, 1, NULL, logits, NULL, e) < 0)
			return -1;
		tok = argmax(logits, m->cfg->vocab_size);
	}
	return 0;
}

static int timed(coli_engine *m, coli_kv *kv, sums *s, int mode, int ctx, float *logits, figures *f,
		 coli_err *e)
{
	m->dsa_dense = mode == DENSE;
	s->full = s->shared = 0;
	double busy0, own0, busy1, own1, t0 = coli_now();
	cpu_seconds(&busy0, &own0);
	if (decode(m, kv, ctx, o.steps, logits, e) < 0)
		return -1;
	double dt = coli_now() - t0, per = 1e-6 / o.steps;
	cpu_seconds(&busy1, &own1);
	f->others = busy0 < 0 ? 0 : (busy1 - busy0 - (own1 - own0)) / (dt * (double)sysconf(_SC_NPROCESSORS_ONLN));
	f->others = f->others < 0 ? 0 : f->others;
	f->tok_s = o.steps / dt;
	f->ms = 1e3 * dt / o.steps;
	f->ms_full = (double)s->full * per;
	f->ms_shared = (double)s->shared * per;
	f->ms_other = f->ms - f->ms_full - f->ms_shared;
	return 0;
}

/* ---- medians and output ----------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of field `off` of figures f[0..n) (n <= 100). */
static double median_at(const figures *f, int n, size_t off)
{
	double v[100];
	for (int i = 0; i < n; i++)
		v[i] = *(const double *)((const char *)&f[i] + off);
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MED(f, n, field) median_at((f), (n), offsetof(figures, field))

/* The median of the per-repetition ratios sparse / dense of tokens/s. */
static double median_ratio(const figures *sp, const figures *dn, int n)
{
	figures r[100];
	for (int i = 0; i < n; i++)
		r[i].tok_s = sp[i].tok_s / dn[i].tok_s;
	return MED(r, n, tok_s);
}

static void count_layers(const coli_model *c, int *full, int *shared)
{
	*full = *shared = 0;
	for (int l = 0; l < c->n_layers; l++)
		++*(c->index_full[l] ? full : shared);
}

/* The reps figures of context number c in mode d, in res [contexts][MODES][reps]. */
static figures *at(figures *res, int c, int d)
{
	return res + ((int64_t)c * MODES + d) * o.reps;
}

static void print_tables(const coli_engine *m, const int *ctx, int nctx, figures *res)
{
	int nf, ns;
	count_layers(m->cfg, &nf, &ns);
	printf("| context | sparse tok/s | dense tok/s | sparse / dense |\n|---:|---:|---:|---:|\n");
	for (int c = 0; c < nctx; c++)
		printf("| %d | %.2f | %.2f | %.2f |\n", ctx[c], MED(at(res, c, SPARSE), o.reps, tok_s),
		       MED(at(res, c, DENSE), o.reps, tok_s), median_ratio(at(res, c, SPARSE), at(res, c, DENSE), o.reps));
	printf("\n| context | mode | ms/token | attention, %d full layer%s | attention, %d shared layer%s | "
	       "everything else | other work, %% of the CPUs |\n|---:|---|---:|---:|---:|---:|---:|\n", nf,
	       nf == 1 ? "" : "s", ns, ns == 1 ? "" : "s");
	for (int c = 0; c < nctx; c++)
		for (int d = 0; d < MODES; d++) {
			const figures *f = at(res, c, d);
			printf("| %d | %s | %.1f | %.1f | %.1f | %.1f | %.0f |\n", ctx[c], mode_name[d], MED(f, o.reps, ms),
			       MED(f, o.reps, ms_full), MED(f, o.reps, ms_shared), MED(f, o.reps, ms_other),
			       100 * MED(f, o.reps, others));
		}
}

static json_t *mode_json(const figures *f)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "tokens_per_s", MED(f, o.reps, tok_s), "ms_per_token",
			 MED(f, o.reps, ms), "attn_full_ms", MED(f, o.reps, ms_full), "attn_shared_ms",
			 MED(f, o.reps, ms_shared), "other_ms", MED(f, o.reps, ms_other), "other_work_cpu_share",
			 MED(f, o.reps, others));
}

static void print_json(const coli_engine *m, const int *ctx, int nctx, figures *res, double rss_mib)
{
	int nf, ns;
	count_layers(m->cfg, &nf, &ns);
	json_t *rows = json_array();
	for (int c = 0; c < nctx; c++)
		json_array_append_new(rows, json_pack("{s:i, s:o, s:o, s:f}", "context", ctx[c], "sparse",
						      mode_json(at(res, c, SPARSE)), "dense", mode_json(at(res, c, DENSE)),
						      "ratio", median_ratio(at(res, c, SPARSE), at(res, c, DENSE), o.reps)));
	json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:o}", "model", o.model, "threads",
			      coli_kernels_threads(m->kc), "steps", o.steps, "reps", o.reps, "index_topk",
			      m->cfg->index_topk, "full_layers", nf, "shared_layers", ns, "peak_rss_mib", rss_mib,
			      "results", rows);
	char *txt = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6));
	if (txt)
		puts(txt);
	free(txt);
	json_decref(j);
}

static double peak_rss_mib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss / 1024.0;
}

static void print_footer(const coli_engine *m, const int *ctx, int nctx)
{
	int longest = 0, th = coli_kernels_threads(m->kc);
	for (int c = 0; c < nctx; c++)
		longest = ctx[c] > longest ? ctx[c] : longest;
	printf("\nMedians of %d runs of each mode, %d decode tokens each, %d thread%s, index_topk %d, "
	       "state %.0f MiB at context %d, peak RSS %.0f MiB.\n", o.reps, o.steps, th, th == 1 ? "" : "s",
	       m->cfg->index_topk, (double)coli_kv_token_bytes(m->cfg) * (longest + o.steps) / (1 << 20), longest,
	       peak_rss_mib());
}

/* ---- the run ---------------------------------------------------------------------------------- */

/* One context: a state of cap ctx + steps filled, a warm-up token of each mode, then the reps,
 * the modes' order swapped every repetition; res: [MODES][reps] figures. */
static int one_context(coli_engine *m, sums *s, int ctx, float *logits, figures *res, coli_err *e)
{
	coli_kv kv;
	if (coli_kv_init(&kv, m, ctx + o.steps, e) < 0)
		return -1;
	fill_state(&kv, ctx);
	int rc = 0;
	for (int d = 0; rc == 0 && d < MODES; d++) {
		m->dsa_dense = d == DENSE;
		rc = decode(m, &kv, ctx, 1, logits, e);
	}
	for (int r = 0; rc == 0 && r < o.reps; r++)
		for (int i = 0; rc == 0 && i < MODES; i++) {
			int d = (i + r) % MODES;
			figures *f = res + (int64_t)d * o.reps + r;
			rc = timed(m, &kv, s, d, ctx, logits, f, e);
			if (rc == 0)
				fprintf(stderr, "coli-dsabench: context %d, repetition %d/%d, %s: %.3f tok/s (other "
					"work %.0f%% of the CPUs)\n", ctx, r + 1, o.reps, mode_name[d], f->tok_s,
					100 * f->others);
		}
	coli_kv_release(&kv);
	return rc;
}

static int check_model(const coli_engine *m, const int *ctx, int nctx, coli_err *e)
{
	if (!m->cfg->index_topk)
		return coli_errf(e, COLI_EUSAGE, "%s: family '%s' has no DSA indexer (glm_moe_dsa has)", o.model,
				 coli_family_name(m->cfg->family));
	for (int c = 0; c < nctx; c++)
		if (ctx[c] > m->cfg->max_position_embeddings - o.steps)
			return coli_errf(e, COLI_EUSAGE, "--contexts: '%d' + %d steps passes max_position_embeddings %d",
					 ctx[c], o.steps, m->cfg->max_position_embeddings);
	return 0;
}

/* Every context in turn on the open engine m; res [contexts][MODES][reps]. */
static int run_all(coli_engine *m, sums *s, const int *ctx, int nctx, figures *res, coli_err *e)
{
	float *logits = malloc((size_t)m->cfg->vocab_size * sizeof(float));
	int rc = logits ? 0 : coli_errf(e, COLI_ENOMEM, "cannot allocate %d logits", m->cfg->vocab_size);
	s->c = m->cfg;
	for (int c = 0; rc == 0 && c < nctx; c++)
		rc = one_context(m, s, ctx[c], logits, at(res, c, 0), e);
	free(logits);
	return rc;
}

static int bench(coli_err *e)
{
	int *ctx = NULL, nctx = 0, rc = -1;
	figures *res = NULL;
	sums s = {0};
	coli_tracer tr;
	coli_engine m = {0};
	coli_tracer_init(&tr, on_record, &s);
	tr.phase = COLI_PHASE_DECODE;
	coli_engine_opts mo = {.threads = o.threads, .tracer = &tr};
	if (coli_opts_int_list(o.contexts, 1, 1 << 24, &ctx, &nctx, e) < 0)
		coli_err_prefix(e, "--contexts");
	else if (!(res = calloc((size_t)nctx * MODES * (size_t)o.reps, sizeof(*res))))
		coli_errf(e, COLI_ENOMEM, "out of memory");
	else if (coli_engine_open(&m, o.model, &mo, e) == 0 && check_model(&m, ctx, nctx, e) == 0)
		rc = run_all(&m, &s, ctx, nctx, res, e);
	if (rc == 0) {
		print_tables(&m, ctx, nctx, res);
		print_footer(&m, ctx, nctx);
		if (o.json)
			print_json(&m, ctx, nctx, res, peak_rss_mib());
	}
	free(res);
	free(ctx);
	coli_engine_close(&m);
	return rc;
}

int main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(options, argc, argv, &e);
	if (n >= 0 && o.help) {
		char *h = coli_opts_help(synopsis, options);
		fputs(h ? h : "coli-dsabench: out of memory\n", stdout);
		free(h);
		return 0;
	}
	if (n == 0)
		coli_errf(&e, COLI_EUSAGE, "missing MODEL");
	else if (n > 1)
		coli_errf(&e, COLI_EUSAGE, "unexpected argument '%s'", argv[1]);
	if (n == 1) {
		o.model = argv[0];
		if (bench(&e) == 0)
			return 0;
	}
	fflush(stdout);
	fprintf(stderr, "coli-dsabench: %s\n", e.msg);
	if (e.code == COLI_EUSAGE)
		fprintf(stderr, "(see 'coli-dsabench --help')\n");
	return coli_err_exit_status(&e);
}
