/* test_mtp.c: speculative decoding's engine side, on the deepseek_v3, glm4_moe and deepseek_v4
 * fixtures (their MTP layer, tests/fixtures/hf/<family>-tiny/README.md):
 *   - a verify (k + 1 tokens in one forward) gives the bits of k + 1 decode steps, for every
 *     kernel variant the CPU has, dense matrices at 16 and 8 bits;
 *   - the queued hidden state is the lm_head's input (its logits are the main model's);
 *   - the MTP head's logits at position 0 against a reference computed here with plain loops
 *     over the container's dequantized tensors (DeepSeek-V3's definition: enorm(embed(t_1)) and
 *     hnorm(h_0) through eh_proj, the decoder block, the shared head; deepseek_v4's, DeepSeek's
 *     MTPBlock: e_proj enorm(embed(t_1)) + h_proj hnorm(h_0) on each of the main model's final
 *     streams, the decoder block between its mHC mixings, its mHC head and norm, the head);
 *   - drafting and truncating leave the next draft as it would be without them (deepseek_v4: its
 *     window restored);
 *   - speculative sampling's rule draws from p (a statistical check). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "nn/moe.h"
#include "nn/weights.h"
#include "run.h"
#include "sampler.h"
#include "t.h"

static int convert(const char *fam, int dense_bits, const char *out)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q --force --dense-bits %d %s/%s-tiny/checkpoint %s", dense_bits,
		 t_fixtures(), fam, out);
	return system(cmd);
}

static const int32_t prompt_ids[6] = {63, 236, 218, 246, 404, 135};
static const int32_t next_ids[5] = {302, 473, 439, 124, 220};

/* The ids above within m's vocabulary (the same ids where it has 512); a longer prompt of 14,
 * beyond deepseek_v4's fixture's window of 8. */
typedef struct fit_ids {
	int32_t prompt[6], next5[5], longer[14];
} fit_ids;

static fit_ids ids_for(const coli_engine *m)
{
	fit_ids d;
	int V = m->cfg->vocab_size;
	for (int i = 0; i < 6; i++)
		d.prompt[i] = prompt_ids[i] % V;
	for (int i = 0; i < 5; i++)
		d.next5[i] = next_ids[i] % V;
	for (int i = 0; i < 14; i++)
		d.longer[i] = i < 6 ? d.prompt[i] : (prompt_ids[i % 6] + i) % V;
	return d;
}

/* The prompt, then next5 one decode step at a time (logits [5][V]) or in one forward. */
static int run_seq(coli_engine *m, int batched, float *logits, coli_err *e)
{
	coli_kv kv;
	fit_ids d = ids_for(m);
	int V = m->cfg->vocab_size, rc = coli_kv_init(&kv, m, 32, e);
	if (rc == 0)
		rc = coli_forward(m, &kv, d.prompt, 6, NULL, NULL, NULL, e);
	if (rc == 0 && batched)
		rc = coli_forward(m, &kv, d.next5, 5, logits, NULL, NULL, e);
	for (int i = 0; rc == 0 && !batched && i < 5; i++)
		rc = coli_forward(m, &kv, d.next5 + i, 1, NULL, logits + (int64_t)i * V, NULL, e);
	coli_kv_release(&kv);
	return rc;
}

static void check_verify_bits(const char *fam, const char *path, int bits)
{
	static const char *const isas[] = {"scalar", "avx2", "avx512"};
	char name[200];
	for (size_t i = 0; i < 3; i++) {
		coli_engine m;
		coli_err e = {0, ""};
		coli_engine_opts o = {.isa = isas[i]};
		if (!coli_kernels_available(isas[i]) || coli_engine_open(&m, path, &o, &e) < 0)
			continue;
		size_t n = (size_t)5 * m.cfg->vocab_size;
		float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float));
		int rc = run_seq(&m, 0, a, &e) == 0 && run_seq(&m, 1, b, &e) == 0 ? 0 : -1;
		snprintf(name, sizeof(name), "mtp: %s dense %d-bit %s: a verify of 5 tokens has the bits of 5 decode steps",
			 fam, bits, isas[i]);
		T_CHECK(name, rc == 0 && memcmp(a, b, n * sizeof(float)) == 0, "rc %d %s", rc, e.msg);
		free(a), free(b);
		coli_engine_close(&m);
	}
}

/* ---- the reference: plain loops over dequantized tensors, in double ---- */

static double *deq(const coli_engine *m, const coli_mat *W)
{
	double *out = malloc((size_t)(W->rows * W->cols) * sizeof(double));
	float *row = malloc((size_t)W->cols * sizeof(float));
	for (int64_t r = 0; r < W->rows; r++) {
		coli_mat_row(m->kc, W, r, row);
		for (int64_t c = 0; c < W->cols; c++)
			out[r * W->cols + c] = row[c];
	}
	free(row);
	return out;
}

/* y[r0 .. r0 + nr) = W x (+ bias). */
static void mv(const coli_engine *m, const coli_mat *W, const float *bias, const double *x, int64_t r0, int64_t nr,
	       double *y)
{
	double *w = deq(m, W);
	for (int64_t r = 0; r < nr; r++) {
		double s = bias ? bias[r0 + r] : 0;
		for (int64_t c = 0; c < W->cols; c++)
			s += w[(r0 + r) * W->cols + c] * x[c];
		y[r] = s;
	}
	free(w);
}

static void norm(const double *x, const float *w, int n, double eps, double *y)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	double inv = 1.0 / sqrt(ss / n + eps);
	for (int i = 0; i < n; i++)
		y[i] = x[i] * inv * w[i];
}

/* y += scale * down(silu(gate x) * up x), with lim > 0 gate x clamped to at most lim and up x to
 * [-lim, lim] (deepseek_v4). */
static void swiglu_ref(const coli_engine *m, const coli_mat *g, const coli_mat *u, const coli_mat *dn, const double *x,
		       double scale, double lim, double *y)
{
	int64_t f = g->rows, d = m->cfg->hidden_size;
	double *a = calloc((size_t)f, sizeof(double)), *b = calloc((size_t)f, sizeof(double));
	double *o = calloc((size_t)d, sizeof(double));
	mv(m, g, NULL, x, 0, f, a);
	mv(m, u, NULL, x, 0, f, b);
	for (int64_t i = 0; lim > 0 && i < f; i++) {
		a[i] = a[i] > lim ? lim : a[i];
		b[i] = b[i] > lim ? lim : b[i] < -lim ? -lim : b[i];
	}
	for (int64_t i = 0; i < f; i++)
		a[i] = a[i] / (1 + exp(-a[i])) * b[i];
	mv(m, dn, NULL, a, 0, d, o);
	for (int64_t i = 0; i < d; i++)
		y[i] += scale * o[i];
	free(a), free(b), free(o);
}

/* Attention of the one token at position 0: every head's value (softmax over one key is 1). */
static void attention0(const coli_engine *m, const layer_w *L, const double *a, double *out)
{
	const coli_model *c = m->cfg;
	if (c->attn == COLI_ATTN_MLA) {
		int lat = c->kv_lora_rank, nope = c->qk_nope_head_dim, vd = c->v_head_dim;
		double *ckv = calloc((size_t)L->kv_a.rows, sizeof(double)), *cl = calloc((size_t)lat, sizeof(double));
		mv(m, &L->kv_a, L->kv_a_bias, a, 0, L->kv_a.rows, ckv);
		norm(ckv, L->kv_a_norm, lat, 1e-6, cl);
		for (int h = 0; h < c->n_heads; h++)
			mv(m, &L->kv_b, NULL, cl, (int64_t)h * (nope + vd) + nope, vd, out + (int64_t)h * vd);
		free(ckv), free(cl);
		return;
	}
	int hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
	double *v = calloc((size_t)L->v.rows, sizeof(double));
	mv(m, &L->v, L->v_bias, a, 0, L->v.rows, v);
	for (int h = 0; h < c->n_heads; h++)
		memcpy(out + (int64_t)h * hd, v + (int64_t)(h / group) * hd, (size_t)hd * sizeof(double));
	free(v);
}

/* The routed experts (the engine's router, tested against HF in test_forward) and the shared
 * expert of layer l on the normed x, added to y. */
static int moe_ref(coli_engine *m, int l, const layer_w *L, const double *x, double *y)
{
	const coli_model *c = m->cfg;
	int E = c->n_experts, k = c->top_k;
	double *lg = calloc((size_t)E, sizeof(double));
	float *lf = calloc((size_t)E, sizeof(float)), *scratch = calloc((size_t)(3 * E + 2 * c->n_group + 8), sizeof(float));
	float w[64];
	int32_t ids[64], gsel[64];
	mv(m, &L->router, NULL, x, 0, E, lg);
	for (int i = 0; i < E; i++)
		lf[i] = (float)lg[i];
	route(c, L->corr_bias, lf, ids, w, scratch, gsel);
	int rc = 0;
	for (int j = 0; rc == 0 && j < k; j++) {
		coli_err e = {0, ""};
		const coli_expert *ex = coli_store_get(m->store, l, ids[j], &e);
		if (!ex) {
			rc = -1;
			break;
		}
		swiglu_ref(m, &ex->gate, &ex->up, &ex->down, x, w[j], 0, y);
		coli_store_release(m->store, l, ids[j]);
	}
	if (L->sh_gate.rows)
		swiglu_ref(m, &L->sh_gate, &L->sh_up, &L->sh_down, x, 1.0, 0, y);
	free(lg), free(lf), free(scratch);
	return rc;
}

/* The MTP layer at position 0 from h0 and the token t1: its logits into out[vocab]. */
static int mtp_reference(coli_engine *m, const float *h0, int32_t t1, double *out)
{
	const coli_model *c = m->cfg;
	int l = c->n_layers, d = c->hidden_size, V = c->vocab_size;
	const layer_w *L = &m->w->layers[l];
	double eps = c->rms_norm_eps;
	double *in = calloc((size_t)2 * d, sizeof(double)), *t = calloc((size_t)d, sizeof(double));
	double *x = calloc((size_t)d, sizeof(double)), *a = calloc((size_t)d, sizeof(double));
	double *att = calloc((size_t)(c->n_heads * (c->v_head_dim > c->head_dim ? c->v_head_dim : c->head_dim)), sizeof(double));
	double *o = calloc((size_t)d, sizeof(double));
	float *row = calloc((size_t)d, sizeof(float));
	coli_mat_row(m->kc, &m->w->embed, t1, row);
	for (int i = 0; i < d; i++)
		t[i] = row[i], x[i] = h0[i];
	norm(t, L->enorm, d, eps, in);        /* [enorm(embed(t_1)); hnorm(h_0)] */
	norm(x, L->hnorm, d, eps, in + d);
	mv(m, &L->eh_proj, NULL, in, 0, d, x); /* x = eh_proj [...] */
	norm(x, L->attn_norm, d, eps, a);
	attention0(m, L, a, att);
	mv(m, &L->o, L->o_bias, att, 0, d, o);
	for (int i = 0; i < d; i++)
		x[i] += o[i];
	norm(x, L->mlp_norm, d, eps, a);
	memset(o, 0, (size_t)d * sizeof(double));
	int rc = moe_ref(m, l, L, a, o);
	for (int i = 0; i < d; i++)
		x[i] += o[i];
	norm(x, L->head_norm ? L->head_norm : m->w->final_norm, d, eps, a);
	mv(m, L->head.rows ? &L->head : &m->w->lm_head, NULL, a, 0, V, out);
	free(in), free(t), free(x), free(a), free(att), free(o), free(row);
	return rc;
}

static double max_diff(const float *a, const double *b, int n, double *scale)
{
	double mx = 0;
	*scale = 0;
	for (int i = 0; i < n; i++) {
		mx = fabs(a[i] - b[i]) > mx ? fabs(a[i] - b[i]) : mx;
		*scale = fabs(b[i]) > *scale ? fabs(b[i]) : *scale;
	}
	return mx;
}

/* The hidden state queued after a forward of t0 is the lm_head's input; the first draft step's
 * logits against the reference. */
static void check_reference(const char *fam, const char *path)
{
	char name[200];
	coli_engine m;
	coli_kv kv;
	coli_mtp s;
	coli_err e = {0, ""};
	memset(&s, 0, sizeof(s));
	int rc = coli_engine_open(&m, path, NULL, &e);
	snprintf(name, sizeof(name), "mtp: %s: the container opens", fam);
	T_CHECK(name, rc == 0, "open %s: %s", path, e.msg);
	if (rc < 0)
		return;
	int V = m.cfg->vocab_size, d = m.cfg->hidden_size;
	float *main_lg = calloc((size_t)V, sizeof(float)), *head = calloc((size_t)V, sizeof(float));
	float *draft = calloc((size_t)V, sizeof(float)), *h0 = calloc((size_t)d, sizeof(float));
	double *ref = calloc((size_t)V, sizeof(double)), scale = 0;
	rc = coli_kv_init(&kv, &m, 16, &e) == 0 && coli_mtp_init(&s, &m, 16, 0, &e) == 0 ? 0 : -1;
	if (rc == 0)
		rc = coli_forward_mtp(&m, &kv, &s, prompt_ids, 1, NULL, main_lg, &e);
	if (rc == 0) {
		memcpy(h0, s.hid, (size_t)d * sizeof(float));
		coli_mat_vec(m.kc, &m.w->lm_head, h0, head);
	}
	snprintf(name, sizeof(name), "mtp: %s: the queued hidden state is the lm_head's input", fam);
	T_CHECK(name, rc == 0 && memcmp(head, main_lg, (size_t)V * sizeof(float)) == 0, "rc %d %s", rc, e.msg);
	if (rc == 0)
		rc = coli_mtp_step(&m, &s, prompt_ids[1], draft, &e);
	if (rc == 0)
		rc = mtp_reference(&m, h0, prompt_ids[1], ref);
	double diff = rc == 0 ? max_diff(draft, ref, V, &scale) : 1e9;
	snprintf(name, sizeof(name), "mtp: %s: the MTP head's logits at position 0 against the plain-loop reference", fam);
	T_CHECK(name, rc == 0 && diff <= 1e-4 * (1 + scale) && scale > 0, "rc %d, max diff %.3g (logits up to %.3g) %s", rc,
		diff, scale, e.msg);
	coli_mtp_release(&s);
	coli_kv_release(&kv);
	coli_engine_close(&m);
	free(main_lg), free(head), free(draft), free(h0), free(ref);
}

/* ---- deepseek_v4's MTP layer at position 0 (DeepSeek's MTPBlock), plain loops in double ---- */

static double sigm(double x)
{
	return 1 / (1 + exp(-x));
}

/* x = rms(x) (unweighted; in place). */
static void unit(double *x, int n, double eps)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	for (int i = 0; i < n; i++)
		x[i] /= sqrt(ss / n + eps);
}

/* mHC of the streams st [S][D] with fn, base, scale: the block input x; before a block (post
 * not NULL) also post [S] and comb [S][S], softmax rows then Sinkhorn (columns first). */
static void hc_ref(const coli_model *c, const double *st, const float *fn, const float *base, const float *scale,
		   double *x, double *post, double *comb)
{
	int S = c->hc_mult, D = c->hidden_size, SD = S * D, rows = post ? (2 + S) * S : S;
	double *n = malloc((size_t)SD * sizeof(double)), *mix = calloc((size_t)rows, sizeof(double)), eps = c->hc_eps;
	memcpy(n, st, (size_t)SD * sizeof(double));
	unit(n, SD, c->rms_norm_eps);
	for (int r = 0; r < rows; r++)
		for (int i = 0; i < SD; i++)
			mix[r] += fn[(int64_t)r * SD + i] * n[i];
	memset(x, 0, (size_t)D * sizeof(double));
	for (int j = 0; j < S; j++)
		for (int i = 0; i < D; i++)
			x[i] += (sigm(mix[j] * scale[0] + base[j]) + eps) * st[j * D + i];
	for (int j = 0; post && j < S; j++) {
		double mx = -1e300, sum = 0;
		post[j] = 2 * sigm(mix[S + j] * scale[1] + base[S + j]);
		for (int k = 0; k < S; k++)
			comb[j * S + k] = mix[2 * S + j * S + k] * scale[2] + base[2 * S + j * S + k], mx = fmax(mx, comb[j * S + k]);
		for (int k = 0; k < S; k++)
			sum += comb[j * S + k] = exp(comb[j * S + k] - mx);
		for (int k = 0; k < S; k++)
			comb[j * S + k] = comb[j * S + k] / sum + eps;
	}
	for (int it = 0; post && it < 2 * c->hc_iters - 1; it++)
		for (int a = 0; a < S; a++) {
			double sum = 0;
			for (int b = 0; b < S; b++)
				sum += it % 2 ? comb[a * S + b] : comb[b * S + a];
			for (int b = 0; b < S; b++)
				*(it % 2 ? &comb[a * S + b] : &comb[b * S + a]) /= sum + eps;
		}
	free(n), free(mix);
}

/* The streams after a block's output y: st_k = post_k y + sum_j comb[j][k] st_j. */
static void hc_post_ref(const coli_model *c, double *st, const double *post, const double *comb, const double *y)
{
	int S = c->hc_mult, D = c->hidden_size;
	double *o = calloc((size_t)S * D, sizeof(double));
	for (int k = 0; k < S; k++)
		for (int i = 0; i < D; i++) {
			o[k * D + i] = post[k] * y[i];
			for (int j = 0; j < S; j++)
				o[k * D + i] += comb[j * S + k] * st[j * D + i];
		}
	memcpy(st, o, (size_t)S * D * sizeof(double));
	free(o);
}

/* The window-only attention of the one token at position 0 (RoPE the identity): each head's
 * output the key (= value) weighted against its sink, then the grouped output. */
static void attention0_v4(const coli_engine *m, const layer_w *L, const double *a, double *out)
{
	const coli_model *c = m->cfg;
	int H = c->n_heads, hd = c->head_dim, G = c->o_groups, olr = c->o_lora_rank, per = H * hd / G;
	double eps = c->rms_norm_eps, *qa = calloc((size_t)c->q_lora_rank, sizeof(double));
	double *qr = calloc((size_t)c->q_lora_rank, sizeof(double)), *q = calloc((size_t)H * hd, sizeof(double));
	double *k0 = calloc((size_t)hd, sizeof(double)), *kv = calloc((size_t)hd, sizeof(double));
	double *o = calloc((size_t)H * hd, sizeof(double)), *og = calloc((size_t)G * olr, sizeof(double));
	mv(m, &L->q_a, NULL, a, 0, c->q_lora_rank, qa);
	norm(qa, L->q_a_norm, c->q_lora_rank, eps, qr);
	mv(m, &L->q_b, NULL, qr, 0, (int64_t)H * hd, q);
	mv(m, &L->wkv, NULL, a, 0, hd, k0);
	norm(k0, L->kv_norm, hd, eps, kv);
	for (int h = 0; h < H; h++) {
		double sc = 0;
		unit(q + h * hd, hd, eps);
		for (int i = 0; i < hd; i++)
			sc += q[h * hd + i] * kv[i] / sqrt(hd);
		for (int i = 0; i < hd; i++)
			o[h * hd + i] = sigm(sc - L->sink[h]) * kv[i];
	}
	for (int g = 0; g < G; g++)
		mv(m, &L->wo_a, NULL, o + g * per, (int64_t)g * olr, olr, og + g * olr);
	mv(m, &L->wo_b, NULL, og, 0, c->hidden_size, out);
	free(qa), free(qr), free(q), free(k0), free(kv), free(o), free(og);
}

/* The MoE of (non-hash) layer l on the normed x: sqrt(softplus) scores, top-k of score + bias
 * (ties lower id), weights renormalised x routed_scaling_factor; clamped experts and the shared
 * one; into y. */
static int moe_v4_ref(coli_engine *m, int l, const layer_w *L, const double *x, double *y)
{
	const coli_model *c = m->cfg;
	int E = c->n_experts, k = c->top_k, rc = 0;
	double *sc = calloc((size_t)E, sizeof(double)), sum = 0;
	char *taken = calloc((size_t)E, 1);
	int32_t ids[64];
	mv(m, &L->router, NULL, x, 0, E, sc);
	for (int i = 0; i < E; i++)
		sc[i] = sqrt(sc[i] > 20 ? sc[i] : log1p(exp(sc[i])));
	for (int j = 0; j < k; j++) {
		ids[j] = -1;
		for (int i = 0; i < E; i++)
			if (!taken[i] && (ids[j] < 0 || sc[i] + L->corr_bias[i] > sc[ids[j]] + L->corr_bias[ids[j]]))
				ids[j] = i;
		taken[ids[j]] = 1, sum += sc[ids[j]];
	}
	memset(y, 0, (size_t)c->hidden_size * sizeof(double));
	for (int j = 0; rc == 0 && j < k; j++) {
		coli_err e = {0, ""};
		const coli_expert *ex = coli_store_get(m->store, l, ids[j], &e);
		if (!ex)
			rc = -1;
		else
			swiglu_ref(m, &ex->gate, &ex->up, &ex->down, x, sc[ids[j]] / (sum + 1e-20) * c->routed_scaling_factor,
				   c->swiglu_limit, y);
		if (ex)
			coli_store_release(m->store, l, ids[j]);
	}
	if (L->sh_gate.rows)
		swiglu_ref(m, &L->sh_gate, &L->sh_up, &L->sh_down, x, 1.0, c->swiglu_limit, y);
	free(sc), free(taken);
	return rc;
}

/* The logits of the streams st under the mHC head of W (site 2), the norm nw and the head. */
static void head_ref(const coli_engine *m, const layer_w *W, const float *nw, const double *st, double *out)
{
	int D = m->cfg->hidden_size;
	double *x = calloc((size_t)D, sizeof(double)), *a = calloc((size_t)D, sizeof(double));
	hc_ref(m->cfg, st, W->hc_fn[2], W->hc_base[2], W->hc_scale[2], x, NULL, NULL);
	norm(x, nw, D, m->cfg->rms_norm_eps, a);
	mv(m, &m->w->lm_head, NULL, a, 0, m->cfg->vocab_size, out);
	free(x), free(a);
}

/* The MTP layer at position 0 from the main model's final streams h0 [S][D] and the token t1. */
static int mtp_reference_v4(coli_engine *m, const float *h0, int32_t t1, double *out)
{
	const coli_model *c = m->cfg;
	int l = c->n_layers, D = c->hidden_size, S = c->hc_mult, rc;
	const layer_w *L = &m->w->layers[l];
	double eps = c->rms_norm_eps, *st = calloc((size_t)S * D, sizeof(double)), *t = calloc((size_t)D, sizeof(double));
	double *x = calloc((size_t)D, sizeof(double)), *a = calloc((size_t)D, sizeof(double));
	double *ev = calloc((size_t)D, sizeof(double)), *y = calloc((size_t)D, sizeof(double));
	double post[64], *comb = calloc((size_t)S * S, sizeof(double));
	float *row = calloc((size_t)D, sizeof(float));
	coli_mat_row(m->kc, &m->w->embed, t1, row);
	for (int i = 0; i < D; i++)
		t[i] = row[i];
	norm(t, L->enorm, D, eps, a);
	mv(m, &L->e_proj, NULL, a, 0, D, ev); /* e_proj enorm(embed(t_1)) */
	for (int j = 0; j < S; j++) {          /* + h_proj hnorm(h_0[j]) */
		for (int i = 0; i < D; i++)
			t[i] = h0[j * D + i];
		norm(t, L->hnorm, D, eps, a);
		mv(m, &L->h_proj, NULL, a, 0, D, st + j * D);
		for (int i = 0; i < D; i++)
			st[j * D + i] += ev[i];
	}
	hc_ref(c, st, L->hc_fn[0], L->hc_base[0], L->hc_scale[0], x, post, comb);
	norm(x, L->attn_norm, D, eps, a);
	attention0_v4(m, L, a, y);
	hc_post_ref(c, st, post, comb, y);
	hc_ref(c, st, L->hc_fn[1], L->hc_base[1], L->hc_scale[1], x, post, comb);
	norm(x, L->mlp_norm, D, eps, a);
	rc = moe_v4_ref(m, l, L, a, y);
	hc_post_ref(c, st, post, comb, y);
	head_ref(m, L, L->head_norm, st, out);
	free(st), free(t), free(x), free(a), free(ev), free(y), free(comb), free(row);
	return rc;
}

/* deepseek_v4: the queued streams give the main logits under the model's head; the first draft
 * step's logits against the reference. */
static void check_reference_v4(const char *path)
{
	coli_engine m;
	coli_kv kv;
	coli_mtp s;
	coli_err e = {0, ""};
	memset(&s, 0, sizeof(s));
	if (coli_engine_open(&m, path, NULL, &e) < 0) {
		T_CHECK("mtp: deepseek_v4: the container opens", 0, "%s", e.msg);
		return;
	}
	const coli_model *c = m.cfg;
	int V = c->vocab_size, SD = c->hc_mult * c->hidden_size;
	fit_ids d = ids_for(&m);
	float *main_lg = calloc((size_t)V, sizeof(float)), *draft = calloc((size_t)V, sizeof(float));
	float *h0 = calloc((size_t)SD, sizeof(float));
	double *ref = calloc((size_t)V, sizeof(double)), *st = calloc((size_t)SD, sizeof(double)), scale = 0, diff = 1e9;
	T_CHECK("mtp: deepseek_v4: the fixture's MTP layer attends its window only (the reference's case)",
		c->n_mtp_layers == 1 && c->compress[c->n_layers] == 0, "%d MTP layers", c->n_mtp_layers);
	int rc = coli_kv_init(&kv, &m, 16, &e) == 0 && coli_mtp_init(&s, &m, 16, 0, &e) == 0 ? 0 : -1;
	if (rc == 0 && (rc = coli_forward_mtp(&m, &kv, &s, d.prompt, 1, NULL, main_lg, &e)) == 0) {
		memcpy(h0, s.hid, (size_t)SD * sizeof(float));
		for (int i = 0; i < SD; i++)
			st[i] = h0[i];
		head_ref(&m, &m.w->top, m.w->final_norm, st, ref);
		diff = max_diff(main_lg, ref, V, &scale);
	}
	T_CHECK("mtp: deepseek_v4: the queued streams are the main model's last (its head gives its logits)",
		rc == 0 && diff <= 1e-4 * (1 + scale) && scale > 0, "rc %d, max diff %.3g: %s", rc, diff, e.msg);
	if (rc == 0)
		rc = coli_mtp_step(&m, &s, d.prompt[1], draft, &e);
	if (rc == 0)
		rc = mtp_reference_v4(&m, h0, d.prompt[1], ref);
	diff = rc == 0 ? max_diff(draft, ref, V, &scale) : 1e9;
	T_CHECK("mtp: deepseek_v4: the MTP layer's logits at position 0 against the plain-loop reference",
		rc == 0 && diff <= 1e-4 * (1 + scale) && scale > 0, "rc %d, max diff %.3g (logits up to %.3g) %s", rc, diff,
		scale, e.msg);
	coli_mtp_release(&s);
	coli_kv_release(&kv);
	coli_engine_close(&m);
	free(main_lg), free(draft), free(h0), free(ref), free(st);
}

/* A prompt of 6 (deepseek_v4: 14, past its window; the others' MTP batches stay within the 8
 * rows whose bits equal single rows'), three draft steps, a verify, a rollback and truncate
 * keeping one position: the next first draft step gives what a state that never drafted gives. */
static int drafted_state(coli_engine *m, int draft, float *out, coli_err *e)
{
	coli_kv kv;
	coli_mtp s;
	fit_ids d = ids_for(m);
	int V = m->cfg->vocab_size;
	float *lg = calloc((size_t)5 * V, sizeof(float));
	memset(&s, 0, sizeof(s));
	int rc = coli_kv_init(&kv, m, 32, e) == 0 && coli_kv_keep(&kv, m, e) == 0 && coli_mtp_init(&s, m, 32, 0, e) == 0
			 ? 0
			 : -1;
	int np = m->cfg->attn == COLI_ATTN_V4 ? 14 : 6;
	if (rc == 0)
		rc = coli_forward_mtp(m, &kv, &s, d.longer, np, NULL, lg, e);
	for (int i = 0; rc == 0 && draft && i < 3; i++)
		rc = coli_mtp_step(m, &s, d.next5[i], lg, e);
	if (rc == 0)
		rc = coli_forward_mtp(m, &kv, &s, d.next5, 4, lg, NULL, e);
	if (rc == 0 && (rc = coli_kv_rollback(m, &kv, np + 1, e)) == 0) {
		coli_mtp_truncate(m, &s, kv.n);
		rc = coli_mtp_step(m, &s, d.next5[2], out, e);
	}
	coli_mtp_release(&s);
	coli_kv_release(&kv);
	free(lg);
	return rc;
}

static void check_truncate(const char *fam, const char *path)
{
	char name[200];
	coli_engine m;
	coli_err e = {0, ""};
	if (coli_engine_open(&m, path, NULL, &e) < 0)
		return;
	int V = m.cfg->vocab_size;
	float *a = calloc((size_t)V, sizeof(float)), *b = calloc((size_t)V, sizeof(float));
	int rc = drafted_state(&m, 1, a, &e) == 0 && drafted_state(&m, 0, b, &e) == 0 ? 0 : -1;
	snprintf(name, sizeof(name), "mtp: %s: drafts rolled back leave the next draft's bits unchanged", fam);
	T_CHECK(name, rc == 0 && memcmp(a, b, (size_t)V * sizeof(float)) == 0, "rc %d %s", rc, e.msg);
	free(a), free(b);
	coli_engine_close(&m);
}

/* Without MTP layers: an error naming the container. */
static void check_no_mtp(const char *dir)
{
	char path[600], cmd[1400];
	coli_engine m;
	coli_mtp s;
	coli_err e = {0, ""};
	snprintf(path, sizeof(path), "%s/qwen.coli", dir);
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q %s/qwen3_moe-tiny/checkpoint %s", t_fixtures(), path);
	int rc = system(cmd) == 0 && coli_engine_open(&m, path, NULL, &e) == 0 ? 0 : -1;
	int got = rc == 0 ? coli_mtp_init(&s, &m, 16, 0, &e) : 0;
	T_CHECK("mtp: a container without MTP layers: coli_mtp_init refuses, naming it",
		rc == 0 && got < 0 && e.code == COLI_EUSAGE && strstr(e.msg, "qwen.coli") && strstr(e.msg, "no MTP layers"),
		"rc %d got %d: %s", rc, got, e.msg);
	if (rc == 0)
		coli_engine_close(&m);
}

/* Speculative sampling draws from p: n rounds of a draft from q and the rule, over V ids. */
static void rule_rounds(const char *what, const float *p, const float *q, int V, int n)
{
	char name[200];
	float *resid = calloc((size_t)V, sizeof(float));
	long *hist = calloc((size_t)V, sizeof(long)), acc = 0, never = 0;
	sampler s;
	coli_sampler_init(&s, V, 1.0f, 0, 1.0f, 42);
	for (int i = 0; i < n; i++) {
		int ok, d = coli_sampler_draw(&s, q), x = coli_sampler_verify(&s, p, q, d, resid, &ok);
		hist[x]++, acc += ok;
	}
	double worst = 0, want_acc = 0;
	for (int i = 0; i < V; i++) {
		double f = (double)hist[i] / n, sd = sqrt((p[i] * (1 - p[i]) + 1e-12) / n);
		worst = fabs(f - p[i]) / sd > worst ? fabs(f - p[i]) / sd : worst;
		want_acc += p[i] < q[i] ? p[i] : q[i];
		never += p[i] == 0 ? hist[i] : 0;
	}
	snprintf(name, sizeof(name), "mtp: %s: speculative sampling's tokens are distributed as p (within 5 sigma)", what);
	T_CHECK(name, worst < 5 && never == 0, "worst deviation %.2f sigma, %ld of ids p never gives", worst, never);
	double a = (double)acc / n;
	snprintf(name, sizeof(name), "mtp: %s: speculative sampling accepts with probability sum min(p, q)", what);
	T_CHECK(name, fabs(a - want_acc) < 0.005, "accepted %.4f, expected %.4f", a, want_acc);
	coli_sampler_release(&s);
	free(resid), free(hist);
}

static void check_rule(void)
{
	const float p[6] = {0.4f, 0.25f, 0.15f, 0.1f, 0.1f, 0.0f}, q[6] = {0.1f, 0.3f, 0.3f, 0.0f, 0.1f, 0.2f};
	rule_rounds("6 ids", p, q, 6, 400000);
}

/* On the model: q the MTP draft's distribution after the prompt and next5[0], p the verify's
 * first row (the main model's, at temperature 1, top-k 8). */
static void check_rule_model(const char *fam, const char *path)
{
	coli_engine m;
	coli_kv kv;
	coli_mtp s;
	coli_err e = {0, ""};
	sampler smp;
	memset(&s, 0, sizeof(s));
	if (coli_engine_open(&m, path, NULL, &e) < 0)
		return;
	int V = m.cfg->vocab_size;
	fit_ids d = ids_for(&m);
	int32_t toks[2] = {d.next5[0], 0};
	float *lg = calloc((size_t)2 * V, sizeof(float)), *p = calloc((size_t)V, sizeof(float));
	float *q = calloc((size_t)V, sizeof(float));
	coli_sampler_init(&smp, V, 1.0f, 8, 1.0f, 1);
	int rc = coli_kv_init(&kv, &m, 32, &e) == 0 && coli_mtp_init(&s, &m, 32, 0, &e) == 0 ? 0 : -1;
	if (rc == 0)
		rc = coli_forward_mtp(&m, &kv, &s, d.prompt, 6, NULL, lg, &e);
	if (rc == 0 && (rc = coli_mtp_step(&m, &s, toks[0], lg, &e)) == 0) {
		coli_sampler_probs(&smp, lg, q);
		toks[1] = coli_sampler_draw(&smp, q);
		rc = coli_forward_mtp(&m, &kv, &s, toks, 2, lg, NULL, &e);
	}
	T_CHECK("mtp: a draft and its verify at temperature 1, top-k 8", rc == 0, "%s: %s", fam, e.msg);
	if (rc == 0) {
		coli_sampler_probs(&smp, lg, p);
		rule_rounds(fam, p, q, V, 200000);
	}
	coli_sampler_release(&smp);
	coli_mtp_release(&s);
	coli_kv_release(&kv);
	coli_engine_close(&m);
	free(lg), free(p), free(q);
}

/* --draft auto's model (run/draft.c): off when drafts are never accepted and a verified token
 * costs half a plain step; on, with more than one draft, when most are and verifies are cheap. */
static void check_auto(void)
{
	coli_spec d;
	double acc, gain;
	memset(&d, 0, sizeof(d));
	d.c_plain = 1.0, d.c_step = 0.05, d.c_tok = 0.45, d.acc_a = 0, d.acc_r = 20;
	int k = coli_spec_best_k(&d, &acc, &gain);
	T_CHECK("mtp: auto's model: acceptance ~0 and a verified token at half a plain step: off", gain < 1 && acc < 0.05,
		"k %d, gain %.3f, acceptance %.3f", k, gain, acc);
	d.c_step = 0.02, d.c_tok = 0.1, d.acc_a = 16, d.acc_r = 4;
	k = coli_spec_best_k(&d, &acc, &gain);
	double e = 0, pw = 1;
	for (int i = 0; i <= k; i++, pw *= acc)
		e += pw;
	T_CHECK("mtp: auto's model: acceptance 0.8 and cheap verifies: on, k > 1, the expected speedup", k > 1 && gain > 1.5 &&
		fabs(gain - e / (1 + k * 0.12)) < 1e-9, "k %d, gain %.3f, acceptance %.3f", k, gain, acc);
}

int main(void)
{
	static const char *const fams[] = {"deepseek_v3", "glm4_moe"};
	char dir[] = "/tmp/coli-test-mtp.XXXXXX", path[600], cmd[700];
	if (!mkdtemp(dir))
		return 1;
	for (size_t i = 0; i < 2; i++) {
		for (int bits = 16; bits >= 8; bits -= 8) {
			snprintf(path, sizeof(path), "%s/%s-%d.coli", dir, fams[i], bits);
			snprintf(cmd, sizeof(cmd), "mtp: %s converts with %d-bit dense matrices", fams[i], bits);
			T_CHECK(cmd, convert(fams[i], bits, path) == 0, "coli-convert of %s failed", path);
			check_verify_bits(fams[i], path, bits);
		}
		check_reference(fams[i], path);
		check_truncate(fams[i], path);
		check_rule_model(fams[i], path);
	}
	snprintf(path, sizeof(path), "%s/deepseek_v4.coli", dir);
	T_CHECK("mtp: deepseek_v4 converts (16-bit dense matrices)", convert("deepseek_v4", 16, path) == 0,
		"coli-convert of %s failed", path);
	check_verify_bits("deepseek_v4", path, 16);
	check_reference_v4(path);
	check_truncate("deepseek_v4", path);
	check_rule_model("deepseek_v4", path);
	check_no_mtp(dir);
	check_rule();
	check_auto();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	T_CHECK("mtp: scratch folder removed", system(cmd) == 0, "rm failed");
	T_EXIT();
}
