/* fuzz_bundle.c: a datapoint bundle's manifest.json through coli_bundle_manifest_parse; a manifest
 * it accepts must come back identical through coli_bundle_manifest_json and a second parse (the
 * writer and the reader agree). */
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	coli_bundle_manifest *m = calloc(2, sizeof(*m));
	coli_err e;
	if (m && coli_bundle_manifest_parse((const char *)data, size, "manifest.json", m, &e) == 0) {
		char *text = coli_bundle_manifest_json(m, &e);
		if (!text || coli_bundle_manifest_parse(text, strlen(text), "again", m + 1, &e) != 0 ||
		    memcmp(m, m + 1, sizeof(*m)))
			__builtin_trap(); /* an accepted manifest that does not round-trip */
		free(text);
	}
	free(m);
	return 0;
}
