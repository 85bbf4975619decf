/* fuzz_route.c: a route_trace v1 CSV through coli_route_open_mem. A table the reader accepts
 * must hold what formats/route.md promises: its shape in range, every present entry top_k
 * distinct experts below n_experts with finite weights >= 0, non-increasing by slot; entries
 * absent only at the last layer of prompt positions other than the last, as many as it counts. */
#include <math.h>
#include <stdlib.h>

#include "fuzz.h"
#include "route.h"

/* One (position, layer) entry as promised; 1 when it is absent (and allowed to be). */
static int check_entry(const coli_route *r, int p, int l)
{
	const float *w = NULL;
	const int32_t *x = coli_route_at(r, p, l, &w);
	if (!x) {
		if (r->n_layers < 2 || l != r->n_layers - 1 || p >= r->n_prefill - 1)
			abort();
		return 1;
	}
	for (int j = 0; j < r->top_k; j++) {
		if (x[j] < 0 || x[j] >= r->n_experts || !isfinite(w[j]) || w[j] < 0 || (j && w[j] > w[j - 1]))
			abort();
		for (int i = 0; i < j; i++)
			if (x[i] == x[j])
				abort();
	}
	return 0;
}

static void check(const coli_route *r)
{
	if (r->n_layers < 1 || r->n_layers > COLI_ROUTE_MAX_LAYERS || r->n_experts < 1 ||
	    r->n_experts > COLI_ROUTE_MAX_EXPERTS || r->top_k < 1 || r->top_k > r->n_experts ||
	    r->n_positions < 1 || r->n_prefill < 1 || r->n_prefill > r->n_positions || !r->model || !r->arch)
		abort();
	int absent = 0;
	for (int p = 0; p < r->n_positions; p++)
		for (int l = 0; l < r->n_layers; l++)
			absent += check_entry(r, p, l);
	if (absent != r->n_absent || coli_route_at(r, r->n_positions, 0, NULL) || coli_route_at(r, 0, r->n_layers, NULL))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	coli_route *r = NULL;
	coli_err e;
	if (coli_route_open_mem(&r, (const char *)data, size, "fuzz.route.csv", &e) == 0)
		check(r);
	coli_route_close(r);
	return 0;
}
