/* model_rope.c: config.json's RoPE parameters: transformers 5's nested rope_parameters or the
 * older rope_scaling, every key read or refused. */
#include <string.h>

#include "model_cfg.h"

/* The RoPE parameters' object: transformers 5's nested rope_parameters (which also carries
 * rope_theta and partial_rotary_factor), else the older rope_scaling; NULL when neither. Both
 * present is refused unless rope_scaling is null or says "default". */
int mdl_rope_object(const cfg *top, json_t **out)
{
	json_t *p = cfg_get(top, "rope_parameters"), *s = cfg_get(top, "rope_scaling");
	if (p && !json_is_object(p))
		return cfg_bad_type(top, "rope_parameters", "an object or null", p);
	if (s && !json_is_object(s))
		return cfg_bad_type(top, "rope_scaling", "an object or null", s);
	if (p && s) {
		json_t *t = json_object_get(s, "rope_type") ? json_object_get(s, "rope_type") : json_object_get(s, "type");
		if (!json_is_string(t) || strcmp(json_string_value(t), "default"))
			return coli_errf(top->e, COLI_EDATA, "%s: rope_scaling: set beside rope_parameters (one of them "
					 "must say how RoPE is scaled)", top->name);
	}
	*out = p ? p : s;
	return 0;
}

/* A number of the rope object that may also stand at the root (rope_theta,
 * partial_rotary_factor): both present and different is refused. */
int mdl_rope_num(const cfg *top, const char *key, double def, double *out)
{
	json_t *o;
	double nested;
	if (cfg_pos(top, key, def, out) || mdl_rope_object(top, &o))
		return -1;
	cfg c = {o, "rope_parameters.", top->name, top->e};
	if (!o || o != cfg_get(top, "rope_parameters") || !cfg_get(&c, key))
		return 0;
	if (cfg_pos(&c, key, 0, &nested))
		return -1;
	if (cfg_get(top, key) && nested != *out)
		return coli_errf(top->e, COLI_EDATA, "%s: rope_parameters.%s: %g differs from %s %g", top->name, key,
				 nested, key, *out);
	*out = nested;
	return 0;
}

/* rope_type (or the older type); rope_parameters may leave it out (transformers then says
 * "default"), rope_scaling may not. */
static int parse_rope_type(const cfg *c, coli_model *m)
{
	const char *key = cfg_get(c, "rope_type") ? "rope_type" : "type";
	const char *t;
	if (cfg_str(c, key, strcmp(c->prefix, "rope_parameters.") ? NULL : "default", &t))
		return -1;
	if (!strcmp(t, "default"))
		m->rope.scaling = COLI_ROPE_NONE;
	else if (!strcmp(t, "linear"))
		m->rope.scaling = COLI_ROPE_LINEAR;
	else if (!strcmp(t, "yarn"))
		m->rope.scaling = COLI_ROPE_YARN;
	else
		return coli_errf(c->e, COLI_EDATA, "%s: %s%s: '%s' unsupported (supported: default, linear, yarn)",
				 c->name, c->prefix, key, t);
	return 0;
}

/* Every key of the rope object must be one coli reads: another (attention_factor, truncate,
 * low_freq_factor, ...) would change the rotation. */
static int rope_keys_known(const cfg *c, const coli_model *m)
{
	static const char *const known[] = {"rope_type", "type", "rope_theta", "partial_rotary_factor", "factor",
					    "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
					    "mscale_all_dim"};
	const char *key;
	json_t *v;
	json_object_foreach(c->obj, key, v) {
		size_t i = 0;
		while (i < sizeof(known) / sizeof(known[0]) && strcmp(key, known[i]))
			i++;
		/* qwen3_5_moe's M-RoPE: text positions are equal on its three axes, which makes it the
		 * plain RoPE of the first rotary dims (its sections only concern images) */
		int mrope = m->family == COLI_FAM_QWEN3_5_MOE && (!strcmp(key, "mrope_section") || !strcmp(key, "mrope_interleaved"));
		/* deepseek_v4's YaRN: an attention_factor, which must be 1 (model_v4.c) */
		int v4 = m->family == COLI_FAM_DEEPSEEK_V4 && !strcmp(key, "attention_factor");
		if (i == sizeof(known) / sizeof(known[0]) && !mrope && !v4)
			return coli_errf(c->e, COLI_EDATA, "%s: %s%s: unsupported key (coli reads rope_type, rope_theta, "
					 "partial_rotary_factor, factor, original_max_position_embeddings, beta_fast, "
					 "beta_slow, mscale, mscale_all_dim)", c->name, c->prefix, key);
	}
	return 0;
}

/* transformers reads beta_fast and beta_slow as `x or default`: 0 is the default. mscale absent
 * stays 0 (HF's None: the attention factor is then 0.1 ln(factor) + 1). */
static int yarn_zero_defaults(coli_rope *r)
{
	r->beta_fast = r->beta_fast == 0 ? 32 : r->beta_fast;
	r->beta_slow = r->beta_slow == 0 ? 1 : r->beta_slow;
	return 0;
}

/* rope_parameters or rope_scaling (mdl_rope_object): null, default, linear {factor} or yarn {factor,
 * original_max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim}; HF yarn
 * defaults 32, 1, 1, 0. */
int mdl_parse_rope(const cfg *top, coli_model *m)
{
	coli_rope *r = &m->rope;
	json_t *v;
	r->scaling = COLI_ROPE_NONE;
	r->factor = 1.0;
	r->original_max_position_embeddings = m->max_position_embeddings;
	r->beta_fast = 32, r->beta_slow = 1, r->mscale = 0, r->mscale_all_dim = 0;
	if (mdl_rope_object(top, &v))
		return -1;
	if (!v)
		return 0;
	cfg c = {v, v == cfg_get(top, "rope_parameters") ? "rope_parameters." : "rope_scaling.", top->name, top->e};
	if (rope_keys_known(&c, m) || parse_rope_type(&c, m))
		return -1;
	static const char *const yarn_only[] = {"beta_fast", "beta_slow", "mscale", "mscale_all_dim",
						"original_max_position_embeddings"};
	for (size_t i = 0; r->scaling != COLI_ROPE_YARN && i < sizeof(yarn_only) / sizeof(yarn_only[0]); i++)
		if (cfg_get(&c, yarn_only[i]))
			return coli_errf(c.e, COLI_EDATA, "%s: %s%s: set, but only yarn reads it (rope type is not yarn)",
					 c.name, c.prefix, yarn_only[i]);
	if (r->scaling == COLI_ROPE_NONE)
		return 0;
	if (!cfg_get(&c, "factor"))
		return cfg_missing(&c, "factor");
	if (cfg_pos(&c, "factor", 0, &r->factor))
		return -1;
	if (r->scaling == COLI_ROPE_LINEAR)
		return 0;
	return cfg_pos(&c, "original_max_position_embeddings", m->max_position_embeddings,
		       &r->original_max_position_embeddings) ||
	       cfg_num(&c, "beta_fast", 32, &r->beta_fast) ||
	       cfg_num(&c, "beta_slow", 1, &r->beta_slow) ||
	       cfg_num(&c, "mscale", 0, &r->mscale) ||
	       cfg_num(&c, "mscale_all_dim", 0, &r->mscale_all_dim) || yarn_zero_defaults(r);
}

