/* fuzz_usage.c: a .coli_usage file through coli_usage_read, as it is and with its payload size
 * and CRCs made right; the identity expected is the one the file claims. A table the reader
 * accepts must hold what formats/usage.md promises: every count read back is finite, >= 0. */
#include <math.h>
#include <stdlib.h>

#include "fuzz.h"
#include "usage.h"

static void read_usage(const char *path, const uint8_t identity[32])
{
	coli_usage u = {0};
	coli_err e;
	if (coli_usage_read(path, identity, &u, &e) < 0)
		return;
	if (u.n_layers < 1 || u.n_layers > COLI_USAGE_MAX_LAYERS || u.n_experts < 1 ||
	    u.n_experts > COLI_USAGE_MAX_EXPERTS || !(u.decay >= 0 && u.decay <= 1))
		abort();
	for (size_t i = 0; i < (size_t)u.n_layers * (size_t)u.n_experts; i++)
		if (!isfinite(u.counts[i]) || u.counts[i] < 0)
			abort();
	coli_usage_release(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_payload_file(data, size, "fuzz.coli_usage", read_usage);
	return 0;
}
