/* sampler.h: next-token choice: greedy, or temperature, top-k and top-p (nucleus) sampling
 * from a seeded generator (the same seed gives the same tokens). */
#ifndef COLI_SAMPLER_H
#define COLI_SAMPLER_H

#include <stdint.h>

typedef struct sampler {
	float temperature;  /* 0 = greedy */
	int top_k;          /* 0 = off */
	float top_p;        /* 1 = off */
	uint64_t state;     /* splitmix64 */
	int vocab;
	float *probs;       /* [vocab] scratch */
	int *order;         /* [vocab] scratch */
} sampler;

int sampler_init(sampler *s, int vocab, float temperature, int top_k, float top_p, uint64_t seed);
void sampler_release(sampler *s);

/* The next token from logits[vocab]. */
int sampler_pick(sampler *s, const float *logits);

#endif
