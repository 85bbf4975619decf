/* routes.c: --routing's file as a route table: a route_trace CSV (formats/route.md), or the routed
 * experts of a .coli_trace (formats/trace.md), whose calls become positions.
 *
 * A .coli_trace records, per forward call and MoE layer, the distinct experts the layer got
 * (EXPERT records; a prediction not routed to, PREDICT_WASTED, is left out): a decode call's are
 * its token's top_k; a prefill call's are the union of its positions', in no position's order.
 * Each call becomes floor(n / top_k) positions of top_k experts in record order (a decode call:
 * one; a prompt: its union cut in groups, a warm-up that fills the cache as the prompt did), the
 * layers without a full group absent at the call's last positions. The positions of the leading
 * prefill calls are the table's prompt. Layers are the MoE layers with records, in container
 * order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "planner.h"
#include "trace.h"

typedef struct routed {
	int32_t call, layer, expert;
} routed;

/* What the records say: each call's phase, every routed expert in order. */
typedef struct trace_routes {
	int8_t *phase;          /* [n_calls] */
	int n_calls;
	routed *x;
	size_t n, cap;
} trace_routes;

static int keep(trace_routes *t, const coli_trace_rec *r, coli_err *e)
{
	if (r->kind == COLI_TR_TOKEN) {
		int8_t *ph = realloc(t->phase, (size_t)(r->token + 1) * sizeof(*ph));
		if (!ph)
			return coli_errf(e, COLI_ENOMEM, "out of memory reading a trace's calls");
		t->phase = ph, t->n_calls = r->token + 1, ph[r->token] = (int8_t)r->sub;
	} else if (r->kind == COLI_TR_EXPERT && r->sub != COLI_X_PREDICT_WASTED) {
		if (t->n == t->cap) {
			size_t cap = t->cap ? 2 * t->cap : 4096;
			routed *x = realloc(t->x, cap * sizeof(*x));
			if (!x)
				return coli_errf(e, COLI_ENOMEM, "out of memory reading a trace's routed experts");
			t->x = x, t->cap = cap;
		}
		t->x[t->n++] = (routed){r->token, r->layer, r->expert};
	}
	return 0;
}

static int read_all(trace_routes *t, const char *path, coli_trace_info *info, coli_err *e)
{
	coli_trace_reader *rd;
	coli_trace_rec rec;
	int rc;
	if (coli_trace_reader_open(&rd, path, e) < 0)
		return -1;
	*info = *coli_trace_reader_info(rd);
	while ((rc = coli_trace_next(rd, &rec, e)) > 0)
		if (keep(t, &rec, e) < 0) {
			rc = -1;
			break;
		}
	coli_trace_reader_close(rd);
	return rc < 0 ? -1 : 0;
}

/* moe[container layer]: its MoE index among the layers with records (-1: none); their count. */
static int moe_layers(const trace_routes *t, int n_layers, int *moe)
{
	int n = 0;
	for (int l = 0; l < n_layers; l++)
		moe[l] = -1;
	for (size_t i = 0; i < t->n; i++)
		if (t->x[i].layer >= 0 && t->x[i].layer < n_layers)
			moe[t->x[i].layer] = 0;
	for (int l = 0; l < n_layers; l++)
		if (moe[l] >= 0)
			moe[l] = n++;
	return n;
}

/* got[call * L + layer]: the experts of (call, MoE layer); the positions of each call into pos0[]. */
static int count_positions(const trace_routes *t, const int *moe, int L, int k, int *got, int *pos0, int *n_prefill)
{
	int n = 0;
	for (size_t i = 0; i < t->n; i++)
		if (t->x[i].call >= 0 && t->x[i].call < t->n_calls && moe[t->x[i].layer] >= 0)
			got[(size_t)t->x[i].call * (size_t)L + (size_t)moe[t->x[i].layer]]++;
	*n_prefill = 0;
	for (int c = 0; c < t->n_calls; c++) {
		int most = 0;
		for (int l = 0; l < L; l++)
			most = got[(size_t)c * (size_t)L + (size_t)l] / k > most ? got[(size_t)c * (size_t)L + (size_t)l] / k : most;
		pos0[c] = n, n += most;
		if (t->phase[c] == COLI_PHASE_PREFILL && *n_prefill == pos0[c])
			*n_prefill = n;
	}
	pos0[t->n_calls] = n;
	return n;
}

/* The table's ids: each (call, layer)'s experts in groups of k from the call's first position. */
static void fill(coli_route *r, const trace_routes *t, const int *moe, const int *pos0, int *seen)
{
	size_t L = (size_t)r->n_layers, k = (size_t)r->top_k;
	for (size_t i = 0; i < (size_t)r->n_positions * L * k; i++)
		r->ids[i] = -1;
	memset(seen, 0, (size_t)t->n_calls * L * sizeof(*seen));
	for (size_t i = 0; i < t->n; i++) {
		const routed *x = &t->x[i];
		if (x->call < 0 || x->call >= t->n_calls || moe[x->layer] < 0)
			continue;
		int *s = &seen[(size_t)x->call * L + (size_t)moe[x->layer]];
		int pos = pos0[x->call] + *s / r->top_k;
		if (pos < pos0[x->call + 1])
			r->ids[((size_t)pos * L + (size_t)moe[x->layer]) * k + (size_t)(*s % r->top_k)] = x->expert;
		(*s)++;
	}
	/* a group left incomplete is absent */
	for (size_t p = 0; p < (size_t)r->n_positions * L; p++)
		for (size_t j = 0; j < k; j++)
			if (r->ids[p * k + j] < 0)
				for (size_t m = 0; m < k; m++)
					r->ids[p * k + m] = -1;
}

static int build(coli_route *r, const trace_routes *t, const coli_trace_info *info, coli_err *e)
{
	int *moe = coli_calloc((size_t)info->n_layers, sizeof(*moe), e), rc = -1;
	int *pos0 = moe ? coli_calloc((size_t)t->n_calls + 1, sizeof(*pos0), e) : NULL;
	int L = moe ? moe_layers(t, info->n_layers, moe) : 0;
	int *got = pos0 && L ? coli_calloc((size_t)t->n_calls * (size_t)L, sizeof(*got), e) : NULL;
	if (got) {
		r->n_layers = L, r->n_experts = info->n_experts, r->top_k = info->top_k;
		r->n_positions = count_positions(t, moe, L, info->top_k, got, pos0, &r->n_prefill);
		size_t cells = (size_t)r->n_positions * (size_t)L * (size_t)info->top_k;
		r->ids = coli_malloc(cells * sizeof(*r->ids) + 1, e);
		r->weights = coli_calloc(cells + 1, sizeof(*r->weights), e);
		r->expert_bytes = coli_calloc((size_t)L, sizeof(*r->expert_bytes), e);
		r->dense_bytes = coli_calloc((size_t)L, sizeof(*r->dense_bytes), e);
		if (r->ids && r->weights && r->expert_bytes && r->dense_bytes) {
			fill(r, t, moe, pos0, got);
			rc = 0;
		}
	} else if (pos0 && !L)
		coli_errf(e, COLI_EDATA, "%s: no routed expert recorded (a run without streaming, or without MoE layers)", r->name);
	free(moe), free(pos0), free(got);
	return rc;
}

int plan_route_open(coli_route **out, const char *path, coli_err *e)
{
	int is = coli_trace_sniff(path, e);
	if (is < 0)
		return -1;
	if (!is)
		return coli_route_open(out, path, e);
	trace_routes t = {0};
	coli_trace_info info;
	coli_route *r = coli_calloc(1, sizeof(*r), e);
	int rc = r && (r->name = strdup(path)) && (r->model = strdup(path)) && (r->arch = strdup("coli_trace")) ? 0 : -1;
	if (r && rc < 0)
		coli_errf(e, COLI_ENOMEM, "out of memory reading %s", path);
	rc = rc < 0 ? rc : read_all(&t, path, &info, e);
	rc = rc < 0 ? rc : build(r, &t, &info, e);
	free(t.phase), free(t.x);
	if (rc < 0)
		return coli_route_close(r), -1;
	*out = r;
	return 0;
}
