/* test_v4.c: deepseek_v4 in the engine beyond the golden logits (test_forward.c): a hash layer's
 * experts are known from the token id before the layer runs, so the streaming store reads them
 * ahead exactly: counted from the trace's expert outcomes, no get on a hash layer misses (each a
 * hit or a read already issued), while the routed layers behind them do miss at the same cache;
 * and reading ahead changes nothing computed (the logits equal the run in RAM, bit for bit).
 * The batched prefill: a prompt of 1, 3 or 7 tokens in one call gives the bits of a call a token
 * (the prompt's last logits, a decode step's after it, the MTP layer's draft after that), a
 * prompt of 70 (products over more than COLI_EXACT_N tokens: another summation order) the same
 * within 1e-5 of the logits' scale, and streamed the bits of RAM; the MTP layer's draft does not
 * depend on how its rows were queued (batches of 3 against a token a call, bit for bit). */
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

#define PREFILL_CAP 128

/* The prompt's n tokens (ids 3 + 7i mod vocab) in one call (one_by_one 0) or a call a token,
 * then a decode step of token 5, then the MTP layer's draft of the token after it (6): the
 * logits of the prompt's last token, of the step and of the draft into out ([3][vocab]). */
static int prefill(const char *path, const coli_engine_opts *o, int n, int one_by_one, float *out, coli_err *e)
{
	coli_engine m;
	coli_kv kv;
	coli_mtp s;
	int32_t ids[PREFILL_CAP], step = 5;
	if (coli_engine_open(&m, path, o, e) < 0)
		return -1;
	int V = m.cfg->vocab_size, has_kv = coli_kv_init(&kv, &m, PREFILL_CAP, e) == 0;
	int has_mtp = has_kv && coli_mtp_init(&s, &m, PREFILL_CAP, 0, e) == 0, rc = has_mtp ? 0 : -1;
	for (int i = 0; i < n; i++)
		ids[i] = (3 + 7 * i) % V;
	for (int at = 0; rc == 0 && at < n; at += one_by_one ? 1 : n)
		rc = coli_forward_mtp(&m, &kv, &s, ids + at, one_by_one ? 1 : n, NULL, out, e);
	rc = rc == 0 ? coli_forward_mtp(&m, &kv, &s, &step, 1, NULL, out + V, e) : rc;
	rc = rc == 0 ? coli_mtp_step(&m, &s, 6, out + 2 * V, e) : rc;
	if (has_mtp)
		coli_mtp_release(&s);
	if (has_kv)
		coli_kv_release(&kv);
	coli_engine_close(&m);
	return rc;
}

/* The largest difference between a and b over n, and (*scale) the largest |a|. */
static double max_diff(const float *a, const float *b, size_t n, double *scale)
{
	double d = 0;
	*scale = 0;
	for (size_t i = 0; i < n; i++) {
		double x = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i], y = a[i] < 0 ? -a[i] : a[i];
		d = x > d ? x : d, *scale = y > *scale ? y : *scale;
	}
	return d;
}

/* The batched prefill against a call a token (RAM), the 70-token batch streamed against RAM,
 * and the MTP layer's rows queued in batches of 3 against a token a call. */
static void batched(const char *path, const coli_model *c)
{
	coli_err e = {0, ""};
	size_t each = 3 * (size_t)c->vocab_size;
	float *one = calloc(each, sizeof(float)), *all = calloc(each, sizeof(float)), *str = calloc(each, sizeof(float));
	coli_engine_opts ro = {0}, so = {.stream = 1, .so = {.cache_slots = c->top_k}}, b3 = {.max_batch = 3};
	const int lens[] = {1, 3, 7, 70};
	char name[200];
	for (int i = 0; i < 4; i++) {
		int n = lens[i], rc = one && all && str ? prefill(path, &ro, n, 1, one, &e) : -1;
		rc = rc == 0 ? prefill(path, &ro, n, 0, all, &e) : rc;
		double scale = 0, d = rc == 0 ? max_diff(all, one, each, &scale) : 1e9;
		snprintf(name, sizeof(name), "v4: a %d-token prefill in one call: the logits (its last, a step's, a draft's) %s",
			 n, n <= COLI_EXACT_N ? "of a call a token, bit for bit" : "of a call a token within 1e-5");
		T_CHECK(name, rc == 0 && (n <= COLI_EXACT_N ? d == 0 : d <= 1e-5 * scale) && scale > 0,
			"rc %d %s; max diff %.3g (logits up to %.3g)", rc, e.msg, d, scale);
	}
	int rc = one && all && str ? prefill(path, &so, 70, 0, str, &e) : -1;
	T_CHECK("v4: a 70-token prefill streamed gives RAM's logits bit for bit",
		rc == 0 && memcmp(str, all, each * sizeof(float)) == 0, "rc %d %s", rc, e.msg);
	rc = one && all ? prefill(path, &ro, 20, 1, one, &e) : -1;
	rc = rc == 0 ? prefill(path, &b3, 20, 0, all, &e) : rc;
	T_CHECK("v4: the MTP layer's rows queued in batches of 3 or a token a call: the same logits bit for bit",
		rc == 0 && memcmp(one, all, each * sizeof(float)) == 0, "rc %d %s", rc, e.msg);
	free(one), free(all), free(str);
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
	batched(path, &c);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("v4: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
}
