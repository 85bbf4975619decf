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
#define MAX_POS 4096

static int round_up(int x, int m)
{
	return (x + m - 1) / m * m;
}

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

/* Special ids: the tokenizer's, else those of the reference checkpoints. */
static void specials(synth_shape *s, const synth_opts *o, const synth_tok *t)
{
	int ds = !strcmp(o->family, "deepseek_v3");
	s->bos = ds ? 0 : 1;
	s->eos = ds ? 1 : 2;
	s->pad = !strcmp(o->family, "olmoe") ? 1 : 0;
	if (!t)
		return;
	if (t->eos >= 0)
		s->eos = t->eos;
	s->bos = t->bos >= 0 ? t->bos : t->pad >= 0 ? t->pad : s->bos;
	s->pad = t->pad >= 0 ? t->pad : s->eos;
}

void synth_shape_derive(synth_shape *s, const synth_opts *o, const synth_tok *t)
{
	memset(s, 0, sizeof(*s));
	groups(s, o);
	s->kv_lora = round_up(o->hidden / 14, 64);
	s->kv_lora = s->kv_lora < 64 ? 64 : s->kv_lora > 512 ? 512 : s->kv_lora;
	s->q_lora = 3 * s->kv_lora;
	s->rope_dim = o->head_dim / 2;
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
	sets(c, "transformers_version", TF_VERSION);
	setb(c, "use_cache", 1);
	seti(c, "vocab_size", o->vocab);
}

/* Keys of the sigmoid-routed families (deepseek_v3, glm4_moe). */
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

static void deepseek(json_t *c, const synth_opts *o, const synth_shape *s)
{
	common(c, o, "DeepseekV3ForCausalLM");
	sigmoid_moe(c, o, s);
	setb(c, "attention_bias", 0);
	seti(c, "bos_token_id", s->bos);
	seti(c, "eos_token_id", s->eos);
	seti(c, "head_dim", s->rope_dim);
	seti(c, "kv_lora_rank", s->kv_lora);
	seti(c, "moe_layer_freq", 1);
	seti(c, "pretraining_tp", 1);
	seti(c, "q_lora_rank", s->q_lora);
	seti(c, "qk_head_dim", o->head_dim + s->rope_dim);
	seti(c, "qk_nope_head_dim", o->head_dim);
	seti(c, "qk_rope_head_dim", s->rope_dim);
	setf(c, "rms_norm_eps", 1e-6);
	setb(c, "rope_interleave", 1);
	setf(c, "rope_theta", 10000.0);
	sets(c, "scoring_func", "sigmoid");
	sets(c, "topk_method", "noaux_tc");
	seti(c, "v_head_dim", o->head_dim);
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

static void fp8(json_t *c)
{
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
	} fams[] = {{"deepseek_v3", deepseek}, {"glm4_moe", glm}, {"qwen3_moe", qwen},
		    {"olmoe", olmoe},             {"mixtral", mixtral}};
	json_t *c = json_object();
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++)
		if (!strcmp(o->family, fams[i].name))
			fams[i].fn(c, o, s);
	if (o->fp8)
		fp8(c);
	return dump(c);
}

char *synth_generation_json(const synth_opts *o, const synth_shape *s)
{
	json_t *c = json_object();
	int has_bos = strcmp(o->family, "glm4_moe") && strcmp(o->family, "olmoe");
	setb(c, "_from_model_config", 1);
	if (has_bos)
		seti(c, "bos_token_id", s->bos);
	seti(c, "eos_token_id", s->eos);
	if (!has_bos)
		seti(c, "pad_token_id", s->pad);
	sets(c, "transformers_version", TF_VERSION);
	return dump(c);
}
