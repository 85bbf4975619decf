/* test_v4.c: deepseek_v4 in the engine beyond the golden logits (test_forward.c): a hash layer's
 * experts are known from the token id before the layer runs, so the streaming store reads them
 * ahead exactly: counted from the trace's expert outcomes, no get on a hash layer misses (each a
 * hit or a read already issued), while the routed layers behind them do miss at the same cache;
 * and reading ahead changes nothing computed (the logits equal the run in RAM, bit for bit). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "t.h"

#define STEPS 16

typedef struct outcomes {
	long n[COLI_MAX_LAYERS][COLI_X_N];
} outcomes;

static void count(void *ctx, const coli_trace_rec *r)
{
	outcomes *o = ctx;
	if (r->kind == COLI_TR_EXPERT && r->layer < COLI_MAX_LAYERS && r->sub < COLI_X_N)
		o->n[r->layer][r->sub]++;
}

static int32_t argmax(const float *v, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		best = v[i] > v[best] ? i : best;
	return best;
}

/* A prompt and STEPS greedy tokens; every step's logits into lg [STEPS + 1][vocab]. */
static int run(const char *path, const coli_engine_opts *o, float *lg, coli_err *e)
{
	coli_engine m;
	coli_kv kv;
	int32_t prompt[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	if (coli_engine_open(&m, path, o, e) < 0)
		return -1;
	int V = m.cfg->vocab_size, rc = coli_kv_init(&kv, &m, 64, e);
	rc = rc == 0 ? coli_forward(&m, &kv, prompt, 10, NULL, lg, NULL, e) : -1;
	for (int t = 1; rc == 0 && t <= STEPS; t++) {
		int32_t id = argmax(lg + (int64_t)(t - 1) * V, V);
		rc = coli_forward(&m, &kv, &id, 1, NULL, lg + (int64_t)t * V, NULL, e);
	}
	if (rc == 0)
		coli_kv_release(&kv);
	coli_engine_close(&m);
	return rc;
}

int main(void)
{
	char dir[] = "/tmp/coli-test-v4.XXXXXX", path[600], cmd[700];
	coli_err e = {0, ""};
	if (!mkdtemp(dir) || t_convert_fixture(dir, "deepseek_v4", path, sizeof(path)) < 0)
		return 1;
	coli_model c;
	char cfg[700];
	snprintf(cfg, sizeof(cfg), "%s/config.json", path);
	T_CHECK("v4: config read", coli_model_load(&c, cfg, &e) == 0 && c.n_hash_layers == 3, "%s", e.msg);
	size_t each = (size_t)(STEPS + 1) * (size_t)c.vocab_size;
	float *ram = calloc(each, sizeof(float)), *streamed = calloc(each, sizeof(float));
	outcomes *o = calloc(1, sizeof(*o));
	coli_tracer tr;
	coli_tracer_init(&tr, count, o);
	coli_engine_opts ro = {0}, so = {.stream = 1, .so = {.cache_slots = c.top_k}, .tracer = &tr};
	int rc = ram && streamed && o ? run(path, &ro, ram, &e) : -1;
	rc = rc == 0 ? run(path, &so, streamed, &e) : -1;
	T_CHECK("v4: the prompt and 16 greedy tokens run in RAM and streamed", rc == 0, "%s", e.msg);
	if (rc == 0) {
		long hash_miss = 0, hash_ahead = 0, routed_miss = 0;
		for (int l = 0; l < c.n_layers; l++) {
			if (l < c.n_hash_layers)
				hash_miss += o->n[l][COLI_X_MISS], hash_ahead += o->n[l][COLI_X_PREFETCHED];
			else
				routed_miss += o->n[l][COLI_X_MISS];
		}
		T_CHECK("v4: every get on a hash layer finds its expert read or being read ahead (no miss)",
			hash_miss == 0 && hash_ahead > 0, "%ld misses, %ld read ahead", hash_miss, hash_ahead);
		T_CHECK("v4: the routed layers miss at the same cache (the count can see misses)", routed_miss > 0,
			"%ld misses", routed_miss);
		T_CHECK("v4: reading ahead changes nothing: streamed logits equal RAM's bit for bit",
			memcmp(ram, streamed, each * sizeof(float)) == 0, "logits differ");
	}
	free(ram), free(streamed), free(o);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("v4: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
}
