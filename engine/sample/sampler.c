/* sampler.c: greedy and temperature / top-k / top-p sampling, as HF's logits warpers order them
 * (temperature, then top-k, then top-p), with a splitmix64 generator. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

int sampler_init(sampler *s, int vocab, float temperature, int top_k, float top_p, uint64_t seed)
{
	*s = (sampler){temperature, top_k, top_p, seed, vocab, malloc((size_t)vocab * sizeof(float)),
		       malloc((size_t)vocab * sizeof(int))};
	return s->probs && s->order ? 0 : -1;
}

void sampler_release(sampler *s)
{
	free(s->probs);
	free(s->order);
	s->probs = NULL;
	s->order = NULL;
}

static double uniform(sampler *s)
{
	uint64_t z = (s->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / (double)(1ull << 53);
}

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		b = x[i] > x[b] ? i : b;
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

int sampler_pick(sampler *s, const float *logits)
{
	int n = s->vocab;
	if (s->temperature <= 0)
		return argmax(logits, n);
	float mx = logits[argmax(logits, n)];
	double sum = 0;
	for (int i = 0; i < n; i++) {
		s->probs[i] = expf((logits[i] - mx) / s->temperature);
		sum += s->probs[i];
		s->order[i] = i;
	}
	for (int i = 0; i < n; i++)
		s->probs[i] = (float)(s->probs[i] / sum);
	qsort_r(s->order, (size_t)n, sizeof(int), by_prob, s->probs);
	int keep = s->top_k > 0 && s->top_k < n ? s->top_k : n;
	double mass = 0, cut = 0;
	for (int i = 0; i < keep; i++)
		mass += s->probs[s->order[i]];
	for (int i = 0; i < keep; i++) { /* top-p over the renormalised top-k: smallest prefix reaching p */
		cut += s->probs[s->order[i]] / mass;
		if (cut >= s->top_p) {
			keep = i + 1;
			break;
		}
	}
	double total = 0;
	for (int i = 0; i < keep; i++)
		total += s->probs[s->order[i]];
	double r = uniform(s) * total, acc = 0;
	for (int i = 0; i < keep; i++)
		if ((acc += s->probs[s->order[i]]) > r)
			return s->order[i];
	return s->order[keep - 1];
}
