/* fuzz_config.c: config.json through coli_model_parse, then the tensor set it implies. */
#include <stdlib.h>

#include "fuzz.h"
#include "model.h"

/* coli_model_tensors makes ~3 specs per (layer, expert): a config at the bounds (1024 layers of
 * 65536 experts) asks for gigabytes, so only modest shapes are expanded. */
#define MAX_EXPANDED (1 << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_text(data, size);
	coli_model m;
	coli_err e;
	if (text && coli_model_parse(&m, text, "config.json", &e) == 0 &&
	    (long long)(m.n_layers + m.n_mtp_layers) * (m.n_experts + 16) <= MAX_EXPANDED) {
		coli_tensor_spec *specs = NULL;
		int n = 0;
		if (coli_model_tensors(&m, &specs, &n, &e) == 0)
			free(specs);
	}
	free(text);
	return 0;
}
