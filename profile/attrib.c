/* attrib.c: the attribution table of a trace, its disks and the bottleneck verdict (attrib.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "fileio.h"
#include "policy.h"

const char *const prof_part_names[PART_N] = {"I/O wait", "expert products", "attention", "linear attention",
					     "sparse selection", "hyper-connections", "router", "other", "between calls",
					     "untraced"};
const char *const prof_part_keys[PART_N] = {"io_wait", "experts", "attention", "linear_attention", "sparse_selection",
					    "hyper_connections", "router", "other", "between_calls", "untraced"};

/* The part each span kind counts in. */
static const int part_of_span[COLI_SPAN_N] = {
	[COLI_SPAN_ATTENTION] = PART_ATTENTION, [COLI_SPAN_ROUTER] = PART_ROUTER, [COLI_SPAN_EXPERTS] = PART_EXPERTS,
	[COLI_SPAN_IO_WAIT] = PART_IO_WAIT, [COLI_SPAN_OTHER] = PART_OTHER, [COLI_SPAN_BETWEEN] = PART_BETWEEN,
	[COLI_SPAN_LINEAR] = PART_LINEAR, [COLI_SPAN_INDEXER] = PART_INDEXER, [COLI_SPAN_MIX] = PART_MIX,
};

double prof_attention_s(const prof_phase *p)
{
	return p->part[PART_ATTENTION] + p->part[PART_LINEAR] + p->part[PART_INDEXER];
}

double prof_other_s(const prof_phase *p)
{
	return p->part[PART_MIX] + p->part[PART_ROUTER] + p->part[PART_OTHER] + p->part[PART_BETWEEN] +
	       p->part[PART_UNTRACED];
}

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
	if (t->n_reads) {
		memcpy(r, t->reads, t->n_reads * sizeof(*r));
		qsort(r, t->n_reads, sizeof(*r), cmp_read);
	}
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

/* More cache: the run's cache replayed at its size and 25% more (more_cache.h); the I/O wait
 * scaled by the ratio of replayed misses. */
static int cache_estimate(prof_attrib *a, const prof_trace *t, coli_err *e)
{
	prof_verdict *v = &a->v;
	const prof_phase *p = &a->ph[v->phase];
	prof_cache_est *c = &v->cache;
	if (v->phase != COLI_PHASE_DECODE || p->part[PART_IO_WAIT] <= 0) {
		memset(c, 0, sizeof(*c));
		snprintf(c->why, sizeof(c->why), "%s", v->phase ? "decode never waited for the disk" : "no decode step");
		return 0;
	}
	if (prof_cache_estimate(t, c, e) < 0)
		return -1;
	if (c->ok && c->base_hit < 1) {
		double wait = p->part[PART_IO_WAIT] * (1 - c->more_hit) / (1 - c->base_hit);
		v->more_tok_s = p->positions / (p->wall - p->part[PART_IO_WAIT] + wait);
	}
	return 0;
}

/* Amdahl: tokens/s when the part taking share f of the time runs x times faster. */
static double amdahl(double tok_s, double f, double x) { return tok_s / (1 - f + f / x); }

/* printf onto the end of v->text. */
__attribute__((format(printf, 2, 3))) static void say(prof_verdict *v, const char *fmt, ...)
{
	size_t at = strlen(v->text);
	va_list ap;
	va_start(ap, fmt);
	if (at < sizeof(v->text))
		vsnprintf(v->text + at, sizeof(v->text) - at, fmt, ap);
	va_end(ap);
}

static const char *bound_name(int part)
{
	return part == PART_OTHER     ? "other work of the forward pass (embedding, final norm, head)"
	     : part == PART_BETWEEN ? "the time between forward calls (sampling, printing, bookkeeping)"
				    : prof_part_names[part];
}

/* More cache in words: the replay of the run's own cache, or why there is none. */
static void cache_text(prof_verdict *v)
{
	const prof_cache_est *c = &v->cache;
	if (v->more_tok_s <= 0) {
		if (c->why[0] && v->share[PART_IO_WAIT] > 0)
			say(v, " No more-cache estimate: %s.", c->why);
		return;
	}
	say(v, " Hit rate %.1f%%; RAM for %d instead of %d experts per layer would change it by about %+.1f points "
	    "(the trace's routing replayed through the run's own cache, %s per layer%s%s, policy from %s: %.1f%% -> "
	    "%.1f%%) and give about %.2fx (%.4g tokens/s).", 100 * v->hit, c->more, c->cache,
	    100 * (c->more_hit - c->base_hit), c->policy, c->pins ? ", pins kept" : "",
	    c->usage && !strcmp(c->policy, "LFU") ? ", its counts from 0 (the usage file's are not in the trace)" : "",
	    c->policy_from, 100 * c->base_hit, 100 * c->more_hit, v->more_tok_s / v->tok_s, v->more_tok_s);
}

static void verdict_text(prof_verdict *v, const prof_phase *p)
{
	double io = v->share[PART_IO_WAIT];
	v->text[0] = 0;
	say(v, "%s is bound by %s: %.0f%% of its time (%.3g of %.3g ms per token), %.4g tokens/s.",
	    v->phase == COLI_PHASE_DECODE ? "decode" : "prefill", bound_name(v->bound), 100 * v->share[v->bound],
	    1e3 * p->part[v->bound] / p->positions, 1e3 * p->wall / p->positions, v->tok_s);
	if (io > 0)
		say(v, " I/O wait %.0f%%: a disk 2x faster would give about %.2fx tokens/s (%.4g = %.4g / (1 - %.2f + "
		    "%.2f / 2));", 100 * io, v->disk2x / v->tok_s, v->disk2x, v->tok_s, io, io);
	else
		say(v, " No I/O wait (every expert was in RAM when got): a faster disk would change nothing;");
	say(v, " expert products %.0f%%: products 2x faster would give %.2fx (%.4g)", 100 * v->share[PART_EXPERTS],
	    v->compute2x / v->tok_s, v->compute2x);
	if (io > 0)
		say(v, "; with every expert in RAM (no wait): %.2fx (%.4g).", v->no_wait / v->tok_s, v->no_wait);
	else
		say(v, ".");
	cache_text(v);
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
	for (int ph = 0; ph < 2; ph++) /* the tokens the run counted (drafts: fewer than the positions run) */
		a->ph[ph].positions = t->n_walls[ph] ? (double)t->wall_tokens[ph] : a->ph[ph].positions;
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
		json_array_append_new(arr, json_pack("{s:s, s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:o}", "dir", d->dir, "device",
						     d->dev, "reads", (json_int_t)d->reads, "failed_reads",
						     (json_int_t)d->failed, "mib_read", d->bytes / 1048576, "service_s",
						     d->service, "busy_s", d->busy, "mb_per_s_busy",
						     d->busy > 0 ? d->bytes / d->busy / 1e6 : 0.0, "probe_mb_per_s",
						     d->probe_bps > 0 ? json_real(d->probe_bps / 1e6) : json_null()));
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
	const prof_cache_est *c = &v->cache;
	if (j && v->more_tok_s > 0)
		json_object_set_new(j, "more_cache", json_pack("{s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f}", "policy",
							       c->policy[1] == 'F' ? "lfu" : "lru", "policy_from",
							       c->policy_from, "slots", c->cache, "more_slots", c->more,
							       "pins", c->pins, "replayed_hit_rate", c->base_hit,
							       "more_hit_rate", c->more_hit, "tokens_per_s", v->more_tok_s));
	else if (j && c->why[0])
		json_object_set_new(j, "no_more_cache", json_string(c->why));
	return j;
}

json_t *prof_attrib_json(const prof_attrib *a, const prof_trace *t)
{
	return json_pack("{s:s, s:i, s:i, s:i, s:i, s:{s:o, s:o}, s:f, s:o, s:o}", "trace", t->name, "trace_version",
			 t->version, "layers", t->n_layers, "experts", t->n_experts, "top_k", t->top_k, "phases", "prefill",
			 phase_json(&a->ph[COLI_PHASE_PREFILL]), "decode", phase_json(&a->ph[COLI_PHASE_DECODE]),
			 "worst_span_error", a->span_error, "disks", disks_json(a), "verdict", verdict_json(&a->v));
}
