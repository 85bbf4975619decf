/* measure.c: a float32 forward pass over sampled tokens that reports how the model routes.
 *
 * Each sampled token is run as a sequence of one token at position 0, where attention is exact
 * and reduces to o_proj(v_proj(x)) (MLA: o_proj of the value half of kv_b_proj(kv_a_layernorm(
 * kv_a_proj_with_mqa(x))); gated attention: v x sigmoid(gate) before o_proj; a Gated DeltaNet
 * from a zero state: sigmoid(b) (q . k) v of the conv's last tap, through its gated norm and
 * out_proj); tokens therefore never mix, and the "previous token" overlap is
 * that of independent tokens. Per layer: RMSNorm -> attention -> RMSNorm -> router -> top-k ->
 * weighted SwiGLU experts (+ shared experts, sigmoid-gated in qwen3_5_moe) or the dense MLP,
 * added to the residual stream.
 * Next-layer prediction is measured as a runtime would do it: layer l's router applied (after
 * layer l's post_attention_layernorm) to the hidden state layer l-1's router saw ("MoE input")
 * and to layer l-1's output ("layer output").
 */
#include "synth.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

typedef struct lnames {
	const char *in_norm, *post_norm, *q, *v, *v_bias, *o, *o_bias;
	const char *kv_a, *kv_a_bias, *kv_norm, *kv_b, *router, *corr;
	const char *lin_qkv, *lin_z, *lin_b, *lin_conv, *lin_norm, *lin_out, *sh_gate;
	const char *shared[3], *dense[3];
	const char **expert; /* [E x 3]: gate, up, down */
} lnames;

typedef struct stats {
	int moe, used, has_rec;
	double zipf, top, prev, rec_in, rec_out;
} stats;

typedef struct fwd {
	const synth_src *src;
	const coli_model *m;
	int T, H, E, k, threads;
	coli_tensor_spec *spec;
	lnames *ln;
	float *h, *x, *xs, *pre, *post, *y, *router, *corr;
	int *sel, *sel2, have_prev;
	float *wsel, *wsel2;
	stats *st;
} fwd;

/* ---- names ----------------------------------------------------------------------------------- */

static int ends(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

static void name_mlp(lnames *L, const coli_tensor_spec *s)
{
	static const char *const proj[3] = {"gate_proj.weight", "up_proj.weight",
					    "down_proj.weight"};
	for (int p = 0; p < 3; p++)
		if (ends(s->name, proj[p])) {
			if (strstr(s->name, "shared_expert"))
				L->shared[p] = s->name;
			else
				L->dense[p] = s->name;
		}
}

static void name_one(lnames *L, const coli_tensor_spec *s, int E)
{
	static const struct {
		const char *suffix;
		size_t off;
	} tab[] = {
		{"input_layernorm.weight", offsetof(lnames, in_norm)},
		{"post_attention_layernorm.weight", offsetof(lnames, post_norm)},
		{"self_attn.v_proj.weight", offsetof(lnames, v)},
		{"self_attn.v_proj.bias", offsetof(lnames, v_bias)},
		{"self_attn.o_proj.weight", offsetof(lnames, o)},
		{"self_attn.o_proj.bias", offsetof(lnames, o_bias)},
		{"self_attn.kv_a_proj_with_mqa.weight", offsetof(lnames, kv_a)},
		{"self_attn.kv_a_proj_with_mqa.bias", offsetof(lnames, kv_a_bias)},
		{"self_attn.kv_a_layernorm.weight", offsetof(lnames, kv_norm)},
		{"self_attn.kv_b_proj.weight", offsetof(lnames, kv_b)},
		{"e_score_correction_bias", offsetof(lnames, corr)},
	};
	static const struct {
		coli_role role;
		size_t off;
	} roles[] = {
		{COLI_R_ROUTER, offsetof(lnames, router)},     {COLI_R_Q, offsetof(lnames, q)},
		{COLI_R_LIN_QKV, offsetof(lnames, lin_qkv)},   {COLI_R_LIN_Z, offsetof(lnames, lin_z)},
		{COLI_R_LIN_B, offsetof(lnames, lin_b)},       {COLI_R_LIN_CONV, offsetof(lnames, lin_conv)},
		{COLI_R_LIN_NORM, offsetof(lnames, lin_norm)}, {COLI_R_LIN_OUT, offsetof(lnames, lin_out)},
		{COLI_R_SH_EXPERT_GATE, offsetof(lnames, sh_gate)},
	};
	if (s->cls == COLI_TC_EXPERT && s->expert < E) {
		L->expert[s->expert * 3 + s->proj] = s->name;
		return;
	}
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (s->role == roles[i].role) {
			*(const char **)((char *)L + roles[i].off) = s->name;
			return;
		}
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (ends(s->name, tab[i].suffix)) {
			*(const char **)((char *)L + tab[i].off) = s->name;
			return;
		}
	name_mlp(L, s);
}

static int names_build(fwd *f, coli_err *e)
{
	int n;
	if (coli_model_tensors(f->m, &f->spec, &n, e))
		return -1;
	f->ln = coli_calloc((size_t)f->m->n_layers, sizeof(*f->ln), e);
	if (!f->ln)
		return -1;
	for (int l = 0; l < f->m->n_layers; l++) {
		f->ln[l].expert = coli_calloc((size_t)f->E * 3, sizeof(char *), e);
		if (!f->ln[l].expert)
			return -1;
	}
	for (int i = 0; i < n; i++)
		if (f->spec[i].layer >= 0 && f->spec[i].layer < f->m->n_layers)
			name_one(&f->ln[f->spec[i].layer], &f->spec[i], f->E);
	return 0;
}

/* ---- kernels --------------------------------------------------------------------------------- */

static float dot(const float *a, const float *b, int64_t n)
{
	float s[8] = {0}, t = 0;
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			s[j] += a[i + j] * b[i + j];
	for (; i < n; i++)
		t += a[i] * b[i];
	return t + ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static float silu(float g)
{
	return g / (1.0f + expf(-g));
}

static float sigmoid(float g)
{
	return 1.0f / (1.0f + expf(-g));
}

/* Y[t][row0 + r] = W[row0 + r] . X[t] (+ b[row0 + r]) for rows [row0, row0+nrows), weights
 * streamed in blocks of about 1M floats. */
static int mm_rows(const fwd *f, const char *name, const float *b, int64_t row0, int64_t nrows,
		   int64_t C, const float *X, int n, float *Y, int64_t ldy, coli_err *e)
{
	int64_t blk = (1 << 20) / C + 1;
	float *w = coli_malloc((size_t)((blk < nrows ? blk : nrows) * C) * sizeof(float), e);
	int rc = w ? 0 : -1;
	for (int64_t r0 = row0; rc == 0 && r0 < row0 + nrows; r0 += blk) {
		int64_t nr = row0 + nrows - r0 < blk ? row0 + nrows - r0 : blk;
		rc = f->src->rows(f->src, name, r0, nr, w, e);
		for (int64_t r = 0; rc == 0 && r < nr; r++)
			for (int t = 0; t < n; t++)
				Y[t * ldy + r0 + r] = dot(w + r * C, X + t * C, C) + (b ? b[r0 + r] : 0);
	}
	free(w);
	return rc;
}

typedef struct mm_job {
	const fwd *f;
	const char *name;
	const float *bias;
	int64_t R, C, blk;
	const float *X;
	float *Y;
} mm_job;

static int mm_task(void *ctx, int i, coli_err *e)
{
	const mm_job *j = ctx;
	int64_t r0 = (int64_t)i * j->blk, nr = j->R - r0 < j->blk ? j->R - r0 : j->blk;
	return mm_rows(j->f, j->name, j->bias, r0, nr, j->C, j->X, j->f->T, j->Y, j->R, e);
}

/* Y [T x R] = X [T x C] W^T (+ bias) for all tokens, rows split over the threads. */
static int mm(const fwd *f, const char *name, const char *bias, const float *X, float *Y,
	      coli_err *e)
{
	int64_t R, C;
	if (f->src->shape(f->src, name, &R, &C))
		return coli_errf(e, COLI_EDATA, "%s: no such tensor", name);
	float *b = bias ? coli_malloc((size_t)R * sizeof(float), e) : NULL;
	if (bias && (!b || f->src->rows(f->src, bias, 0, 1, b, e))) {
		free(b);
		return -1;
	}
	int64_t parts = 4 * (int64_t)f->threads, blk = (R + parts - 1) / parts;
	mm_job j = {f, name, b, R, C, blk, X, Y};
	int rc = synth_parallel((int)((R + blk - 1) / blk), f->threads, mm_task, &j, e);
	free(b);
	return rc;
}

/* The layers' RMSNorms (a (1 + w) family's scale by 1 + the stored weight). */
static int rmsnorm(const fwd *f, const char *wname, const float *in, float *out, int n,
		   int64_t dim, int64_t ld, coli_err *e)
{
	float *w = coli_malloc((size_t)dim * sizeof(float), e);
	if (!w || f->src->rows(f->src, wname, 0, 1, w, e)) {
		free(w);
		return -1;
	}
	for (int64_t i = 0; f->m->norm_offset && i < dim; i++)
		w[i] += 1.0f;
	for (int t = 0; t < n; t++) {
		const float *a = in + t * ld;
		float ss = 0;
		for (int64_t i = 0; i < dim; i++)
			ss += a[i] * a[i];
		float inv = 1.0f / sqrtf(ss / (float)dim + (float)f->m->rms_norm_eps);
		for (int64_t i = 0; i < dim; i++)
			out[t * dim + i] = a[i] * inv * w[i];
	}
	free(w);
	return 0;
}

/* Rows of X (n x dim) in a fresh buffer of n x dim floats. */
static float *fbuf(int64_t n, int64_t dim, coli_err *e)
{
	return coli_malloc((size_t)(n * dim) * sizeof(float), e);
}

static void add_rows(float *h, const float *d, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		h[i] += d[i];
}

/* ---- attention of a one-token sequence ------------------------------------------------------- */

/* Gated attention: each head's output x sigmoid(its gate), the second half of the head's q_proj
 * rows [query | gate]. */
static int output_gate(fwd *f, const lnames *L, float *vr, coli_err *e)
{
	int64_t hd = f->m->head_dim, nh = f->m->n_heads;
	float *qg = fbuf(f->T, 2 * nh * hd, e);
	if (!qg || mm(f, L->q, NULL, f->x, qg, e)) {
		free(qg);
		return -1;
	}
	for (int64_t t = 0; t < f->T; t++)
		for (int64_t i = 0; i < nh * hd; i++)
			vr[t * nh * hd + i] *= sigmoid(qg[t * 2 * nh * hd + (2 * (i / hd) + 1) * hd + i % hd]);
	free(qg);
	return 0;
}

static int attn_gqa(fwd *f, const lnames *L, coli_err *e)
{
	const coli_model *m = f->m;
	int64_t hd = m->head_dim, nh = m->n_heads, nkv = m->n_kv_heads, T = f->T;
	float *v = fbuf(T, nkv * hd, e), *vr = v ? fbuf(T, nh * hd, e) : NULL;
	float *o = vr ? fbuf(T, f->H, e) : NULL;
	int rc = !o || mm(f, L->v, L->v_bias, f->x, v, e) ? -1 : 0;
	for (int64_t t = 0; rc == 0 && t < T; t++)
		for (int64_t q = 0; q < nh; q++) /* head q reads kv head q / (nh / nkv) */
			memcpy(vr + (t * nh + q) * hd, v + (t * nkv + q / (nh / nkv)) * hd,
			       (size_t)hd * sizeof(float));
	if (rc == 0 && m->attn_gate)
		rc = output_gate(f, L, vr, e);
	if (rc == 0 && (rc = mm(f, L->o, L->o_bias, vr, o, e)) == 0)
		add_rows(f->h, o, T * f->H);
	free(v);
	free(vr);
	free(o);
	return rc;
}

/* ---- Gated DeltaNet of a one-token sequence -------------------------------------------------- */

static void l2norm(float *x, int64_t n)
{
	float ss = 0;
	for (int64_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	float r = 1.0f / sqrtf(ss + 1e-6f);
	for (int64_t i = 0; i < n; i++)
		x[i] *= r;
}

typedef struct gdn_bufs {
	float *qkv, *z, *b, *taps, *w, *o, *out; /* [T][C], [T][vd], [T][v_heads], [C][K], [dv], [T][vd], [T][H] */
} gdn_bufs;

/* One token from a zero state: the conv's last tap and SiLU; q, k L2-normalised, q / sqrt(dk);
 * the delta rule's output sigmoid(b) (q . k) v per value head (its key head h / (Hv / Hk)); the
 * gated RMSNorm w x rmsnorm(o) x silu(z). */
static void gdn_token(const coli_model *m, const gdn_bufs *g, int64_t t)
{
	int64_t dk = m->lin_k_dim, dv = m->lin_v_dim, kd = m->lin_k_heads * dk, vd = m->lin_v_heads * dv;
	int64_t C = 2 * kd + vd, K = m->lin_conv, per = m->lin_v_heads / m->lin_k_heads;
	float *y = g->qkv + t * C, *o = g->o + t * vd;
	for (int64_t c = 0; c < C; c++)
		y[c] = silu(g->taps[c * K + K - 1] * y[c]);
	for (int64_t h = 0; h < m->lin_k_heads; h++) {
		l2norm(y + h * dk, dk);
		l2norm(y + kd + h * dk, dk);
	}
	for (int64_t h = 0; h < m->lin_v_heads; h++) {
		const float *q = y + h / per * dk, *k = y + kd + h / per * dk, *v = y + 2 * kd + h * dv;
		float s = sigmoid(g->b[t * m->lin_v_heads + h]) * dot(q, k, dk) / sqrtf((float)dk), ss = 0;
		for (int64_t i = 0; i < dv; i++)
			ss += (s * v[i]) * (s * v[i]);
		float inv = 1.0f / sqrtf(ss / (float)dv + (float)m->rms_norm_eps);
		for (int64_t i = 0; i < dv; i++)
			o[h * dv + i] = s * v[i] * inv * g->w[i] * silu(g->z[t * vd + h * dv + i]);
	}
}

static int attn_gdn(fwd *f, const lnames *L, coli_err *e)
{
	const coli_model *m = f->m;
	int64_t T = f->T, vd = (int64_t)m->lin_v_heads * m->lin_v_dim;
	int64_t C = 2 * (int64_t)m->lin_k_heads * m->lin_k_dim + vd;
	gdn_bufs g = {fbuf(T, C, e), fbuf(T, vd, e), fbuf(T, m->lin_v_heads, e), fbuf(C, m->lin_conv, e),
		      fbuf(1, m->lin_v_dim, e), fbuf(T, vd, e), fbuf(T, f->H, e)};
	int rc = !g.qkv || !g.z || !g.b || !g.taps || !g.w || !g.o || !g.out ||
			 mm(f, L->lin_qkv, NULL, f->x, g.qkv, e) || mm(f, L->lin_z, NULL, f->x, g.z, e) ||
			 mm(f, L->lin_b, NULL, f->x, g.b, e) || f->src->rows(f->src, L->lin_conv, 0, C, g.taps, e) ||
			 f->src->rows(f->src, L->lin_norm, 0, 1, g.w, e) ? -1 : 0;
	for (int64_t t = 0; rc == 0 && t < T; t++)
		gdn_token(m, &g, t);
	if (rc == 0 && (rc = mm(f, L->lin_out, NULL, g.o, g.out, e)) == 0)
		add_rows(f->h, g.out, T * f->H);
	free(g.qkv);
	free(g.z);
	free(g.b);
	free(g.taps);
	free(g.w);
	free(g.o);
	free(g.out);
	return rc;
}

static int attn_mla(fwd *f, const lnames *L, coli_err *e)
{
	const coli_model *m = f->m;
	int64_t T = f->T, nh = m->n_heads, nope = m->qk_nope_head_dim, vd = m->v_head_dim;
	int64_t kva = m->kv_lora_rank + m->qk_rope_head_dim, kvl = m->kv_lora_rank;
	float *ckv = fbuf(T, kva, e), *c = ckv ? fbuf(T, kvl, e) : NULL;
	float *kvb = c ? fbuf(T, nh * (nope + vd), e) : NULL;
	float *vc = kvb ? fbuf(T, nh * vd, e) : NULL;
	float *o = vc ? fbuf(T, f->H, e) : NULL;
	int rc = !o || mm(f, L->kv_a, L->kv_a_bias, f->x, ckv, e) ||
			 rmsnorm(f, L->kv_norm, ckv, c, (int)T, kvl, kva, e) ||
			 mm(f, L->kv_b, NULL, c, kvb, e) ? -1 : 0;
	for (int64_t t = 0; rc == 0 && t < T; t++)
		for (int64_t q = 0; q < nh; q++) /* per head [k_nope | v]: keep v */
			memcpy(vc + (t * nh + q) * vd, kvb + (t * nh + q) * (nope + vd) + nope,
			       (size_t)vd * sizeof(float));
	if (rc == 0 && (rc = mm(f, L->o, L->o_bias, vc, o, e)) == 0)
		add_rows(f->h, o, T * f->H);
	free(ckv);
	free(c);
	free(kvb);
	free(vc);
	free(o);
	return rc;
}

static int attention(fwd *f, const lnames *L, coli_err *e)
{
	if (rmsnorm(f, L->in_norm, f->h, f->x, f->T, f->H, f->H, e))
		return -1;
	if (L->lin_qkv)
		return attn_gdn(f, L, e);
	return f->m->attn == COLI_ATTN_MLA ? attn_mla(f, L, e) : attn_gqa(f, L, e);
}

/* ---- MLPs ------------------------------------------------------------------------------------ */

/* out [T x H] = down(silu(gate X) * up X) for all tokens. */
static int swiglu_all(fwd *f, const char *const names[3], const float *X, float *out,
		      coli_err *e)
{
	int64_t F, C;
	if (f->src->shape(f->src, names[0], &F, &C))
		return coli_errf(e, COLI_EDATA, "%s: no such tensor", names[0]);
	float *g = fbuf(f->T, F, e), *u = g ? fbuf(f->T, F, e) : NULL;
	int rc = !u || mm(f, names[0], NULL, X, g, e) || mm(f, names[1], NULL, X, u, e) ? -1 : 0;
	for (int64_t i = 0; rc == 0 && i < f->T * F; i++)
		g[i] = silu(g[i]) * u[i];
	if (rc == 0)
		rc = mm(f, names[2], NULL, g, out, e);
	free(g);
	free(u);
	return rc;
}

typedef struct ex_job {
	fwd *f;
	const lnames *L;
	int *ids, *start, *cnt, *pairs; /* pairs: t * k + slot, grouped by expert */
} ex_job;

/* One expert over the tokens routed to it: y[t][slot] = expert(x[t]). */
static int ex_task(void *ctx, int i, coli_err *e)
{
	ex_job *j = ctx;
	fwd *f = j->f;
	int x = j->ids[i], n = j->cnt[x];
	const int *pr = j->pairs + j->start[x];
	const char *const *nm = j->L->expert + 3 * x;
	int64_t F, C, H = f->H;
	if (f->src->shape(f->src, nm[0], &F, &C))
		return coli_errf(e, COLI_EDATA, "%s: no such tensor", nm[0]);
	float *X = fbuf(n, H, e), *g = X ? fbuf(n, F, e) : NULL, *u = g ? fbuf(n, F, e) : NULL;
	float *Y = u ? fbuf(n, H, e) : NULL;
	for (int q = 0; Y && q < n; q++)
		memcpy(X + q * H, f->x + (pr[q] / f->k) * H, (size_t)H * sizeof(float));
	int rc = !Y || mm_rows(f, nm[0], NULL, 0, F, H, X, n, g, F, e) ||
			 mm_rows(f, nm[1], NULL, 0, F, H, X, n, u, F, e) ? -1 : 0;
	for (int64_t q = 0; rc == 0 && q < n * F; q++)
		g[q] = silu(g[q]) * u[q];
	if (rc == 0 && (rc = mm_rows(f, nm[2], NULL, 0, H, F, g, n, Y, H, e)) == 0)
		for (int q = 0; q < n; q++)
			memcpy(f->y + (int64_t)pr[q] * H, Y + q * H, (size_t)H * sizeof(float));
	free(X);
	free(g);
	free(u);
	free(Y);
	return rc;
}

/* Groups (token, slot) pairs by expert and runs the used experts in parallel. */
static int experts(fwd *f, const lnames *L, coli_err *e)
{
	int E = f->E, n = f->T * f->k, used = 0;
	int *buf = coli_calloc((size_t)(3 * E + n + E), sizeof(int), e);
	if (!buf)
		return -1;
	ex_job j = {f, L, buf, buf + E, buf + 2 * E, buf + 3 * E};
	for (int i = 0; i < n; i++)
		j.cnt[f->sel[i]]++;
	for (int x = 0, s = 0; x < E; s += j.cnt[x], x++) {
		j.start[x] = s;
		if (j.cnt[x])
			j.ids[used++] = x;
	}
	int *fillp = buf + 3 * E + n;
	for (int i = 0; i < n; i++)
		j.pairs[j.start[f->sel[i]] + fillp[f->sel[i]]++] = i;
	int rc = synth_parallel(used, f->threads, ex_task, &j, e);
	free(buf);
	return rc;
}

/* ---- routing --------------------------------------------------------------------------------- */

static int load_router(fwd *f, const lnames *L, coli_err *e)
{
	if (!L->router)
		return coli_errf(e, COLI_EDATA, "layer router: no such tensor");
	if (f->src->rows(f->src, L->router, 0, f->E, f->router, e))
		return -1;
	return L->corr ? f->src->rows(f->src, L->corr, 0, 1, f->corr, e) : 0;
}

/* Routes every token of X (already normalized) with the loaded router. */
static void route_all(fwd *f, const lnames *L, const float *X, int *sel, float *w)
{
	float z[4096], tmp[8192];
	for (int t = 0; t < f->T; t++) {
		for (int x = 0; x < f->E; x++)
			z[x] = dot(f->router + (int64_t)x * f->H, X + (int64_t)t * f->H, f->H);
		synth_route(f->m, z, L->corr ? f->corr : NULL, sel + t * f->k, w + t * f->k, tmp);
	}
}

static double overlap(const int *a, const int *b, int k)
{
	int hit = 0;
	for (int i = 0; i < k; i++)
		for (int j = 0; j < k; j++)
			hit += a[i] == b[j];
	return (double)hit / k;
}

/* Mean recall of sel by the routing of a predictor state (normalized with this layer's norm). */
static int recall(fwd *f, const lnames *L, const float *state, double *out, coli_err *e)
{
	if (rmsnorm(f, L->post_norm, state, f->xs, f->T, f->H, f->H, e))
		return -1;
	route_all(f, L, f->xs, f->sel2, f->wsel2);
	double s = 0;
	for (int t = 0; t < f->T; t++)
		s += overlap(f->sel2 + t * f->k, f->sel + t * f->k, f->k);
	*out = s / f->T;
	return 0;
}

static int layer_stats(fwd *f, stats *s, coli_err *e)
{
	double *c = coli_calloc((size_t)f->E, sizeof(*c), e), prev = 0;
	if (!c)
		return -1;
	s->moe = 1;
	for (int i = 0; i < f->T * f->k; i++)
		c[f->sel[i]] += 1;
	for (int x = 0; x < f->E; x++)
		s->used += c[x] > 0;
	s->zipf = synth_zipf_fit(c, f->E);
	s->top = synth_top_share(c, f->E);
	for (int t = 1; t < f->T; t++)
		prev += overlap(f->sel + t * f->k, f->sel + (t - 1) * f->k, f->k);
	s->prev = f->T > 1 ? prev / (f->T - 1) : 0;
	free(c);
	return 0;
}

/* ---- layers ---------------------------------------------------------------------------------- */

/* qwen3_5_moe: the shared expert's output sh [T x H] x sigmoid(shared_expert_gate . x). */
static int gate_shared(fwd *f, const lnames *L, float *sh, coli_err *e)
{
	float *g = fbuf(f->T, 1, e);
	if (!g || mm(f, L->sh_gate, NULL, f->x, g, e)) {
		free(g);
		return -1;
	}
	for (int64_t t = 0; t < f->T; t++)
		for (int64_t i = 0; i < f->H; i++)
			sh[t * f->H + i] *= sigmoid(g[t]);
	free(g);
	return 0;
}

/* h += sum_k w_k y_k (+ shared experts). */
static int moe_out(fwd *f, const lnames *L, coli_err *e)
{
	int64_t H = f->H;
	float *sh = L->shared[0] ? fbuf(f->T, H, e) : NULL;
	if (L->shared[0] && (!sh || swiglu_all(f, L->shared, f->x, sh, e) ||
			     (L->sh_gate && gate_shared(f, L, sh, e)))) {
		free(sh);
		return -1;
	}
	for (int64_t t = 0; t < f->T; t++) {
		float *h = f->h + t * H;
		for (int s = 0; s < f->k; s++) {
			const float *y = f->y + (t * f->k + s) * H;
			float w = f->wsel[t * f->k + s];
			for (int64_t i = 0; i < H; i++)
				h[i] += w * y[i];
		}
		if (sh)
			add_rows(h, sh + t * H, H);
	}
	free(sh);
	return 0;
}

static int moe_layer(fwd *f, int l, coli_err *e)
{
	const lnames *L = &f->ln[l];
	stats *s = &f->st[l];
	size_t bytes = (size_t)f->T * (size_t)f->H * sizeof(float);
	if (load_router(f, L, e) || rmsnorm(f, L->post_norm, f->h, f->x, f->T, f->H, f->H, e))
		return -1;
	route_all(f, L, f->x, f->sel, f->wsel);
	if (layer_stats(f, s, e))
		return -1;
	if (f->have_prev) {
		if (recall(f, L, f->pre, &s->rec_in, e) || recall(f, L, f->post, &s->rec_out, e))
			return -1;
		s->has_rec = 1;
	}
	memcpy(f->pre, f->h, bytes);
	if (experts(f, L, e) || moe_out(f, L, e))
		return -1;
	memcpy(f->post, f->h, bytes);
	f->have_prev = 1;
	return 0;
}

static int dense_layer(fwd *f, int l, coli_err *e)
{
	const lnames *L = &f->ln[l];
	float *d = fbuf(f->T, f->H, e);
	int rc = !d || rmsnorm(f, L->post_norm, f->h, f->x, f->T, f->H, f->H, e) ||
			 swiglu_all(f, L->dense, f->x, d, e) ? -1 : 0;
	if (rc == 0)
		add_rows(f->h, d, (int64_t)f->T * f->H);
	free(d);
	f->have_prev = 0;
	return rc;
}

/* ---- driver ---------------------------------------------------------------------------------- */

static int fwd_init(fwd *f, const synth_src *src, const synth_measure_opts *o, coli_err *e)
{
	memset(f, 0, sizeof(*f));
	f->src = src;
	f->m = src->m;
	f->T = o->tokens;
	f->H = f->m->hidden_size;
	f->E = f->m->n_experts;
	f->k = f->m->top_k;
	f->threads = o->threads;
	if (f->E > 4096)
		return coli_errf(e, COLI_EUSAGE, "measuring: %d experts exceeds 4096", f->E);
	int64_t TH = (int64_t)f->T * f->H, Tk = (int64_t)f->T * f->k;
	if (names_build(f, e) || !(f->h = fbuf(TH, 1, e)) || !(f->x = fbuf(TH, 1, e)) ||
	    !(f->xs = fbuf(TH, 1, e)) || !(f->pre = fbuf(TH, 1, e)) || !(f->post = fbuf(TH, 1, e)) ||
	    !(f->y = fbuf(TH, f->k, e)) || !(f->router = fbuf(f->E, f->H, e)) ||
	    !(f->corr = fbuf(f->E, 1, e)) || !(f->wsel = fbuf(Tk, 1, e)) ||
	    !(f->wsel2 = fbuf(Tk, 1, e)) || !(f->sel = coli_malloc((size_t)Tk * sizeof(int), e)) ||
	    !(f->sel2 = coli_malloc((size_t)Tk * sizeof(int), e)) ||
	    !(f->st = coli_calloc((size_t)f->m->n_layers, sizeof(stats), e)))
		return -1;
	return 0;
}

static void fwd_release(fwd *f)
{
	for (int l = 0; f->ln && l < f->m->n_layers; l++)
		free(f->ln[l].expert);
	free(f->ln);
	free(f->spec);
	free(f->h);
	free(f->x);
	free(f->xs);
	free(f->pre);
	free(f->post);
	free(f->y);
	free(f->router);
	free(f->corr);
	free(f->wsel);
	free(f->wsel2);
	free(f->sel);
	free(f->sel2);
	free(f->st);
}

/* Embedding rows of T token ids drawn uniformly from the vocabulary. */
static int embed(fwd *f, uint64_t seed, coli_err *e)
{
	uint64_t key = synth_key(seed, "synth.measure.tokens");
	for (int t = 0; t < f->T; t++) {
		int64_t id = (int64_t)(synth_rand64(key, (uint64_t)t) % (uint64_t)f->m->vocab_size);
		if (f->src->rows(f->src, "model.embed_tokens.weight", id, 1,
				 f->h + (int64_t)t * f->H, e))
			return -1;
	}
	return 0;
}

static void print_row(const char *label, double used, int E, const stats *s, int has_rec)
{
	printf("| %s | %.1f/%d | %.2f | %.2f | %.2f |", label, used, E, s->zipf, s->top, s->prev);
	if (has_rec)
		printf(" %.2f | %.2f |\n", s->rec_in, s->rec_out);
	else
		printf(" - | - |\n");
}

/* Mean over MoE layers (recall: over layers that have a previous MoE layer). */
static void print_mean(const fwd *f)
{
	stats m = {0};
	double used = 0;
	int n = 0, nr = 0;
	for (int l = 0; l < f->m->n_layers; l++) {
		const stats *s = &f->st[l];
		if (!s->moe)
			continue;
		n++;
		used += s->used;
		m.zipf += s->zipf;
		m.top += s->top;
		m.prev += s->prev;
		if (s->has_rec) {
			nr++;
			m.rec_in += s->rec_in;
			m.rec_out += s->rec_out;
		}
	}
	n = n ? n : 1;
	m.zipf /= n;
	m.top /= n;
	m.prev /= n;
	m.rec_in /= nr ? nr : 1;
	m.rec_out /= nr ? nr : 1;
	print_row("mean", used / n, f->E, &m, nr > 0);
}

static void print_table(const fwd *f, const synth_measure_opts *o)
{
	if (o->quiet) /* -q: nothing on stdout (the table is what --measure-only is for) */
		return;
	printf("routing of %d random tokens, each run as a one-token sequence "
	       "(attention = o_proj(v_proj(x)); tokens do not mix)\n\n", f->T);
	printf("| layer | experts used | zipf fit | top-10%% share | prev-token overlap | "
	       "recall from MoE input | recall from layer output |\n");
	printf("|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int l = 0; l < f->m->n_layers; l++) {
		char label[16];
		snprintf(label, sizeof(label), "%d", l);
		if (f->st[l].moe)
			print_row(label, f->st[l].used, f->E, &f->st[l], f->st[l].has_rec);
	}
	print_mean(f);
	const synth_plan *p = o->plan;
	if (p)
		printf("\ntarget: zipf %.2f, predict %.2f; router Monte Carlo: zipf %.2f, recall %.2f "
		       "(bias scale %.4f, logit noise %.4f)\n", p->zipf, p->predict, p->mc_zipf,
		       p->mc_recall, p->gamma, p->r_eff);
	fflush(stdout);
}

int synth_measure(const synth_src *src, const synth_measure_opts *o, coli_err *e)
{
	fwd f;
	if (src->m->family == COLI_FAM_DEEPSEEK_V4) /* mHC streams, windows, hash layers: not modelled here */
		return coli_errf(e, COLI_EUSAGE, "the routing measurement does not run deepseek_v4's blocks; convert the "
				 "checkpoint and count its routing with coli-run --usage");
	int rc = fwd_init(&f, src, o, e) || embed(&f, o->seed, e) ? -1 : 0;
	for (int l = 0; rc == 0 && l < f.m->n_layers; l++) {
		if (synth_interrupted)
			rc = coli_errf(e, COLI_EIO, "interrupted");
		else if (attention(&f, &f.ln[l], e))
			rc = -1;
		else
			rc = f.m->is_moe[l] ? moe_layer(&f, l, e) : dense_layer(&f, l, e);
	}
	if (rc == 0)
		print_table(&f, o);
	fwd_release(&f);
	return rc;
}
