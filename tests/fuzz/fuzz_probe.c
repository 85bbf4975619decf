/* fuzz_probe.c: probe.json through coli_probe_parse; a probe it accepts must come back
 * identical through coli_probe_json and a second parse (the writer and the reader agree). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	coli_probe *p = calloc(2, sizeof(*p));
	coli_err e;
	if (p && coli_probe_parse((const char *)data, size, "probe.json", p, &e) == 0) {
		char *text = coli_probe_json(p, (int)(size & 1), &e);
		if (!text || coli_probe_parse(text, strlen(text), "again", p + 1, &e) != 0 || memcmp(p, p + 1, sizeof(*p)))
			__builtin_trap(); /* an accepted probe that does not round-trip */
		free(text);
	}
	free(p);
	return 0;
}
