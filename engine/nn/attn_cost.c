/* attn_cost.c: what decode's attention core costs, for coli-plan's model: its multiply-adds per
 * token and a timing of the engine's own inner loop (attn_head). */
#include <stdlib.h>

#include "clock.h"
#include "engine.h"
#include "nn/attention.h"

/* Positions one layer's attention looks at from pos: every earlier one, or DSA's index_topk. */
static double attended(const coli_model *c, int pos)
{
	return c->index_topk && pos + 1 > c->index_topk ? c->index_topk : pos + 1.0;
}

/* Layers that run the DSA indexer (none without one). */
static int index_layers(const coli_model *c)
{
	int n = 0;
	for (int l = 0; c->index_topk && l < c->n_layers; l++)
		n += c->index_full[l];
	return n;
}

/* deepseek_v4's keys one query of layer l looks at from pos: the window's, and the compressed
 * rows complete so far (CSA: the indexer's index_topk best of them). */
static double v4_keys(const coli_model *c, int l, int pos)
{
	double window = pos + 1 < c->sliding_window ? pos + 1.0 : c->sliding_window;
	int r = c->compress[l];
	double rows = r ? (double)((pos + 1) / r) : 0;
	return window + (c->index_full[l] && rows > c->index_topk ? c->index_topk : rows);
}

/* deepseek_v4's CSA rows the indexer scores at pos, over its layers. */
static double v4_scanned(const coli_model *c, int pos)
{
	double n = 0;
	for (int l = 0; l < c->n_layers; l++)
		n += c->index_full[l] ? (double)((pos + 1) / c->compress[l]) : 0;
	return n;
}

double coli_attn_decode_fmas(const coli_model *c, int pos, int *threaded)
{
	double per; /* multiply-adds per (query head, cached position) */
	if (c->attn == COLI_ATTN_V4) { /* one shared KV head: scores and values over head_dim each */
		double keys = 0;
		for (int l = 0; l < c->n_layers; l++)
			keys += v4_keys(c, l, pos);
		/* the engine shares blocks of heads out once heads x keys x head_dim reaches the
		 * threshold; every layer attends at least its window's keys */
		int win = pos + 1 < c->sliding_window ? pos + 1 : c->sliding_window;
		*threaded = (double)c->n_heads * win * c->head_dim >= COLI_ATTN_THREAD_WORK;
		return keys * c->n_heads * 2.0 * c->head_dim;
	}
	if (c->attn == COLI_ATTN_MLA) {
		per = 2.0 * c->kv_lora_rank + c->qk_rope_head_dim; /* scores on the latent and the rope part, values */
		*threaded = 0;
	} else {
		per = 2.0 * c->head_dim;
		*threaded = (double)c->n_heads * (pos + 1) * c->head_dim >= COLI_ATTN_THREAD_WORK;
	}
	int layers = 0; /* attention layers (a Gated DeltaNet's cost is coli_attn_linear_fmas) */
	for (int l = 0; l < c->n_layers; l++)
		layers += !c->is_linear[l];
	return (double)layers * c->n_heads * attended(c, pos) * per;
}

double coli_attn_linear_fmas(const coli_model *c)
{
	int layers = 0;
	for (int l = 0; l < c->n_layers; l++)
		layers += c->is_linear[l];
	/* per value head and element of its state: the decay, S^T k, the update and S^T q (one pass) */
	return (double)layers * c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * 4.0;
}

double coli_attn_index_fmas(const coli_model *c, int pos)
{
	if (c->attn == COLI_ATTN_V4) /* every complete CSA row scored by every index head */
		return v4_scanned(c, pos) * c->index_n_heads * c->index_head_dim;
	if (!c->index_topk || pos + 1 <= c->index_topk) /* every position attended: no scan */
		return 0;
	return (double)index_layers(c) * (pos + 1.0) * c->index_n_heads * c->index_head_dim;
}

double coli_attn_decode_bytes(const coli_model *c, int pos)
{
	coli_state_part p[COLI_STATE_LAYER_MAX];
	if (c->attn == COLI_ATTN_V4) { /* the keys attended, the index rows scanned (the windows' few rows aside) */
		double keys = 0;
		for (int l = 0; l < c->n_layers; l++)
			keys += v4_keys(c, l, pos);
		return sizeof(float) * (keys * c->head_dim + v4_scanned(c, pos) * c->index_head_dim);
	}
	double b = 0, scanned = coli_attn_index_fmas(c, pos) > 0 ? pos + 1.0 : 0, rows = attended(c, pos);
	for (int l = 0; l < c->n_layers; l++) {
		int n = coli_model_state_range(c, l, l + 1, p);
		for (int i = 0; i < n; i++) /* the index keys are all scanned, the rest only where attended */
			b += (double)p[i].width * sizeof(float) * (p[i].kind == COLI_STATE_INDEX_KEY ? scanned : rows) +
			     2.0 * sizeof(float) * p[i].fixed; /* a fixed part is read and written once a token */
	}
	return b;
}

double coli_attn_core_rate(int hd, int n, double seconds)
{
	float *k = malloc((size_t)n * hd * sizeof(float)), *v = malloc((size_t)n * hd * sizeof(float));
	float *q = malloc((size_t)hd * sizeof(float)), *out = malloc((size_t)hd * sizeof(float));
	float *att = malloc((size_t)n * sizeof(float));
	double rate = 0;
	if (k && v && q && out && att) {
		for (int64_t i = 0; i < (int64_t)n * hd; i++)
			k[i] = (float)(i % 17) / 17 - 0.5f, v[i] = (float)(i % 13) / 13 - 0.5f;
		for (int i = 0; i < hd; i++)
			q[i] = (float)(i % 7) / 7 - 0.5f;
		long calls = 0;
		double t0 = coli_now(), end = t0 + seconds;
		for (; calls < 16 || coli_now() < end; calls++)
			attn_head(&(attn_part){q, k, hd, hd}, NULL, v, hd, hd, n, 0.088f, att, out);
		rate = (double)calls * n * 2.0 * hd / (coli_now() - t0);
	}
	free(k), free(v), free(q), free(out), free(att);
	return rate;
}
