/* dsa.c: the DSA lightning indexer: its keys (per-token state of "full" layers), its scores over
 * every earlier position, and the top index_topk selection that the MLA attention then reads. */
#include "nn/dsa.h"

#include <math.h>
#include <string.h>

#include "nn/blocks.h"
#include "nn/rope.h"
#include "nn/ws.h"

/* LayerNorm with weight and bias (torch's, float32, biased variance), in place. */
static void layernorm(float *x, const float *w, const float *b, int n, float eps)
{
	float mean = 0, var = 0;
	for (int i = 0; i < n; i++)
		mean += x[i];
	mean /= (float)n;
	for (int i = 0; i < n; i++)
		var += (x[i] - mean) * (x[i] - mean);
	float r = 1.0f / sqrtf(var / (float)n + eps);
	for (int i = 0; i < n; i++)
		x[i] = (x[i] - mean) * r * w[i] + b[i];
}

/* One query's scores over a range of positions, shared out over the kernels' threads. */
typedef struct score_job {
	const float *q, *w, *keys; /* [heads][hd], [heads], [positions][hd] */
	int heads, hd;
	float scale;
	float *out;
} score_job;

static void score_range(void *arg, int64_t begin, int64_t end)
{
	const score_job *j = arg;
	for (int64_t s = begin; s < end; s++) {
		const float *k = j->keys + s * j->hd;
		float acc = 0;
		for (int h = 0; h < j->heads; h++) {
			float x = dot(j->q + (int64_t)h * j->hd, k, j->hd) * j->scale;
			acc += j->w[h] * (x > 0 ? x : 0);
		}
		j->out[s] = acc;
	}
}

/* The k-th largest of x[0..n) (1 <= k <= n), x reordered (quickselect, middle pivot). */
static float kth_largest(float *x, int n, int k)
{
	int lo = 0, hi = n - 1, want = k - 1;
	while (lo < hi) {
		float p = x[lo + (hi - lo) / 2];
		int i = lo, j = hi;
		while (i <= j) {
			while (x[i] > p)
				i++;
			while (x[j] < p)
				j--;
			if (i <= j) {
				float t = x[i];
				x[i++] = x[j];
				x[j--] = t;
			}
		}
		if (want <= j)
			hi = j;
		else if (want >= i)
			lo = i;
		else
			return x[want];
	}
	return x[want];
}

int dsa_top(const float *scores, int n, int k, float *tmp, int32_t *out)
{
	if (k >= n) {
		for (int s = 0; s < n; s++)
			out[s] = s;
		return n;
	}
	memcpy(tmp, scores, (size_t)n * sizeof(float));
	float v = kth_largest(tmp, n, k);
	int above = 0, got = 0;
	for (int s = 0; s < n; s++)
		above += scores[s] > v;
	for (int s = 0, ties = k - above; s < n && got < k; s++) /* ascending: ties go to the lower positions */
		if (scores[s] > v || (scores[s] == v && ties-- > 0))
			out[got++] = s;
	return got;
}

/* The batch's index keys appended to the layer's cache: wk x, LayerNorm (eps 1e-6), RoPE on the
 * first rope dims. */
static void index_keys(const coli_engine *m, const layer_w *L, coli_kv *kv, int l, const float *X, int n)
{
	int hd = m->cfg->index_head_dim;
	float *K = kv->ix[l] + (int64_t)kv->n * hd; /* [n][hd] */
	coli_mat_mul(m->kc, &L->idx_wk, X, n, K);
	for (int i = 0; i < n; i++) {
		layernorm(K + (int64_t)i * hd, L->idx_k_norm, L->idx_k_bias, hd, 1e-6f);
		rope_apply(m->rope, K + (int64_t)i * hd, 1, 0, kv->n + i);
	}
}

void dsa_index(const coli_engine *m, const layer_w *L, coli_kv *kv, int l, const float *X, const float *QA, int n)
{
	const coli_model *c = m->cfg;
	fwd_ws *w = m->ws;
	int H = c->index_n_heads, hd = c->index_head_dim, K = c->index_topk;
	if (!L->idx_wk.rows)
		return; /* a shared layer: the previous full layer's selection stands */
	index_keys(m, L, kv, l, X, n);
	int scan = 0;
	for (int i = 0; i < n; i++) { /* -1: every earlier position is attended, no scan */
		w->nsel[i] = kv->n + i + 1 <= K || m->dsa_dense ? -1 : 0;
		scan |= w->nsel[i] == 0;
	}
	if (!scan)
		return;
	float head_scale = 1.0f / sqrtf((float)H), key_scale = 1.0f / sqrtf((float)hd);
	coli_mat_mul(m->kc, &L->idx_wq_b, QA, n, w->IQ);
	coli_mat_mul(m->kc, &L->idx_weights, X, n, w->IW);
	for (int i = 0; i < n; i++) {
		if (w->nsel[i] < 0)
			continue;
		int pos = kv->n + i;
		float *q = w->IQ + (int64_t)i * H * hd, *wt = w->IW + (int64_t)i * H;
		rope_apply(m->rope, q, H, hd, pos);
		for (int h = 0; h < H; h++)
			wt[h] *= head_scale;
		score_job j = {q, wt, kv->ix[l], H, hd, key_scale, kv->iscore};
		int64_t work = (int64_t)(pos + 1) * H * hd;
		if (work < (1 << 20))
			score_range(&j, 0, pos + 1);
		else
			coli_kernels_for(m->kc, pos + 1, (pos + 1) / (4 * coli_kernels_threads(m->kc)) + 1, score_range, &j);
		w->nsel[i] = dsa_top(kv->iscore, pos + 1, K, kv->iscore + kv->cap, w->sel + (int64_t)i * K);
	}
}
