/* sampler.h: next-token choice: greedy, or temperature, top-k and top-p (nucleus) sampling
 * from a seeded generator (the same seed gives the same tokens), optionally among a subset of
 * the ids (a padded vocabulary's ids without a token are never chosen). */
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
	int *allowed;       /* [n_allowed] the ids that may be chosen, ascending; NULL: all */
	int n_allowed;      /* vocab without a mask */
} sampler;

int coli_sampler_init(sampler *s, int vocab, float temperature, int top_k, float top_p, uint64_t seed);
void coli_sampler_release(sampler *s);

/* Restricts every later pick to the ids with ok[id] != 0 (ok has vocab entries; read, not
 * kept): their logits are masked, greedy and sampling alike. Returns 0, or -1 when no id is
 * allowed or the list cannot be allocated (the sampler then keeps its previous choice). */
int coli_sampler_mask(sampler *s, const uint8_t *ok);

/* The next token from logits[vocab]. */
int coli_sampler_pick(sampler *s, const float *logits);

/* The distribution coli_sampler_pick draws from, into p[vocab] (0 outside what temperature, top-k,
 * top-p and the mask keep; greedy: 1 at the argmax). Draws nothing from the generator. */
void coli_sampler_probs(sampler *s, const float *logits, float *p);

/* An id drawn from the weights w[vocab] (non-negative, any sum), ids in ascending order; -1
 * when they sum to 0. */
int coli_sampler_draw(sampler *s, const float *w);

/* Speculative sampling (Leviathan et al. 2023; Chen et al. 2023): the draft d, drawn from q,
 * is kept (*accepted = 1, returns d) with probability min(1, p[d] / q[d]); else returns an id
 * drawn from norm(max(0, p - q)) (resid: [vocab] scratch). Either way the id returned is
 * distributed as p. */
int coli_sampler_verify(sampler *s, const float *p, const float *q, int d, float *resid, int *accepted);

#endif
