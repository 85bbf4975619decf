/* model.c: reads an HF config.json into a coli_model, applying HF transformers v4.57 defaults. */
#include "model.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

#define SUPPORTED "deepseek_v3, glm4_moe, qwen3_moe, olmoe, mixtral, glm_moe_dsa"
#define REQUIRED LLONG_MIN  /* as a default: the field must be present */
#define DIM_MAX (1LL << 20) /* bound on hidden/intermediate/rank sizes */
#define HEAD_MAX 4096       /* bound on head counts and per-head dims */

static const char *const family_names[COLI_FAM_COUNT] = {
	"deepseek_v3", "glm4_moe", "qwen3_moe", "olmoe", "mixtral", "glm_moe_dsa",
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
};

const char *coli_family_name(coli_family f)
{
	return f >= 0 && f < COLI_FAM_COUNT ? family_names[f] : "?";
}

/* One JSON object being read: messages say "<file>: <prefix><key>: ...". */
typedef struct cfg {
	json_t *obj;
	const char *prefix; /* "" or e.g. "rope_scaling." */
	const char *name;
	coli_err *e;
} cfg;

static const char *json_kind(const json_t *v)
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

static int bad_type(const cfg *c, const char *key, const char *want, const json_t *v)
{
	return coli_errf(c->e, COLI_EDATA, "%s: %s%s: expected %s, got %s", c->name, c->prefix,
			 key, want, json_kind(v));
}

static int missing(const cfg *c, const char *key)
{
	return coli_errf(c->e, COLI_EDATA, "%s: %s%s: missing", c->name, c->prefix, key);
}

/* The value of key; NULL when absent or null (HF then uses its default). */
static json_t *cfg_get(const cfg *c, const char *key)
{
	json_t *v = json_object_get(c->obj, key);
	return json_is_null(v) ? NULL : v;
}

static int is_null(const cfg *c, const char *key)
{
	return json_is_null(json_object_get(c->obj, key));
}

static int get_int(const cfg *c, const char *key, long long def, long long lo, long long hi,
		   int *out)
{
	json_t *v = cfg_get(c, key);
	if (!v && def == REQUIRED)
		return missing(c, key);
	if (v && !json_is_integer(v))
		return bad_type(c, key, "an integer", v);
	long long x = v ? (long long)json_integer_value(v) : def;
	if (x < lo || x > hi)
		return coli_errf(c->e, COLI_EDATA, "%s: %s%s: %lld out of range [%lld, %lld]",
				 c->name, c->prefix, key, x, lo, hi);
	*out = (int)x;
	return 0;
}

static int get_num(const cfg *c, const char *key, double def, double *out)
{
	json_t *v = cfg_get(c, key);
	if (v && !json_is_number(v))
		return bad_type(c, key, "a number", v);
	*out = v ? json_number_value(v) : def;
	return 0;
}

/* A number that must be finite and > 0. */
static int get_pos(const cfg *c, const char *key, double def, double *out)
{
	if (get_num(c, key, def, out))
		return -1;
	if (!(*out > 0) || !isfinite(*out))
		return coli_errf(c->e, COLI_EDATA, "%s: %s%s: %g must be > 0", c->name, c->prefix,
				 key, *out);
	return 0;
}

static int get_bool(const cfg *c, const char *key, int def, int *out)
{
	json_t *v = cfg_get(c, key);
	if (v && !json_is_boolean(v))
		return bad_type(c, key, "a boolean", v);
	*out = v ? json_is_true(v) : def;
	return 0;
}

/* A string (pointer into the JSON tree); def NULL means required. */
static int get_str(const cfg *c, const char *key, const char *def, const char **out)
{
	json_t *v = cfg_get(c, key);
	if (!v && !def)
		return missing(c, key);
	if (v && !json_is_string(v))
		return bad_type(c, key, "a string", v);
	*out = v ? json_string_value(v) : def;
	return 0;
}

/* A string field that must be one of a few values (here: exactly `want`). */
static int want_str(const cfg *c, const char *key, const char *def, const char *want)
{
	const char *s;
	if (get_str(c, key, def, &s))
		return -1;
	if (strcmp(s, want))
		return coli_errf(c->e, COLI_EDATA, "%s: %s%s: '%s' unsupported (supported: %s)",
				 c->name, c->prefix, key, s, want);
	return 0;
}

static int parse_family(const cfg *c, coli_model *m)
{
	json_t *v = cfg_get(c, "model_type");
	if (!v)
		return coli_errf(c->e, COLI_EDATA, "%s: model_type: missing (supported: " SUPPORTED
				 ")", c->name);
	if (!json_is_string(v))
		return bad_type(c, "model_type", "a string", v);
	const char *s = json_string_value(v);
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
	if (get_str(c, key, "", &s))
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
	if (get_int(c, "vocab_size", REQUIRED, 1, 1 << 24, &m->vocab_size) ||
	    get_int(c, "hidden_size", REQUIRED, 1, DIM_MAX, &m->hidden_size) ||
	    get_int(c, "num_hidden_layers", REQUIRED, 1, COLI_MAX_LAYERS, &m->n_layers) ||
	    get_int(c, "num_attention_heads", REQUIRED, 1, HEAD_MAX, &m->n_heads) ||
	    get_int(c, "intermediate_size", REQUIRED, 1, DIM_MAX, &m->intermediate_size) ||
	    get_int(c, "max_position_embeddings", d->max_pos, 1, INT_MAX,
		    &m->max_position_embeddings) ||
	    get_pos(c, "rms_norm_eps", d->eps, &m->rms_norm_eps) ||
	    get_bool(c, "tie_word_embeddings", 0, &m->tie_word_embeddings) ||
	    want_str(c, "hidden_act", "silu", "silu"))
		return -1;
	return parse_dtype(c, m);
}

/* The RoPE parameters' object: transformers 5's nested rope_parameters (which also carries
 * rope_theta and partial_rotary_factor), else the older rope_scaling; NULL when neither. Both
 * present is refused unless rope_scaling is null or says "default". */
static int rope_object(const cfg *top, json_t **out)
{
	json_t *p = cfg_get(top, "rope_parameters"), *s = cfg_get(top, "rope_scaling");
	if (p && !json_is_object(p))
		return bad_type(top, "rope_parameters", "an object or null", p);
	if (s && !json_is_object(s))
		return bad_type(top, "rope_scaling", "an object or null", s);
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
static int get_rope_num(const cfg *top, const char *key, double def, double *out)
{
	json_t *o;
	double nested;
	if (get_pos(top, key, def, out) || rope_object(top, &o))
		return -1;
	cfg c = {o, "rope_parameters.", top->name, top->e};
	if (!o || o != cfg_get(top, "rope_parameters") || !cfg_get(&c, key))
		return 0;
	if (get_pos(&c, key, 0, &nested))
		return -1;
	if (cfg_get(top, key) && nested != *out)
		return coli_errf(top->e, COLI_EDATA, "%s: rope_parameters.%s: %g differs from %s %g", top->name, key,
				 nested, key, *out);
	*out = nested;
	return 0;
}

/* Keys MLA computes one way only: every head its own KV head (transformers repeats KV heads
 * num_attention_heads / num_key_value_heads times, which MLA's latent cache has no room for),
 * the whole rope part rotated. */
static int mla_pinned(const cfg *c, const coli_model *m)
{
	int kv;
	double f;
	if (get_int(c, "num_key_value_heads", m->n_heads, 1, HEAD_MAX, &kv) ||
	    get_rope_num(c, "partial_rotary_factor", 1.0, &f))
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
	if ((!is_null(c, "q_lora_rank") &&
	     get_int(c, "q_lora_rank", 1536, 0, DIM_MAX, &m->q_lora_rank)) ||
	    get_int(c, "kv_lora_rank", 512, 1, DIM_MAX, &m->kv_lora_rank) ||
	    get_int(c, "qk_nope_head_dim", 128, 0, HEAD_MAX, &m->qk_nope_head_dim) ||
	    get_int(c, "qk_rope_head_dim", 64, 2, HEAD_MAX, &m->qk_rope_head_dim) ||
	    get_int(c, "v_head_dim", 128, 1, HEAD_MAX, &m->v_head_dim) ||
	    get_bool(c, "rope_interleave", 1, &m->rope.interleave) ||
	    get_bool(c, "attention_bias", 0, &bias))
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
	if (is_null(c, "num_key_value_heads"))
		def = m->n_heads;
	if (get_int(c, "num_key_value_heads", def, 1, m->n_heads, &m->n_kv_heads))
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
	    get_int(c, "head_dim", 0, m->hidden_size / m->n_heads, m->hidden_size / m->n_heads, &m->head_dim))
		return -1;
	if (cfg_get(c, "head_dim"))
		return get_int(c, "head_dim", 0, 1, HEAD_MAX, &m->head_dim);
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
	if (get_rope_num(c, "partial_rotary_factor", fams[m->family].rotary_factor, &f))
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
	if (m->family == COLI_FAM_QWEN3_MOE && get_bool(c, "use_sliding_window", 0, &use))
		return -1;
	if (!use)
		return 0;
	int def = m->family == COLI_FAM_QWEN3_MOE ? 4096 : 0; /* HF Qwen3MoeConfig default */
	if (is_null(c, "sliding_window")) /* null: no window, whatever use_sliding_window says */
		return 0;
	return get_int(c, "sliding_window", def, 0, INT_MAX, &m->sliding_window);
}

/* Per-family q/k norm and projection biases. */
static int parse_gqa_extras(const cfg *c, coli_model *m)
{
	int bias = 0, qk = 0;
	if (m->family != COLI_FAM_MIXTRAL && get_bool(c, "attention_bias", 0, &bias))
		return -1;
	switch (m->family) {
	case COLI_FAM_GLM4_MOE:
		if (get_bool(c, "use_qk_norm", 0, &qk))
			return -1;
		m->qk_norm = qk ? COLI_QKNORM_HEAD : COLI_QKNORM_NONE;
		m->qkv_bias = bias;
		break;
	case COLI_FAM_QWEN3_MOE:
		m->qk_norm = COLI_QKNORM_HEAD;
		m->qkv_bias = m->o_bias = bias;
		break;
	case COLI_FAM_OLMOE:
		m->qk_norm = COLI_QKNORM_WHOLE;
		m->qkv_bias = m->o_bias = bias;
		if (cfg_get(c, "clip_qkv") && get_pos(c, "clip_qkv", 0, &m->clip_qkv))
			return -1;
		break;
	default:
		break;
	}
	return 0;
}

/* A boolean that must be true: the reference computes only that way whatever the key says. */
static int want_true(const cfg *c, const char *key, const char *why)
{
	int v;
	if (get_bool(c, key, 1, &v))
		return -1;
	if (!v)
		return coli_errf(c->e, COLI_EDATA, "%s: %s: false unsupported (%s)", c->name, key, why);
	return 0;
}

/* indexer_types: a list of "full" / "shared" per layer; else index_topk_pattern ("FSSF..." or
 * such a list); else the schedule transformers derives: layer i is full when
 * max(i - index_skip_topk_offset + 1, 0) is a multiple of index_topk_freq (defaults 2 and 1). */
static int parse_indexer_types(const cfg *c, coli_model *m)
{
	const char *key = cfg_get(c, "indexer_types") ? "indexer_types" : "index_topk_pattern";
	json_t *v = cfg_get(c, key);
	if (!v) {
		int freq, offset;
		if (get_int(c, "index_topk_freq", 1, INT_MIN, INT_MAX, &freq) ||
		    get_int(c, "index_skip_topk_offset", 2, INT_MIN + COLI_MAX_LAYERS, INT_MAX - COLI_MAX_LAYERS, &offset))
			return -1;
		freq = freq < 1 ? 1 : freq;
		for (int i = 0; i < m->n_layers; i++)
			m->index_full[i] = (i - offset + 1 > 0 ? i - offset + 1 : 0) % freq == 0;
		return 0;
	}
	size_t n = json_is_string(v) ? strlen(json_string_value(v)) : json_array_size(v);
	if (!json_is_array(v) && !(json_is_string(v) && !strcmp(key, "index_topk_pattern")))
		return bad_type(c, key, "an array", v);
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

/* layer_types, when present, must give every layer the one kind coli computes (want). */
static int all_layers_are(const cfg *c, const coli_model *m, const char *want)
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

/* GLM-MoE-DSA: MLA plus the DSA lightning indexer. transformers interleaves the RoPE pairs of
 * MLA and of the indexer whatever rope_interleave and indexer_rope_interleave say, so false is
 * refused rather than ignored. */
static int parse_dsa(const cfg *c, coli_model *m)
{
	const char *why = "transformers' glm_moe_dsa always rotates interleaved pairs";
	if (get_int(c, "index_topk", 2048, 1, DIM_MAX, &m->index_topk) ||
	    get_int(c, "index_n_heads", 32, 1, HEAD_MAX, &m->index_n_heads) ||
	    get_int(c, "index_head_dim", 128, 2, HEAD_MAX, &m->index_head_dim) ||
	    want_true(c, "rope_interleave", why) || want_true(c, "indexer_rope_interleave", why) ||
	    get_bool(c, "index_share_for_mtp_iteration", 0, &m->index_share_mtp) ||
	    all_layers_are(c, m, "deepseek_sparse_attention") ||
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

static int parse_attention(const cfg *c, coli_model *m)
{
	if (get_rope_num(c, "rope_theta", fams[m->family].theta, &m->rope.theta))
		return -1;
	if (m->family == COLI_FAM_DEEPSEEK_V3)
		return parse_mla(c, m);
	if (m->family == COLI_FAM_GLM_MOE_DSA)
		return parse_mla(c, m) || parse_dsa(c, m);
	m->attn = COLI_ATTN_GQA;
	if (parse_kv_heads(c, m) || parse_head_dim(c, m) || parse_rotary_dim(c, m) ||
	    parse_window(c, m) || (m->family != COLI_FAM_MIXTRAL && all_layers_are(c, m, "full_attention")))
		return -1;
	return parse_gqa_extras(c, m);
}

/* scoring_func / topk_method are Hub extras; only the sigmoid noaux_tc router is modelled. */
static int parse_sigmoid_router(const cfg *c, coli_model *m)
{
	int sigmoid_defaults = m->family == COLI_FAM_DEEPSEEK_V3; /* n_group 8, topk_group 4 */
	if (get_pos(c, "routed_scaling_factor", m->family == COLI_FAM_GLM4_MOE ? 1.0 : 2.5,
		    &m->routed_scaling_factor) ||
	    get_int(c, "n_shared_experts", 1, 0, 1024, &m->n_shared_experts) ||
	    want_str(c, "scoring_func", "sigmoid", "sigmoid") ||
	    want_str(c, "topk_method", "noaux_tc", "noaux_tc") ||
	    get_int(c, "n_group", sigmoid_defaults ? 8 : 1, 1, m->n_experts, &m->n_group))
		return -1;
	m->router = COLI_ROUTER_SIGMOID_GROUP;
	m->has_correction_bias = 1;
	int per = m->n_experts / m->n_group;
	if (m->n_experts % m->n_group || per < 2)
		return coli_errf(c->e, COLI_EDATA, "%s: n_group: %d does not split %s %d into "
				 "groups of >= 2", c->name, m->n_group, fams[m->family].experts_key,
				 m->n_experts);
	if (get_int(c, "topk_group", sigmoid_defaults ? 4 : 1, 1, m->n_group, &m->topk_group))
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
		return get_bool(c, "norm_topk_prob", d->norm_topk, &m->norm_topk_prob) ||
		       parse_sigmoid_router(c, m);
	case COLI_FAM_MIXTRAL:
		m->router = COLI_ROUTER_TOPK_SOFTMAX; /* a softmax over the k: always normalised */
		m->norm_topk_prob = 1;
		return 0;
	default:
		m->router = COLI_ROUTER_SOFTMAX_TOPK;
		return get_bool(c, "norm_topk_prob", d->norm_topk, &m->norm_topk_prob);
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
		return get_int(c, key, fams[m->family].experts, 1, 1 << 16, &m->n_experts);
	if (get_int(c, alias, 0, 1, 1 << 16, &a))
		return -1;
	if (get_int(c, key, a, 1, 1 << 16, &m->n_experts))
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
	    get_int(c, "num_experts_per_tok", d->top_k, 1, 1 << 16, &m->top_k))
		return -1;
	if (m->top_k > m->n_experts)
		return coli_errf(c->e, COLI_EDATA, "%s: num_experts_per_tok: %d exceeds %s %d",
				 c->name, m->top_k, d->experts_key, m->n_experts);
	m->moe_intermediate_size = m->intermediate_size;
	if (d->moe_inter && get_int(c, "moe_intermediate_size", d->moe_inter, 1, DIM_MAX,
				    &m->moe_intermediate_size))
		return -1;
	return parse_router(c, m);
}

/* qwen3_moe: layer i is MoE unless listed in mlp_only_layers or (i+1) % step != 0. */
static int parse_qwen3_layers(const cfg *c, coli_model *m)
{
	int step;
	if (get_int(c, "decoder_sparse_step", 1, 1, COLI_MAX_LAYERS, &step))
		return -1;
	for (int i = 0; i < m->n_layers; i++)
		m->is_moe[i] = (i + 1) % step == 0;
	json_t *list = cfg_get(c, "mlp_only_layers");
	if (list && !json_is_array(list))
		return bad_type(c, "mlp_only_layers", "an array", list);
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
	if (get_int(c, "first_k_dense_replace", def, 0, COLI_MAX_LAYERS, &first))
		return -1;
	/* DeepSeek's own code reads moe_layer_freq; glm4_moe's and glm_moe_dsa's references ignore it,
	 * so there only 1 (what they compute) is taken. */
	if (get_int(c, "moe_layer_freq", 1, 1, m->family == COLI_FAM_DEEPSEEK_V3 ? COLI_MAX_LAYERS : 1, &freq))
		return -1;
	for (int i = 0; i < m->n_layers; i++)
		m->is_moe[i] = i >= first && i % freq == 0;
	return get_int(c, "num_nextn_predict_layers", 0, 0, COLI_MAX_LAYERS - m->n_layers,
		       &m->n_mtp_layers);
}

/* glm_moe_dsa: mlp_layer_types ("dense" / "sparse" per layer) when present, which transformers
 * then reads in place of first_k_dense_replace. */
static int parse_mlp_layer_types(const cfg *c, coli_model *m)
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
		rc = parse_dense_first(c, m) || parse_mlp_layer_types(c, m);
		break;
	case COLI_FAM_QWEN3_MOE:
		rc = parse_qwen3_layers(c, m);
		break;
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

/* rope_type (or the older type); rope_parameters may leave it out (transformers then says
 * "default"), rope_scaling may not. */
static int parse_rope_type(const cfg *c, coli_model *m)
{
	const char *key = cfg_get(c, "rope_type") ? "rope_type" : "type";
	const char *t;
	if (get_str(c, key, strcmp(c->prefix, "rope_parameters.") ? NULL : "default", &t))
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
static int rope_keys_known(const cfg *c)
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
		if (i == sizeof(known) / sizeof(known[0]))
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

/* rope_parameters or rope_scaling (rope_object): null, default, linear {factor} or yarn {factor,
 * original_max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim}; HF yarn
 * defaults 32, 1, 1, 0. */
static int parse_rope(const cfg *top, coli_model *m)
{
	coli_rope *r = &m->rope;
	json_t *v;
	r->scaling = COLI_ROPE_NONE;
	r->factor = 1.0;
	r->original_max_position_embeddings = m->max_position_embeddings;
	r->beta_fast = 32, r->beta_slow = 1, r->mscale = 0, r->mscale_all_dim = 0;
	if (rope_object(top, &v))
		return -1;
	if (!v)
		return 0;
	cfg c = {v, v == cfg_get(top, "rope_parameters") ? "rope_parameters." : "rope_scaling.", top->name, top->e};
	if (rope_keys_known(&c) || parse_rope_type(&c, m))
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
		return missing(&c, "factor");
	if (get_pos(&c, "factor", 0, &r->factor))
		return -1;
	if (r->scaling == COLI_ROPE_LINEAR)
		return 0;
	return get_pos(&c, "original_max_position_embeddings", m->max_position_embeddings,
		       &r->original_max_position_embeddings) ||
	       get_num(&c, "beta_fast", 32, &r->beta_fast) ||
	       get_num(&c, "beta_slow", 1, &r->beta_slow) ||
	       get_num(&c, "mscale", 0, &r->mscale) ||
	       get_num(&c, "mscale_all_dim", 0, &r->mscale_all_dim) || yarn_zero_defaults(r);
}

static int parse_block_size(const cfg *c, coli_model *m)
{
	json_t *v = cfg_get(c, "weight_block_size");
	m->fp8_block[0] = m->fp8_block[1] = 128; /* HF FineGrainedFP8Config default */
	if (!v && is_null(c, "weight_block_size"))
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
		return bad_type(top, "quantization_config", "an object", v);
	cfg c = {v, "quantization_config.", top->name, top->e};
	if (want_str(&c, "quant_method", NULL, "fp8") || want_str(&c, "fmt", "e4m3", "e4m3") ||
	    want_str(&c, "activation_scheme", "dynamic", "dynamic") || parse_block_size(&c, m))
		return -1;
	m->fp8 = 1;
	return 0;
}

static int parse_root(coli_model *m, json_t *root, const char *name, coli_err *e)
{
	cfg c = {root, "", name, e};
	memset(m, 0, sizeof(*m));
	if (parse_family(&c, m) || parse_sizes(&c, m) || parse_attention(&c, m) ||
	    parse_moe(&c, m) || parse_layers(&c, m) || parse_rope(&c, m) || parse_quant(&c, m))
		return -1;
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
