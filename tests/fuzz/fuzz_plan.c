/* fuzz_plan.c: plan.json through coli_plan_parse; a plan it accepts must hold only known knobs,
 * each with a value, and predictions in range. */
#include <math.h>
#include <stdlib.h>

#include "fuzz.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	coli_plan *p = calloc(1, sizeof(*p));
	coli_err e;
	if (p && coli_plan_parse((const char *)data, size, "plan.json", p, &e) == 0) {
		for (int i = 0; i < p->n_knobs; i++)
			if (coli_plan_knob_index(p->knobs[i].name) < 0 || !p->knobs[i].value)
				__builtin_trap();
		if (!(p->hit_rate >= 0 && p->hit_rate <= 1) || !isfinite(p->warm.tok_s) || p->n_disks > COLI_PLAN_MAX_DISKS)
			__builtin_trap();
		coli_plan_release(p);
	}
	free(p);
	return 0;
}
