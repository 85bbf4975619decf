/* policy/sizing.c: what a run allocates and how its budget splits, in one call (policy.h,
 * coli_run_sizing): the engine's own figures for each part, then the split. */
#include "policy.h"

#include <stdlib.h>

#include "engine.h"
#include "fileio.h"
#include "machine.h"
#include "nn/kv.h"
#include "speculative.h"

/* a's per-layer lists into in: each layer's record bytes from the container, its cache at most
 * its experts (rec and cache: [n] the caller frees). */
static int lists_in(const coli_container *ct, const coli_run_ask *a, coli_budget_in *in, double **rec, int **cache,
		    coli_err *e)
{
	int n = ct->layout.n_elayers;
	if (a->n_lists != n)
		return coli_errf(e, COLI_EUSAGE, "%s: %d counts, the container has %d MoE layers (MTP included)",
				 a->list_cache ? "--cache-slots" : "--pins", a->n_lists, n);
	if (!(*rec = coli_calloc((size_t)n, sizeof(**rec), e)) || !(*cache = coli_calloc((size_t)n, sizeof(**cache), e)))
		return -1;
	for (int i = 0; i < n; i++) {
		const coli_lexperts *x = &ct->layout.elayers[i];
		int c = a->list_cache ? a->list_cache[i] : 0;
		(*cache)[i] = c > x->n_experts ? x->n_experts : c, (*rec)[i] = (double)x->record_size;
	}
	in->n_lists = n, in->list_cache = a->list_cache ? *cache : NULL, in->list_pins = a->list_pins;
	in->list_record = *rec, in->out_pins = a->out_pins, in->out_slots = a->out_slots;
	return 0;
}

int coli_run_sizing(const coli_container *ct, const coli_run_ask *a, coli_budget *out, coli_err *e)
{
	const coli_model *c = &ct->model;
	int threads = a->threads > 0 ? a->threads : coli_machine_physical_cores();
	int batch = a->batch > 0 ? a->batch : COLI_MAX_BATCH, L = c->n_layers + c->n_mtp_layers;
	coli_budget_in in = {.budget = a->budget, .vocab = c->vocab_size, .top_k = c->top_k, .tok = a->tok,
			     .cache_slots = a->cache_slots, .pins = a->pins, .has_usage = a->usage != NULL,
			     .usage_known = coli_usage_known(a->usage, L, c->n_experts)};
	in.work = (double)coli_engine_work_bytes(c, batch);
	in.draft = a->draft ? (double)coli_spec_bytes(c, a->ctx, batch, threads, a->oracle) : 0;
	in.kv = (double)kv_layers_bytes(c, 0, c->n_layers, a->ctx, threads) + a->resumed;
	coli_budget_container(ct, &in);
	if (in.cache_slots > in.max_experts) /* a layer never caches more than its experts */
		in.cache_slots = in.max_experts;
	double *rec = NULL;
	int *cache = NULL, rc = a->n_lists || a->list_cache || a->list_pins ? lists_in(ct, a, &in, &rec, &cache, e) : 0;
	if (rc == 0)
		rc = coli_budget_split(&in, out, e);
	free(rec), free(cache);
	return rc;
}
