/* test_sampler.c: the sampler (engine/sampler.h): greedy and sampled picks, and the mask that
 * keeps a padded vocabulary's ids without a token from ever being chosen. */
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

int main(void)
{
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
