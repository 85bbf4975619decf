/* moe.c: routers, the union of a batch's experts, SwiGLU products, shared and dense MLPs. */
#include "nn/moe.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "nn/blocks.h"
#include "nn/ws.h"
#include "clock.h"
#include "fileio.h"

void top_k(const float *v, int n, int k, int32_t *idx)
{
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int i = 0; i < n; i++) {
			int taken = 0;
			for (int t = 0; t < j && !taken; t++)
				taken = idx[t] == i;
			if (!taken && (best < 0 || v[i] > v[best]))
				best = i;
		}
		idx[j] = best;
	}
}

void sort_pairs(int32_t *ids, float *w, int k)
{
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && (w[j] > w[j - 1] || (w[j] == w[j - 1] && ids[j] < ids[j - 1])); j--) {
			float tw = w[j];
			int32_t ti = ids[j];
			w[j] = w[j - 1], ids[j] = ids[j - 1];
			w[j - 1] = tw, ids[j - 1] = ti;
		}
}

/* DeepSeek-V3 / GLM: sigmoid scores, choice by score + correction bias within the topk_group
 * groups whose two best choice scores sum highest (other groups' experts scored 0.0, as HF
 * does), weights = sigmoid scores (no bias), renormalised, x routed_scaling_factor. */
static void route_sigmoid(const coli_model *c, const float *bias, const float *logits, int32_t *ids, float *w,
			  float *s, float *choice, float *gscore, int32_t *gsel)
{
	int E = c->n_experts, G = c->n_group, per = E / G;
	int32_t two[2];
	for (int i = 0; i < E; i++) {
		s[i] = sigmoid(logits[i]);
		choice[i] = s[i] + (bias ? bias[i] : 0.0f);
	}
	for (int g = 0; g < G; g++) {
		int k2 = per < 2 ? per : 2;
		top_k(choice + g * per, per, k2, two);
		gscore[g] = 0;
		for (int j = 0; j < k2; j++)
			gscore[g] += choice[g * per + two[j]];
	}
	top_k(gscore, G, c->topk_group, gsel);
	for (int g = 0; g < G; g++) {
		int kept = 0;
		for (int j = 0; j < c->topk_group; j++)
			kept |= gsel[j] == g;
		for (int i = 0; !kept && i < per; i++)
			choice[g * per + i] = 0.0f;
	}
	top_k(choice, E, c->top_k, ids);
	float sum = 0;
	for (int j = 0; j < c->top_k; j++)
		sum += (w[j] = s[ids[j]]);
	for (int j = 0; j < c->top_k; j++)
		w[j] = (c->norm_topk_prob ? w[j] / (sum + 1e-20f) : w[j]) * (float)c->routed_scaling_factor;
}

void route(const coli_model *c, const float *corr_bias, const float *logits, int32_t *ids, float *w, float *scratch,
	   int32_t *gsel)
{
	int E = c->n_experts, k = c->top_k;
	if (c->router == COLI_ROUTER_SIGMOID_GROUP) {
		route_sigmoid(c, corr_bias, logits, ids, w, scratch, scratch + E, scratch + 2 * E, gsel);
	} else {
		memcpy(scratch, logits, (size_t)E * sizeof(float));
		softmax(scratch, E);
		top_k(scratch, E, k, ids);
		float sum = 0;
		for (int j = 0; j < k; j++)
			sum += (w[j] = scratch[ids[j]]);
		int renorm = c->router == COLI_ROUTER_TOPK_SOFTMAX || c->norm_topk_prob;
		for (int j = 0; renorm && j < k; j++)
			w[j] /= sum;
	}
	sort_pairs(ids, w, k);
}

/* silu(g) * u into g over n values; with lim > 0 (deepseek_v4's swiglu_limit) g clamped to at
 * most lim and u to [-lim, lim] first. */
static void swiglu_clamped(float *g, float *u, int64_t n, float lim)
{
	for (int64_t i = 0; lim > 0 && i < n; i++) {
		g[i] = g[i] > lim ? lim : g[i];
		u[i] = u[i] > lim ? lim : u[i] < -lim ? -lim : u[i];
	}
	swiglu(g, u, n);
}

/* down(silu(gate X) * up X) for m rows of X (clamped by lim, swiglu_clamped); H: [m][ffn] x2
 * scratch. One row (decode): gate and up in one dispatch. */
static void swiglu_mlp(coli_kernels *kc, const coli_mat *gate, const coli_mat *up, const coli_mat *down, const float *X, int m,
		       float lim, float *H, float *U, float *out)
{
	int ffn = (int)gate->rows;
	const coli_mat *W[2] = {gate, up};
	const float *xs[2] = {X, X};
	float *ys[2] = {H, U};
	if (m != 1 || coli_mat_vec_batch(kc, W, xs, ys, 2) < 0) {
		coli_mat_mul(kc, gate, X, m, H);
		coli_mat_mul(kc, up, X, m, U);
	}
	swiglu_clamped(H, U, (int64_t)m * ffn, lim);
	coli_mat_mul(kc, down, H, m, out);
}

/* Traced: a resident store's expert is a pin (a streaming store traces its own). */
static void ram_outcome(const coli_engine *m, int l, int x)
{
	if (!m->tr || coli_store_streams(m->store))
		return;
	uint64_t t = coli_tracer_now(m->tr);
	coli_tracer_emit(m->tr, COLI_TR_EXPERT, COLI_X_PIN, 0, l, x, t, t, 0);
}

const coli_expert *moe_get(const coli_engine *m, int l, int x, coli_err *e)
{
	if (!m->tr || !coli_store_streams(m->store)) {
		ram_outcome(m, l, x);
		return coli_store_get(m->store, l, x, e);
	}
	coli_tracer_mark(m->tr, COLI_SPAN_EXPERTS, l);
	const coli_expert *ex = coli_store_get(m->store, l, x, e);
	coli_tracer_mark(m->tr, COLI_SPAN_IO_WAIT, l);
	return ex;
}

/* One expert over the tokens of the batch that chose it: read once, multiplied once. */
static int run_expert(const coli_engine *m, int l, int x, const float *X, int n, fwd_ws *w, float *out, coli_err *e)
{
	const coli_model *c = m->cfg;
	int k = c->top_k, d = c->hidden_size, cnt = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < k; j++)
			if (w->ids[i * k + j] == x) {
				w->rows_of[cnt] = i;
				w->wt[cnt] = w->W[i * k + j];
				memcpy(w->G + (int64_t)cnt++ * d, X + (int64_t)i * d, (size_t)d * sizeof(float));
			}
	if (cnt == 0)
		return 0;
	const coli_expert *ex = moe_get(m, l, x, e);
	if (!ex)
		return -1;
	swiglu_mlp(m->kc, &ex->gate, &ex->up, &ex->down, w->G, cnt, (float)c->swiglu_limit, w->H, w->U, w->D);
	coli_store_release(m->store, l, x);
	for (int r = 0; r < cnt; r++)
		axpy(out + (int64_t)w->rows_of[r] * d, w->wt[r], w->D + (int64_t)r * d, d);
	return 0;
}

/* count independent products, in dispatches of at most 64 (what coli_mat_vec_batch takes). */
static int products(coli_kernels *kc, const coli_mat **W, const float **xs, float **ys, int count)
{
	for (int at = 0; at < count; at += 64)
		if (coli_mat_vec_batch(kc, W + at, xs + at, ys + at, count - at < 64 ? count - at : 64) < 0)
			return -1;
	return 0;
}

/* Experts j in js[0..n) of a decoding token: gate and up products in one dispatch, then the
 * down products in another, each into its own rows of w->H, w->U, w->D. */
static int token_products(const coli_engine *m, const float *x, const coli_expert *const *ex, const int *js, int n, fwd_ws *w)
{
	int d = m->cfg->hidden_size, ffn = m->cfg->moe_intermediate_size;
	const coli_mat **W = w->pm;
	const float **xs = w->px;
	float **ys = w->py;
	for (int i = 0; i < n; i++) {
		int j = js[i];
		W[2 * i] = &ex[j]->gate, W[2 * i + 1] = &ex[j]->up;
		xs[2 * i] = xs[2 * i + 1] = x;
		ys[2 * i] = w->H + (int64_t)j * ffn, ys[2 * i + 1] = w->U + (int64_t)j * ffn;
	}
	if (products(m->kc, W, xs, ys, 2 * n) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		int j = js[i];
		swiglu_clamped(w->H + (int64_t)j * ffn, w->U + (int64_t)j * ffn, ffn, (float)m->cfg->swiglu_limit);
		W[i] = &ex[j]->down, xs[i] = w->H + (int64_t)j * ffn, ys[i] = w->D + (int64_t)j * d;
	}
	return products(m->kc, W, xs, ys, n);
}

/* The experts of want[0..k) not yet in ex that are read and checked now, into ex; their indices
 * into js; their count. *rc -1 and e filled on a failed read. */
static int take_ready(const coli_engine *m, int l, const int *want, const coli_expert **ex, int k, int *js, int *rc,
		      coli_err *e)
{
	int n = 0;
	for (int j = 0; *rc == 0 && j < k; j++) {
		coli_err te = {0, ""};
		if (!ex[j] && (ex[j] = coli_store_try_get(m->store, l, want[j], &te))) {
			js[n++] = j;
			ram_outcome(m, l, want[j]);
		} else if (te.code) {
			*e = te, *rc = -1;
		}
	}
	return n;
}

/* A streamed decode's wait for its layer's reads in flight: take_ready looked at again, the CPU
 * yielded between looks, for up to POLL_NS (traced as I/O wait); 0 when none arrived by then.
 * Not while the store predicts the next layer: a wrong prediction's read in flight may hold the
 * slot a miss needs, so that the request could not queue it and only the blocking get does (a
 * look would never find it). Without predictions a request queues every miss (a layer has top_k
 * slots at least, none in use or in flight when its token's experts are requested). A compute
 * thread that sleeps through these waits comes back slower on a virtual machine, its vCPU idle:
 * in bench-plan's 3 GiB configuration the products took 16.7 ms a token blocking, 12.7 polling,
 * 10.3 with every expert in RAM, and without the throttle decode ran 13.5% faster
 * (docs/benchmarks.md, "Streamed compute"). */
#define POLL_NS 20000000

static int poll_ready(const coli_engine *m, int l, const int *want, const coli_expert **ex, int k, int *js, int *rc,
		      coli_err *e)
{
	if (!coli_store_streams(m->store) || coli_store_predicting(m->store) == 1)
		return 0;
	coli_tracer_mark(m->tr, COLI_SPAN_EXPERTS, l);
	uint64_t t0 = coli_now_ns();
	int n = 0;
	while (*rc == 0 && n == 0 && coli_now_ns() - t0 < POLL_NS) {
		sched_yield();
		n = take_ready(m, l, want, ex, k, js, rc, e);
	}
	coli_tracer_mark(m->tr, COLI_SPAN_IO_WAIT, l);
	return n;
}

/* Decode (one token): its top_k experts' reads all started, then products as they arrive:
 * each round takes every expert already read (all of them when resident) and waits only when
 * none is; sums in ascending expert order, as the batched path does. */
static int experts_one_token(const coli_engine *m, int l, const float *x, fwd_ws *w, float *out, coli_err *e)
{
	const coli_model *c = m->cfg;
	int k = c->top_k, d = c->hidden_size, *order = w->order, *want = w->want, rc = 0, left = k;
	const coli_expert **ex = w->ex;
	for (int j = 0; j < k; j++)
		order[j] = j, ex[j] = NULL;
	for (int a = 1; a < k; a++) /* ascending expert id */
		for (int b = a; b > 0 && w->ids[order[b]] < w->ids[order[b - 1]]; b--) {
			int t = order[b];
			order[b] = order[b - 1], order[b - 1] = t;
		}
	for (int j = 0; j < k; j++)
		want[j] = w->ids[order[j]];
	coli_store_request(m->store, l, want, k); /* the k reads overlap */
	while (rc == 0 && left > 0) {
		int *js = w->js, n = take_ready(m, l, want, ex, k, js, &rc, e);
		if (rc == 0 && n == 0)
			n = poll_ready(m, l, want, ex, k, js, &rc, e);
		if (rc == 0 && n == 0) { /* none read yet: wait for the first still missing */
			int j = 0;
			while (ex[j])
				j++;
			if (!(ex[j] = moe_get(m, l, want[j], e)))
				rc = -1;
			js[n++] = j;
		}
		if (rc == 0 && token_products(m, x, ex, js, n, w) < 0)
			rc = coli_errf(e, COLI_ENOMEM, "out of memory for the experts' products");
		left -= n;
	}
	for (int j = 0; j < (rc == 0 ? k : 0); j++)
		axpy(out, w->W[order[j]], w->D + (int64_t)j * d, d);
	for (int j = 0; j < k; j++)
		if (ex[j])
			coli_store_release(m->store, l, want[j]);
	return rc;
}

/* The batch's experts, each once, ascending, into w->uni; their count. */
static int batch_union(const coli_model *c, int n, fwd_ws *w)
{
	int E = c->n_experts, k = c->top_k, nu = 0;
	memset(w->uni, 0, (size_t)E * sizeof(int));
	for (int i = 0; i < n * k; i++)
		if (w->ids[i] >= 0 && w->ids[i] < E)
			w->uni[w->ids[i]] = 1;
	for (int x = 0; x < E; x++)
		if (w->uni[x])
			w->uni[nu++] = x;
	return nu;
}

void moe_read_ahead(const coli_engine *m, int l, int n)
{
	int nu = batch_union(m->cfg, n, m->ws), k = m->cfg->top_k;
	coli_store_prefetch(m->store, l, m->ws->uni, nu < k ? nu : k);
}

/* Prefill: the union's experts in ascending order (the sums as before), each one requested
 * (read first, unless a prefetch already read it), the next top_k - 1 prefetched behind it (a
 * window of top_k the store can always hold: it has >= top_k slots), then got. */
static int experts_batch(const coli_engine *m, int l, const float *X, int n, fwd_ws *w, float *out, coli_err *e)
{
	int nu = batch_union(m->cfg, n, w), k = m->cfg->top_k, rc = 0;
	for (int u = 0; rc == 0 && u < nu; u++) {
		int ahead = nu - u - 1 < k - 1 ? nu - u - 1 : k - 1;
		coli_store_request(m->store, l, w->uni + u, 1);
		coli_store_prefetch(m->store, l, w->uni + u + 1, ahead);
		rc = run_expert(m, l, w->uni[u], X, n, w, out, e);
	}
	return rc;
}

/* A replayed routing (coli_engine_opts.route_from): the entries of positions pos..pos+n-1 at
 * layer l, the j-th MoE layer of the main stack, in place of the router's choice. */
static void route_replayed(const coli_engine *m, int l, int pos, int n, fwd_ws *w)
{
	const coli_model *c = m->cfg;
	int k = c->top_k, j = 0;
	if (!m->route || l >= c->n_layers)
		return;
	for (int i = 0; i < l; i++)
		j += c->is_moe[i];
	for (int i = 0; i < n; i++) {
		const float *wt;
		const int32_t *ids = coli_route_at(m->route, pos + i, j, &wt);
		if (ids) {
			memcpy(w->ids + i * k, ids, (size_t)k * sizeof(int32_t));
			memcpy(w->W + i * k, wt, (size_t)k * sizeof(float));
		}
	}
}

/* Routes each row of X (positions pos..pos+n-1): experts and weights into w->ids, w->W (a
 * replayed routing's where given); usage counted; a decode's prediction scored. */
static void route_batch(const coli_engine *m, int l, int pos, const float *X, int n, fwd_ws *w)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[l];
	int E = c->n_experts, k = c->top_k;
	coli_mat_mul(m->kc, &L->router, X, n, w->R);
	for (int i = 0; i < n; i++)
		route(c, L->corr_bias, w->R + (int64_t)i * E, w->ids + i * k, w->W + i * k, w->scratch, w->gsel);
	route_replayed(m, l, pos, n, w);
	for (int i = 0; m->usage && i < n * k; i++) /* single-threaded here: no atomics */
		if (w->ids[i] >= 0 && w->ids[i] < E)
			m->usage[(int64_t)l * E + w->ids[i]] += 1.0;
	if (n == 1)
		coli_store_predict_check(m->store, l, w->ids, k);
}

int moe_apply(const coli_engine *m, int l, const float *X, int n, float *out, int32_t *ids, float *wts, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[l];
	fwd_ws *w = m->ws;
	int d = c->hidden_size, rc = 0;
	memset(out, 0, (size_t)n * d * sizeof(float));
	rc = n == 1 ? experts_one_token(m, l, X, w, out, e) : experts_batch(m, l, X, n, w, out, e);
	if (rc == 0 && L->sh_gate.rows) {
		swiglu_mlp(m->kc, &L->sh_gate, &L->sh_up, &L->sh_down, X, n, (float)c->swiglu_limit, w->H, w->U, w->D);
		for (int i = 0; i < n; i++) { /* qwen3_5_moe: x sigmoid(shared_expert_gate . x) */
			const float *g = (const float *)(const void *)L->sh_expert_gate.codes;
			float s = g ? sigmoid(dot(g, X + (int64_t)i * d, d)) : 1.0f;
			for (int j = 0; j < d; j++)
				out[(int64_t)i * d + j] += s * w->D[(int64_t)i * d + j];
		}
	}
	coli_tracer_mark(m->tr, COLI_SPAN_EXPERTS, l);
	if (rc == 0 && ids)
		memcpy(ids, w->ids, (size_t)n * c->top_k * sizeof(int32_t));
	if (rc == 0 && wts)
		memcpy(wts, w->W, (size_t)n * c->top_k * sizeof(float));
	return rc;
}

static int moe_block(const coli_engine *m, int l, int pos, const float *X, int n, float *out, int32_t *ids, float *wts,
		     coli_err *e)
{
	route_batch(m, l, pos, X, n, m->ws);
	coli_tracer_mark(m->tr, COLI_SPAN_ROUTER, l);
	return moe_apply(m, l, X, n, out, ids, wts, e);
}

void moe_predict(const coli_engine *m, int l, const float *x)
{
	const coli_model *c = m->cfg;
	if (l < 0 || l >= c->n_layers || !c->is_moe[l] || !coli_store_predicting(m->store))
		return;
	const layer_w *L = &m->w->layers[l];
	fwd_ws *w = m->ws;
	int E = c->n_experts, k = c->top_k, d = c->hidden_size;
	rmsnorm(w->pN, x, L->mlp_norm, d, (float)c->rms_norm_eps);
	coli_mat_vec(m->kc, &L->router, w->pN, w->scratch);
	route(c, L->corr_bias, w->scratch, w->pid, w->pw, w->scratch + E, w->gsel);
	for (int j = 0; j < k; j++)
		w->pint[j] = w->pid[j];
	coli_store_predict(m->store, l, w->pint, k);
	coli_tracer_mark(m->tr, COLI_SPAN_ROUTER, l - 1);
}

int mlp_block(const coli_engine *m, int l, int pos, const float *X, int n, float *out, int32_t *ids, float *wts,
	      coli_err *e)
{
	const layer_w *L = &m->w->layers[l];
	if (m->cfg->is_moe[l])
		return moe_block(m, l, pos, X, n, out, ids, wts, e);
	swiglu_mlp(m->kc, &L->gate, &L->up, &L->down, X, n, 0.0f, m->ws->H, m->ws->U, out);
	coli_tracer_mark(m->tr, COLI_SPAN_EXPERTS, l);
	return 0;
}
