/* blocks.c: norms, activations, softmax and vector helpers shared by every family. */
#include "nn/blocks.h"

#include <math.h>

#include "hot.h"

void rmsnorm(float *y, const float *x, const float *w, int n, float eps)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	float r = 1.0f / sqrtf((float)(ss / n) + eps);
	if (!w) {
		for (int i = 0; i < n; i++)
			y[i] = x[i] * r;
		return;
	}
	for (int i = 0; i < n; i++)
		y[i] = w[i] * (x[i] * r);
}

void swiglu(float *gate, const float *up, int n)
{
	for (int i = 0; i < n; i++)
		gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void softmax(float *x, int n)
{
	float mx = x[0];
	for (int i = 1; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	double sum = 0;
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - mx);
		sum += x[i];
	}
	float inv = (float)(1.0 / sum);
	for (int i = 0; i < n; i++)
		x[i] *= inv;
}

/* Sixteen float32 partial sums: vectorises, and keeps attention off the scalar path. */
COLI_HOT float dot(const float *a, const float *b, int n)
{
	float s[16] = {0}, t = 0;
	int i = 0;
	for (; i + 16 <= n; i += 16)
		for (int j = 0; j < 16; j++)
			s[j] += a[i + j] * b[i + j];
	for (int j = 0; j < 16; j++)
		t += s[j];
	for (; i < n; i++)
		t += a[i] * b[i];
	return t;
}

/* Blocks of sixteen (as dot): vectorises (a plain loop stayed scalar at -O2, the attention
 * core's cost); each element's product and sum as the plain loop's, so the same bits. */
COLI_HOT void axpy(float *restrict y, float a, const float *restrict x, int n)
{
	int i = 0;
	for (; i + 16 <= n; i += 16)
		for (int j = 0; j < 16; j++)
			y[i + j] += a * x[i + j];
	for (; i < n; i++)
		y[i] += a * x[i];
}

void add_bias(float *Y, const float *b, int n, int d)
{
	if (!b)
		return;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < d; j++)
			Y[(int64_t)i * d + j] += b[j];
}
