/* model_hybrid.c: config.json keys of qwen3_5_moe (Qwen3.5/3.6-35B-A3B, Qwen3.8): the text
 * model's config (text_config of the multimodal release), Gated DeltaNet ("linear_attention")
 * layers beside gated full attention, (1 + w) RMSNorms, the sigmoid-gated shared expert, MTP. */
#include <string.h>

#include "model_cfg.h"

/* layer_types ("linear_attention" / "full_attention" per layer), else transformers' schedule:
 * layer i is full attention when (i + 1) is a multiple of full_attention_interval (default 4). */
static int parse_layer_types(const cfg *c, coli_model *m)
{
	json_t *v = cfg_get(c, "layer_types");
	int every;
	if (!v) {
		if (cfg_int(c, "full_attention_interval", 4, 1, COLI_MAX_LAYERS, &every))
			return -1;
		for (int i = 0; i < m->n_layers; i++)
			m->is_linear[i] = (i + 1) % every != 0;
		return 0;
	}
	if (!json_is_array(v) || json_array_size(v) != (size_t)m->n_layers)
		return coli_errf(c->e, COLI_EDATA, "%s: %slayer_types: expected an array of %d entries", c->name, c->prefix,
				 m->n_layers);
	for (int i = 0; i < m->n_layers; i++) {
		const char *t = json_string_value(json_array_get(v, (size_t)i));
		if (!t || (strcmp(t, "linear_attention") && strcmp(t, "full_attention")))
			return coli_errf(c->e, COLI_EDATA, "%s: %slayer_types[%d]: '%s' unsupported (supported: "
					 "linear_attention, full_attention)", c->name, c->prefix, i, t ? t : "(not a string)");
		m->is_linear[i] = !strcmp(t, "linear_attention");
	}
	return 0;
}

/* The Gated DeltaNet's widths: key heads (q and k) serve num_value_heads / num_key_heads
 * consecutive value heads each. */
static int parse_gdn(const cfg *c, coli_model *m)
{
	if (cfg_int(c, "linear_num_key_heads", 16, 1, HEAD_MAX, &m->lin_k_heads) ||
	    cfg_int(c, "linear_num_value_heads", 32, 1, HEAD_MAX, &m->lin_v_heads) ||
	    cfg_int(c, "linear_key_head_dim", 128, 1, HEAD_MAX, &m->lin_k_dim) ||
	    cfg_int(c, "linear_value_head_dim", 128, 1, HEAD_MAX, &m->lin_v_dim) ||
	    cfg_int(c, "linear_conv_kernel_dim", 4, 1, 64, &m->lin_conv))
		return -1;
	if (m->lin_v_heads % m->lin_k_heads)
		return coli_errf(c->e, COLI_EDATA, "%s: %slinear_num_value_heads: %d is not a multiple of "
				 "linear_num_key_heads %d", c->name, c->prefix, m->lin_v_heads, m->lin_k_heads);
	return 0;
}

int mdl_parse_hybrid(const cfg *c, coli_model *m)
{
	const char *why = "transformers' qwen3_5_moe always gates the attention output";
	m->qk_norm = COLI_QKNORM_HEAD;
	m->norm_offset = 1;
	m->attn_gate = 1;
	return cfg_want_true(c, "attn_output_gate", why) || parse_layer_types(c, m) || parse_gdn(c, m);
}

int mdl_parse_hybrid_moe(const cfg *c, coli_model *m)
{
	int dedicated, norm;
	if (cfg_int(c, "shared_expert_intermediate_size", 512, 0, DIM_MAX, &m->shared_inter) ||
	    cfg_bool(c, "norm_topk_prob", 1, &norm) || cfg_int(c, "mtp_num_hidden_layers", 0, 0, 1, &m->n_mtp_layers) ||
	    cfg_bool(c, "mtp_use_dedicated_embeddings", 0, &dedicated))
		return -1;
	if (!norm)
		return coli_errf(c->e, COLI_EDATA, "%s: %snorm_topk_prob: false unsupported (transformers' qwen3_5_moe "
				 "always renormalises the top-k)", c->name, c->prefix);
	if (dedicated)
		return coli_errf(c->e, COLI_EDATA, "%s: %smtp_use_dedicated_embeddings: true unsupported (the MTP layer "
				 "reads the model's embedding)", c->name, c->prefix);
	m->router = COLI_ROUTER_SOFTMAX_TOPK;
	m->norm_topk_prob = 1;
	m->n_shared_experts = m->shared_inter > 0;
	m->shared_gate = m->shared_inter > 0;
	memset(m->is_moe, 1, (size_t)m->n_layers);
	return 0;
}

/* The multimodal release nests the text model's keys in text_config; tie_word_embeddings may
 * stand at the root (both present and different is refused). */
int mdl_text_config(const cfg *root, cfg *text, coli_model *m)
{
	json_t *t = cfg_get(root, "text_config");
	int tie_root, tie_text;
	*text = *root;
	if (!t)
		return cfg_bool(root, "tie_word_embeddings", 0, &m->tie_word_embeddings);
	if (!json_is_object(t))
		return cfg_bad_type(root, "text_config", "an object", t);
	*text = (cfg){t, "text_config.", root->name, root->e};
	if (cfg_bool(root, "tie_word_embeddings", 0, &tie_root) || cfg_bool(text, "tie_word_embeddings", tie_root, &tie_text))
		return -1;
	if (tie_root != tie_text && cfg_get(root, "tie_word_embeddings"))
		return coli_errf(root->e, COLI_EDATA, "%s: text_config.tie_word_embeddings: %s differs from "
				 "tie_word_embeddings %s", root->name, tie_text ? "true" : "false", tie_root ? "true" : "false");
	m->tie_word_embeddings = tie_text;
	return 0;
}
