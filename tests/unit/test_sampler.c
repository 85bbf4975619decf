/* test_sampler.c: the sampler (engine/sampler.h): greedy and sampled picks, and the mask that
 * keeps a padded vocabulary's ids without a token from ever being chosen. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sampler.h"
#include "t.h"

#define V 64

/* Logits where the masked ids (the top half, as a padded vocabulary's) are the most likely. */
static void padded_logits(float *logits)
{
	for (int i = 0; i < V; i++)
		logits[i] = i < V / 2 ? (float)(i % 7) * 0.1f : 10.0f + (float)i;
}

/* n picks of s from logits: 1 when none is at or above V / 2. */
static int picks_below_half(sampler *s, const float *logits, int n)
{
	for (int i = 0; i < n; i++)
		if (coli_sampler_pick(s, logits) >= V / 2)
			return 0;
	return 1;
}

static void test_mask(float temp, int top_k, float top_p, const char *name)
{
	float logits[V];
	uint8_t ok[V];
	sampler s;
	padded_logits(logits);
	for (int i = 0; i < V; i++)
		ok[i] = i < V / 2;
	int rc = coli_sampler_init(&s, V, temp, top_k, top_p, 7);
	T_CHECK(name, rc == 0 && coli_sampler_pick(&s, logits) >= V / 2 && coli_sampler_mask(&s, ok) == 0 &&
			      picks_below_half(&s, logits, 2000),
		"a masked id was picked (temperature %g, top-k %d, top-p %g)", temp, top_k, top_p);
	coli_sampler_release(&s);
}

/* The comparison loop greedy picking once was: the first largest, NaNs never larger. */
static int first_largest(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		b = x[i] > x[b] ? i : b;
	return b;
}

/* Greedy picks over vectors of every length 1 .. 70 with ties, NaNs (x[0] included), +-0, -inf,
 * the largest at every position, against the plain comparison loop. */
static void test_greedy_cases(void)
{
	enum { N = 70 };
	float x[N];
	uint64_t r = 12345;
	int bad = 0, tried = 0;
	for (int n = 1; n <= N && !bad; n++)
		for (int k = 0; k < 40 && !bad; k++, tried++) {
			for (int i = 0; i < n; i++) {
				r = r * 6364136223846793005ull + 1442695040888963407ull;
				int v = (int)(r >> 59); /* 0 .. 31 */
				x[i] = v < 3 ? NAN : v < 5 ? -INFINITY : v == 5 ? 0.0f : v == 6 ? -0.0f : (float)(v % 9) - 4;
			}
			if (k % 4 == 1)
				x[k % n] = 100; /* one largest somewhere */
			sampler s;
			coli_sampler_init(&s, n, 0, 0, 1, 0);
			int got = coli_sampler_pick(&s, x), want = first_largest(x, n);
			coli_sampler_release(&s);
			if (got != want) {
				bad = 1;
				printf("  n %d case %d: picked %d, the comparison loop %d\n", n, k, got, want);
			}
		}
	T_CHECK("sampler greedy: the first largest logit, NaNs passed over, in 2800 vectors of 1..70", !bad,
		"%d vectors tried", tried);
}

int main(void)
{
	test_greedy_cases();
	float logits[V];
	uint8_t none[V];
	sampler s;
	padded_logits(logits);
	coli_sampler_init(&s, V, 0, 0, 1, 0);
	T_CHECK("sampler greedy is the argmax", coli_sampler_pick(&s, logits) == V - 1, "%d",
		coli_sampler_pick(&s, logits));
	memset(none, 0, sizeof(none));
	none[3] = none[6] = 1;
	T_CHECK("sampler greedy with a mask is the best allowed id (lower id on ties)",
		coli_sampler_mask(&s, none) == 0 && coli_sampler_pick(&s, logits) == 6, "%d",
		coli_sampler_pick(&s, logits));
	memset(none, 0, sizeof(none));
	T_CHECK("sampler mask allowing nothing is refused, the previous one kept",
		coli_sampler_mask(&s, none) < 0 && coli_sampler_pick(&s, logits) == 6, "accepted");
	coli_sampler_release(&s);
	test_mask(0, 0, 1, "sampler mask: greedy never picks a masked id");
	test_mask(1.0f, 0, 1, "sampler mask: temperature sampling never picks a masked id");
	test_mask(2.0f, 40, 1, "sampler mask: top-k above the allowed ids never picks a masked id");
	test_mask(1.5f, 0, 0.9f, "sampler mask: top-p never picks a masked id");
	T_EXIT();
}
