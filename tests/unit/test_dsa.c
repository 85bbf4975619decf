/* test_dsa.c: the DSA lightning indexer (engine/nn/dsa.c) against transformers' GlmMoeDsaIndexer
 * (tests/fixtures/hf/glm_moe_dsa-tiny):
 *   - dsa_top: the k best of a list with ties, ties to the lower position, ascending, against
 *     a sort by (score descending, position ascending);
 *   - the positions attended at every prompt token of the last layers (full layer 3 and the
 *     shared layer 4 that reuses them) equal dsa_selected.i32.bin, on every kernel variant;
 *   - attention forced over every position (dsa_dense) gives the tokens and logits of the
 *     sparse path, bit for bit, while the context is at most index_topk, and other logits past it
 *     (the selection matters there: the fixture drops 56 of 64 keys);
 *   - the state declares the indexer's keys on full layers only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "fileio.h"
#include "nn/dsa.h"
#include "nn/ws.h"
#include "t.h"

static void *load(const char *name, size_t *n)
{
	char path[512], *buf = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/glm_moe_dsa-tiny/%s", t_fixtures(), name);
	if (coli_read_file(path, &buf, &len, NULL) < 0)
		return NULL;
	*n = len / 4;
	return buf;
}

/* Reference: positions sorted by (score desc, position asc), the first k, then ascending. */
static int cmp_int(const void *a, const void *b)
{
	return *(const int32_t *)a - *(const int32_t *)b;
}

static const float *g_scores;
static int cmp_rank(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	if (g_scores[x] != g_scores[y])
		return g_scores[x] > g_scores[y] ? -1 : 1;
	return x - y;
}

static void test_top(void)
{
	enum { N = 500 };
	float s[N], tmp[N];
	int32_t got[N], want[N];
	int bad = 0;
	srand(7);
	for (int round = 0; round < 200; round++) {
		int n = 1 + rand() % N, k = 1 + rand() % n, levels = 1 + rand() % 8; /* few levels: many ties */
		for (int i = 0; i < n; i++)
			s[i] = round % 2 ? (float)(rand() % levels) : (float)rand() / RAND_MAX - 0.5f;
		for (int i = 0; i < n; i++)
			want[i] = i;
		g_scores = s;
		qsort(want, (size_t)n, sizeof(int32_t), cmp_rank);
		qsort(want, (size_t)k, sizeof(int32_t), cmp_int);
		int m = dsa_top(s, n, k, tmp, got);
		bad += m != k || memcmp(got, want, (size_t)k * sizeof(int32_t)) != 0;
	}
	T_CHECK("dsa: top-k with ties (to the lower position), ascending, 200 random lists", bad == 0, "%d wrong", bad);
}

static int convert(const char *out)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q --force --expert-bits 16 --dense-bits 16 --mtp-bits 16 "
		 "%s/glm_moe_dsa-tiny/checkpoint %s", t_fixtures(), out);
	return system(cmd);
}

/* After the prompt's forward, ws->sel holds full layer 3's selection, which shared layer 4
 * reused: both rows of dsa_selected (intersected with causality, -1 padded) must match. */
static void test_selection(const char *path, const char *isa)
{
	char name[160];
	coli_engine m;
	coli_kv kv;
	coli_err e = {0, ""};
	coli_engine_opts o = {.isa = isa};
	size_t np = 0, ns = 0;
	int32_t *prompt = load("prompt_ids.i32.bin", &np), *ref = load("dsa_selected.i32.bin", &ns);
	int rc = coli_engine_open(&m, path, &o, &e) == 0 && coli_kv_init(&kv, &m, (int)np, &e) == 0 ? 0 : -1;
	rc = rc == 0 ? coli_forward(&m, &kv, prompt, (int)np, NULL, NULL, NULL, &e) : -1;
	int K = rc == 0 ? m.cfg->index_topk : 0, bad = 0, sparse = 0;
	for (int layer = 3; rc == 0 && layer <= 4; layer++)
		for (int t = 0; t < (int)np; t++) {
			const int32_t *want = ref + ((size_t)layer * np + (size_t)t) * (size_t)K;
			int n = m.ws->nsel[t];
			sparse += n >= 0;
			for (int j = 0; j < K; j++) {
				int32_t g = n < 0 ? (j <= t ? j : -1) : (j < n ? m.ws->sel[(size_t)t * K + j] : -1);
				bad += g != want[j];
			}
		}
	snprintf(name, sizeof(name), "dsa %s: layers 3 (full) and 4 (shared): positions attended equal dsa_selected", isa);
	T_CHECK(name, rc == 0 && ns == 5 * np * 8 && bad == 0 && sparse == 2 * ((int)np - K), "rc %d (%s), %d differ, %d sparse",
		rc, e.msg, bad, sparse);
	if (rc == 0) {
		int idx = 0, full = 0;
		for (int i = 0; i < kv.n_parts; i++)
			if (kv.parts[i].kind == COLI_STATE_INDEX_KEY)
				idx++, full += m.cfg->index_full[kv.parts[i].layer];
		snprintf(name, sizeof(name), "dsa %s: index keys are state of the 3 full layers only", isa);
		T_CHECK(name, idx == 3 && full == 3 && kv.ix[0] && kv.ix[1] && !kv.ix[2] && kv.ix[3] && !kv.ix[4] &&
			kv.ix_width == 32, "%d parts, %d on full layers", idx, full);
		coli_kv_release(&kv);
		coli_engine_close(&m);
	}
	free(prompt), free(ref);
}

/* Greedy tokens and step logits of n_prompt prompt tokens then steps more. */
static int greedy(const char *path, int dense, const int32_t *prompt, int np, int steps, int32_t *ids, float *logits,
		  coli_err *e)
{
	coli_engine m;
	coli_kv kv;
	coli_engine_opts o = {.dsa_dense = dense};
	if (coli_engine_open(&m, path, &o, e) < 0)
		return -1;
	int V = m.cfg->vocab_size, rc = coli_kv_init(&kv, &m, np + steps, e);
	rc = rc == 0 ? coli_forward(&m, &kv, prompt, np, NULL, logits, NULL, e) : -1;
	for (int i = 0; rc == 0 && i < steps; i++) {
		const float *l = logits + (size_t)i * V;
		int b = 0;
		for (int j = 1; j < V; j++)
			b = l[j] > l[b] ? j : b;
		ids[i] = b;
		if (i + 1 < steps)
			rc = coli_forward(&m, &kv, &ids[i], 1, NULL, logits + (size_t)(i + 1) * V, NULL, e);
	}
	coli_kv_release(&kv);
	coli_engine_close(&m);
	return rc;
}

static void test_forced_dense(const char *path)
{
	enum { V = 384, STEPS = 24 };
	size_t np = 0;
	int32_t *prompt = load("prompt_ids.i32.bin", &np), a[STEPS], b[STEPS];
	float *la = malloc((size_t)STEPS * V * sizeof(float)), *lb = malloc((size_t)STEPS * V * sizeof(float));
	coli_err e = {0, ""};
	/* 3 prompt tokens + 5 greedy: positions 0..7, never more than index_topk 8 keys */
	int rc = greedy(path, 0, prompt, 3, 6, a, la, &e) | greedy(path, 1, prompt, 3, 6, b, lb, &e);
	T_CHECK("dsa: forced dense equals sparse while the context is at most index_topk (ids, logits bit for bit)",
		rc == 0 && !memcmp(a, b, 6 * sizeof(int32_t)) && !memcmp(la, lb, (size_t)6 * V * sizeof(float)), "rc %d (%s)",
		rc, e.msg);
	rc = greedy(path, 0, prompt, (int)np, STEPS, a, la, &e) | greedy(path, 1, prompt, (int)np, STEPS, b, lb, &e);
	T_CHECK("dsa: forced dense differs past index_topk (the selection drops keys there)",
		rc == 0 && memcmp(la, lb, (size_t)STEPS * V * sizeof(float)) != 0, "rc %d (%s)", rc, e.msg);
	free(prompt), free(la), free(lb);
}

int main(void)
{
	char dir[] = "/tmp/coli-test-dsa.XXXXXX", path[600];
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/glm.coli", dir);
	test_top();
	int made = convert(path) == 0;
	T_CHECK("dsa: the fixture converts", made, "coli-convert failed");
	static const char *const isas[] = {"avx512", "avx2", "scalar"};
	for (int i = 0; made && i < 3; i++) {
		coli_kernels *k = NULL;
		int runs = coli_kernels_open(&k, isas[i], 1, NULL) == 0;
		coli_kernels_close(k);
		if (runs)
			test_selection(path, isas[i]);
	}
	if (made)
		test_forced_dense(path);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("dsa: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
}
