/* gguf_qwen35.c: the qwen3_5_moe checkpoint as llama.cpp's "qwen35moe" GGUF, as llama.cpp's own
 * converter makes it (convert_hf_to_gguf.py's Qwen3_5MoeTextModel, over Qwen3NextModel and
 * _LinearAttentionVReorderBase, of the llama.cpp that node-llama-cpp 3.21.1 bundles).
 *
 * Names and layouts: a HF linear [out, in] is ne = [in, out] with the same bytes (gguf_qwen.c).
 * The (1 + w) RMSNorms (input_layernorm, post_attention_layernorm, q_norm, k_norm, model.norm) are
 * stored as 1 + w; the Gated DeltaNet's output norm (linear_attn.norm, scaled by w) as w. A_log
 * becomes ssm_a = -exp(A_log), dt_bias ssm_dt.bias, the conv taps [C, 1, K] ssm_conv1d ne = [K, C].
 * The value heads move from grouped by key head to tiled (gguf.h, gg_vperm): the v rows of
 * in_proj_qkv (attn_qkv), the rows of in_proj_z (attn_gate), in_proj_b (ssm_beta) and in_proj_a
 * (ssm_alpha), A_log and dt_bias, the v channels of the conv, the columns of out_proj (ssm_out).
 * Full attention's q_proj (each head's query then its gate) is attn_q as it is: llama.cpp takes
 * the two halves of each head as strided views. The shared expert is ffn_{gate,up,down}_shexp
 * behind ffn_gate_inp_shexp ([H]); routed experts stacked as for qwen3moe.
 * Types: routers, norms, the conv, ssm_a, ssm_dt, ssm_beta and ssm_alpha and the shared expert's
 * gate F32 (coli keeps them f32 too), other matrices o->gguf_dense, experts o->gguf_experts.
 * Not written: the MTP layer (refused: llama.cpp runs it only as a draft model) and the vision
 * tower (llama.cpp's mmproj, a separate file); tied embeddings are refused.
 */
#include "gguf.h"

#include <stdio.h>
#include <string.h>

/* A tensor of layer l: "blk.l.<gg>" from "model.layers.l.<hf>", F32 unless type says. */
static gg_tensor *layer_tensor(gg_model *g, int l, const char *gg, const char *hf, int type, int64_t in,
			       int64_t out, int xform, coli_err *e)
{
	char n[64], h[160];
	snprintf(n, sizeof(n), "blk.%d.%s", l, gg);
	snprintf(h, sizeof(h), "model.layers.%d.%s", l, hf);
	if (gg_add2(g, n, type, in, out, h, e))
		return NULL;
	gg_last(g)->xform = xform;
	return gg_last(g);
}

/* One tensor of a layer's table: its names, type, ne, transform and value-head reorder. */
typedef struct spec {
	const char *gg, *hf;
	int type;
	int64_t in, out;
	int xform, axis;
	int64_t start, dim;
} spec;

static int add_specs(gg_model *g, const coli_model *m, int l, const spec *t, size_t n, coli_err *e)
{
	for (size_t i = 0; i < n; i++) {
		gg_tensor *x = layer_tensor(g, l, t[i].gg, t[i].hf, t[i].type, t[i].in, t[i].out, t[i].xform, e);
		if (!x)
			return -1;
		if (t[i].axis != GG_AXIS_NONE)
			x->perm = (gg_vperm){t[i].axis, t[i].start, t[i].dim, m->lin_k_heads,
					     m->lin_v_heads / m->lin_k_heads};
	}
	return 0;
}

static int full_attention(gg_model *g, const coli_model *m, int l, int dense, coli_err *e)
{
	int64_t h = m->hidden_size, q = (int64_t)m->n_heads * m->head_dim, kv = (int64_t)m->n_kv_heads * m->head_dim;
	const spec t[] = {
		{"attn_q.weight", "self_attn.q_proj.weight", dense, h, 2 * q, 0, 0, 0, 0},
		{"attn_k.weight", "self_attn.k_proj.weight", dense, h, kv, 0, 0, 0, 0},
		{"attn_v.weight", "self_attn.v_proj.weight", dense, h, kv, 0, 0, 0, 0},
		{"attn_output.weight", "self_attn.o_proj.weight", dense, q, h, 0, 0, 0, 0},
		{"attn_q_norm.weight", "self_attn.q_norm.weight", GG_F32, m->head_dim, 1, GG_X_PLUS1, 0, 0, 0},
		{"attn_k_norm.weight", "self_attn.k_norm.weight", GG_F32, m->head_dim, 1, GG_X_PLUS1, 0, 0, 0},
	};
	return add_specs(g, m, l, t, sizeof(t) / sizeof(t[0]), e);
}

static int gated_deltanet(gg_model *g, const coli_model *m, int l, int dense, coli_err *e)
{
	int64_t h = m->hidden_size, kd = (int64_t)m->lin_k_heads * m->lin_k_dim, vd = (int64_t)m->lin_v_heads * m->lin_v_dim;
	int64_t nv = m->lin_v_heads, dv = m->lin_v_dim, conv = 2 * kd + vd;
	const int R = GG_AXIS_ROWS, C = GG_AXIS_COLS;
	const spec t[] = {
		{"attn_qkv.weight", "linear_attn.in_proj_qkv.weight", dense, h, conv, 0, R, 2 * kd, dv},
		{"attn_gate.weight", "linear_attn.in_proj_z.weight", dense, h, vd, 0, R, 0, dv},
		{"ssm_beta.weight", "linear_attn.in_proj_b.weight", GG_F32, h, nv, 0, R, 0, 1},
		{"ssm_alpha.weight", "linear_attn.in_proj_a.weight", GG_F32, h, nv, 0, R, 0, 1},
		{"ssm_conv1d.weight", "linear_attn.conv1d.weight", GG_F32, m->lin_conv, conv, 0, R, 2 * kd, dv},
		{"ssm_a", "linear_attn.A_log", GG_F32, nv, 1, GG_X_NEG_EXP, C, 0, 1},
		{"ssm_dt.bias", "linear_attn.dt_bias", GG_F32, nv, 1, 0, C, 0, 1},
		{"ssm_norm.weight", "linear_attn.norm.weight", GG_F32, dv, 1, 0, 0, 0, 0},
		{"ssm_out.weight", "linear_attn.out_proj.weight", dense, vd, h, 0, C, 0, dv},
	};
	return add_specs(g, m, l, t, sizeof(t) / sizeof(t[0]), e);
}

/* The norms around the mixer, the router, the shared expert and its gate, then the experts. */
static int norms_and_moe(gg_model *g, const coli_model *m, int l, int dense, int experts, coli_err *e)
{
	int64_t h = m->hidden_size, sh = m->shared_inter;
	const spec t[] = {
		{"attn_norm.weight", "input_layernorm.weight", GG_F32, h, 1, GG_X_PLUS1, 0, 0, 0},
		{"post_attention_norm.weight", "post_attention_layernorm.weight", GG_F32, h, 1, GG_X_PLUS1, 0, 0, 0},
		{"ffn_gate_inp.weight", "mlp.gate.weight", GG_F32, h, m->n_experts, 0, 0, 0, 0},
		{"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", GG_F32, h, 1, 0, 0, 0, 0},
		{"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", dense, h, sh, 0, 0, 0, 0},
		{"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", dense, h, sh, 0, 0, 0, 0},
		{"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", dense, sh, h, 0, 0, 0, 0},
	};
	return add_specs(g, m, l, t, sizeof(t) / sizeof(t[0]), e) || gg_experts(g, m, l, experts, e) ? -1 : 0;
}

/* What llama.cpp's qwen35moe cannot hold, or this writer does not write. */
static int refused(const coli_model *m, int interval, coli_err *e)
{
	const char *why = m->tie_word_embeddings ? "tied embeddings" : m->n_mtp_layers ? "an MTP layer (--mtp 0)" :
			  !m->shared_inter ? "no shared expert" : NULL;
	if (why)
		return coli_errf(e, COLI_EUSAGE, "--gguf: a qwen3_5_moe with %s is not written as GGUF", why);
	if (m->lin_k_dim != m->lin_v_dim)
		return coli_errf(e, COLI_EUSAGE, "--gguf: linear key head dim %d differs from the value head dim %d "
				 "(llama.cpp's qwen35moe takes both from ssm.state_size)", m->lin_k_dim, m->lin_v_dim);
	for (int l = 0; l < m->n_layers; l++)
		if (m->is_linear[l] != ((l + 1) % interval != 0))
			return coli_errf(e, COLI_EUSAGE, "--gguf: layer %d's kind is not full_attention_interval %d's "
					 "(llama.cpp's qwen35moe knows only that schedule)", l, interval);
	return 0;
}

int gg_qwen35_tensors(gg_model *g, const coli_model *m, int dense_type, int expert_type, coli_err *e)
{
	int64_t h = m->hidden_size, v = m->vocab_size;
	if (gg_add2(g, "token_embd.weight", dense_type, h, v, "model.embed_tokens.weight", e))
		return -1;
	for (int l = 0; l < m->n_layers; l++)
		if ((m->is_linear[l] ? gated_deltanet(g, m, l, dense_type, e) : full_attention(g, m, l, dense_type, e)) ||
		    norms_and_moe(g, m, l, dense_type, expert_type, e))
			return -1;
	if (gg_add2(g, "output_norm.weight", GG_F32, h, 1, "model.norm.weight", e))
		return -1;
	gg_last(g)->xform = GG_X_PLUS1;
	return gg_add2(g, "output.weight", dense_type, h, v, "lm_head.weight", e);
}

static void hparams(gg_buf *b, const synth_opts *o, const coli_model *m)
{
	int sec[3];
	struct { const char *key; int v; } u[] = {
		{"qwen35moe.block_count", m->n_layers},
		{"qwen35moe.context_length", m->max_position_embeddings},
		{"qwen35moe.embedding_length", m->hidden_size},
		{"qwen35moe.attention.head_count", m->n_heads},
		{"qwen35moe.attention.head_count_kv", m->n_kv_heads},
		{"qwen35moe.attention.key_length", m->head_dim},
		{"qwen35moe.attention.value_length", m->head_dim},
		{"qwen35moe.rope.dimension_count", m->rope.rotary_dim},
		{"qwen35moe.expert_count", m->n_experts},
		{"qwen35moe.expert_used_count", m->top_k},
		{"qwen35moe.expert_feed_forward_length", m->moe_intermediate_size},
		{"qwen35moe.expert_shared_feed_forward_length", m->shared_inter},
		{"qwen35moe.ssm.conv_kernel", m->lin_conv},
		{"qwen35moe.ssm.state_size", m->lin_k_dim},
		{"qwen35moe.ssm.group_count", m->lin_k_heads},
		{"qwen35moe.ssm.time_step_rank", m->lin_v_heads},
		{"qwen35moe.ssm.inner_size", m->lin_v_dim * m->lin_v_heads},
		{"qwen35moe.full_attention_interval", o->full_interval},
	};
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		gg_kv_u32(b, u[i].key, (uint32_t)u[i].v);
	gg_kv_f32(b, "qwen35moe.rope.freq_base", (float)m->rope.theta);
	gg_kv_f32(b, "qwen35moe.attention.layer_norm_rms_epsilon", (float)m->rms_norm_eps);
	/* the multimodal rope's sections (text gives every section the same position) */
	synth_mrope_sections(o, sec);
	gg_kv_arr(b, "qwen35moe.rope.dimension_sections", GV_I32, 4);
	for (int i = 0; i < 4; i++) {
		int32_t s = i < 3 ? sec[i] : 0;
		gg_put(b, &s, 4);
	}
}

int gg_qwen35_metadata(gg_buf *b, const synth_opts *o, const coli_model *m, const synth_tok *tok,
		       const synth_shape *s, coli_err *e)
{
	if (refused(m, o->full_interval, e) || gg_general(b, o, tok, "qwen35moe", "qwen3_5_moe", e))
		return -1;
	hparams(b, o, m);
	if (gg_tokenizer(b, tok, m->vocab_size, s, "qwen35", e))
		return -1;
	return b->oom ? coli_errf(e, COLI_ENOMEM, "out of memory building the GGUF metadata") : 0;
}
