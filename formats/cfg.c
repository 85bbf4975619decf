/* cfg.c: typed getters over one config.json object, each message naming the file and the key. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model_cfg.h"

static const char *cfg_json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a real number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

int cfg_bad_type(const cfg *c, const char *key, const char *want, const json_t *v)
{
	return coli_errf(c->e, COLI_EDATA, "%s: %s%s: expected %s, got %s", c->name, c->prefix,
			 key, want, cfg_json_kind(v));
}

int cfg_missing(const cfg *c, const char *key)
{
	return coli_errf(c->e, COLI_EDATA, "%s: %s%s: missing", c->name, c->prefix, key);
}

/* The value of key; NULL when absent or null (HF then uses its default). */
json_t *cfg_get(const cfg *c, const char *key)
{
	json_t *v = json_object_get(c->obj, key);
	return json_is_null(v) ? NULL : v;
}

int cfg_is_null(const cfg *c, const char *key)
{
	return json_is_null(json_object_get(c->obj, key));
}

int cfg_int(const cfg *c, const char *key, long long def, long long lo, long long hi,
		   int *out)
{
	json_t *v = cfg_get(c, key);
	if (!v && def == CFG_REQUIRED)
		return cfg_missing(c, key);
	if (v && !json_is_integer(v))
		return cfg_bad_type(c, key, "an integer", v);
	long long x = v ? (long long)json_integer_value(v) : def;
	if (x < lo || x > hi)
		return coli_errf(c->e, COLI_EDATA, "%s: %s%s: %lld out of range [%lld, %lld]",
				 c->name, c->prefix, key, x, lo, hi);
	*out = (int)x;
	return 0;
}

int cfg_num(const cfg *c, const char *key, double def, double *out)
{
	json_t *v = cfg_get(c, key);
	if (v && !json_is_number(v))
		return cfg_bad_type(c, key, "a number", v);
	*out = v ? json_number_value(v) : def;
	return 0;
}

/* A number that must be finite and > 0. */
int cfg_pos(const cfg *c, const char *key, double def, double *out)
{
	if (cfg_num(c, key, def, out))
		return -1;
	if (!(*out > 0) || !isfinite(*out))
		return coli_errf(c->e, COLI_EDATA, "%s: %s%s: %g must be > 0", c->name, c->prefix,
				 key, *out);
	return 0;
}

int cfg_bool(const cfg *c, const char *key, int def, int *out)
{
	json_t *v = cfg_get(c, key);
	if (v && !json_is_boolean(v))
		return cfg_bad_type(c, key, "a boolean", v);
	*out = v ? json_is_true(v) : def;
	return 0;
}

/* A string (pointer into the JSON tree); def NULL means required. */
int cfg_str(const cfg *c, const char *key, const char *def, const char **out)
{
	json_t *v = cfg_get(c, key);
	if (!v && !def)
		return cfg_missing(c, key);
	if (v && !json_is_string(v))
		return cfg_bad_type(c, key, "a string", v);
	*out = v ? json_string_value(v) : def;
	return 0;
}

/* A string field that must be one of a few values (here: exactly `want`). */
int cfg_want_str(const cfg *c, const char *key, const char *def, const char *want)
{
	const char *s;
	if (cfg_str(c, key, def, &s))
		return -1;
	if (strcmp(s, want))
		return coli_errf(c->e, COLI_EDATA, "%s: %s%s: '%s' unsupported (supported: %s)",
				 c->name, c->prefix, key, s, want);
	return 0;
}

/* A boolean that must be true: the reference computes only that way whatever the key says. */
int cfg_want_true(const cfg *c, const char *key, const char *why)
{
	int v;
	if (cfg_bool(c, key, 1, &v))
		return -1;
	if (!v)
		return coli_errf(c->e, COLI_EDATA, "%s: %s: false unsupported (%s)", c->name, key, why);
	return 0;
}

/* layer_types, when present, must give every layer the one kind coli computes (want). */
int cfg_all_layers_are(const cfg *c, const coli_model *m, const char *want)
{
	json_t *v = cfg_get(c, "layer_types");
	if (!v)
		return 0;
	if (!json_is_array(v) || json_array_size(v) != (size_t)m->n_layers)
		return coli_errf(c->e, COLI_EDATA, "%s: layer_types: expected an array of %d entries", c->name, m->n_layers);
	for (size_t i = 0; i < json_array_size(v); i++) {
		const char *t = json_string_value(json_array_get(v, i));
		if (!t || strcmp(t, want))
			return coli_errf(c->e, COLI_EDATA, "%s: layer_types[%zu]: '%s' unsupported (supported: %s)",
					 c->name, i, t ? t : "(not a string)", want);
	}
	return 0;
}

