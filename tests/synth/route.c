/* route.c: expert selection exactly as the HF families route, and the skew statistics. */
#include "synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Indices of the k largest s[i] among allowed ones (allowed NULL: all), best first; ties keep
 * the lower index first. One pass with insertion into the sorted head. */
static void topk(const float *s, const uint8_t *allowed, int n, int k, int *idx)
{
	int have = 0;
	for (int i = 0; i < n; i++) {
		if ((allowed && !allowed[i]) || (have == k && !(s[i] > s[idx[k - 1]])))
			continue;
		int j = have < k ? have++ : k - 1;
		while (j > 0 && s[i] > s[idx[j - 1]]) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = i;
	}
}

static void softmax_topk(const coli_model *m, const float *z, int *idx, float *w)
{
	int E = m->n_experts, k = m->top_k;
	float mx = z[0], sum = 0, sel = 0;
	if (!w) {
		topk(z, NULL, E, k, idx);
		return;
	}
	for (int i = 1; i < E; i++)
		mx = fmaxf(mx, z[i]);
	for (int i = 0; i < E; i++)
		sum += expf(z[i] - mx);
	topk(z, NULL, E, k, idx);
	for (int j = 0; j < k; j++) {
		w[j] = expf(z[idx[j]] - mx) / sum;
		sel += w[j];
	}
	if (m->router == COLI_ROUTER_TOPK_SOFTMAX || m->norm_topk_prob)
		for (int j = 0; j < k; j++)
			w[j] /= sel;
}

/* Group scores are the sum of the two best biased scores of each group; experts outside the
 * topk_group best groups are excluded (HF fills them with 0, equal here since scores > 0). */
static void group_mask(const coli_model *m, const float *sc, uint8_t *allowed, float *gs)
{
	int E = m->n_experts, G = m->n_group, per = E / G;
	int gidx[COLI_MAX_LAYERS];
	for (int g = 0; g < G; g++) {
		int two[2];
		topk(sc + g * per, NULL, per, per < 2 ? 1 : 2, two);
		gs[g] = sc[g * per + two[0]] + (per < 2 ? 0 : sc[g * per + two[1]]);
	}
	topk(gs, NULL, G, m->topk_group, gidx);
	memset(allowed, 0, (size_t)E);
	for (int j = 0; j < m->topk_group; j++)
		memset(allowed + gidx[j] * per, 1, (size_t)per);
}

static void sigmoid_group(const coli_model *m, const float *z, const float *bias, int *idx,
			  float *w, float *tmp)
{
	int E = m->n_experts, k = m->top_k;
	float *s = tmp, *sc = tmp + E, sum = 0;
	uint8_t allowed[1 << 12];
	float gs[COLI_MAX_LAYERS];
	for (int i = 0; i < E; i++) {
		s[i] = 1.0f / (1.0f + expf(-z[i]));
		sc[i] = s[i] + (bias ? bias[i] : 0.0f);
	}
	int grouped = m->n_group > 1 && E <= (int)sizeof(allowed);
	if (grouped)
		group_mask(m, sc, allowed, gs);
	topk(sc, grouped ? allowed : NULL, E, k, idx);
	for (int j = 0; w && j < k; j++) {
		w[j] = s[idx[j]];
		sum += w[j];
	}
	for (int j = 0; w && j < k; j++)
		w[j] = (m->norm_topk_prob ? w[j] / (sum + 1e-20f) : w[j]) *
		       (float)m->routed_scaling_factor;
}

/* deepseek_v4: sqrt(softplus(z)) scores, chosen by score + bias, weights the chosen scores
 * renormalised (+ 1e-20) x routed_scaling_factor. */
static void sqrtsoftplus(const coli_model *m, const float *z, const float *bias, int *idx, float *w, float *tmp)
{
	int E = m->n_experts, k = m->top_k;
	float *s = tmp, *sc = tmp + E, sum = 0;
	for (int i = 0; i < E; i++) {
		s[i] = sqrtf(z[i] > 20 ? z[i] : log1pf(expf(z[i])));
		sc[i] = s[i] + (bias ? bias[i] : 0.0f);
	}
	topk(sc, NULL, E, k, idx);
	for (int j = 0; w && j < k; j++)
		sum += w[j] = s[idx[j]];
	for (int j = 0; w && j < k; j++)
		w[j] = w[j] / (sum + 1e-20f) * (float)m->routed_scaling_factor;
}

int synth_biased(const coli_model *m)
{
	return m->router == COLI_ROUTER_SIGMOID_GROUP || m->router == COLI_ROUTER_SQRTSOFTPLUS;
}

void synth_route(const coli_model *m, const float *z, const float *bias, int *idx, float *w,
		 float *tmp)
{
	if (m->router == COLI_ROUTER_SQRTSOFTPLUS)
		sqrtsoftplus(m, z, bias, idx, w, tmp);
	else if (m->router == COLI_ROUTER_SIGMOID_GROUP)
		sigmoid_group(m, z, bias, idx, w, tmp);
	else
		softmax_topk(m, z, idx, w);
}

static int cmp_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

/* Counts sorted by decreasing popularity into a malloc'd copy (NULL on failure). */
static double *sorted(const double *counts, int n)
{
	double *c = malloc((size_t)n * sizeof(*c));
	if (!c)
		return NULL;
	memcpy(c, counts, (size_t)n * sizeof(*c));
	qsort(c, (size_t)n, sizeof(*c), cmp_desc);
	return c;
}

double synth_zipf_fit(const double *counts, int n)
{
	double *c = sorted(counts, n), sx = 0, sy = 0, sxx = 0, sxy = 0;
	if (!c || n < 2) {
		free(c);
		return 0;
	}
	for (int r = 0; r < n; r++) {
		double x = log(r + 1.0), y = log(c[r] + 0.5);
		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
	}
	free(c);
	return -(n * sxy - sx * sy) / (n * sxx - sx * sx);
}

double synth_top_share(const double *counts, int n)
{
	double *c = sorted(counts, n), top = 0, all = 0;
	if (!c)
		return 0;
	int k = (n + 9) / 10;
	for (int r = 0; r < n; r++) {
		all += c[r];
		if (r < k)
			top += c[r];
	}
	free(c);
	return all > 0 ? top / all : 0;
}
