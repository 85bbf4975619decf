/* model_dsa.c: config.json keys of glm_moe_dsa (GLM-5.2/5.3): the DSA lightning indexer and
 * the per-layer MLP kinds. */
#include <string.h>

#include "model_cfg.h"

/* indexer_types: a list of "full" / "shared" per layer; else index_topk_pattern ("FSSF..." or
 * such a list); else the schedule transformers derives: layer i is full when
 * max(i - index_skip_topk_offset + 1, 0) is a multiple of index_topk_freq (defaults 2 and 1). */
static int parse_indexer_types(const cfg *c, coli_model *m)
{
	const char *key = cfg_get(c, "indexer_types") ? "indexer_types" : "index_topk_pattern";
	json_t *v = cfg_get(c, key);
	if (!v) {
		int freq, offset;
		if (cfg_int(c, "index_topk_freq", 1, INT_MIN, INT_MAX, &freq) ||
		    cfg_int(c, "index_skip_topk_offset", 2, INT_MIN + COLI_MAX_LAYERS, INT_MAX - COLI_MAX_LAYERS, &offset))
			return -1;
		freq = freq < 1 ? 1 : freq;
		for (int i = 0; i < m->n_layers; i++)
			m->index_full[i] = (i - offset + 1 > 0 ? i - offset + 1 : 0) % freq == 0;
		return 0;
	}
	size_t n = json_is_string(v) ? strlen(json_string_value(v)) : json_array_size(v);
	if (!json_is_array(v) && !(json_is_string(v) && !strcmp(key, "index_topk_pattern")))
		return cfg_bad_type(c, key, "an array", v);
	if (n != (size_t)m->n_layers)
		return coli_errf(c->e, COLI_EDATA, "%s: %s: %zu entries, num_hidden_layers is %d", c->name, key, n,
				 m->n_layers);
	for (size_t i = 0; i < n; i++) {
		const char *t = json_is_string(v) ? (json_string_value(v)[i] == 'F' ? "full" : json_string_value(v)[i] == 'S' ? "shared" : "?")
						  : json_string_value(json_array_get(v, i));
		if (!t || (strcmp(t, "full") && strcmp(t, "shared")))
			return coli_errf(c->e, COLI_EDATA, "%s: %s[%zu]: expected \"full\" or \"shared\"%s", c->name, key, i,
					 json_is_string(v) ? " (F or S)" : "");
		m->index_full[i] = !strcmp(t, "full");
	}
	return 0;
}

/* GLM-MoE-DSA: MLA plus the DSA lightning indexer. transformers interleaves the RoPE pairs of
 * MLA and of the indexer whatever rope_interleave and indexer_rope_interleave say, so false is
 * refused rather than ignored. */
int mdl_parse_dsa(const cfg *c, coli_model *m)
{
	const char *why = "transformers' glm_moe_dsa always rotates interleaved pairs";
	if (cfg_int(c, "index_topk", 2048, 1, DIM_MAX, &m->index_topk) ||
	    cfg_int(c, "index_n_heads", 32, 1, HEAD_MAX, &m->index_n_heads) ||
	    cfg_int(c, "index_head_dim", 128, 2, HEAD_MAX, &m->index_head_dim) ||
	    cfg_want_true(c, "rope_interleave", why) || cfg_want_true(c, "indexer_rope_interleave", why) ||
	    cfg_bool(c, "index_share_for_mtp_iteration", 0, &m->index_share_mtp) ||
	    cfg_all_layers_are(c, m, "deepseek_sparse_attention") ||
	    parse_indexer_types(c, m))
		return -1;
	if (!m->q_lora_rank)
		return coli_errf(c->e, COLI_EDATA, "%s: q_lora_rank: null, but the DSA indexer's query is made from the "
				 "query latent", c->name);
	if (m->index_head_dim < m->qk_rope_head_dim)
		return coli_errf(c->e, COLI_EDATA, "%s: index_head_dim: %d is less than qk_rope_head_dim %d (the indexer "
				 "rotates its first qk_rope_head_dim dims)", c->name, m->index_head_dim, m->qk_rope_head_dim);
	if (!m->index_full[0])
		return coli_errf(c->e, COLI_EDATA, "%s: indexer_types[0]: \"shared\", but no earlier \"full\" layer "
				 "has a selection to share", c->name);
	return 0;
}

/* glm_moe_dsa: mlp_layer_types ("dense" / "sparse" per layer) when present, which transformers
 * then reads in place of first_k_dense_replace. */
int mdl_parse_mlp_layer_types(const cfg *c, coli_model *m)
{
	json_t *v = cfg_get(c, "mlp_layer_types");
	if (!v)
		return 0;
	if (!json_is_array(v) || json_array_size(v) != (size_t)m->n_layers)
		return coli_errf(c->e, COLI_EDATA, "%s: mlp_layer_types: expected an array of %d entries", c->name,
				 m->n_layers);
	for (int i = 0; i < m->n_layers; i++) {
		const char *t = json_string_value(json_array_get(v, (size_t)i));
		if (!t || (strcmp(t, "dense") && strcmp(t, "sparse")))
			return coli_errf(c->e, COLI_EDATA, "%s: mlp_layer_types[%d]: expected \"dense\" or \"sparse\"",
					 c->name, i);
		m->is_moe[i] = !strcmp(t, "sparse");
	}
	return 0;
}

