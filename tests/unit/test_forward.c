/* test_forward.c: the forward pass against Hugging Face transformers' outputs for every
 * fixture family (tests/fixtures/hf/<family>-tiny), at 16, 8 and 4 expert bits (dense 16; the
 * FP4 fixture at 16 bits and with its experts kept as fp4, both against its one reference):
 *   - teacher-forced logits of the prompt (24 tokens; glm_moe_dsa 64, past its index_topk 8, so
 *     the DSA indexer's selection decides the attention) within 1e-3 of logits[_q8|_q4].f32.bin;
 *   - the routing set of every token at every MoE layer equal to routing_indices[_qN];
 *   - routing weights within 1e-4 (same order: by weight descending, ties by id);
 *   - (16 bits) full_logits over prompt + 16 greedy tokens within 1e-3, and full routing sets;
 *   - the first 16 greedy tokens through the KV cache equal greedy_tokens[_qN], step logits within 1e-3;
 *   - a prefill in one batch equals the same tokens fed one by one (batched = incremental);
 * each with every kernel variant this CPU runs (scalar, AVX2, AVX-512), forced as COLI_ISA
 * forces it. Containers are made with bin/coli-convert into a scratch folder. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "engine.h"
#include "kernels.h"
#include "t.h"

#define TOL 1e-3

static const char *const families[] = {"olmoe", "qwen3_moe", "mixtral", "deepseek_v3", "glm4_moe", "deepseek_v3-fp8",
				       "glm_moe_dsa", "qwen3_5_moe", "deepseek_v4", "deepseek_v4-fp4"};

/* A fixture array: whole file as floats or ints; count in *n. */
static void *load(const char *fam, const char *name, size_t *n)
{
	char path[512], *buf = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/%s-tiny/%s", t_fixtures(), fam, name);
	if (coli_read_file(path, &buf, &len, NULL) < 0)
		return NULL;
	*n = len / 4;
	return buf;
}

static double max_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)a[i] - b[i]));
	return m;
}

static int same_set(const int32_t *a, const int32_t *b, int k)
{
	for (int i = 0; i < k; i++) {
		int found = 0;
		for (int j = 0; j < k; j++)
			found |= a[i] == b[j];
		if (!found)
			return 0;
	}
	return 1;
}

/* Positions x layers whose routing sets differ. */
static int routing_mismatches(const int32_t *got, const int32_t *want, size_t n, int k)
{
	int bad = 0;
	for (size_t i = 0; i < n; i += (size_t)k)
		bad += !same_set(got + i, want + i, k);
	return bad;
}

/* bits 0: the converter's default (FP4 experts kept as fp4). */
static int convert(const char *fam, int bits, const char *out)
{
	char cmd[1024], eb[32] = "";
	if (bits)
		snprintf(eb, sizeof(eb), "--expert-bits %d", bits);
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q --force %s --dense-bits 16 --mtp-bits 16 %s/%s-tiny/checkpoint %s",
		 eb, t_fixtures(), fam, out);
	return system(cmd);
}

typedef struct fx {
	const char *fam, *suf, *isa, *label; /* label: "16-bit", ..., "fp4" */
	int bits;
	coli_engine m;
	int32_t *prompt;
	size_t n_prompt;
} fx;

static void check_teacher(fx *f)
{
	char name[128], file[64];
	int V = f->m.cfg->vocab_size, k = f->m.cfg->top_k, L = coli_engine_moe_layers(&f->m), n = (int)f->n_prompt;
	coli_kv kv;
	size_t nr = 0, nw = 0, nl = 0;
	float *logits = malloc((size_t)n * V * sizeof(float)), *w = malloc((size_t)L * n * k * sizeof(float));
	int32_t *ids = malloc((size_t)L * n * k * sizeof(int32_t));
	coli_routing_log r = {ids, w};
	coli_err e = {0, ""};
	int rc = coli_kv_init(&kv, &f->m, n, &e) == 0 ? coli_forward(&f->m, &kv, f->prompt, n, logits, NULL, &r, &e) : -1;
	snprintf(file, sizeof(file), "logits%s.f32.bin", f->suf);
	float *ref = load(f->fam, file, &nl);
	snprintf(file, sizeof(file), "routing_indices%s.i32.bin", f->suf);
	int32_t *rref = load(f->fam, file, &nr);
	snprintf(file, sizeof(file), "routing_weights%s.f32.bin", f->suf);
	float *wref = load(f->fam, file, &nw);
	snprintf(name, sizeof(name), "forward %s: %s %s experts: teacher-forced logits within 1e-3", f->isa, f->fam, f->label);
	T_CHECK(name, rc == 0 && ref && nl == (size_t)n * V && max_diff(logits, ref, nl) <= TOL, "rc %d (%s), max diff %g",
		rc, e.msg, ref && rc == 0 ? max_diff(logits, ref, nl) : -1.0);
	snprintf(name, sizeof(name), "forward %s: %s %s experts: routing sets identical at every layer and position",
		 f->isa, f->fam, f->label);
	T_CHECK(name, rc == 0 && rref && nr == (size_t)L * n * k && routing_mismatches(ids, rref, nr, k) == 0,
		"%d of %zu differ", rc == 0 && rref ? routing_mismatches(ids, rref, nr, k) : -1, nr / (size_t)k);
	snprintf(name, sizeof(name), "forward %s: %s %s experts: routing weights within 1e-4", f->isa, f->fam, f->label);
	T_CHECK(name, rc == 0 && wref && nw == nr && max_diff(w, wref, nw) <= 1e-4, "max diff %g",
		rc == 0 && wref ? max_diff(w, wref, nw) : -1.0);
	free(logits), free(w), free(ids), free(ref), free(rref), free(wref);
	coli_kv_release(&kv);
}

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		b = x[i] > x[b] ? i : b;
	return b;
}

/* Greedy decoding through the KV cache, one token per forward call. */
static void check_greedy(fx *f)
{
	char name[160], file[64];
	int V = f->m.cfg->vocab_size, n = (int)f->n_prompt, steps = 16;
	size_t ng = 0, nl = 0;
	snprintf(file, sizeof(file), "greedy_tokens%s.i32.bin", f->suf);
	int32_t *want = load(f->fam, file, &ng);
	snprintf(file, sizeof(file), "greedy_step_logits%s.f32.bin", f->suf);
	float *lref = load(f->fam, file, &nl), *logits = malloc((size_t)steps * V * sizeof(float));
	int32_t got[16];
	coli_kv kv;
	coli_err e = {0, ""};
	int rc = coli_kv_init(&kv, &f->m, n + steps, &e) == 0 ? coli_forward(&f->m, &kv, f->prompt, n, NULL, logits, NULL, &e) : -1;
	for (int i = 0; rc == 0 && i < steps; i++) {
		got[i] = argmax(logits + (size_t)i * V, V);
		if (i + 1 < steps)
			rc = coli_forward(&f->m, &kv, &got[i], 1, NULL, logits + (size_t)(i + 1) * V, NULL, &e);
	}
	snprintf(name, sizeof(name), "forward %s: %s %s experts: 16 greedy tokens through the KV cache", f->isa, f->fam, f->label);
	T_CHECK(name, rc == 0 && want && ng >= 16 && memcmp(got, want, sizeof(got)) == 0, "rc %d (%s), first token %d vs %d",
		rc, e.msg, got[0], want ? want[0] : -1);
	snprintf(name, sizeof(name), "forward %s: %s %s experts: greedy step logits within 1e-3", f->isa, f->fam, f->label);
	T_CHECK(name, rc == 0 && lref && nl == ng * V && max_diff(logits, lref, (size_t)steps * V) <= TOL, "max diff %g",
		rc == 0 && lref ? max_diff(logits, lref, (size_t)steps * V) : -1.0);
	free(want), free(lref), free(logits);
	coli_kv_release(&kv);
}

/* Prompt + greedy tokens teacher-forced (40 positions), against full_logits and full routing. */
static void check_full(fx *f)
{
	char name[160];
	int V = f->m.cfg->vocab_size, k = f->m.cfg->top_k, L = coli_engine_moe_layers(&f->m);
	size_t ng = 0, nl = 0, nr = 0;
	int32_t *g = load(f->fam, "greedy_tokens.i32.bin", &ng), *rref = load(f->fam, "full_routing_indices.i32.bin", &nr);
	float *ref = load(f->fam, "full_logits.f32.bin", &nl);
	int n = (int)(f->n_prompt + ng);
	int32_t *toks = malloc((size_t)n * sizeof(int32_t)), *ids = malloc((size_t)L * n * k * sizeof(int32_t));
	float *logits = malloc((size_t)n * V * sizeof(float));
	memcpy(toks, f->prompt, f->n_prompt * sizeof(int32_t));
	memcpy(toks + f->n_prompt, g, ng * sizeof(int32_t));
	coli_routing_log r = {ids, NULL};
	coli_kv kv;
	coli_err e = {0, ""};
	int rc = coli_kv_init(&kv, &f->m, n, &e) == 0 ? coli_forward(&f->m, &kv, toks, n, logits, NULL, &r, &e) : -1;
	snprintf(name, sizeof(name), "forward %s: %s: full_logits over %d tokens within 1e-3", f->isa, f->fam, n);
	T_CHECK(name, rc == 0 && nl == (size_t)n * V && max_diff(logits, ref, nl) <= TOL, "max diff %g",
		rc == 0 && nl == (size_t)n * V ? max_diff(logits, ref, nl) : -1.0);
	snprintf(name, sizeof(name), "forward %s: %s: full routing sets over %d tokens identical", f->isa, f->fam, n);
	T_CHECK(name, rc == 0 && nr == (size_t)L * n * k && routing_mismatches(ids, rref, nr, k) == 0, "%d differ",
		rc == 0 && nr == (size_t)L * n * k ? routing_mismatches(ids, rref, nr, k) : -1);
	free(g), free(rref), free(ref), free(toks), free(ids), free(logits);
	coli_kv_release(&kv);
}

/* The same prompt in one batch and one token at a time gives the same last logits. */
static void check_incremental(fx *f)
{
	char name[160];
	int V = f->m.cfg->vocab_size, n = (int)f->n_prompt, rc;
	float *a = malloc((size_t)V * sizeof(float)), *b = malloc((size_t)V * sizeof(float));
	coli_kv k1, k2;
	coli_err e = {0, ""};
	rc = coli_kv_init(&k1, &f->m, n, &e) | coli_kv_init(&k2, &f->m, n, &e);
	rc |= coli_forward(&f->m, &k1, f->prompt, n, NULL, a, NULL, &e);
	for (int i = 0; rc == 0 && i < n; i++)
		rc = coli_forward(&f->m, &k2, f->prompt + i, 1, NULL, b, NULL, &e);
	snprintf(name, sizeof(name), "forward %s: %s: batched prefill equals token-by-token (1e-4)", f->isa, f->fam);
	T_CHECK(name, rc == 0 && max_diff(a, b, (size_t)V) <= 1e-4, "max diff %g", max_diff(a, b, (size_t)V));
	free(a), free(b);
	coli_kv_release(&k1), coli_kv_release(&k2);
}

/* Whether this CPU runs kernel variant isa. */
static int runs(const char *isa)
{
	coli_kernels *k = NULL;
	int ok = coli_kernels_open(&k, isa, 1, NULL) == 0;
	coli_kernels_close(k);
	return ok;
}

static void run_family(const char *fam, const char *dir)
{
	static const int int_bits[] = {16, 8, 4}, fp4_bits[] = {16, 0};
	static const char *const int_sufs[] = {"", "_q8", "_q4"}, *const fp4_sufs[] = {"", ""};
	static const char *const int_labels[] = {"16-bit", "8-bit", "4-bit"}, *const fp4_labels[] = {"16-bit", "fp4"};
	static const char *const isas[] = {"avx512", "avx2", "scalar"};
	/* deepseek_v4-fp4: its FP4 values are the weights, widened exactly (16 bits) or kept (fp4, the
	 * default): both against the same reference; no int variants */
	int fp4 = strstr(fam, "fp4") != NULL, n = fp4 ? 2 : 3;
	const int *bits = fp4 ? fp4_bits : int_bits;
	const char *const *sufs = fp4 ? fp4_sufs : int_sufs, *const *labels = fp4 ? fp4_labels : int_labels;
	for (int i = 0; i < n; i++) {
		char path[512], name[128];
		snprintf(path, sizeof(path), "%s/%s-%s.coli", dir, fam, labels[i]);
		int made = convert(fam, bits[i], path) == 0;
		for (int v = 0; v < 3; v++) {
			if (!runs(isas[v])) {
				printf("SKIP forward %s: this CPU lacks it\n", isas[v]);
				continue;
			}
			fx f;
			memset(&f, 0, sizeof(f));
			f.fam = fam, f.suf = sufs[i], f.bits = bits[i], f.isa = isas[v], f.label = labels[i];
			coli_engine_opts o = {.isa = isas[v]};
			coli_err e = {0, ""};
			int rc = made ? coli_engine_open(&f.m, path, &o, &e) : -1;
			f.prompt = load(fam, "prompt_ids.i32.bin", &f.n_prompt);
			snprintf(name, sizeof(name), "forward %s: %s %s experts: container converts and loads", isas[v], fam,
				 labels[i]);
			T_CHECK(name, rc == 0 && f.prompt, "%s", e.msg);
			if (rc == 0 && f.prompt) {
				check_teacher(&f);
				check_greedy(&f);
				if (bits[i] == 16 || bits[i] == 0) {
					check_full(&f);
					check_incremental(&f);
				}
				coli_engine_close(&f.m);
			}
			free(f.prompt);
		}
	}
}

/* argv[1], when given: the one family to run (e.g. deepseek_v4-fp4). */
int main(int argc, char **argv)
{
	char dir[] = "/tmp/coli-test-forward.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		if (argc < 2 || strcmp(argv[1], families[i]) == 0)
			run_family(families[i], dir);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("forward: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
}
