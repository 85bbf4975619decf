/* gdn.c: the Gated DeltaNet block: projections, the causal depthwise conv with its state, the
 * gated delta rule on a per-layer recurrent state, the gated RMSNorm and the output projection. */
#include "nn/gdn.h"

#include <math.h>
#include <string.h>

#include "kernels/pool.h"
#include "nn/blocks.h"
#include "nn/kv.h"
#include "nn/weights.h"
#include "nn/ws.h"

static float sigmoidf(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

static float siluf(float x)
{
	return x / (1.0f + expf(-x));
}

/* torch.nn.functional.softplus (beta 1, threshold 20). */
static float softplusf(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

/* x * rsqrt(sum(x^2) + 1e-6), as the reference's l2norm (float32). */
static void l2norm(float *x, int n)
{
	float ss = 0;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	float r = 1.0f / sqrtf(ss + 1e-6f);
	for (int i = 0; i < n; i++)
		x[i] *= r;
}

/* The conv state after n more raw rows R[n][C]: the last K - 1 inputs of state + R. */
static void conv_slide(float *state, const float *R, int n, int C, int K)
{
	int keep = K - 1;
	for (int s = 0; s < keep; s++) {
		int t = n - keep + s; /* its index in R, or < 0: in the old state */
		const float *src = t >= 0 ? R + (int64_t)t * C : state + (int64_t)(t + keep) * C;
		memmove(state + (int64_t)s * C, src, (size_t)C * sizeof(float));
	}
}

/* The causal depthwise conv over the batch's raw rows R[n][C] with the state's last K - 1
 * inputs before them, SiLU: into Y[n][C]; then the state keeps the last K - 1 inputs. */
static void conv(const float *taps, float *state, const float *R, int n, int C, int K, float *Y)
{
	for (int i = 0; i < n; i++)
		for (int c = 0; c < C; c++) {
			float acc = 0;
			for (int j = 0; j < K; j++) {
				int t = i - (K - 1) + j; /* the input j taps back; < 0: in the state */
				float x = t >= 0 ? R[(int64_t)t * C + c] : state[(int64_t)(t + K - 1) * C + c];
				acc += taps[(int64_t)c * K + j] * x;
			}
			Y[(int64_t)i * C + c] = siluf(acc);
		}
	conv_slide(state, R, n, C, K);
}

void gdn_step(float *S, const float *q, const float *k, const float *v, float g, float beta, int dk, int dv, float *o)
{
	float decay = expf(g), mem[4096]; /* dv <= 4096 (linear_value_head_dim's bound) */
	for (int j = 0; j < dv; j++)
		mem[j] = 0;
	for (int i = 0; i < dk; i++) { /* decay, and kv_mem = S^T k */
		float *row = S + (int64_t)i * dv;
		for (int j = 0; j < dv; j++) {
			row[j] *= decay;
			mem[j] += row[j] * k[i];
		}
	}
	for (int j = 0; j < dv; j++) {
		mem[j] = (v[j] - mem[j]) * beta; /* delta */
		o[j] = 0;
	}
	for (int i = 0; i < dk; i++) { /* S += k delta^T; o = S^T q */
		float *row = S + (int64_t)i * dv;
		for (int j = 0; j < dv; j++) {
			row[j] += k[i] * mem[j];
			o[j] += row[j] * q[i];
		}
	}
}

/* The value heads of one token shared out over the kernels' threads. */
typedef struct heads_job {
	const coli_engine *m;
	float *S;                 /* [v_heads][dk][dv] */
	const float *Y, *B, *A;   /* the token's conv output [C], b [v_heads], a [v_heads] */
	const float *a_log, *dt_bias;
	float *O;                 /* [v_heads][dv] */
} heads_job;

static void heads(void *arg, int64_t begin, int64_t end)
{
	const heads_job *j = arg;
	const coli_model *c = j->m->cfg;
	int dk = c->lin_k_dim, dv = c->lin_v_dim, kd = c->lin_k_heads * dk, per = c->lin_v_heads / c->lin_k_heads;
	for (int64_t h = begin; h < end; h++) {
		const float *q = j->Y + (h / per) * dk, *k = j->Y + kd + (h / per) * dk, *v = j->Y + 2 * kd + h * dv;
		float g = -expf(j->a_log[h]) * softplusf(j->A[h] + j->dt_bias[h]);
		gdn_step(j->S + h * dk * dv, q, k, v, g, sigmoidf(j->B[h]), dk, dv, j->O + h * dv);
	}
}

/* q and k of each key head L2-normalised, q scaled by 1/sqrt(dk), in the conv output Y[C]. */
static void norm_qk(const coli_model *c, float *Y)
{
	int dk = c->lin_k_dim, kd = c->lin_k_heads * dk;
	float scale = 1.0f / sqrtf((float)dk);
	for (int h = 0; h < c->lin_k_heads; h++) {
		float *q = Y + h * dk, *k = Y + kd + h * dk;
		l2norm(q, dk);
		l2norm(k, dk);
		for (int i = 0; i < dk; i++)
			q[i] *= scale;
	}
}

/* The gated RMSNorm of each value head of O[v_heads][dv]: weight x rmsnorm(o) x silu(z). */
static void gated_norm(const coli_model *c, const float *w, float *O, const float *Z)
{
	int dv = c->lin_v_dim;
	for (int h = 0; h < c->lin_v_heads; h++) {
		float *o = O + (int64_t)h * dv;
		const float *z = Z + (int64_t)h * dv;
		rmsnorm(o, o, w, dv, (float)c->rms_norm_eps);
		for (int i = 0; i < dv; i++)
			o[i] *= siluf(z[i]);
	}
}

int attn_gdn(const coli_engine *m, int l, coli_kv *kv, const float *X, int n, float *out, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[l];
	fwd_ws *w = m->ws;
	int Hv = c->lin_v_heads, dv = c->lin_v_dim, vd = Hv * dv;
	int C = 2 * c->lin_k_heads * c->lin_k_dim + vd;
	(void)e;
	mat_mul(m->kc, &L->lin_qkv, X, n, w->LR);
	mat_mul(m->kc, &L->lin_z, X, n, w->LZ);
	mat_mul(m->kc, &L->lin_b, X, n, w->LB);
	mat_mul(m->kc, &L->lin_a, X, n, w->LA);
	conv((const float *)(const void *)L->lin_conv.codes, kv->conv[l], w->LR, n, C, c->lin_conv, w->LY);
	int64_t work = (int64_t)Hv * c->lin_k_dim * dv;
	for (int i = 0; i < n; i++) {
		float *Y = w->LY + (int64_t)i * C, *O = w->LO + (int64_t)i * vd;
		norm_qk(c, Y);
		kv_keep_rows(kv, c, l, i, w->LR + (int64_t)i * C, Y, w->LB + (int64_t)i * Hv, w->LA + (int64_t)i * Hv);
		heads_job j = {m, kv->rec[l], Y, w->LB + (int64_t)i * Hv, w->LA + (int64_t)i * Hv, L->lin_a_log, L->lin_dt_bias, O};
		if (work < (1 << 18))
			heads(&j, 0, Hv);
		else
			coli_kernels_for(m->kc, Hv, Hv / (2 * coli_kernels_threads(m->kc)) + 1, heads, &j);
		gated_norm(c, L->lin_norm, O, w->LZ + (int64_t)i * vd);
	}
	mat_mul(m->kc, &L->lin_out, w->LO, n, out);
	return 0;
}

void gdn_replay(const coli_engine *m, coli_kv *kv, int l, int steps)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[l];
	kv_keep *k = kv->keep;
	int Hv = c->lin_v_heads, C = 2 * c->lin_k_heads * c->lin_k_dim + Hv * c->lin_v_dim;
	conv_slide(kv->conv[l], k->R[l], steps, C, c->lin_conv);
	for (int i = 0; i < steps; i++) { /* the outputs land in scratch: only the state matters */
		heads_job j = {m, kv->rec[l], k->Y[l] + (int64_t)i * C, k->B[l] + (int64_t)i * Hv, k->A[l] + (int64_t)i * Hv,
			       L->lin_a_log, L->lin_dt_bias, m->ws->LO};
		heads(&j, 0, Hv);
	}
}
