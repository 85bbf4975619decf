/* attrib.c: the attribution table of a trace, its disks and the bottleneck verdict (attrib.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "fileio.h"
#include "policy.h"

const char *const prof_part_names[PART_N] = {"I/O wait", "expert products", "attention", "router", "other",
					     "untraced"};
const char *const prof_part_keys[PART_N] = {"io_wait", "experts", "attention", "router", "other", "untraced"};

/* The part each span kind counts in. */
static const int part_of_span[COLI_SPAN_N] = {
	[COLI_SPAN_ATTENTION] = PART_ATTENTION, [COLI_SPAN_ROUTER] = PART_ROUTER, [COLI_SPAN_EXPERTS] = PART_EXPERTS,
	[COLI_SPAN_IO_WAIT] = PART_IO_WAIT, [COLI_SPAN_OTHER] = PART_OTHER,
};

/* A call into its phase; the untraced part in whole nanoseconds, so the parts sum to the wall. */
static void add_call(prof_attrib *a, const prof_call *c)
{
	prof_phase *p = &a->ph[c->phase];
	int64_t rest = (int64_t)(c->t1 - c->t0);
	p->calls++, p->positions += (double)c->n, p->wall += (double)(c->t1 - c->t0) / 1e9;
	for (int k = 0; k < COLI_SPAN_N; k++) {
		p->part[part_of_span[k]] += (double)c->span[k] / 1e9;
		rest -= (int64_t)c->span[k];
	}
	p->part[PART_UNTRACED] += (double)rest / 1e9;
	for (int k = 0; k < COLI_X_N; k++)
		p->out[k] += c->out[k];
	double err = c->t1 > c->t0 ? fabs((double)rest) / (double)(c->t1 - c->t0) : 0;
	a->span_error = err > a->span_error ? err : a->span_error;
}

static int cmp_read(const void *x, const void *y)
{
	const prof_read *a = x, *b = y;
	return a->copy != b->copy ? (a->copy > b->copy) - (a->copy < b->copy) : (a->t0 > b->t0) - (a->t0 < b->t0);
}

/* Each copy's reads: bytes, service time, and the busy time (the union of the reads' intervals). */
static int add_disks(prof_attrib *a, const prof_trace *t, coli_err *e)
{
	prof_read *r = t->n_reads ? coli_calloc(t->n_reads, sizeof(*r), e) : NULL;
	if (t->n_reads && !r)
		return -1;
	memcpy(r, t->reads, t->n_reads * sizeof(*r));
	qsort(r, t->n_reads, sizeof(*r), cmp_read);
	uint64_t end = 0;
	for (size_t i = 0; i < t->n_reads; i++) {
		prof_disk *d = &a->disks[r[i].copy];
		prof_phase *p = &a->ph[t->calls[r[i].token < t->n_calls ? r[i].token : t->n_calls - 1].phase];
		double s = (double)(r[i].t1 - r[i].t0) / 1e9;
		if (i == 0 || r[i].copy != r[i - 1].copy)
			end = 0;
		uint64_t from = r[i].t0 > end ? r[i].t0 : end;
		d->busy += r[i].t1 > from ? (double)(r[i].t1 - from) / 1e9 : 0;
		end = r[i].t1 > end ? r[i].t1 : end;
		d->reads++, d->service += s, p->disk_service += s;
		if (r[i].flags & COLI_READ_OK)
			d->bytes += (double)r[i].bytes, p->read_bytes += (double)r[i].bytes;
		else
			d->failed++;
	}
	free(r);
	return 0;
}

/* The probe's best O_DIRECT bandwidth of the device named dev; 0 when the probe has none. */
static double probe_bps(const coli_probe *probe, const char *dev)
{
	double best = 0;
	for (int i = 0; probe && i < probe->n_disks; i++)
		if (strcmp(probe->disks[i].dev, dev) == 0 && coli_probe_best_bps(&probe->disks[i]) > best)
			best = coli_probe_best_bps(&probe->disks[i]);
	return best;
}

/* The run's expert cache per MoE layer from the trace's metadata: --cache-slots, else the
 * default top_k x COLI_CACHE_PER_TOP_K when no --ram sized it; 0 when unknown or not streaming. */
static int meta_cache_slots(const prof_trace *t)
{
	json_t *st = json_object_get(t->meta, "store");
	const char *kind = json_string_value(json_object_get(st, "kind"));
	json_int_t slots = json_integer_value(json_object_get(st, "cache_slots"));
	double ram = json_number_value(json_object_get(st, "ram_gib"));
	if (!kind || strcmp(kind, "stream") != 0)
		return 0;
	if (slots > 0 && slots <= t->n_experts)
		return (int)slots;
	return ram > 0 ? 0 : (t->top_k * COLI_CACHE_PER_TOP_K <= t->n_experts ? t->top_k * COLI_CACHE_PER_TOP_K : 0);
}

/* The routed experts of the phase's calls as simulator batches (one per call and layer). */
static int phase_batches(const prof_trace *t, int phase, coli_sim_batch **out, int32_t **ids, int *n, coli_err *e)
{
	*out = coli_calloc(t->n_routes + 1, sizeof(**out), e), *ids = coli_calloc(t->n_routes + 1, sizeof(**ids), e);
	*n = 0;
	if (!*out || !*ids)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < t->n_routes; i++) {
		const prof_route *r = &t->routes[i];
		if (t->calls[r->call].phase != phase)
			continue;
		if (*n == 0 || (*out)[*n - 1].layer != r->layer || i == 0 || t->routes[i - 1].call != r->call)
			(*out)[(*n)++] = (coli_sim_batch){r->layer, 0, *ids + k};
		(*ids)[k++] = r->expert;
		(*out)[*n - 1].n++;
	}
	return 0;
}

/* Replayed per-layer LRU hit rate of the batches at capacity slots; -1 when it cannot run. */
static double replay_lru(const prof_trace *t, const coli_sim_batch *b, int n, int slots)
{
	int max_batch = 1;
	for (int i = 0; i < n; i++)
		max_batch = b[i].n > max_batch ? b[i].n : max_batch;
	coli_sim_opts o = {.policy = COLI_SIM_LRU, .n_layers = t->n_layers, .n_experts = t->n_experts,
			   .capacity = slots, .max_batch = max_batch};
	coli_sim *s;
	coli_err e;
	if (slots < max_batch || coli_sim_open(&s, &o, &e) < 0)
		return -1;
	double h = -1;
	if (coli_sim_run(s, b, n, &e) == 0) {
		coli_sim_stats st = coli_sim_stats_of(s, -1);
		h = st.hits + st.misses ? (double)st.hits / (double)(st.hits + st.misses) : -1;
	}
	coli_sim_close(s);
	return h;
}

/* More cache: the phase's routing replayed at the run's cache and 25% more; the I/O wait scaled
 * by the ratio of replayed misses. */
static int cache_estimate(prof_attrib *a, const prof_trace *t, coli_err *e)
{
	prof_verdict *v = &a->v;
	const prof_phase *p = &a->ph[v->phase];
	if (!(v->cache_slots = meta_cache_slots(t)) || p->part[PART_IO_WAIT] <= 0)
		return 0;
	coli_sim_batch *b;
	int32_t *ids;
	int n;
	int rc = phase_batches(t, v->phase, &b, &ids, &n, e);
	v->more_slots = v->cache_slots + (v->cache_slots + 3) / 4;
	v->more_slots = v->more_slots > t->n_experts ? t->n_experts : v->more_slots;
	if (rc == 0 && n > 0 && v->more_slots > v->cache_slots) {
		v->base_hit = replay_lru(t, b, n, v->cache_slots), v->more_hit = replay_lru(t, b, n, v->more_slots);
		if (v->base_hit >= 0 && v->more_hit >= 0 && v->base_hit < 1) {
			double wait = p->part[PART_IO_WAIT] * (1 - v->more_hit) / (1 - v->base_hit);
			v->more_tok_s = p->positions / (p->wall - p->part[PART_IO_WAIT] + wait);
		}
	}
	free(b), free(ids);
	return rc;
}

/* Amdahl: tokens/s when the part taking share f of the time runs x times faster. */
static double amdahl(double tok_s, double f, double x) { return tok_s / (1 - f + f / x); }

static void verdict_text(prof_verdict *v, const prof_phase *p)
{
	const char *ph = v->phase == COLI_PHASE_DECODE ? "decode" : "prefill";
	int n = snprintf(v->text, sizeof(v->text),
			 "%s is bound by %s: %.0f%% of its time (%.3g of %.3g ms per token), %.4g tokens/s. "
			 "I/O wait %.0f%%: a disk 2x faster would give about %.2fx tokens/s (%.4g = %.4g / "
			 "(1 - %.2f + %.2f / 2)); expert products %.0f%%: products 2x faster would give %.2fx (%.4g); "
			 "with every expert in RAM (no wait): %.2fx (%.4g).",
			 ph, v->bound == PART_OTHER ? "other work (embedding, head, sampling, bookkeeping)" : prof_part_names[v->bound],
			 100 * v->share[v->bound],
			 1e3 * p->part[v->bound] / p->positions, 1e3 * p->wall / p->positions, v->tok_s,
			 100 * v->share[PART_IO_WAIT], v->disk2x / v->tok_s, v->disk2x, v->tok_s, v->share[PART_IO_WAIT],
			 v->share[PART_IO_WAIT], 100 * v->share[PART_EXPERTS], v->compute2x / v->tok_s, v->compute2x,
			 v->no_wait / v->tok_s, v->no_wait);
	if (v->more_tok_s > 0 && n > 0 && (size_t)n < sizeof(v->text))
		snprintf(v->text + n, sizeof(v->text) - (size_t)n,
			 " Hit rate %.1f%%; RAM for %d instead of %d experts per layer would raise it by about %.1f "
			 "points (the trace's routing replayed through LRU: %.1f%% -> %.1f%%) and give about %.2fx "
			 "(%.4g tokens/s).",
			 100 * v->hit, v->more_slots, v->cache_slots, 100 * (v->more_hit - v->base_hit), 100 * v->base_hit,
			 100 * v->more_hit, v->more_tok_s / v->tok_s, v->more_tok_s);
}

static int verdict(prof_attrib *a, const prof_trace *t, coli_err *e)
{
	prof_verdict *v = &a->v;
	v->phase = a->ph[COLI_PHASE_DECODE].calls ? COLI_PHASE_DECODE : COLI_PHASE_PREFILL;
	const prof_phase *p = &a->ph[v->phase];
	if (p->wall <= 0)
		return coli_errf(e, COLI_EDATA, "%s: the %s calls took no time", t->name, v->phase ? "decode" : "prefill");
	v->tok_s = p->positions / p->wall;
	for (int k = 0; k < PART_N; k++) {
		v->share[k] = p->part[k] / p->wall;
		v->bound = k < PART_UNTRACED && v->share[k] > v->share[v->bound] ? k : v->bound;
	}
	v->disk2x = amdahl(v->tok_s, v->share[PART_IO_WAIT], 2);
	v->compute2x = amdahl(v->tok_s, v->share[PART_EXPERTS], 2);
	v->no_wait = v->share[PART_IO_WAIT] < 1 ? v->tok_s / (1 - v->share[PART_IO_WAIT]) : 0;
	v->hit = prof_hit_rate(p->out);
	if (cache_estimate(a, t, e) < 0)
		return -1;
	verdict_text(v, p);
	return 0;
}

int prof_attrib_make(prof_attrib *a, const prof_trace *t, const coli_probe *probe, coli_err *e)
{
	memset(a, 0, sizeof(*a));
	for (int i = 0; i < t->n_calls; i++)
		add_call(a, &t->calls[i]);
	if (!(a->disks = coli_calloc((size_t)t->n_copies, sizeof(*a->disks), e)))
		return -1;
	a->n_disks = t->n_copies;
	for (int k = 0; k < t->n_copies; k++)
		a->disks[k].dir = t->dir[k], a->disks[k].dev = t->dev[k], a->disks[k].probe_bps = probe_bps(probe, t->dev[k]);
	if (add_disks(a, t, e) < 0 || verdict(a, t, e) < 0) {
		prof_attrib_release(a);
		return -1;
	}
	return 0;
}

void prof_attrib_release(prof_attrib *a)
{
	free(a->disks);
	memset(a, 0, sizeof(*a));
}

static json_t *phase_json(const prof_phase *p)
{
	json_t *parts = json_object();
	for (int k = 0; k < PART_N; k++)
		json_object_set_new(parts, prof_part_keys[k], json_real(p->part[k]));
	return json_pack("{s:i, s:I, s:f, s:f, s:o, s:f, s:f, s:f}", "calls", p->calls, "tokens", (json_int_t)p->positions,
			 "wall_s", p->wall, "tokens_per_s", p->wall > 0 ? p->positions / p->wall : 0.0, "parts_s", parts,
			 "disk_service_s", p->disk_service, "read_mib", p->read_bytes / 1048576, "hit_rate",
			 prof_hit_rate(p->out));
}

static json_t *disks_json(const prof_attrib *a)
{
	json_t *arr = json_array();
	for (int k = 0; k < a->n_disks; k++) {
		const prof_disk *d = &a->disks[k];
		json_array_append_new(arr, json_pack("{s:s, s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f}", "dir", d->dir, "device",
						     d->dev, "reads", (json_int_t)d->reads, "failed_reads",
						     (json_int_t)d->failed, "mib_read", d->bytes / 1048576, "service_s",
						     d->service, "busy_s", d->busy, "mb_per_s_busy",
						     d->busy > 0 ? d->bytes / d->busy / 1e6 : 0.0, "probe_mb_per_s",
						     d->probe_bps / 1e6));
	}
	return arr;
}

static json_t *verdict_json(const prof_verdict *v)
{
	json_t *j = json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:s}", "phase",
			      v->phase == COLI_PHASE_DECODE ? "decode" : "prefill", "bound", prof_part_keys[v->bound],
			      "share", v->share[v->bound], "tokens_per_s", v->tok_s, "disk_2x_tokens_per_s", v->disk2x,
			      "products_2x_tokens_per_s", v->compute2x, "no_wait_tokens_per_s", v->no_wait, "hit_rate",
			      v->hit, "text", v->text);
	if (j && v->more_tok_s > 0)
		json_object_set_new(j, "more_cache", json_pack("{s:i, s:i, s:f, s:f, s:f}", "slots", v->cache_slots,
							       "more_slots", v->more_slots, "replayed_hit_rate",
							       v->base_hit, "more_hit_rate", v->more_hit,
							       "tokens_per_s", v->more_tok_s));
	return j;
}

json_t *prof_attrib_json(const prof_attrib *a, const prof_trace *t)
{
	return json_pack("{s:s, s:i, s:i, s:i, s:{s:o, s:o}, s:f, s:o, s:o}", "trace", t->name, "layers", t->n_layers,
			 "experts", t->n_experts, "top_k", t->top_k, "phases", "prefill",
			 phase_json(&a->ph[COLI_PHASE_PREFILL]), "decode", phase_json(&a->ph[COLI_PHASE_DECODE]),
			 "worst_span_error", a->span_error, "disks", disks_json(a), "verdict", verdict_json(&a->v));
}
