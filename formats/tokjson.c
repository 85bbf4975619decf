/* tokjson.c: the largest id a tokenizer.json assigns (model.vocab, added_tokens). */
#include "tokjson.h"

#include <jansson.h>
#include <stdio.h>

/* Raises *max to id when larger, naming its token in where. */
static void consider(json_int_t id, const char *token, int64_t *max, char *where, size_t cap)
{
	if (id > *max) {
		*max = id;
		snprintf(where, cap, "\"%.40s\"", token);
	}
}

int coli_tokjson_max_id(const char *buf, size_t len, const char *path, int64_t *max_id, char *where, size_t cap,
			coli_err *e)
{
	json_error_t je;
	json_t *root = json_loadb(buf, len, 0, &je), *v;
	const char *key;
	size_t i;
	*max_id = -1;
	if (cap)
		where[0] = 0;
	if (!json_is_object(root)) {
		json_decref(root);
		return coli_errf(e, COLI_EDATA, "%s: not a JSON object (line %d: %s)", path, je.line, je.text);
	}
	json_object_foreach(json_object_get(json_object_get(root, "model"), "vocab"), key, v)
		if (json_is_integer(v))
			consider(json_integer_value(v), key, max_id, where, cap);
	json_array_foreach(json_object_get(root, "added_tokens"), i, v)
		if (json_is_integer(json_object_get(v, "id")))
			consider(json_integer_value(json_object_get(v, "id")), json_string_value(json_object_get(v, "content")) ?
				 json_string_value(json_object_get(v, "content")) : "?", max_id, where, cap);
	json_decref(root);
	return 0;
}
