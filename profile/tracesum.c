/* tracesum.c: a .coli_trace read whole into calls, reads and routed experts (tracesum.h). */
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "tracesum.h"

/* Grows *p (of *cap entries of size sz) to hold need entries, doubling. */
static int grow(void *p, size_t *cap, size_t need, size_t sz, coli_err *e)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	void *q = realloc(*(void **)p, n * sz);
	if (!q)
		return coli_errf(e, COLI_ENOMEM, "out of memory for %zu trace entries of %zu bytes", n, sz);
	*(void **)p = q;
	*cap = n;
	return 0;
}

/* Room for call n_calls (the one being read) and its per-layer counters, zeroed. */
static int open_call(prof_trace *t, coli_err *e)
{
	size_t old = t->cap_calls, L = (size_t)t->n_layers, need = (size_t)t->n_calls + 1;
	if (need <= old)
		return 0;
	size_t cap = old;
	if (grow(&t->calls, &cap, need, sizeof(*t->calls), e) < 0)
		return -1;
	size_t c2 = old, c3 = old;
	if (grow(&t->lhit, &c2, cap, L * sizeof(*t->lhit), e) < 0 || grow(&t->lget, &c3, cap, L * sizeof(*t->lget), e) < 0)
		return -1;
	memset(t->calls + old, 0, (cap - old) * sizeof(*t->calls));
	memset(t->lhit + old * L, 0, (cap - old) * L * sizeof(*t->lhit));
	memset(t->lget + old * L, 0, (cap - old) * L * sizeof(*t->lget));
	t->cap_calls = cap;
	return 0;
}

static int order_err(const prof_trace *t, size_t i, const coli_trace_rec *r, const char *what, coli_err *e)
{
	return coli_errf(e, COLI_EDATA, "%s: record %zu: kind %d token %d: %s (expected %d: calls numbered from 0, "
			 "a call's records before its TOKEN)", t->name, i, r->kind, r->token, what, t->n_calls);
}

static int add_expert(prof_trace *t, prof_call *c, const coli_trace_rec *r, coli_err *e)
{
	size_t at = (size_t)t->n_calls * (size_t)t->n_layers + (size_t)r->layer;
	c->out[r->sub]++;
	if (r->sub == COLI_X_PREDICT_WASTED)
		return 0;
	t->lget[at]++;
	t->lhit[at] += r->sub == COLI_X_PIN || r->sub == COLI_X_HIT;
	if (grow(&t->routes, &t->cap_routes, t->n_routes + 1, sizeof(*t->routes), e) < 0)
		return -1;
	t->routes[t->n_routes++] = (prof_route){t->n_calls, r->layer, r->expert, r->sub};
	return 0;
}

static int add_read(prof_trace *t, const coli_trace_rec *r, coli_err *e)
{
	if (grow(&t->reads, &t->cap_reads, t->n_reads + 1, sizeof(*t->reads), e) < 0)
		return -1;
	t->reads[t->n_reads++] = (prof_read){r->t0, r->t1, r->n, r->copy, r->token, r->sub};
	return 0;
}

static int add(prof_trace *t, size_t i, const coli_trace_rec *r, coli_err *e)
{
	if (r->kind == COLI_TR_READ)
		return r->token > t->n_calls ? order_err(t, i, r, "a read of a call not begun", e) : add_read(t, r, e);
	if (r->token != t->n_calls)
		return order_err(t, i, r, "out of order", e);
	if (r->kind == COLI_TR_WALL) {
		t->n_walls[r->sub]++, t->wall_tokens[r->sub] += r->n;
		return 0;
	}
	if (open_call(t, e) < 0)
		return -1;
	prof_call *c = &t->calls[t->n_calls];
	if (r->kind == COLI_TR_SPAN)
		c->span[r->sub] += r->t1 - r->t0;
	else if (r->kind == COLI_TR_EXPERT)
		return add_expert(t, c, r, e);
	else if (r->kind == COLI_TR_TOKEN)
		c->phase = r->sub, c->t0 = r->t0, c->t1 = r->t1, c->n = r->n, t->n_calls++;
	return 0;
}

static int copy_info(prof_trace *t, const coli_trace_info *in, const char *name, coli_err *e)
{
	t->name = strdup(name);
	t->version = in->version;
	t->n_layers = in->n_layers, t->n_experts = in->n_experts, t->top_k = in->top_k, t->n_copies = in->n_copies;
	t->start_unix_ns = in->start_unix_ns;
	memcpy(t->identity, in->identity, sizeof(t->identity));
	t->dev = calloc((size_t)in->n_copies, sizeof(*t->dev));
	t->dir = calloc((size_t)in->n_copies, sizeof(*t->dir));
	json_error_t je;
	t->meta = in->meta ? json_loads(in->meta, 0, &je) : json_object();
	if (!t->name || !t->dev || !t->dir || !t->meta)
		return coli_errf(e, COLI_ENOMEM, "%s: out of memory for the trace's header", name);
	for (int k = 0; k < in->n_copies; k++) {
		memcpy(t->dev[k], in->copies[k].dev, sizeof(t->dev[k]));
		if (!(t->dir[k] = strdup(in->copies[k].dir)))
			return coli_errf(e, COLI_ENOMEM, "%s: out of memory for the trace's header", name);
	}
	return 0;
}

int prof_trace_read(prof_trace *t, coli_trace_reader *r, const char *name, coli_err *e)
{
	coli_trace_rec recs[256];
	long got;
	size_t i = 0;
	memset(t, 0, sizeof(*t));
	if (copy_info(t, coli_trace_reader_info(r), name, e) < 0)
		return -1;
	while ((got = coli_trace_next_n(r, recs, sizeof(recs) / sizeof(recs[0]), e)) > 0)
		for (long j = 0; j < got; j++, i++)
			if (add(t, i, &recs[j], e) < 0)
				return -1;
	if (got < 0)
		return -1;
	if (t->n_calls == 0)
		return coli_errf(e, COLI_EDATA, "%s: no forward call recorded (a trace of a run that computed nothing)", name);
	return 0;
}

static int load_with(prof_trace *t, coli_trace_reader *r, const char *name, coli_err *e)
{
	int rc = prof_trace_read(t, r, name, e);
	coli_trace_reader_close(r);
	if (rc < 0)
		prof_trace_release(t);
	return rc;
}

int prof_trace_load(prof_trace *t, const char *path, coli_err *e)
{
	coli_trace_reader *r;
	memset(t, 0, sizeof(*t));
	if (coli_trace_reader_open(&r, path, e) < 0)
		return -1;
	return load_with(t, r, path, e);
}

int prof_trace_load_mem(prof_trace *t, const void *data, size_t n, const char *name, coli_err *e)
{
	coli_trace_reader *r;
	memset(t, 0, sizeof(*t));
	if (coli_trace_reader_open_mem(&r, data, n, name, e) < 0)
		return -1;
	return load_with(t, r, name, e);
}

void prof_trace_release(prof_trace *t)
{
	for (int k = 0; t->dir && k < t->n_copies; k++)
		free(t->dir[k]);
	free(t->dir), free(t->dev), free(t->name), free(t->calls), free(t->lhit), free(t->lget);
	free(t->reads), free(t->routes);
	json_decref(t->meta);
	memset(t, 0, sizeof(*t));
}

uint64_t prof_gets(const uint64_t *out)
{
	uint64_t n = 0;
	for (int k = 0; k < COLI_X_N; k++)
		n += k == COLI_X_PREDICT_WASTED ? 0 : out[k];
	return n;
}

double prof_hit_rate(const uint64_t *out)
{
	uint64_t g = prof_gets(out);
	return g ? (double)(out[COLI_X_PIN] + out[COLI_X_HIT]) / (double)g : 0;
}
