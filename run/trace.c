/* trace.c: --trace FILE: the engine's records written to a .coli_trace (formats/trace.h) by one
 * writer behind a lock (the compute thread and the I/O threads both emit). */
#include <stdio.h>
#include <string.h>

#include "run.h"

/* The engine's emit: appended under the lock; the first failure is kept and ends the trace. */
static void emit(void *ctx, const coli_trace_rec *rec)
{
	run_trace *rt = ctx;
	pthread_mutex_lock(&rt->mu);
	if (rt->w && !rt->failed && coli_trace_append(rt->w, rec, &rt->err) < 0)
		rt->failed = 1;
	pthread_mutex_unlock(&rt->mu);
}

void run_trace_prepare(run_trace *rt)
{
	memset(rt, 0, sizeof(*rt));
	pthread_mutex_init(&rt->mu, NULL);
	coli_tracer_init(&rt->t, emit, rt);
}

static json_t *int_array(const int *v, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(v[i]));
	return a;
}

/* The expert cache as coli-profile replays it ("more cache"): the eviction policy, whether LFU
 * started from a usage file, the pins, the per-layer lists. */
static void store_meta(json_t *st, const run_opts *o, const coli_engine *m)
{
	coli_store_stats ss;
	json_object_set_new(st, "cache_policy", json_string(o->cache_policy == STORE_CACHE_LFU ? "lfu" : "lru"));
	json_object_set_new(st, "usage", json_boolean(o->usage != NULL));
	if (coli_store_get_stats(m->store, &ss) == 0)
		json_object_set_new(st, "pins_per_layer", json_integer(ss.pins));
	if (o->n_cache_list)
		json_object_set_new(st, "cache_slots_list", int_array(o->cache_list, o->n_cache_list));
	if (o->n_pins_list)
		json_object_set_new(st, "pins_list", int_array(o->pins_list, o->n_pins_list));
}

/* The run's command line and settings, for the trace's metadata (formats/trace.md). */
static char *meta(const run_opts *o, const coli_engine *m)
{
	json_t *argv = json_array();
	for (int i = 0; i < o->argc; i++)
		json_array_append_new(argv, json_string(o->argv[i]));
	json_t *j = json_pack("{s:o, s:s, s:s, s:s, s:{s:s, s:i, s:i, s:b, s:f, s:s, s:i}}", "argv", argv,
			      "coli_version", COLI_RUN_VERSION, "model", o->model, "family",
			      coli_family_name(m->cfg->family), "store", "kind",
			      coli_store_kind_of(m->store) == COLI_STORE_STREAM ? "stream" : "ram", "cache_slots", o->cache_slots,
			      "pins", o->pins, "prefetch", o->prefetch != 0, "ram_gib", o->ram, "isa",
			      coli_kernels_isa(m->kc), "threads", coli_kernels_threads(m->kc));
	if (j && o->route_from)
		json_object_set_new(j, "route_from", json_string(o->route_from));
	if (j)
		store_meta(json_object_get(j, "store"), o, m);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return s;
}

int run_trace_open(run_trace *rt, const char *path, const coli_engine *m, const run_opts *o, coli_err *e)
{
	coli_store_stats st;
	coli_trace_copy copies[STORE_MAX_COPIES] = {{m->ct->dir, "-"}};
	int n = 1;
	if (coli_store_get_stats(m->store, &st) == 0)
		for (n = 0; n < st.n_disks; n++) {
			copies[n].dir = st.disks[n].dir;
			snprintf(copies[n].dev, sizeof(copies[n].dev), "%s", st.disks[n].dev);
		}
	char *js = meta(o, m);
	coli_trace_info info = {.n_layers = m->cfg->n_layers + m->cfg->n_mtp_layers, .n_experts = m->cfg->n_experts,
				.top_k = m->cfg->top_k, .n_copies = n, .copies = copies, .meta = js};
	memcpy(info.identity, m->ct->identity, sizeof(info.identity));
	int rc = js ? coli_trace_writer_open(&rt->w, path, &info, e) : coli_errf(e, COLI_ENOMEM, "out of memory");
	free(js);
	coli_tracer_init(&rt->t, emit, rt); /* t = 0 is the writer's start */
	return rc;
}

int run_trace_close(run_trace *rt, int ok, coli_err *e)
{
	int rc = 0;
	if (ok && rt->failed)
		rc = coli_errf(e, rt->err.code, "--trace: %s", rt->err.msg);
	if (rt->w && ok && rc == 0)
		rc = coli_trace_writer_close(rt->w, e);
	else
		coli_trace_writer_abort(rt->w);
	rt->w = NULL;
	pthread_mutex_destroy(&rt->mu);
	return rc;
}
