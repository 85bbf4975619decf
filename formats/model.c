/* model.c: reads an HF config.json into a coli_model, applying HF transformers v4.57 defaults. */
#include "model.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "model_cfg.h"

#define SUPPORTED "deepseek_v3, glm4_moe, qwen3_moe, olmoe, mixtral, glm_moe_dsa, qwen3_5_moe, deepseek_v4"

static const char *const family_names[COLI_FAM_COUNT] = {
	"deepseek_v3", "glm4_moe", "qwen3_moe", "olmoe", "mixtral", "glm_moe_dsa", "qwen3_5_moe", "deepseek_v4",
};

/* The defaults of each family's HF config class (v4.57) that differ between families. */
typedef struct fam_desc {
	const char *experts_key; /* the routed-expert count's key */
	int experts, top_k;
	int moe_inter;           /* 0: the experts use intermediate_size */
	int max_pos;
	double eps, theta;
	int kv_heads;            /* 0: num_attention_heads */
	int norm_topk;
	double rotary_factor;
} fam_desc;

static const fam_desc fams[COLI_FAM_COUNT] = {
	[COLI_FAM_DEEPSEEK_V3] = {"n_routed_experts", 256, 8, 2048, 4096, 1e-6, 10000.0, 128, 1, 1.0},
	[COLI_FAM_GLM4_MOE] = {"n_routed_experts", 128, 8, 1408, 131072, 1e-5, 10000.0, 8, 1, 0.5},
	[COLI_FAM_QWEN3_MOE] = {"num_experts", 128, 8, 768, 32768, 1e-6, 10000.0, 4, 0, 1.0},
	[COLI_FAM_OLMOE] = {"num_experts", 64, 8, 0, 4096, 1e-5, 10000.0, 0, 0, 1.0},
	[COLI_FAM_MIXTRAL] = {"num_local_experts", 8, 2, 0, 131072, 1e-5, 1e6, 8, 1, 1.0},
	[COLI_FAM_GLM_MOE_DSA] = {"n_routed_experts", 256, 8, 2048, 202752, 1e-5, 10000.0, 64, 1, 1.0},
	[COLI_FAM_QWEN3_5_MOE] = {"num_experts", 256, 8, 512, 262144, 1e-6, 10000000.0, 2, 1, 0.25},
	[COLI_FAM_DEEPSEEK_V4] = {"n_routed_experts", 256, 6, 2048, 1048576, 1e-6, 10000.0, 1, 1, 0.125},
};

const char *coli_family_name(coli_family f)
{
	return f >= 0 && f < COLI_FAM_COUNT ? family_names[f] : "?";
}

static int parse_family(const cfg *c, coli_model *m)
{
	json_t *v = cfg_get(c, "model_type");
	if (!v)
		return coli_errf(c->e, COLI_EDATA, "%s: model_type: missing (supported: " SUPPORTED
				 ")", c->name);
	if (!json_is_string(v))
		return cfg_bad_type(c, "model_type", "a string", v);
	const char *s = json_string_value(v);
	if (!strcmp(s, "qwen3_5_moe_text")) /* the text model alone (Qwen3_5MoeForCausalLM) */
		s = "qwen3_5_moe";
	for (int f = 0; f < COLI_FAM_COUNT; f++) {
		if (!strcmp(s, family_names[f])) {
			m->family = (coli_family)f;
			snprintf(m->model_type, sizeof(m->model_type), "%s", s);
			return 0;
		}
	}
	return coli_errf(c->e, COLI_EDATA, "%s: model_type '%s' unsupported (supported: "
			 SUPPORTED ")", c->name, s);
}

/* "dtype" (transformers >= 4.56) or "torch_dtype" (older checkpoints). */
static int parse_dtype(const cfg *c, coli_model *m)
{
	const char *key = cfg_get(c, "dtype") ? "dtype" : "torch_dtype";
	const char *s;
	if (cfg_str(c, key, "", &s))
		return -1;
	if (strlen(s) >= sizeof(m->dtype))
		return coli_errf(c->e, COLI_EDATA, "%s: %s: '%s' is not a known dtype", c->name,
				 key, s);
	snprintf(m->dtype, sizeof(m->dtype), "%s", s);
	return 0;
}

static int parse_sizes(const cfg *c, coli_model *m)
{
	const fam_desc *d = &fams[m->family];
	if (cfg_int(c, "vocab_size", CFG_REQUIRED, 1, 1 << 24, &m->vocab_size) ||
	    cfg_int(c, "hidden_size", CFG_REQUIRED, 1, DIM_MAX, &m->hidden_size) ||
	    cfg_int(c, "num_hidden_layers", CFG_REQUIRED, 1, COLI_MAX_LAYERS, &m->n_layers) ||
	    cfg_int(c, "num_attention_heads", CFG_REQUIRED, 1, HEAD_MAX, &m->n_heads) ||
	    (m->family != COLI_FAM_QWEN3_5_MOE && m->family != COLI_FAM_DEEPSEEK_V4 && /* every layer MoE */
	     cfg_int(c, "intermediate_size", CFG_REQUIRED, 1, DIM_MAX, &m->intermediate_size)) ||
	    cfg_int(c, "max_position_embeddings", d->max_pos, 1, INT_MAX,
		    &m->max_position_embeddings) ||
	    cfg_pos(c, "rms_norm_eps", d->eps, &m->rms_norm_eps) ||
	    (m->family != COLI_FAM_QWEN3_5_MOE && cfg_bool(c, "tie_word_embeddings", 0, &m->tie_word_embeddings)) ||
	    cfg_want_str(c, "hidden_act", "silu", "silu"))
		return -1;
	return parse_dtype(c, m);
}

/* Keys MLA computes one way only: every head its own KV head (transformers repeats KV heads
 * num_attention_heads / num_key_value_heads times, which MLA's latent cache has no room for),
 * the whole rope part rotated. */
static int mla_pinned(const cfg *c, const coli_model *m)
{
	int kv;
	double f;
	if (cfg_int(c, "num_key_value_heads", m->n_heads, 1, HEAD_MAX, &kv) ||
	    mdl_rope_num(c, "partial_rotary_factor", 1.0, &f))
		return -1;
	if (kv != m->n_heads)
		return coli_errf(c->e, COLI_EDATA, "%s: num_key_value_heads: %d unsupported with MLA (must equal "
				 "num_attention_heads %d)", c->name, kv, m->n_heads);
	if (f != 1.0)
		return coli_errf(c->e, COLI_EDATA, "%s: partial_rotary_factor: %g unsupported with MLA (its rope part, "
				 "qk_rope_head_dim, is rotated whole)", c->name, f);
	return 0;
}

/* DeepSeek MLA. HF: q_a_proj, kv_a_proj_with_mqa and o_proj carry attention_bias. */
static int parse_mla(const cfg *c, coli_model *m)
{
	int bias;
	m->attn = COLI_ATTN_MLA;
	m->q_lora_rank = 0;
	if ((!cfg_is_null(c, "q_lora_rank") &&
	     cfg_int(c, "q_lora_rank", 1536, 0, DIM_MAX, &m->q_lora_rank)) ||
	    cfg_int(c, "kv_lora_rank", 512, 1, DIM_MAX, &m->kv_lora_rank) ||
	    cfg_int(c, "qk_nope_head_dim", 128, 0, HEAD_MAX, &m->qk_nope_head_dim) ||
	    cfg_int(c, "qk_rope_head_dim", 64, 2, HEAD_MAX, &m->qk_rope_head_dim) ||
	    cfg_int(c, "v_head_dim", 128, 1, HEAD_MAX, &m->v_head_dim) ||
	    cfg_bool(c, "rope_interleave", 1, &m->rope.interleave) ||
	    cfg_bool(c, "attention_bias", 0, &bias))
		return -1;
	if (m->qk_rope_head_dim % 2)
		return coli_errf(c->e, COLI_EDATA, "%s: qk_rope_head_dim: %d is odd", c->name,
				 m->qk_rope_head_dim);
	m->n_kv_heads = m->n_heads;
	m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
	m->rope.rotary_dim = m->qk_rope_head_dim;
	m->qkv_bias = m->o_bias = bias;
	return mla_pinned(c, m);
}

/* num_key_value_heads: family default when absent, num_attention_heads when null. */
static int parse_kv_heads(const cfg *c, coli_model *m)
{
	int def = fams[m->family].kv_heads ? fams[m->family].kv_heads : m->n_heads;
	if (cfg_is_null(c, "num_key_value_heads"))
		def = m->n_heads;
	if (cfg_int(c, "num_key_value_heads", def, 1, m->n_heads, &m->n_kv_heads))
		return -1;
	if (m->n_heads % m->n_kv_heads)
		return coli_errf(c->e, COLI_EDATA, "%s: num_attention_heads: %d not divisible by "
				 "num_key_value_heads %d", c->name, m->n_heads, m->n_kv_heads);
	return 0;
}

/* head_dim from config.json when set, else hidden_size / num_attention_heads (HF getattr);
 * olmoe's reference always uses hidden_size / num_attention_heads, so another value is refused. */
static int parse_head_dim(const cfg *c, coli_model *m)
{
	if (cfg_get(c, "head_dim") && m->family == COLI_FAM_OLMOE && m->hidden_size % m->n_heads == 0 &&
	    cfg_int(c, "head_dim", 0, m->hidden_size / m->n_heads, m->hidden_size / m->n_heads, &m->head_dim))
		return -1;
	if (cfg_get(c, "head_dim"))
		return cfg_int(c, "head_dim", 0, 1, HEAD_MAX, &m->head_dim);
	if (m->hidden_size % m->n_heads)
		return coli_errf(c->e, COLI_EDATA, "%s: hidden_size: %d not divisible by "
				 "num_attention_heads %d", c->name, m->hidden_size, m->n_heads);
	m->head_dim = m->hidden_size / m->n_heads;
	return 0;
}

/* Rotary dims = int(head_dim x partial_rotary_factor), as HF's default rope init computes. */
static int parse_rotary_dim(const cfg *c, coli_model *m)
{
	double f;
	if (mdl_rope_num(c, "partial_rotary_factor", fams[m->family].rotary_factor, &f))
		return -1;
	m->rope.rotary_dim = (int)(m->head_dim * f);
	if (f > 1 || m->rope.rotary_dim < 2 || m->rope.rotary_dim % 2)
		return coli_errf(c->e, COLI_EDATA, "%s: partial_rotary_factor: %g gives %d rotary "
				 "dims of head_dim %d (need an even count >= 2)", c->name, f,
				 m->rope.rotary_dim, m->head_dim);
	return 0;
}

/* qwen3_moe: sliding_window only when use_sliding_window; mixtral: sliding_window or null. */
static int parse_window(const cfg *c, coli_model *m)
{
	int use = m->family == COLI_FAM_MIXTRAL;
	if (m->family == COLI_FAM_QWEN3_MOE && cfg_bool(c, "use_sliding_window", 0, &use))
		return -1;
	if (!use)
		return 0;
	int def = m->family == COLI_FAM_QWEN3_MOE ? 4096 : 0; /* HF Qwen3MoeConfig default */
	if (cfg_is_null(c, "sliding_window")) /* null: no window, whatever use_sliding_window says */
		return 0;
	return cfg_int(c, "sliding_window", def, 0, INT_MAX, &m->sliding_window);
}

/* Per-family q/k norm and projection biases. */
static int parse_gqa_extras(const cfg *c, coli_model *m)
{
	int bias = 0, qk = 0;
	if (m->family != COLI_FAM_MIXTRAL && cfg_bool(c, "attention_bias", 0, &bias))
		return -1;
	switch (m->family) {
	case COLI_FAM_GLM4_MOE:
		if (cfg_bool(c, "use_qk_norm", 0, &qk))
			return -1;
		m->qk_norm = qk ? COLI_QKNORM_HEAD : COLI_QKNORM_NONE;
		m->qkv_bias = bias;
		break;
	case COLI_FAM_QWEN3_MOE:
	case COLI_FAM_QWEN3_5_MOE:
		m->qk_norm = COLI_QKNORM_HEAD;
		m->qkv_bias = m->o_bias = bias;
		break;
	case COLI_FAM_OLMOE:
		m->qk_norm = COLI_QKNORM_WHOLE;
		m->qkv_bias = m->o_bias = bias;
		if (cfg_get(c, "clip_qkv") && cfg_pos(c, "clip_qkv", 0, &m->clip_qkv))
			return -1;
		break;
	default:
		break;
	}
	return 0;
}

static int parse_attention(const cfg *c, coli_model *m)
{
	if (mdl_rope_num(c, "rope_theta", fams[m->family].theta, &m->rope.theta))
		return -1;
	if (m->family == COLI_FAM_DEEPSEEK_V3)
		return parse_mla(c, m);
	if (m->family == COLI_FAM_GLM_MOE_DSA)
		return parse_mla(c, m) || mdl_parse_dsa(c, m);
	if (m->family == COLI_FAM_DEEPSEEK_V4)
		return mdl_parse_v4(c, m);
	m->attn = COLI_ATTN_GQA;
	if (parse_kv_heads(c, m) || parse_head_dim(c, m) || parse_rotary_dim(c, m) || parse_window(c, m))
		return -1;
	if (m->family == COLI_FAM_QWEN3_5_MOE)
		return parse_gqa_extras(c, m) || mdl_parse_hybrid(c, m);
	if (m->family != COLI_FAM_MIXTRAL && cfg_all_layers_are(c, m, "full_attention"))
		return -1;
	return parse_gqa_extras(c, m);
}

/* scoring_func / topk_method are Hub extras; only the sigmoid noaux_tc router is modelled. */
static int parse_sigmoid_router(const cfg *c, coli_model *m)
{
	int sigmoid_defaults = m->family == COLI_FAM_DEEPSEEK_V3; /* n_group 8, topk_group 4 */
	if (cfg_pos(c, "routed_scaling_factor", m->family == COLI_FAM_GLM4_MOE ? 1.0 : 2.5,
		    &m->routed_scaling_factor) ||
	    cfg_int(c, "n_shared_experts", 1, 0, 1024, &m->n_shared_experts) ||
	    cfg_want_str(c, "scoring_func", "sigmoid", "sigmoid") ||
	    cfg_want_str(c, "topk_method", "noaux_tc", "noaux_tc") ||
	    cfg_int(c, "n_group", sigmoid_defaults ? 8 : 1, 1, m->n_experts, &m->n_group))
		return -1;
	m->router = COLI_ROUTER_SIGMOID_GROUP;
	m->has_correction_bias = 1;
	int per = m->n_experts / m->n_group;
	if (m->n_experts % m->n_group || per < 2)
		return coli_errf(c->e, COLI_EDATA, "%s: n_group: %d does not split %s %d into "
				 "groups of >= 2", c->name, m->n_group, fams[m->family].experts_key,
				 m->n_experts);
	if (cfg_int(c, "topk_group", sigmoid_defaults ? 4 : 1, 1, m->n_group, &m->topk_group))
		return -1;
	if (m->top_k > m->topk_group * per)
		return coli_errf(c->e, COLI_EDATA, "%s: num_experts_per_tok: %d exceeds the %d "
				 "experts of topk_group %d groups", c->name, m->top_k,
				 m->topk_group * per, m->topk_group);
	return 0;
}

static int parse_router(const cfg *c, coli_model *m)
{
	const fam_desc *d = &fams[m->family];
	m->routed_scaling_factor = 1.0;
	m->n_group = m->topk_group = 1;
	switch (m->family) {
	case COLI_FAM_DEEPSEEK_V3:
	case COLI_FAM_GLM4_MOE:
	case COLI_FAM_GLM_MOE_DSA:
		return cfg_bool(c, "norm_topk_prob", d->norm_topk, &m->norm_topk_prob) ||
		       parse_sigmoid_router(c, m);
	case COLI_FAM_QWEN3_5_MOE:
		return mdl_parse_hybrid_moe(c, m);
	case COLI_FAM_DEEPSEEK_V4:
		return mdl_parse_v4_moe(c, m);
	case COLI_FAM_MIXTRAL:
		m->router = COLI_ROUTER_TOPK_SOFTMAX; /* a softmax over the k: always normalised */
		m->norm_topk_prob = 1;
		return 0;
	default:
		m->router = COLI_ROUTER_SOFTMAX_TOPK;
		return cfg_bool(c, "norm_topk_prob", d->norm_topk, &m->norm_topk_prob);
	}
}

/* The routed-expert count under the family's key, or under the other spelling transformers 5
 * maps onto it (attribute_map); both present and different is refused. */
static int parse_expert_count(const cfg *c, coli_model *m)
{
	const char *key = fams[m->family].experts_key;
	const char *alias = strcmp(key, "num_local_experts") ? "num_local_experts" : "num_experts";
	int a;
	if (!cfg_get(c, alias))
		return cfg_int(c, key, fams[m->family].experts, 1, 1 << 16, &m->n_experts);
	if (cfg_int(c, alias, 0, 1, 1 << 16, &a))
		return -1;
	if (cfg_int(c, key, a, 1, 1 << 16, &m->n_experts))
		return -1;
	if (a != m->n_experts)
		return coli_errf(c->e, COLI_EDATA, "%s: %s: %d differs from %s %d (two spellings of the expert count)",
				 c->name, alias, a, key, m->n_experts);
	return 0;
}

static int parse_moe(const cfg *c, coli_model *m)
{
	const fam_desc *d = &fams[m->family];
	if (parse_expert_count(c, m) ||
	    cfg_int(c, "num_experts_per_tok", d->top_k, 1, 1 << 16, &m->top_k))
		return -1;
	if (m->top_k > m->n_experts)
		return coli_errf(c->e, COLI_EDATA, "%s: num_experts_per_tok: %d exceeds %s %d",
				 c->name, m->top_k, d->experts_key, m->n_experts);
	m->moe_intermediate_size = m->intermediate_size;
	if (d->moe_inter && cfg_int(c, "moe_intermediate_size", d->moe_inter, 1, DIM_MAX,
				    &m->moe_intermediate_size))
		return -1;
	return parse_router(c, m);
}

/* qwen3_moe: layer i is MoE unless listed in mlp_only_layers or (i+1) % step != 0. */
static int parse_qwen3_layers(const cfg *c, coli_model *m)
{
	int step;
	if (cfg_int(c, "decoder_sparse_step", 1, 1, COLI_MAX_LAYERS, &step))
		return -1;
	for (int i = 0; i < m->n_layers; i++)
		m->is_moe[i] = (i + 1) % step == 0;
	json_t *list = cfg_get(c, "mlp_only_layers");
	if (list && !json_is_array(list))
		return cfg_bad_type(c, "mlp_only_layers", "an array", list);
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= m->n_layers)
			return coli_errf(c->e, COLI_EDATA, "%s: mlp_only_layers[%zu]: not a layer "
					 "index in [0, %d]", c->name, i, m->n_layers - 1);
		m->is_moe[json_integer_value(v)] = 0;
	}
	return 0;
}

/* Dense first layers (first_k_dense_replace; >= n_layers: all dense, as HF), then every
 * moe_layer_freq-th layer (DeepSeek's own code; HF ignores the key, its default is 1). */
static int parse_dense_first(const cfg *c, coli_model *m)
{
	int first, freq = 1;
	int def = m->family == COLI_FAM_GLM4_MOE ? 1 : 3;
	if (cfg_int(c, "first_k_dense_replace", def, 0, COLI_MAX_LAYERS, &first))
		return -1;
	/* DeepSeek's own code reads moe_layer_freq; glm4_moe's and glm_moe_dsa's references ignore it,
	 * so there only 1 (what they compute) is taken. */
	if (cfg_int(c, "moe_layer_freq", 1, 1, m->family == COLI_FAM_DEEPSEEK_V3 ? COLI_MAX_LAYERS : 1, &freq))
		return -1;
	for (int i = 0; i < m->n_layers; i++)
		m->is_moe[i] = i >= first && i % freq == 0;
	return cfg_int(c, "num_nextn_predict_layers", 0, 0, COLI_MAX_LAYERS - m->n_layers,
		       &m->n_mtp_layers);
}

/* Which layers are MoE; MTP layers (deepseek_v3, glm4_moe, glm_moe_dsa) always are, and run the
 * DSA indexer on their own (the checkpoint carries one for them). */
static int parse_layers(const cfg *c, coli_model *m)
{
	int rc = 0;
	switch (m->family) {
	case COLI_FAM_DEEPSEEK_V3:
	case COLI_FAM_GLM4_MOE:
		rc = parse_dense_first(c, m);
		break;
	case COLI_FAM_GLM_MOE_DSA:
		rc = parse_dense_first(c, m) || mdl_parse_mlp_layer_types(c, m);
		break;
	case COLI_FAM_QWEN3_MOE:
		rc = parse_qwen3_layers(c, m);
		break;
	case COLI_FAM_QWEN3_5_MOE: /* every layer MoE (mdl_parse_hybrid_moe) */
		break;
	case COLI_FAM_DEEPSEEK_V4: /* every layer MoE, the MTP layers' kinds with the others' (model_v4.c) */
		return 0;
	default:
		memset(m->is_moe, 1, (size_t)m->n_layers);
		break;
	}
	for (int i = 0; !rc && i < m->n_mtp_layers; i++) {
		m->is_moe[m->n_layers + i] = 1;
		m->index_full[m->n_layers + i] = m->index_topk > 0;
	}
	return rc;
}

static int parse_block_size(const cfg *c, coli_model *m)
{
	json_t *v = cfg_get(c, "weight_block_size");
	m->fp8_block[0] = m->fp8_block[1] = 128; /* HF FineGrainedFP8Config default */
	if (!v && cfg_is_null(c, "weight_block_size"))
		return coli_errf(c->e, COLI_EDATA, "%s: quantization_config.weight_block_size: null (one scale per "
				 "tensor) unsupported: coli reads block scales", c->name);
	if (!v)
		return 0;
	if (!json_is_array(v) || json_array_size(v) != 2)
		return coli_errf(c->e, COLI_EDATA, "%s: quantization_config.weight_block_size: "
				 "expected an array of 2 integers", c->name);
	for (int i = 0; i < 2; i++) {
		json_t *x = json_array_get(v, (size_t)i);
		if (!json_is_integer(x) || json_integer_value(x) < 1 ||
		    json_integer_value(x) > DIM_MAX)
			return coli_errf(c->e, COLI_EDATA, "%s: quantization_config."
					 "weight_block_size[%d]: expected an integer in [1, %lld]",
					 c->name, i, DIM_MAX);
		m->fp8_block[i] = (int)json_integer_value(x);
	}
	return 0;
}

/* quantization_config: absent, or fp8 e4m3 with a weight block size. */
static int parse_quant(const cfg *top, coli_model *m)
{
	json_t *v = cfg_get(top, "quantization_config");
	if (!v)
		return 0;
	if (!json_is_object(v))
		return cfg_bad_type(top, "quantization_config", "an object", v);
	cfg c = {v, "quantization_config.", top->name, top->e};
	/* scale_fmt ue8m0: every scale a power of two (however stored: F32 or F8_E8M0) */
	if (cfg_want_str(&c, "quant_method", NULL, "fp8") || cfg_want_str(&c, "fmt", "e4m3", "e4m3") ||
	    cfg_want_str(&c, "activation_scheme", "dynamic", "dynamic") ||
	    cfg_want_str(&c, "scale_fmt", "ue8m0", "ue8m0") || parse_block_size(&c, m))
		return -1;
	m->fp8 = 1;
	return 0;
}

static int parse_root(coli_model *m, json_t *root, const char *name, coli_err *e)
{
	cfg top = {root, "", name, e}, c;
	memset(m, 0, sizeof(*m));
	if (parse_family(&top, m) || (m->family == COLI_FAM_QWEN3_5_MOE ? mdl_text_config(&top, &c, m) : (c = top, 0)) ||
	    parse_sizes(&c, m) || parse_attention(&c, m) || parse_moe(&c, m) || parse_layers(&c, m) ||
	    mdl_parse_rope(&c, m) || (m->family == COLI_FAM_DEEPSEEK_V4 && mdl_parse_v4_late(&c, m)) ||
	    parse_quant(&top, m))
		return -1;
	if (!m->shared_inter) /* DeepSeek's and GLM's shared experts: n_shared_experts of the routed size */
		m->shared_inter = m->moe_intermediate_size * m->n_shared_experts;
	return 0;
}

int coli_model_parse(coli_model *m, const char *json_text, const char *name, coli_err *e)
{
	json_error_t je;
	json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return coli_errf(e, COLI_EDATA, "%s: invalid JSON at line %d column %d: %s", name,
				 je.line, je.column, je.text);
	int rc = json_is_object(root) ? parse_root(m, root, name, e)
				      : coli_errf(e, COLI_EDATA, "%s: not a JSON object", name);
	json_decref(root);
	return rc;
}

int coli_model_load(coli_model *m, const char *config_path, coli_err *e)
{
	char *text;
	if (coli_read_file(config_path, &text, NULL, e))
		return -1;
	int rc = coli_model_parse(m, text, config_path, e);
	free(text);
	return rc;
}
