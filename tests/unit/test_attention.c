/* test_attention.c: decode attention's core and its cost as the planner reads it: attn_head
 * against a double-precision reference (head dims and position counts off the 16- and 4-wide
 * blocks too), the multiply-adds per token counted by hand for GQA and MLA shapes, the
 * threading threshold, and a timing that gives a rate. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "model.h"
#include "nn/attention.h"
#include "t.h"

/* softmax(q.k * scale) . v in double, for one head. */
static void reference(const float *q, const float *k, const float *v, int stride, int hd, int n, float scale, double *out)
{
	double *a = malloc((size_t)n * sizeof(*a)), mx = -INFINITY, sum = 0;
	for (int t = 0; t < n; t++) {
		a[t] = 0;
		for (int d = 0; d < hd; d++)
			a[t] += (double)q[d] * k[t * stride + d];
		a[t] *= scale;
		mx = a[t] > mx ? a[t] : mx;
	}
	for (int t = 0; t < n; t++)
		sum += a[t] = exp(a[t] - mx);
	for (int d = 0; d < hd; d++) {
		out[d] = 0;
		for (int t = 0; t < n; t++)
			out[d] += a[t] / sum * v[t * stride + d];
	}
	free(a);
}

static void check_head(int hd, int n)
{
	int stride = hd + 3; /* keys and values of one KV head among others */
	float *k = malloc((size_t)n * stride * sizeof(float)), *v = malloc((size_t)n * stride * sizeof(float));
	float *q = malloc((size_t)hd * sizeof(float)), *out = malloc((size_t)hd * sizeof(float));
	float *att = malloc((size_t)n * sizeof(float));
	double *want = malloc((size_t)hd * sizeof(double)), worst = 0;
	srand(7);
	for (int i = 0; i < n * stride; i++)
		k[i] = (float)rand() / RAND_MAX - 0.5f, v[i] = (float)rand() / RAND_MAX - 0.5f;
	for (int i = 0; i < hd; i++)
		q[i] = 2.0f * ((float)rand() / RAND_MAX - 0.5f);
	attn_head(&(attn_part){q, k, stride, hd}, NULL, v, stride, hd, n, 1.0f / sqrtf((float)hd), att, out);
	reference(q, k, v, stride, hd, n, 1.0f / sqrtf((float)hd), want);
	for (int d = 0; d < hd; d++)
		worst = fmax(worst, fabs(out[d] - want[d]));
	char name[96];
	snprintf(name, sizeof(name), "attn_head: head dim %d, %d positions, within 1e-6 of double precision", hd, n);
	T_CHECK(name, worst < 1e-6, "worst difference %g", worst);
	free(k), free(v), free(q), free(out), free(att), free(want);
}

/* Two parts, as MLA: scores on a latent (also the values) plus a rotary part of other keys. */
static void check_two_parts(int lat, int rd, int n)
{
	float *kl = malloc((size_t)n * lat * sizeof(float)), *kr = malloc((size_t)n * rd * sizeof(float));
	float *ql = malloc((size_t)lat * sizeof(float)), *qr = malloc((size_t)rd * sizeof(float));
	float *out = malloc((size_t)lat * sizeof(float)), *att = malloc((size_t)n * sizeof(float)), sc = 0.1f;
	double *a = malloc((size_t)n * sizeof(double)), mx = -INFINITY, sum = 0, worst = 0;
	srand(11);
	for (int i = 0; i < n * lat; i++)
		kl[i] = (float)rand() / RAND_MAX - 0.5f;
	for (int i = 0; i < n * rd; i++)
		kr[i] = (float)rand() / RAND_MAX - 0.5f;
	for (int i = 0; i < lat; i++)
		ql[i] = (float)rand() / RAND_MAX - 0.5f;
	for (int i = 0; i < rd; i++)
		qr[i] = (float)rand() / RAND_MAX - 0.5f;
	attn_head(&(attn_part){ql, kl, lat, lat}, &(attn_part){qr, kr, rd, rd}, kl, lat, lat, n, sc, att, out);
	for (int t = 0; t < n; t++) {
		a[t] = 0;
		for (int d = 0; d < lat; d++)
			a[t] += (double)ql[d] * kl[t * lat + d];
		for (int d = 0; d < rd; d++)
			a[t] += (double)qr[d] * kr[t * rd + d];
		mx = fmax(mx, a[t] *= sc);
	}
	for (int t = 0; t < n; t++)
		sum += a[t] = exp(a[t] - mx);
	for (int d = 0; d < lat; d++) {
		double want = 0;
		for (int t = 0; t < n; t++)
			want += a[t] / sum * kl[t * lat + d];
		worst = fmax(worst, fabs(out[d] - want));
	}
	T_CHECK("attn_head: two parts (MLA's latent, also the values, and rotary keys), within 1e-6", worst < 1e-6,
		"worst difference %g", worst);
	free(kl), free(kr), free(ql), free(qr), free(out), free(att), free(a);
}

/* The multiply-adds counted by hand: GQA (and its threading threshold), then MLA. */
static void check_counts(void)
{
	coli_model g, a;
	memset(&g, 0, sizeof(g));
	memset(&a, 0, sizeof(a));
	g.attn = COLI_ATTN_GQA, g.n_layers = 3, g.n_heads = 32, g.n_kv_heads = 4, g.head_dim = 128;
	a.attn = COLI_ATTN_MLA, a.n_layers = 2, a.n_heads = 16, a.kv_lora_rank = 512, a.qk_rope_head_dim = 64;
	int th = -1, th_below = -1, th_at = -1, th_mla = -1;
	double f = coli_attn_decode_fmas(&g, 99, &th);
	T_CHECK("gqa: layers x heads x positions x 2 head_dim", f == 3.0 * 32 * 100 * 256 && th == 0, "%g %d", f, th);
	/* 32 heads x 128: positions x 4096 reaches 2^22 at 1024 positions (position 1023) */
	coli_attn_decode_fmas(&g, 1022, &th_below);
	coli_attn_decode_fmas(&g, 1023, &th_at);
	T_CHECK("gqa: one thread below 2^22 of work, shared over the threads from it on", th_below == 0 && th_at == 1,
		"%d %d", th_below, th_at);
	f = coli_attn_decode_fmas(&a, 9999, &th_mla);
	T_CHECK("mla: layers x heads x positions x (2 kv_lora_rank + rope dims), one thread",
		f == 2.0 * 16 * 10000 * (2 * 512 + 64) && th_mla == 0, "%g %d", f, th_mla);
}

/* deepseek_v4 (the fixture's shape: window 8; layers window, window, CSA 4, HCA 16, CSA 4; index
 * top 8) at position 99: keys 8, 8, 8 + 8 (of 25 rows), 8 + 6, 8 + 8; the indexer scores 25 rows
 * on each CSA layer; bytes those keys and index rows. */
static void check_v4_counts(void)
{
	coli_model v;
	memset(&v, 0, sizeof(v));
	v.attn = COLI_ATTN_V4, v.n_layers = 5, v.n_heads = 4, v.head_dim = 32, v.sliding_window = 8, v.index_topk = 8;
	v.index_n_heads = 8, v.index_head_dim = 16;
	v.compress[2] = v.compress[4] = 4, v.compress[3] = 16, v.index_full[2] = v.index_full[4] = 1;
	int th = -1;
	double f = coli_attn_decode_fmas(&v, 99, &th), ix = coli_attn_index_fmas(&v, 99), b = coli_attn_decode_bytes(&v, 99);
	T_CHECK("v4: keys (window and compressed rows attended) x heads x 2 head_dim, one thread",
		f == 62.0 * 4 * 2 * 32 && th == 0, "%g %d", f, th);
	T_CHECK("v4: the indexer's complete rows x index heads x index_head_dim", ix == 50.0 * 8 * 16, "%g", ix);
	T_CHECK("v4: bytes of the keys attended and the index rows scanned", b == 4.0 * (62 * 32 + 50 * 16), "%g", b);
	f = coli_attn_decode_fmas(&v, 3, &th);
	T_CHECK("v4: at position 3, 4 window keys a layer and the CSA layers' first row (complete at 3)",
		f == (4.0 * 5 + 2) * 4 * 2 * 32, "%g", f);
	/* V4 Flash's heads: 64 x 512 over a window of 128 keys is the engine's threshold (the blocks
	 * of heads shared out over the threads, nn/v4.c); 11 keys are below it */
	v.n_heads = 64, v.head_dim = 512, v.sliding_window = 128;
	coli_attn_decode_fmas(&v, 999, &th);
	T_CHECK("v4: Flash's 64 heads of 512 over a full window: over the threads", th == 1, "%d", th);
	coli_attn_decode_fmas(&v, 10, &th);
	T_CHECK("v4: 11 keys: one thread", th == 0, "%d", th);
}

int main(void)
{
	check_head(128, 256);
	check_head(20, 7);
	check_head(16, 1);
	check_head(33, 130);
	check_two_parts(72, 8, 13);
	check_counts();
	check_v4_counts();
	double r = coli_attn_core_rate(128, 256, 0.01);
	T_CHECK("rate: the core's timing gives multiply-adds per second", r > 1e6 && r < 1e13, "%g", r);
	T_EXIT();
}
