/* model_v4.c: config.json keys of deepseek_v4 (DeepSeek V4 Flash and Pro): the attention (one
 * shared KV head, the window, the per-layer compressors and the lightning indexer, the grouped
 * output), its two RoPEs, mHC, and the router (hash layers, sqrt(softplus) scores). What each key
 * changes: docs/deepseek_v4.md, section 1. */
#include <string.h>

#include "model_cfg.h"

/* The compressed kinds of layer_types and their compress_rates keys. */
static const char *const kinds[] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"};

/* compress_rates {compressed_sparse_attention: m, heavily_compressed_attention: m} (transformers'
 * defaults 4 and 128): the ratio of each compressed kind. */
static int parse_rates(const cfg *c, int rate[3])
{
	json_t *v = cfg_get(c, "compress_rates");
	rate[0] = 0, rate[1] = 4, rate[2] = 128;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return cfg_bad_type(c, "compress_rates", "an object", v);
	cfg r = {v, "compress_rates.", c->name, c->e};
	const char *key;
	json_t *x;
	json_object_foreach(v, key, x)
		if (strcmp(key, kinds[1]) && strcmp(key, kinds[2]))
			return coli_errf(c->e, COLI_EDATA, "%s: compress_rates.%s: unsupported key (coli reads %s, %s)", c->name,
					 key, kinds[1], kinds[2]);
	return cfg_int(&r, kinds[1], 4, 2, 1 << 15, &rate[1]) || cfg_int(&r, kinds[2], 128, 2, 1 << 15, &rate[2]);
}

/* compress_ratios[i]: an integer >= 0 (the window-only layers' 0). */
static int ratio_at(const cfg *c, json_t *v, size_t i, int *out)
{
	json_t *x = json_array_get(v, i);
	if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1 << 15))
		return coli_errf(c->e, COLI_EDATA, "%s: compress_ratios[%zu]: expected an integer in [0, %d]", c->name, i,
				 1 << 15);
	*out = (int)json_integer_value(x);
	return 0;
}

/* The kind of layer i: layer_types[i] when given, else what compress_ratios[i] means to
 * transformers (0 window only, 4 CSA, 128 HCA; another ratio only through layer_types). */
static int kind_of(const cfg *c, json_t *types, json_t *ratios, int i, int *kind)
{
	int r;
	if (types) {
		const char *t = json_string_value(json_array_get(types, (size_t)i));
		for (*kind = 0; t && *kind < 3 && strcmp(t, kinds[*kind]); (*kind)++)
			;
		if (!t || *kind == 3)
			return coli_errf(c->e, COLI_EDATA, "%s: layer_types[%d]: '%s' unsupported (supported: %s, %s, %s)",
					 c->name, i, t ? t : "(not a string)", kinds[0], kinds[1], kinds[2]);
		return 0;
	}
	if (ratio_at(c, ratios, (size_t)i, &r))
		return -1;
	*kind = r == 0 ? 0 : r == 4 ? 1 : r == 128 ? 2 : -1;
	if (*kind < 0)
		return coli_errf(c->e, COLI_EDATA, "%s: compress_ratios[%d]: %d has no attention kind without layer_types "
				 "(transformers maps 0, 4 and 128)", c->name, i, r);
	return 0;
}

/* Each layer's kind and ratio: layer_types (with compress_rates), else compress_ratios; both
 * given must agree layer by layer. Neither given is refused: transformers' default schedule is
 * V4 Pro's, which a Flash checkpoint is not. An MTP layer takes compress_ratios' entry after the
 * main layers (DeepSeek's; 0 when absent: window only). */
static int parse_schedule(const cfg *c, coli_model *m)
{
	json_t *types = cfg_get(c, "layer_types"), *ratios = cfg_get(c, "compress_ratios");
	int rate[3], r;
	if (parse_rates(c, rate))
		return -1;
	if (!types && !ratios)
		return coli_errf(c->e, COLI_EDATA, "%s: layer_types and compress_ratios: both missing (the per-layer "
				 "attention schedule; transformers' default is DeepSeek V4 Pro's)", c->name);
	if (types && (!json_is_array(types) || json_array_size(types) != (size_t)m->n_layers))
		return coli_errf(c->e, COLI_EDATA, "%s: layer_types: expected an array of %d entries", c->name, m->n_layers);
	if (ratios && (!json_is_array(ratios) || json_array_size(ratios) < (size_t)m->n_layers))
		return coli_errf(c->e, COLI_EDATA, "%s: compress_ratios: expected an array of at least %d entries", c->name,
				 m->n_layers);
	for (int i = 0, kind; i < m->n_layers; i++) {
		if (kind_of(c, types, ratios, i, &kind) || (ratios && ratio_at(c, ratios, (size_t)i, &r)))
			return -1;
		if (ratios && types && r != rate[kind])
			return coli_errf(c->e, COLI_EDATA, "%s: compress_ratios[%d]: %d, but layer_types[%d] '%s' has ratio %d "
					 "(compress_rates)", c->name, i, r, i, kinds[kind], rate[kind]);
		m->compress[i] = (uint16_t)rate[kind], m->index_full[i] = kind == 1;
		if (rate[kind] && (m->head_dim % rate[kind] || (kind == 1 && m->index_head_dim % rate[kind])))
			return coli_errf(c->e, COLI_EDATA, "%s: layer %d's compress ratio %d does not divide head_dim %d%s (coli "
					 "keeps a compressed row as head_dim / ratio floats per token)", c->name, i, rate[kind],
					 m->head_dim, kind == 1 ? " and index_head_dim" : "");
	}
	for (int i = 0; i < m->n_mtp_layers; i++) {
		size_t at = (size_t)(m->n_layers + i);
		if (ratios && at < json_array_size(ratios) && ratio_at(c, ratios, at, &r))
			return -1;
		r = ratios && at < json_array_size(ratios) ? r : 0;
		if (r != 0 && r != rate[1] && r != rate[2])
			return coli_errf(c->e, COLI_EDATA, "%s: compress_ratios[%zu]: %d for MTP layer %d is neither kind's ratio",
					 c->name, at, r, i);
		m->compress[at] = (uint16_t)r, m->index_full[at] = r != 0 && r == rate[1];
		if (r && (m->head_dim % r || (m->index_full[at] && m->index_head_dim % r)))
			return coli_errf(c->e, COLI_EDATA, "%s: compress_ratios[%zu]: %d does not divide head_dim %d or "
					 "index_head_dim %d (coli keeps a compressed row as head_dim / ratio floats per token)",
					 c->name, at, r, m->head_dim, m->index_head_dim);
	}
	return 0;
}

/* qk_rope_head_dim, or transformers' fold of it, partial_rotary_factor = qk_rope_head_dim /
 * head_dim (both given must agree): the last dims of each head that RoPE rotates. */
static int parse_rope_dims(const cfg *c, coli_model *m)
{
	double f;
	if (cfg_int(c, "qk_rope_head_dim", 64, 2, m->head_dim, &m->qk_rope_head_dim) ||
	    mdl_rope_num(c, "partial_rotary_factor", (double)m->qk_rope_head_dim / m->head_dim, &f))
		return -1;
	if ((int)(m->head_dim * f) != m->qk_rope_head_dim)
		return coli_errf(c->e, COLI_EDATA, "%s: partial_rotary_factor: %g gives %d rotary dims, qk_rope_head_dim is %d",
				 c->name, f, (int)(m->head_dim * f), m->qk_rope_head_dim);
	if (m->qk_rope_head_dim % 2)
		return coli_errf(c->e, COLI_EDATA, "%s: qk_rope_head_dim: %d is odd", c->name, m->qk_rope_head_dim);
	m->rope.rotary_dim = m->qk_rope_head_dim, m->rope.interleave = 1;
	return 0;
}

/* The widths and counts; num_key_value_heads is 1 (one shared KV head: transformers ignores
 * the key, so another value is refused rather than silently run as 1). */
static int parse_widths(const cfg *c, coli_model *m)
{
	int bias;
	if (cfg_int(c, "num_key_value_heads", 1, 1, 1, &m->n_kv_heads) ||
	    cfg_int(c, "head_dim", 512, 2, HEAD_MAX, &m->head_dim) ||
	    cfg_int(c, "q_lora_rank", 1024, 1, DIM_MAX, &m->q_lora_rank) ||
	    cfg_int(c, "o_groups", 8, 1, HEAD_MAX, &m->o_groups) ||
	    cfg_int(c, "o_lora_rank", 1024, 1, DIM_MAX, &m->o_lora_rank) ||
	    cfg_int(c, "sliding_window", 128, 1, 1 << 20, &m->sliding_window) ||
	    cfg_int(c, "index_n_heads", 64, 1, HEAD_MAX, &m->index_n_heads) ||
	    cfg_int(c, "index_head_dim", 128, 2, HEAD_MAX, &m->index_head_dim) ||
	    cfg_int(c, "index_topk", 512, 1, DIM_MAX, &m->index_topk) ||
	    cfg_int(c, "hc_mult", 4, 1, 64, &m->hc_mult) ||
	    cfg_int(c, "hc_sinkhorn_iters", 20, 1, 1000, &m->hc_iters) ||
	    cfg_pos(c, "hc_eps", 1e-6, &m->hc_eps) ||
	    cfg_bool(c, "attention_bias", 0, &bias) || parse_rope_dims(c, m))
		return -1;
	if (bias)
		return coli_errf(c->e, COLI_EDATA, "%s: attention_bias: true unsupported (transformers' deepseek_v4 has no "
				 "projection biases)", c->name);
	if (m->n_heads % m->o_groups)
		return coli_errf(c->e, COLI_EDATA, "%s: o_groups: %d does not divide num_attention_heads %d", c->name,
				 m->o_groups, m->n_heads);
	if (m->index_head_dim < m->qk_rope_head_dim)
		return coli_errf(c->e, COLI_EDATA, "%s: index_head_dim: %d is less than qk_rope_head_dim %d (the indexer "
				 "rotates its last qk_rope_head_dim dims)", c->name, m->index_head_dim, m->qk_rope_head_dim);
	return 0;
}

int mdl_parse_v4(const cfg *c, coli_model *m)
{
	m->attn = COLI_ATTN_V4;
	if (parse_widths(c, m) ||
	    cfg_int(c, "num_nextn_predict_layers", 0, 0, COLI_MAX_LAYERS - m->n_layers, &m->n_mtp_layers) ||
	    cfg_pos(c, "compress_rope_theta", 160000, &m->rope_compress.theta))
		return -1;
	return parse_schedule(c, m);
}

/* The router: sqrt(softplus) scores, noaux_tc's correction bias for the choice, no expert
 * groups, the chosen weights always renormalised (transformers reads no flag: false would not
 * be computed), the first num_hash_layers routed by token id; experts' SwiGLU clamped. */
int mdl_parse_v4_moe(const cfg *c, coli_model *m)
{
	int groups;
	m->router = COLI_ROUTER_SQRTSOFTPLUS;
	m->norm_topk_prob = 1;
	if (cfg_want_str(c, "scoring_func", "sqrtsoftplus", "sqrtsoftplus") ||
	    cfg_want_str(c, "topk_method", "noaux_tc", "noaux_tc") ||
	    cfg_want_true(c, "norm_topk_prob", "transformers' deepseek_v4 always renormalises the chosen weights") ||
	    cfg_pos(c, "routed_scaling_factor", 1.5, &m->routed_scaling_factor) ||
	    cfg_int(c, "n_shared_experts", 1, 0, 1, &m->n_shared_experts) ||
	    cfg_int(c, "num_hash_layers", 3, 0, COLI_MAX_LAYERS, &m->n_hash_layers) || /* more than the layers: all */
	    cfg_num(c, "swiglu_limit", 10.0, &m->swiglu_limit) ||
	    cfg_int(c, "n_group", 1, 1, 1, &groups) || cfg_int(c, "topk_group", 1, 1, 1, &groups))
		return -1;
	if (m->swiglu_limit < 0)
		return coli_errf(c->e, COLI_EDATA, "%s: swiglu_limit: %g is negative", c->name, m->swiglu_limit);
	m->has_correction_bias = m->n_hash_layers < m->n_layers || m->n_mtp_layers > 0;
	memset(m->is_moe, 1, (size_t)(m->n_layers + m->n_mtp_layers)); /* no dense layers */
	return 0;
}

/* After the RoPE object is read (mdl_parse_rope, into m->rope): its scaling (YaRN) is the
 * compressed layers' with cos and sin unscaled (attention_factor 1: transformers fixes it so),
 * the window-only layers rotate plainly at rope_theta; expert_dtype fp4 or absent. */
int mdl_parse_v4_late(const cfg *c, coli_model *m)
{
	const char *dtype;
	double theta = m->rope_compress.theta, af;
	json_t *ro;
	if (mdl_rope_object(c, &ro) || cfg_str(c, "expert_dtype", "", &dtype))
		return -1;
	cfg r = {ro, "rope_scaling.", c->name, c->e};
	if (ro && cfg_num(&r, "attention_factor", 1.0, &af))
		return -1;
	if (ro && af != 1.0)
		return coli_errf(c->e, COLI_EDATA, "%s: rope_scaling.attention_factor: %g unsupported (deepseek_v4 leaves "
				 "cos and sin unscaled: 1)", c->name, af);
	if (*dtype && strcmp(dtype, "fp4"))
		return coli_errf(c->e, COLI_EDATA, "%s: expert_dtype: '%s' unsupported (fp4, or absent)", c->name, dtype);
	m->fp4_experts = *dtype != 0;
	m->rope_compress = m->rope;
	m->rope_compress.theta = theta, m->rope_compress.attn_factor = 1.0;
	m->rope.scaling = COLI_ROPE_NONE, m->rope.factor = 1.0;
	return 0;
}
