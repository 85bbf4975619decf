/* test_rollback.c: speculative decoding's rollback of a sequence's state (coli_kv_keep,
 * coli_kv_rollback) on models with fixed-size state: qwen3_5_moe's Gated DeltaNet layers and
 * deepseek_v4's window and compressors' windows (tests/fixtures/hf/<family>-tiny): a
 * verify of 5 tokens (the most) rolled back to 0 .. 4 of them leaves the state (conv,
 * recurrent, keys and values; the window, the compressed rows, the compressors' windows) bit for
 * bit that of a run that fed only those tokens, and the next token's logits equal; for
 * deepseek_v4 at every start from 72 to 80, so that the verify crosses CSA (4) and HCA (16)
 * windows' ends and the 8-key window wraps; a rollback beyond the kept call is refused; a model
 * without fixed parts rolls back by its count alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "fileio.h"
#include "t.h"

/* The fixture's prompt ids, repeated to n in all (room for 96). */
static int32_t *prompt(const char *fam, size_t n)
{
	char path[512], *buf = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "%s/%s-tiny/prompt_ids.i32.bin", t_fixtures(), fam);
	if (coli_read_file(path, &buf, &len, NULL) < 0 || len < 4)
		return NULL;
	int32_t *p = calloc(96, sizeof(*p)), *ids = (int32_t *)(void *)buf;
	for (size_t i = 0; p && i < n && i < 96; i++)
		p[i] = ids[i % (len / 4)];
	free(buf);
	return p;
}

/* Every part's bytes for the first kv->n tokens (growing) or whole (fixed) equal. */
static int same_state(const coli_kv *a, const coli_kv *b)
{
	if (a->n != b->n || a->n_parts != b->n_parts)
		return 0;
	for (int i = 0; i < a->n_parts; i++) {
		const coli_state_part *p = &a->parts[i];
		size_t n = p->width ? (size_t)a->n * (size_t)p->width : (size_t)p->fixed;
		if (memcmp(a->part[i], b->part[i], n * sizeof(float)))
			return 0;
	}
	return 1;
}

/* A prefill of np tokens, a verify of 5 (the most: COLI_DRAFT_MAX + 1), rolled back to keep of
 * them, against a run of np + keep. */
static void test_rollback(coli_engine *m, const char *fam, const int32_t *p, int np)
{
	static const int32_t tail[5] = {17, 301, 5, 44, 123}, next = 99;
	int V = m->cfg->vocab_size;
	float *la = malloc((size_t)V * sizeof(float)), *lb = malloc((size_t)V * sizeof(float));
	for (int keep = 0; keep <= 4; keep++) {
		char name[160];
		coli_kv a, b;
		coli_err e = {0, ""};
		int rc = coli_kv_init(&a, m, np + 8, &e) | coli_kv_init(&b, m, np + 8, &e) | coli_kv_keep(&a, m, &e);
		rc = rc ? rc : coli_forward(m, &a, p, np, NULL, NULL, NULL, &e) | coli_forward(m, &b, p, np, NULL, NULL, NULL, &e);
		rc = rc ? rc : coli_forward(m, &a, tail, 5, NULL, NULL, NULL, &e); /* a verify of 5 */
		rc = rc ? rc : coli_kv_rollback(m, &a, np + keep, &e);
		if (rc == 0 && keep)
			rc = coli_forward(m, &b, tail, keep, NULL, NULL, NULL, &e);
		int same = rc == 0 && same_state(&a, &b);
		rc = rc ? rc : coli_forward(m, &a, &next, 1, NULL, la, NULL, &e) | coli_forward(m, &b, &next, 1, NULL, lb, NULL, &e);
		snprintf(name, sizeof(name), "rollback: %s: a verify of 5 at %d kept %d: the state and the next logits of a run "
			 "of %d", fam, np, keep, np + keep);
		T_CHECK(name, rc == 0 && same && !memcmp(la, lb, (size_t)V * sizeof(float)), "rc %d (%s) same state %d", rc,
			e.msg, same);
		coli_kv_release(&a), coli_kv_release(&b);
	}
	free(la), free(lb);
}

static void test_refused(coli_engine *m, const int32_t *p, int np)
{
	coli_kv a;
	coli_err e = {0, ""};
	int rc = coli_kv_init(&a, m, np + 8, &e) | coli_kv_keep(&a, m, &e) | coli_forward(m, &a, p, np, NULL, NULL, NULL, &e);
	int r1 = rc == 0 ? coli_kv_rollback(m, &a, np - 1, &e) : 0; /* a prefill of 64 is not kept */
	T_CHECK("rollback: into a prefill (not kept) is refused, EUSAGE", rc == 0 && r1 < 0 && e.code == COLI_EUSAGE &&
		strstr(e.msg, "last short forward call"), "rc %d r1 %d (%s)", rc, r1, e.msg);
	coli_kv_release(&a);
}

static void test_no_fixed(const char *dir)
{
	char path[600], cmd[1200];
	coli_engine m;
	coli_kv a;
	coli_err e = {0, ""};
	snprintf(path, sizeof(path), "%s/qwen3.coli", dir);
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q --force %s/qwen3_moe-tiny/checkpoint %s", t_fixtures(), path);
	int rc = system(cmd) == 0 && coli_engine_open(&m, path, NULL, &e) == 0 ? 0 : -1;
	static const int32_t t[5] = {1, 2, 3, 4, 5};
	if (rc == 0) {
		rc = coli_kv_init(&a, &m, 16, &e) | coli_forward(&m, &a, t, 5, NULL, NULL, NULL, &e) |
		     coli_kv_rollback(&m, &a, 2, &e);
		T_CHECK("rollback: a model without fixed parts rolls back anywhere by its count", rc == 0 && a.n == 2 && !a.keep,
			"rc %d (%s) n %d", rc, e.msg, a.n);
		coli_kv_release(&a);
		coli_engine_close(&m);
	} else {
		T_CHECK("rollback: qwen3_moe fixture converts and opens", 0, "%s", e.msg);
	}
}

/* The family's fixture: a verify at each start from first to last rolled back; one into a prefill refused. */
static void test_family(const char *dir, const char *fam, int first, int last)
{
	char path[600];
	coli_engine m;
	coli_err e = {0, ""};
	int32_t *p = prompt(fam, 96);
	int rc = p && t_convert_fixture(dir, fam, path, sizeof(path)) == 0 ? coli_engine_open(&m, path, NULL, &e) : -1;
	T_CHECK(fam, rc == 0, "%s", e.msg);
	for (int np = first; rc == 0 && np <= last; np++)
		test_rollback(&m, fam, p, np);
	if (rc == 0) {
		test_refused(&m, p, first);
		coli_engine_close(&m);
	}
	free(p);
}

int main(void)
{
	char dir[] = "/tmp/coli-test-rollback.XXXXXX", cmd[1200];
	if (!mkdtemp(dir))
		return 1;
	test_family(dir, "qwen3_5_moe", 64, 64);
	test_family(dir, "deepseek_v4", 72, 80);
	test_no_fixed(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("rollback: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
}
