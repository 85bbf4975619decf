/* sampler.c: greedy and temperature / top-k / top-p sampling, as HF's logits warpers order them
 * (temperature, then top-k, then top-p), with a splitmix64 generator. */
#include "sampler.h"

#include <emmintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int coli_sampler_init(sampler *s, int vocab, float temperature, int top_k, float top_p, uint64_t seed)
{
	*s = (sampler){temperature, top_k, top_p, seed, vocab, malloc((size_t)vocab * sizeof(float)),
		       malloc((size_t)vocab * sizeof(int)), NULL, vocab};
	return s->probs && s->order ? 0 : -1;
}

int coli_sampler_mask(sampler *s, const uint8_t *ok)
{
	int n = 0;
	for (int i = 0; i < s->vocab; i++)
		n += ok[i] != 0;
	int *ids = n ? malloc((size_t)n * sizeof(*ids)) : NULL;
	if (!ids)
		return -1;
	for (int i = 0, k = 0; i < s->vocab; i++)
		if (ok[i])
			ids[k++] = i;
	free(s->allowed);
	s->allowed = ids;
	s->n_allowed = n;
	return 0;
}

void coli_sampler_release(sampler *s)
{
	free(s->probs);
	free(s->order);
	free(s->allowed);
	s->probs = NULL;
	s->order = NULL;
	s->allowed = NULL;
}

static double uniform(sampler *s)
{
	uint64_t z = (s->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / (double)(1ull << 53);
}

/* The i-th id that may be chosen. */
static int id_at(const sampler *s, int i)
{
	return s->allowed ? s->allowed[i] : i;
}

/* The first of x[0 .. n) equal to the largest of them, NaNs passed over (the first when x[0] is
 * NaN): the largest in four SSE2 lanes (maxps keeps its second operand unless the first is
 * greater, as the comparison does), then the first equal to it: no load waits for the last
 * comparison, which a decode token's 150k logits otherwise did. */
static int argmax_all(const float *x, int n)
{
	if (x[0] != x[0])
		return 0;
	__m128 m = _mm_set1_ps(x[0]);
	int i = 1;
	for (; i + 4 <= n; i += 4)
		m = _mm_max_ps(_mm_loadu_ps(x + i), m);
	float l[4], mx;
	_mm_storeu_ps(l, m);
	mx = l[0];
	for (int j = 1; j < 4; j++)
		mx = l[j] > mx ? l[j] : mx;
	for (; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	for (i = 0; x[i] != mx; i++)
		;
	return i;
}

/* The allowed id of the largest logit (the lowest such id on ties). */
static int argmax(const sampler *s, const float *x)
{
	if (!s->allowed)
		return argmax_all(x, s->n_allowed);
	int b = id_at(s, 0);
	for (int i = 1; i < s->n_allowed; i++)
		b = x[id_at(s, i)] > x[b] ? id_at(s, i) : b;
	return b;
}

/* Descending probability, ties by lower id: a total order, so sampling is reproducible. */
static int by_prob(const void *a, const void *b, void *probs)
{
	const float *p = probs;
	int i = *(const int *)a, j = *(const int *)b;
	if (p[i] != p[j])
		return p[i] > p[j] ? -1 : 1;
	return i - j;
}

/* Softmax at the temperature over the allowed ids, listed in s->order. */
static void softmax(sampler *s, const float *logits)
{
	int n = s->n_allowed;
	float mx = logits[argmax(s, logits)];
	double sum = 0;
	for (int i = 0; i < n; i++) {
		int id = s->order[i] = id_at(s, i);
		s->probs[id] = expf((logits[id] - mx) / s->temperature);
		sum += s->probs[id];
	}
	for (int i = 0; i < n; i++)
		s->probs[s->order[i]] = (float)(s->probs[s->order[i]] / sum);
}

/* The ids sampling keeps, most probable first, in s->order[0 .. return): temperature, top-k,
 * then top-p over the renormalised top-k (the smallest prefix reaching p); s->probs theirs. */
static int nucleus(sampler *s, const float *logits)
{
	int n = s->n_allowed;
	softmax(s, logits);
	qsort_r(s->order, (size_t)n, sizeof(int), by_prob, s->probs);
	int keep = s->top_k > 0 && s->top_k < n ? s->top_k : n;
	double mass = 0, cut = 0;
	for (int i = 0; i < keep; i++)
		mass += s->probs[s->order[i]];
	for (int i = 0; i < keep; i++) {
		cut += s->probs[s->order[i]] / mass;
		if (cut >= s->top_p)
			return i + 1;
	}
	return keep;
}

int coli_sampler_pick(sampler *s, const float *logits)
{
	if (s->temperature <= 0)
		return argmax(s, logits);
	int keep = nucleus(s, logits);
	double total = 0;
	for (int i = 0; i < keep; i++)
		total += s->probs[s->order[i]];
	double r = uniform(s) * total, acc = 0;
	for (int i = 0; i < keep; i++)
		if ((acc += s->probs[s->order[i]]) > r)
			return s->order[i];
	return s->order[keep - 1];
}

void coli_sampler_probs(sampler *s, const float *logits, float *p)
{
	memset(p, 0, (size_t)s->vocab * sizeof(float));
	if (s->temperature <= 0) {
		p[argmax(s, logits)] = 1.0f;
		return;
	}
	int keep = nucleus(s, logits);
	double total = 0;
	for (int i = 0; i < keep; i++)
		total += s->probs[s->order[i]];
	for (int i = 0; i < keep; i++)
		p[s->order[i]] = (float)(s->probs[s->order[i]] / total);
}

int coli_sampler_draw(sampler *s, const float *w)
{
	double total = 0, acc = 0;
	int last = -1;
	for (int i = 0; i < s->vocab; i++)
		total += w[i];
	if (!(total > 0))
		return -1;
	double r = uniform(s) * total;
	for (int i = 0; i < s->vocab; i++) {
		if (w[i] <= 0)
			continue;
		last = i;
		if ((acc += w[i]) > r)
			return i;
	}
	return last;
}

int coli_sampler_verify(sampler *s, const float *p, const float *q, int d, float *resid, int *accepted)
{
	double u = uniform(s);
	*accepted = q[d] > 0 && u * q[d] < p[d]; /* u < min(1, p/q) */
	if (*accepted)
		return d;
	for (int i = 0; i < s->vocab; i++)
		resid[i] = p[i] > q[i] ? p[i] - q[i] : 0.0f;
	int t = coli_sampler_draw(s, resid);
	return t >= 0 ? t : coli_sampler_draw(s, p); /* p <= q everywhere: only when p == q (never rejected) */
}
