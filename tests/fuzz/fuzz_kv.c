/* fuzz_kv.c: a .coli_kv file through coli_kvfile_load (vocabulary FUZZ_VOCAB), as it is and with its payload size and
 * CRCs made right; the identity expected is the one the file claims. A session the reader
 * accepts must hold what formats/kv.md promises: n_cached <= n_tokens <= n_cached + 1, and
 * every token (in [0, FUZZ_VOCAB)) and cached row is read back (ASan checks the buffers are that
 * long). */
#include <stdlib.h>

#include "fuzz.h"
#include "kvfile.h"

#define FUZZ_VOCAB 512 /* the mixtral-tiny seeds' vocabulary */

/* Sums n floats so that every one is loaded. */
static float sum(const float *x, size_t n)
{
	float s = 0;
	for (size_t i = 0; i < n; i++)
		s += x[i];
	return s;
}

static void read_kv(const char *path, const uint8_t identity[32])
{
	coli_kvfile f = {0};
	coli_err e;
	volatile float s = 0;
	if (coli_kvfile_load(path, identity, FUZZ_VOCAB, &f, &e) < 0)
		return;
	if (f.n_cached < 0 || f.n_cached > f.n_tokens || f.n_tokens > f.n_cached + 1)
		abort();
	for (int i = 0; i < f.n_tokens; i++) {
		if (f.tokens[i] < 0 || f.tokens[i] >= FUZZ_VOCAB)
			abort();
		s += (float)f.tokens[i];
	}
	for (int l = 0; l < f.n_layers; l++)
		s += sum(f.k[l], (size_t)f.n_cached * (size_t)f.k_width) +
		     sum(f.v[l], (size_t)f.n_cached * (size_t)f.v_width);
	coli_kvfile_release(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_payload_file(data, size, "fuzz.coli_kv", read_kv);
	return 0;
}
