/* blocks.h: the small shared pieces of every family's forward pass. */
#ifndef COLI_BLOCKS_H
#define COLI_BLOCKS_H

#include <math.h>
#include <stdint.h>

#include "kernels.h"

/* y = w * (x / sqrt(mean(x^2) + eps)) over n values (HF RMSNorm, float32); y may be x; w NULL:
 * the unweighted norm (transformers' weightless RMSNorm). */
void rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* The logistic function and x * sigmoid(x), in float32 as torch computes them. */
static inline float sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

static inline float silu(float x)
{
	return x / (1.0f + expf(-x));
}

/* x[i] = silu(gate[i]) * up[i] (SwiGLU's activation), in place in gate. */
void swiglu(float *gate, const float *up, int n);

/* In-place softmax over n values (float32, max-subtracted). */
void softmax(float *x, int n);

float dot(const float *a, const float *b, int n);

/* y += a * x over n values. */
void axpy(float *restrict y, float a, const float *restrict x, int n);

/* Y[i][:] += b for n rows of width d (projection biases). */
void add_bias(float *Y, const float *b, int n, int d);

#endif
