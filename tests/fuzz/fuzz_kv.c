/* fuzz_kv.c: a .coli_kv file through coli_kvfile_load (vocabulary FUZZ_VOCAB), as it is and with
 * its payload size and CRCs made right; the identity expected is the one the file claims. Each
 * input is loaded for three models' states: mixtral-tiny's (the seeds' model: key and value of
 * 32 floats in 4 layers, so version 1 files are read too), a mixed one (MLA parts, an indexer's
 * keys, a fixed-size part) and none (any valid part table). A session the reader accepts must
 * hold what formats/kv.md promises: n_cached <= n_tokens <= n_cached + 1, a part table by the
 * rules and equal to the model's, every token in [0, FUZZ_VOCAB), and every part's floats
 * readable and finite (ASan checks the buffers are that long). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kvfile.h"

#define FUZZ_VOCAB 512 /* the mixtral-tiny seeds' vocabulary */

static const coli_state_part mixtral[8] = {
	{0, COLI_STATE_KEY, 32, 0}, {0, COLI_STATE_VALUE, 32, 0}, {1, COLI_STATE_KEY, 32, 0}, {1, COLI_STATE_VALUE, 32, 0},
	{2, COLI_STATE_KEY, 32, 0}, {2, COLI_STATE_VALUE, 32, 0}, {3, COLI_STATE_KEY, 32, 0}, {3, COLI_STATE_VALUE, 32, 0},
};
static const coli_state_part mixed[5] = {
	{0, COLI_STATE_LATENT, 8, 0}, {0, COLI_STATE_ROPE_KEY, 4, 0}, {0, COLI_STATE_INDEX_KEY, 4, 0},
	{1, COLI_STATE_LATENT, 0, 16}, {1, COLI_STATE_ROPE_KEY, 4, 0},
};

/* The rules of the part table (formats/kv.md, "Part table"). */
static int table_ok(const coli_kvfile *f)
{
	for (int i = 0; i < f->n_parts; i++) {
		const coli_state_part *p = &f->parts[i], *q = i ? p - 1 : NULL;
		if (p->kind < 1 || p->kind > COLI_STATE_KIND_MAX || (p->width != 0) == (p->fixed != 0) || p->width < 0 ||
		    p->fixed < 0 || (q && (p->layer < q->layer || (p->layer == q->layer && p->kind <= q->kind))))
			return 0;
	}
	return f->n_parts >= 1;
}

static volatile float sink; /* every token and float is added here: loaded, so ASan sees each */

static void check(const coli_kvfile *f, const coli_state_part *want, int n_want)
{
	if (f->n_cached < 0 || f->n_cached > f->n_tokens || f->n_tokens > f->n_cached + 1 || !table_ok(f) ||
	    (want && (f->n_parts != n_want || memcmp(f->parts, want, (size_t)n_want * sizeof(*want)) != 0)))
		abort();
	for (int i = 0; i < f->n_tokens; i++) {
		if (f->tokens[i] < 0 || f->tokens[i] >= FUZZ_VOCAB)
			abort();
		sink += (float)f->tokens[i];
	}
	for (int i = 0; i < f->n_parts; i++) {
		const coli_state_part *p = &f->parts[i];
		size_t n = p->width ? (size_t)f->n_cached * (size_t)p->width : (size_t)p->fixed;
		for (size_t j = 0; j < n; j++) {
			if (!isfinite(f->data[i][j]))
				abort();
			sink += f->data[i][j];
		}
	}
}

static void read_kv(const char *path, const uint8_t identity[32])
{
	static const struct { const coli_state_part *p; int n; } models[] = {{mixtral, 8}, {mixed, 5}, {NULL, 0}};
	for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		coli_kvfile f;
		coli_err e;
		if (coli_kvfile_load(path, identity, FUZZ_VOCAB, models[m].p, models[m].n, &f, &e) < 0)
			continue;
		check(&f, models[m].p, models[m].n);
		coli_kvfile_release(&f);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_payload_file(data, size, "fuzz.coli_kv", read_kv);
	return 0;
}
