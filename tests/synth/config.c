/* config.c: config.json and generation_config.json as transformers' save_pretrained writes them.
 *
 * Key sets and constant values follow the reference checkpoints (tests/fixtures/hf/<family>-tiny)
 * and the real models of each family; json.dumps(indent=2, sort_keys=True) plus a newline.
 */
#include "synth.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define TF_VERSION "4.57.6"
#define TF5_VERSION "5.0.0" /* glm_moe_dsa and the nested rope_parameters came with transformers 5 */
#define MAX_POS 4096
#define DSA_MAX_POS 202752 /* GLM-5's: a long-context benchmark stays within it */
#define QWEN36_MAX_POS 262144
#define V4_MAX_POS 1048576

/* deepseek_v3 groups: 8 groups keep 4 (as V3) when the experts allow, else 4 keep 2, else 1. */
static void groups(synth_shape *s, const synth_opts *o)
{
	s->n_group = s->topk_group = 1;
	if (strcmp(o->family, "deepseek_v3"))
		return;
	for (int g = 8; g >= 4; g /= 2) {
		int per = o->experts / g;
		if (o->experts % g == 0 && per >= 2 && o->top_k <= (g / 2) * per) {
			s->n_group = g;
			s->topk_group = g / 2;
			return;
		}
	}
}

/* qwen3_5_moe's image, video, vision start and end ids: the tokenizer's when it has all four,
 * else the last four of the vocabulary (as the fixture). */
static void vision_ids(synth_shape *s, const synth_opts *o, const synth_tok *t)
{
	int have = t && t->image >= 0 && t->video >= 0 && t->vision_start >= 0 && t->vision_end >= 0;
	s->image = have ? t->image : o->vocab - 4;
	s->video = have ? t->video : o->vocab - 3;
	s->vision_start = have ? t->vision_start : o->vocab - 2;
	s->vision_end = have ? t->vision_end : o->vocab - 1;
}

/* Special ids: the tokenizer's, else those of the reference checkpoints. */
static void specials(synth_shape *s, const synth_opts *o, const synth_tok *t)
{
	int ds = !strcmp(o->family, "deepseek_v3") || !strcmp(o->family, "deepseek_v4");
	s->bos = ds ? 0 : 1;
	s->eos = ds ? 1 : 2;
	s->pad = !strcmp(o->family, "olmoe") ? 1 : 0;
	vision_ids(s, o, t);
	if (!t)
		return;
	if (t->eos >= 0)
		s->eos = t->eos;
	s->bos = t->bos >= 0 ? t->bos : t->pad >= 0 ? t->pad : s->bos;
	s->pad = t->pad >= 0 ? t->pad : s->eos;
}

/* MLA widths: the options' (synth_opts_resolve sets them for the MLA families). */
void synth_shape_derive(synth_shape *s, const synth_opts *o, const synth_tok *t)
{
	memset(s, 0, sizeof(*s));
	groups(s, o);
	s->kv_lora = o->kv_lora;
	s->q_lora = o->q_lora;
	s->rope_dim = o->rope_dim;
	s->v_dim = o->v_head_dim;
	specials(s, o, t);
}

/* ---- key helpers ----------------------------------------------------------------------------- */

static void seti(json_t *c, const char *k, long long v)
{
	json_object_set_new(c, k, json_integer(v));
}

static void setf(json_t *c, const char *k, double v)
{
	json_object_set_new(c, k, json_real(v));
}

static void setb(json_t *c, const char *k, int v)
{
	json_object_set_new(c, k, json_boolean(v));
}

static void sets(json_t *c, const char *k, const char *v)
{
	json_object_set_new(c, k, json_string(v));
}

static void setnull(json_t *c, const char *k)
{
	json_object_set_new(c, k, json_null());
}

static int is_hybrid(const synth_opts *o)
{
	return !strcmp(o->family, "qwen3_5_moe");
}

static const char *tf_version(const synth_opts *o)
{
	return strcmp(o->family, "glm_moe_dsa") && strcmp(o->family, "deepseek_v4") && !is_hybrid(o) ? TF_VERSION
												       : TF5_VERSION;
}

/* Keys every family has. */
static void common(json_t *c, const synth_opts *o, const char *arch)
{
	json_object_set_new(c, "architectures", json_pack("[s]", arch));
	setf(c, "attention_dropout", 0.0);
	sets(c, "dtype", "bfloat16");
	sets(c, "hidden_act", "silu");
	seti(c, "hidden_size", o->hidden);
	setf(c, "initializer_range", 0.02);
	seti(c, "max_position_embeddings", MAX_POS);
	sets(c, "model_type", o->family);
	seti(c, "num_attention_heads", o->heads);
	seti(c, "num_experts_per_tok", o->top_k);
	seti(c, "num_hidden_layers", o->layers);
	seti(c, "num_key_value_heads", o->kv_heads);
	setb(c, "tie_word_embeddings", 0);
	sets(c, "transformers_version", tf_version(o));
	setb(c, "use_cache", 1);
	seti(c, "vocab_size", o->vocab);
}

/* Keys of the sigmoid-routed families (deepseek_v3, glm4_moe, glm_moe_dsa). */
static void sigmoid_moe(json_t *c, const synth_opts *o, const synth_shape *s)
{
	seti(c, "first_k_dense_replace", o->dense_layers);
	seti(c, "intermediate_size", o->ffn);
	seti(c, "moe_intermediate_size", o->expert_ffn);
	seti(c, "n_group", s->n_group);
	seti(c, "n_routed_experts", o->experts);
	seti(c, "n_shared_experts", o->shared_experts);
	setb(c, "norm_topk_prob", 1);
	seti(c, "num_nextn_predict_layers", o->mtp);
	setf(c, "routed_scaling_factor", 2.5);
	seti(c, "topk_group", s->topk_group);
	setnull(c, "rope_scaling");
}

/* MLA keys shared by deepseek_v3 and glm_moe_dsa. */
static void mla(json_t *c, const synth_opts *o, const synth_shape *s)
{
	setb(c, "attention_bias", 0);
	seti(c, "bos_token_id", s->bos);
	seti(c, "eos_token_id", s->eos);
	seti(c, "kv_lora_rank", s->kv_lora);
	seti(c, "moe_layer_freq", 1);
	seti(c, "q_lora_rank", s->q_lora);
	seti(c, "qk_head_dim", o->head_dim + s->rope_dim);
	seti(c, "qk_nope_head_dim", o->head_dim);
	seti(c, "qk_rope_head_dim", s->rope_dim);
	setb(c, "rope_interleave", 1);
	sets(c, "scoring_func", "sigmoid");
	sets(c, "topk_method", "noaux_tc");
	seti(c, "v_head_dim", s->v_dim);
}

static void deepseek(json_t *c, const synth_opts *o, const synth_shape *s)
{
	common(c, o, "DeepseekV3ForCausalLM");
	sigmoid_moe(c, o, s);
	mla(c, o, s);
	seti(c, "head_dim", s->rope_dim);
	seti(c, "pretraining_tp", 1);
	setf(c, "rms_norm_eps", 1e-6);
	setf(c, "rope_theta", 10000.0);
}

/* "full" / "shared" per layer as transformers derives them from index_topk_freq and
 * index_skip_topk_offset: full when max(i - offset + 1, 0) is a multiple of freq. */
static json_t *indexer_types(const synth_opts *o)
{
	json_t *a = json_array();
	for (int i = 0; i < o->layers; i++) {
		int d = i - o->index_offset + 1;
		json_array_append_new(a, json_string((d > 0 ? d : 0) % o->index_freq ? "shared" : "full"));
	}
	return a;
}

static json_t *mlp_layer_types(const synth_opts *o)
{
	json_t *a = json_array();
	for (int i = 0; i < o->layers; i++)
		json_array_append_new(a, json_string(i < o->dense_layers ? "dense" : "sparse"));
	return a;
}

/* GLM-5.2/5.3 (GlmMoeDsaForCausalLM): MLA + the DSA lightning indexer, transformers 5's nested
 * rope_parameters (no root rope_theta), head_dim = qk_nope_head_dim as the real file has it. */
static void glm_dsa(json_t *c, const synth_opts *o, const synth_shape *s)
{
	common(c, o, "GlmMoeDsaForCausalLM");
	sigmoid_moe(c, o, s);
	json_object_del(c, "rope_scaling");
	mla(c, o, s);
	seti(c, "head_dim", o->head_dim);
	seti(c, "index_head_dim", o->index_head_dim);
	seti(c, "index_n_heads", o->index_heads);
	setb(c, "index_share_for_mtp_iteration", 1);
	seti(c, "index_skip_topk_offset", o->index_offset);
	seti(c, "index_topk", o->index_topk);
	seti(c, "index_topk_freq", o->index_freq);
	setnull(c, "index_topk_pattern");
	setb(c, "indexer_rope_interleave", 1);
	json_object_set_new(c, "indexer_types", indexer_types(o));
	seti(c, "max_position_embeddings", DSA_MAX_POS);
	json_object_set_new(c, "mlp_layer_types", mlp_layer_types(o));
	sets(c, "moe_router_dtype", "float32");
	seti(c, "pad_token_id", s->pad);
	setf(c, "rms_norm_eps", 1e-5);
	json_object_set_new(c, "rope_parameters", json_pack("{s:f, s:s}", "rope_theta", 8000000.0,
							    "rope_type", "default"));
}

/* GLM-4.5-class: partial rotary, q/k/v biases, no q/k norm (GLM-4.5 has use_qk_norm false). */
static void glm(json_t *c, const synth_opts *o, const synth_shape *s)
{
	common(c, o, "Glm4MoeForCausalLM");
	sigmoid_moe(c, o, s);
	setb(c, "attention_bias", 1);
	seti(c, "eos_token_id", s->eos);
	seti(c, "head_dim", o->head_dim);
	seti(c, "pad_token_id", s->pad);
	setf(c, "partial_rotary_factor", 0.5);
	setf(c, "rms_norm_eps", 1e-5);
	setf(c, "rope_theta", 1000000.0);
	setb(c, "use_qk_norm", 0);
}

static void qwen(json_t *c, const synth_opts *o, const synth_shape *s)
{
	common(c, o, "Qwen3MoeForCausalLM");
	setb(c, "attention_bias", 0);
	seti(c, "bos_token_id", s->bos);
	seti(c, "decoder_sparse_step", 1);
	seti(c, "eos_token_id", s->eos);
	seti(c, "head_dim", o->head_dim);
	seti(c, "intermediate_size", o->ffn);
	json_object_set_new(c, "mlp_only_layers", json_array());
	seti(c, "moe_intermediate_size", o->expert_ffn);
	setb(c, "norm_topk_prob", 1);
	seti(c, "num_experts", o->experts);
	setb(c, "output_router_logits", 0);
	setf(c, "rms_norm_eps", 1e-6);
	setnull(c, "rope_scaling");
	setf(c, "rope_theta", 1000000.0);
	setf(c, "router_aux_loss_coef", 0.001);
	setnull(c, "sliding_window");
	setb(c, "use_sliding_window", 0);
}

/* "linear_attention" / "full_attention" per layer: full when i + 1 is a multiple of the interval. */
static json_t *hybrid_layer_types(const synth_opts *o)
{
	json_t *a = json_array();
	for (int i = 0; i < o->layers; i++)
		json_array_append_new(a, json_string((i + 1) % o->full_interval ? "linear_attention"
										 : "full_attention"));
	return a;
}

/* Qwen3.5's rope_parameters: rope_theta and the partial rotary factor again, and the multimodal
 * rope's sections of the rotated half (text ignores them): [11, 11, 10] for 32 (Qwen3.6's),
 * [2, 1, 1] for 4 (the fixture's). */
void synth_mrope_sections(const synth_opts *o, int s[3])
{
	int half = o->head_dim / 8;
	s[0] = (half + 2) / 3;
	s[1] = (half - s[0] + 1) / 2;
	s[2] = half - s[0] - s[1];
}

static json_t *hybrid_rope(const synth_opts *o)
{
	int s[3];
	synth_mrope_sections(o, s);
	return json_pack("{s:b, s:[i,i,i], s:f, s:f, s:s}", "mrope_interleaved", 1, "mrope_section", s[0], s[1],
			 s[2], "partial_rotary_factor", 0.25, "rope_theta", 10000000.0, "rope_type", "default");
}

/* Qwen3.5/3.6 text_config: the keys of the common set that a nested text model has, and its own. */
static json_t *hybrid_text(const synth_opts *o, const synth_shape *s)
{
	json_t *t = json_object();
	common(t, o, "");
	json_object_del(t, "architectures");
	json_object_del(t, "tie_word_embeddings");
	json_object_del(t, "transformers_version");
	sets(t, "model_type", "qwen3_5_moe_text");
	seti(t, "max_position_embeddings", o->preset == SYNTH_PRESET_QWEN36 ? QWEN36_MAX_POS : MAX_POS);
	setb(t, "attention_bias", 0);
	setb(t, "attn_output_gate", 1);
	setnull(t, "bos_token_id");
	seti(t, "eos_token_id", s->eos);
	seti(t, "full_attention_interval", o->full_interval);
	seti(t, "head_dim", o->head_dim);
	json_object_set_new(t, "layer_types", hybrid_layer_types(o));
	seti(t, "linear_conv_kernel_dim", o->conv_kernel);
	seti(t, "linear_key_head_dim", o->lin_k_dim);
	seti(t, "linear_num_key_heads", o->lin_k_heads);
	seti(t, "linear_num_value_heads", o->lin_v_heads);
	seti(t, "linear_value_head_dim", o->lin_v_dim);
	seti(t, "moe_intermediate_size", o->expert_ffn);
	seti(t, "mtp_num_hidden_layers", o->mtp);
	setb(t, "mtp_use_dedicated_embeddings", 0);
	seti(t, "num_experts", o->experts);
	setb(t, "output_router_logits", 0);
	setnull(t, "pad_token_id");
	setf(t, "partial_rotary_factor", 0.25);
	setf(t, "rms_norm_eps", 1e-6);
	json_object_set_new(t, "rope_parameters", hybrid_rope(o));
	setf(t, "router_aux_loss_coef", 0.001);
	seti(t, "shared_expert_intermediate_size", o->ffn);
	return t;
}

/* The vision tower's config (SYNTH_VIS_*, the fixture's), merging into the text model's width. */
static json_t *hybrid_vision(const synth_opts *o)
{
	json_t *v = json_object();
	json_object_set_new(v, "deep_stack_visual_indexes", json_array());
	seti(v, "depth", SYNTH_VIS_DEPTH);
	sets(v, "hidden_act", "gelu_pytorch_tanh");
	seti(v, "hidden_size", SYNTH_VIS_HIDDEN);
	seti(v, "in_channels", SYNTH_VIS_CHANNELS);
	setf(v, "initializer_range", 0.02);
	seti(v, "intermediate_size", SYNTH_VIS_FFN);
	sets(v, "model_type", "qwen3_5_moe_vision");
	seti(v, "num_heads", SYNTH_VIS_HEADS);
	seti(v, "num_position_embeddings", SYNTH_VIS_POSITIONS);
	seti(v, "out_hidden_size", o->hidden);
	seti(v, "patch_size", SYNTH_VIS_PATCH);
	seti(v, "spatial_merge_size", SYNTH_VIS_MERGE);
	seti(v, "temporal_patch_size", SYNTH_VIS_TEMPORAL);
	return v;
}

/* Qwen3.5/3.6-35B-A3B as released (Qwen3_5MoeForConditionalGeneration): the text model's keys in
 * text_config, the vision tower's in vision_config, the multimodal token ids at the root. */
static void hybrid(json_t *c, const synth_opts *o, const synth_shape *s)
{
	json_object_set_new(c, "architectures", json_pack("[s]", "Qwen3_5MoeForConditionalGeneration"));
	seti(c, "image_token_id", s->image);
	sets(c, "model_type", "qwen3_5_moe");
	json_object_set_new(c, "text_config", hybrid_text(o, s));
	setb(c, "tie_word_embeddings", 0);
	sets(c, "transformers_version", TF5_VERSION);
	seti(c, "video_token_id", s->video);
	json_object_set_new(c, "vision_config", hybrid_vision(o));
	seti(c, "vision_end_token_id", s->vision_end);
	seti(c, "vision_start_token_id", s->vision_start);
}

static void olmoe(json_t *c, const synth_opts *o, const synth_shape *s)
{
	common(c, o, "OlmoeForCausalLM");
	setb(c, "attention_bias", 0);
	setnull(c, "clip_qkv");
	seti(c, "eos_token_id", s->eos);
	seti(c, "intermediate_size", o->expert_ffn);
	setb(c, "norm_topk_prob", 0);
	seti(c, "num_experts", o->experts);
	setb(c, "output_router_logits", 0);
	seti(c, "pad_token_id", s->pad);
	setf(c, "rms_norm_eps", 1e-5);
	setnull(c, "rope_scaling");
	setf(c, "rope_theta", 10000.0);
	setf(c, "router_aux_loss_coef", 0.01);
}

static void mixtral(json_t *c, const synth_opts *o, const synth_shape *s)
{
	common(c, o, "MixtralForCausalLM");
	seti(c, "bos_token_id", s->bos);
	seti(c, "eos_token_id", s->eos);
	if (o->head_dim * o->heads == o->hidden)
		setnull(c, "head_dim");
	else
		seti(c, "head_dim", o->head_dim);
	seti(c, "intermediate_size", o->expert_ffn);
	seti(c, "num_local_experts", o->experts);
	setb(c, "output_router_logits", 0);
	setf(c, "rms_norm_eps", 1e-5);
	setf(c, "rope_theta", 1000000.0);
	setf(c, "router_aux_loss_coef", 0.001);
	setf(c, "router_jitter_noise", 0.0);
	setnull(c, "sliding_window");
}

/* DeepSeek V4's per-layer compression ratio: Flash's schedule, layers 0 and 1 window only, then
 * CSA on even layers and HCA on odd ones; an MTP layer window only. */
static int v4_ratio(const synth_opts *o, int l)
{
	return l < 2 || l >= o->layers ? 0 : l % 2 ? o->hca_ratio : o->csa_ratio;
}

static json_t *v4_ratios(const synth_opts *o)
{
	json_t *a = json_array();
	for (int l = 0; l < o->layers + o->mtp; l++)
		json_array_append_new(a, json_integer(v4_ratio(o, l)));
	return a;
}

/* transformers reads only 0, 4 and 128 from compress_ratios: other ratios also go into
 * layer_types and compress_rates, as the fixture writes them. */
static void v4_kinds(json_t *c, const synth_opts *o)
{
	json_t *a = json_array();
	for (int l = 0; l < o->layers; l++)
		json_array_append_new(a, json_string(!v4_ratio(o, l) ? "sliding_attention" : l % 2
						     ? "heavily_compressed_attention" : "compressed_sparse_attention"));
	json_object_set_new(c, "layer_types", a);
	json_object_set_new(c, "compress_rates", json_pack("{s:i, s:i}", "compressed_sparse_attention", o->csa_ratio,
							   "heavily_compressed_attention", o->hca_ratio));
}

/* DeepSeek V4 (DeepseekV4ForCausalLM) as V4 Flash's config.json and the fixtures have it; with
 * --fp8 as it ships: UE8M0 block scales, FP4 routed experts. */
static void deepseek_v4(json_t *c, const synth_opts *o, const synth_shape *s)
{
	common(c, o, "DeepseekV4ForCausalLM");
	json_object_del(c, "dtype");
	sets(c, "torch_dtype", "bfloat16");
	setb(c, "attention_bias", 0);
	seti(c, "bos_token_id", s->bos);
	json_object_set_new(c, "compress_ratios", v4_ratios(o));
	if (o->csa_ratio != 4 || o->hca_ratio != 128)
		v4_kinds(c, o);
	setf(c, "compress_rope_theta", 160000.0);
	seti(c, "eos_token_id", s->eos);
	if (o->fp8)
		sets(c, "expert_dtype", "fp4");
	setf(c, "hc_eps", 1e-6);
	seti(c, "hc_mult", o->hc_mult);
	seti(c, "hc_sinkhorn_iters", 20);
	seti(c, "head_dim", o->head_dim);
	seti(c, "index_head_dim", o->index_head_dim);
	seti(c, "index_n_heads", o->index_heads);
	seti(c, "index_topk", o->index_topk);
	seti(c, "max_position_embeddings", V4_MAX_POS);
	seti(c, "moe_intermediate_size", o->expert_ffn);
	seti(c, "n_routed_experts", o->experts);
	seti(c, "n_shared_experts", o->shared_experts);
	setb(c, "norm_topk_prob", 1);
	seti(c, "num_hash_layers", o->hash_layers);
	seti(c, "num_key_value_heads", 1);
	seti(c, "num_nextn_predict_layers", o->mtp);
	seti(c, "o_groups", o->o_groups);
	seti(c, "o_lora_rank", o->o_lora);
	seti(c, "q_lora_rank", o->q_lora);
	seti(c, "qk_rope_head_dim", o->rope_dim);
	setf(c, "rms_norm_eps", 1e-6);
	json_object_set_new(c, "rope_scaling", json_pack("{s:i, s:i, s:i, s:i, s:s}", "beta_fast", 32, "beta_slow", 1,
							 "factor", 16, "original_max_position_embeddings", 65536,
							 "type", "yarn"));
	setf(c, "rope_theta", 10000.0);
	setf(c, "routed_scaling_factor", 1.5);
	sets(c, "scoring_func", "sqrtsoftplus");
	seti(c, "sliding_window", o->window);
	setf(c, "swiglu_limit", 10.0);
	sets(c, "topk_method", "noaux_tc");
}

static void fp8(json_t *c, const synth_opts *o)
{
	if (!strcmp(o->family, "deepseek_v4")) {
		json_object_set_new(c, "quantization_config",
				    json_pack("{s:s, s:s, s:s, s:s, s:[i,i]}", "activation_scheme", "dynamic", "fmt",
					      "e4m3", "quant_method", "fp8", "scale_fmt", "ue8m0", "weight_block_size",
					      SYNTH_FP8_BLOCK, SYNTH_FP8_BLOCK));
		return;
	}
	json_object_set_new(c, "quantization_config",
			    json_pack("{s:s, s:s, s:s, s:[i,i]}", "activation_scheme", "dynamic",
				      "fmt", "e4m3", "quant_method", "fp8", "weight_block_size",
				      SYNTH_FP8_BLOCK, SYNTH_FP8_BLOCK));
}

/* Copies txt with two-digit exponents ("1e-5" -> "1e-05", as Python prints floats) and a
 * final newline; malloc'd. */
static char *python_floats(const char *txt)
{
	size_t n = strlen(txt);
	char *out = malloc(2 * n + 2), *o = out;
	int in_str = 0;
	for (size_t i = 0; out && i < n; i++) {
		char ch = txt[i];
		*o++ = ch;
		if (ch == '"' && (i == 0 || txt[i - 1] != '\\'))
			in_str = !in_str;
		if (!in_str && ch == 'e' && i > 0 && isdigit((unsigned char)txt[i - 1]) &&
		    (txt[i + 1] == '-' || txt[i + 1] == '+') && isdigit((unsigned char)txt[i + 2]) &&
		    !isdigit((unsigned char)txt[i + 3])) {
			*o++ = txt[++i];
			*o++ = '0';
		}
	}
	if (out)
		memcpy(o, "\n", 2);
	return out;
}

/* Dumps like json.dumps(indent=2, sort_keys=True) + "\n"; malloc'd. */
static char *dump(json_t *c)
{
	char *txt = json_dumps(c, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
	json_decref(c);
	char *t = txt ? python_floats(txt) : NULL;
	free(txt);
	return t;
}

char *synth_config_json(const synth_opts *o, const synth_shape *s)
{
	static const struct {
		const char *name;
		void (*fn)(json_t *, const synth_opts *, const synth_shape *);
	} fams[] = {{"deepseek_v3", deepseek}, {"glm4_moe", glm}, {"glm_moe_dsa", glm_dsa},
		    {"qwen3_moe", qwen},         {"olmoe", olmoe},   {"mixtral", mixtral},
		    {"qwen3_5_moe", hybrid},     {"deepseek_v4", deepseek_v4}};
	json_t *c = json_object();
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++)
		if (!strcmp(o->family, fams[i].name))
			fams[i].fn(c, o, s);
	if (o->fp8)
		fp8(c, o);
	return dump(c);
}

/* Qwen3.5's: no bos, greedy, eos the end of turn and the end of text (the fixture's keys). */
static char *hybrid_generation(const synth_opts *o, const synth_shape *s)
{
	json_t *c = json_object();
	setnull(c, "bos_token_id");
	setb(c, "do_sample", 0);
	json_object_set_new(c, "eos_token_id", s->pad != s->eos ? json_pack("[i,i]", s->eos, s->pad)
								 : json_pack("[i]", s->eos));
	seti(c, "pad_token_id", s->pad);
	sets(c, "transformers_version", tf_version(o));
	return dump(c);
}

char *synth_generation_json(const synth_opts *o, const synth_shape *s)
{
	if (is_hybrid(o))
		return hybrid_generation(o, s);
	json_t *c = json_object();
	int has_bos = strcmp(o->family, "glm4_moe") && strcmp(o->family, "olmoe");
	int has_pad = !has_bos || !strcmp(o->family, "glm_moe_dsa");
	setb(c, "_from_model_config", 1);
	if (has_bos)
		seti(c, "bos_token_id", s->bos);
	seti(c, "eos_token_id", s->eos);
	if (has_pad)
		seti(c, "pad_token_id", s->pad);
	sets(c, "transformers_version", tf_version(o));
	return dump(c);
}
