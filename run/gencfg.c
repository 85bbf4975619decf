/* gencfg.c: end-of-sequence ids from the container's generation_config.json, falling back to
 * config.json's eos_token_id (an integer or a list in either). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "run.h"

static int collect(json_t *v, int32_t *ids, int max, int *n)
{
	if (json_is_integer(v) && *n < max)
		ids[(*n)++] = (int32_t)json_integer_value(v);
	for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++)
		if (json_is_integer(json_array_get(v, i)) && *n < max)
			ids[(*n)++] = (int32_t)json_integer_value(json_array_get(v, i));
	return *n;
}

int eos_ids(const coli_container *c, int32_t *ids, int max, int *n, coli_err *e)
{
	static const char *const files[] = {"generation_config.json", "config.json"};
	*n = 0;
	for (int f = 0; f < 2 && *n == 0; f++) {
		char *path = coli_path_join(c->dir, files[f]), *text = NULL;
		json_error_t je;
		if (!path)
			return coli_errf(e, COLI_ENOMEM, "out of memory");
		if (access(path, F_OK) == 0 && coli_read_file(path, &text, NULL, e) == 0) {
			json_t *j = json_loads(text, 0, &je);
			if (!j) {
				free(text);
				int rc = coli_errf(e, COLI_EDATA, "%s: %s at line %d", path, je.text, je.line);
				free(path);
				return rc;
			}
			collect(json_object_get(j, "eos_token_id"), ids, max, n);
			json_decref(j);
		}
		free(text);
		free(path);
	}
	return 0;
}
