/* model_tensors.c: the HF tensor names and shapes a model implies, and the checkpoint check. */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

/* Builds the tensor list; with v NULL it only counts. */
typedef struct tb {
	const coli_model *m;
	coli_tensor_spec *v;
	int n;
	int layer, mtp;
	char prefix[48]; /* "model.layers.3." or "" */
} tb;

static void add(tb *b, coli_tclass cls, coli_role role, const char *name, int64_t d0, int64_t d1, int ex, int proj)
{
	if (b->v) {
		coli_tensor_spec *s = &b->v[b->n];
		snprintf(s->name, sizeof(s->name), "%s%s", b->prefix, name);
		s->ndim = d1 ? 2 : 1;
		s->shape[0] = d0;
		s->shape[1] = d1;
		s->cls = cls;
		s->layer = b->layer;
		s->expert = ex;
		s->proj = proj;
		s->mtp = b->mtp;
		s->role = role;
	}
	b->n++;
}

/* A 1-D norm or bias. */
static void small(tb *b, coli_role role, const char *name, int64_t d0)
{
	add(b, COLI_TC_SMALL, role, name, d0, 0, -1, -1);
}

/* "<base>.weight" [out, in] as a matrix. */
static void linear(tb *b, coli_role role, const char *base, int64_t out, int64_t in)
{
	char name[112];
	snprintf(name, sizeof(name), "%s.weight", base);
	add(b, COLI_TC_MATRIX, role, name, out, in, -1, -1);
}

static void globals(tb *b)
{
	const coli_model *m = b->m;
	b->layer = -1;
	b->mtp = 0;
	b->prefix[0] = 0;
	linear(b, COLI_R_EMBED, "model.embed_tokens", m->vocab_size, m->hidden_size);
	small(b, COLI_R_FINAL_NORM, "model.norm.weight", m->hidden_size);
	if (!m->tie_word_embeddings)
		linear(b, COLI_R_LM_HEAD, "lm_head", m->vocab_size, m->hidden_size);
}

/* q/k/v/o with optional biases and q/k norms (qwen3_moe, glm4_moe, olmoe, mixtral, qwen3_5_moe:
 * there q_proj also gives each head's output gate, [query | gate] per head). */
static void gqa(tb *b)
{
	const coli_model *m = b->m;
	int64_t q = (int64_t)m->n_heads * m->head_dim, kv = (int64_t)m->n_kv_heads * m->head_dim;
	linear(b, COLI_R_Q, "self_attn.q_proj", m->attn_gate ? 2 * q : q, m->hidden_size);
	linear(b, COLI_R_K, "self_attn.k_proj", kv, m->hidden_size);
	linear(b, COLI_R_V, "self_attn.v_proj", kv, m->hidden_size);
	linear(b, COLI_R_O, "self_attn.o_proj", m->hidden_size, q);
	if (m->qkv_bias) {
		small(b, COLI_R_Q_BIAS, "self_attn.q_proj.bias", q);
		small(b, COLI_R_K_BIAS, "self_attn.k_proj.bias", kv);
		small(b, COLI_R_V_BIAS, "self_attn.v_proj.bias", kv);
	}
	if (m->o_bias)
		small(b, COLI_R_O_BIAS, "self_attn.o_proj.bias", m->hidden_size);
	if (m->qk_norm == COLI_QKNORM_HEAD) {
		small(b, COLI_R_Q_NORM, "self_attn.q_norm.weight", m->head_dim);
		small(b, COLI_R_K_NORM, "self_attn.k_norm.weight", m->head_dim);
	} else if (m->qk_norm == COLI_QKNORM_WHOLE) {
		small(b, COLI_R_Q_NORM, "self_attn.q_norm.weight", q);
		small(b, COLI_R_K_NORM, "self_attn.k_norm.weight", kv);
	}
}

/* A Gated DeltaNet ("linear_attention") layer: q, k, v (through the causal conv), the output
 * gate z, the per-value-head b (beta) and a (decay); the conv's taps [conv_dim, kernel] (stored
 * [conv_dim, 1, kernel]); A_log and dt_bias; the gated RMSNorm over a value head; out_proj. */
static void gdn(tb *b)
{
	const coli_model *m = b->m;
	int64_t kd = (int64_t)m->lin_k_heads * m->lin_k_dim, vd = (int64_t)m->lin_v_heads * m->lin_v_dim;
	linear(b, COLI_R_LIN_QKV, "linear_attn.in_proj_qkv", 2 * kd + vd, m->hidden_size);
	linear(b, COLI_R_LIN_Z, "linear_attn.in_proj_z", vd, m->hidden_size);
	add(b, COLI_TC_SMALL, COLI_R_LIN_B, "linear_attn.in_proj_b.weight", m->lin_v_heads, m->hidden_size, -1, -1);
	add(b, COLI_TC_SMALL, COLI_R_LIN_A, "linear_attn.in_proj_a.weight", m->lin_v_heads, m->hidden_size, -1, -1);
	add(b, COLI_TC_SMALL, COLI_R_LIN_CONV, "linear_attn.conv1d.weight", 2 * kd + vd, m->lin_conv, -1, -1);
	small(b, COLI_R_LIN_A_LOG, "linear_attn.A_log", m->lin_v_heads);
	small(b, COLI_R_LIN_DT_BIAS, "linear_attn.dt_bias", m->lin_v_heads);
	small(b, COLI_R_LIN_NORM, "linear_attn.norm.weight", m->lin_v_dim);
	linear(b, COLI_R_LIN_OUT, "linear_attn.out_proj", m->hidden_size, vd);
}

/* The DSA lightning indexer of a "full" layer: its query from the MLA query latent, its key
 * through its own projection and LayerNorm (weight and bias), the per-head weights (kept f32,
 * as transformers keeps weights_proj). */
static void indexer(tb *b)
{
	const coli_model *m = b->m;
	int64_t hd = m->index_head_dim;
	linear(b, COLI_R_IDX_WQ_B, "self_attn.indexer.wq_b", (int64_t)m->index_n_heads * hd, m->q_lora_rank);
	linear(b, COLI_R_IDX_WK, "self_attn.indexer.wk", hd, m->hidden_size);
	small(b, COLI_R_IDX_K_NORM, "self_attn.indexer.k_norm.weight", hd);
	small(b, COLI_R_IDX_K_BIAS, "self_attn.indexer.k_norm.bias", hd);
	add(b, COLI_TC_SMALL, COLI_R_IDX_WEIGHTS, "self_attn.indexer.weights_proj.weight", m->index_n_heads,
	    m->hidden_size, -1, -1);
}

/* DeepSeek MLA; attention_bias puts biases on q_a_proj, kv_a_proj_with_mqa and o_proj. */
static void mla(tb *b)
{
	const coli_model *m = b->m;
	int64_t q = (int64_t)m->n_heads * (m->qk_nope_head_dim + m->qk_rope_head_dim);
	int64_t kva = (int64_t)m->kv_lora_rank + m->qk_rope_head_dim;
	if (m->q_lora_rank) {
		linear(b, COLI_R_Q_A, "self_attn.q_a_proj", m->q_lora_rank, m->hidden_size);
		small(b, COLI_R_Q_A_NORM, "self_attn.q_a_layernorm.weight", m->q_lora_rank);
		linear(b, COLI_R_Q_B, "self_attn.q_b_proj", q, m->q_lora_rank);
		if (m->qkv_bias)
			small(b, COLI_R_Q_A_BIAS, "self_attn.q_a_proj.bias", m->q_lora_rank);
	} else {
		linear(b, COLI_R_Q_B, "self_attn.q_proj", q, m->hidden_size);
	}
	linear(b, COLI_R_KV_A, "self_attn.kv_a_proj_with_mqa", kva, m->hidden_size);
	small(b, COLI_R_KV_A_NORM, "self_attn.kv_a_layernorm.weight", m->kv_lora_rank);
	linear(b, COLI_R_KV_B, "self_attn.kv_b_proj", (int64_t)m->n_heads * (m->qk_nope_head_dim + m->v_head_dim),
	       m->kv_lora_rank);
	linear(b, COLI_R_O, "self_attn.o_proj", m->hidden_size, (int64_t)m->n_heads * m->v_head_dim);
	if (m->qkv_bias)
		small(b, COLI_R_KV_A_BIAS, "self_attn.kv_a_proj_with_mqa.bias", kva);
	if (m->o_bias)
		small(b, COLI_R_O_BIAS, "self_attn.o_proj.bias", m->hidden_size);
	if (m->index_topk && m->index_full[b->layer])
		indexer(b);
}

/* A SwiGLU MLP "<base>.gate_proj/up_proj/down_proj" (dense layers, shared experts): roles r,
 * r + 1, r + 2. */
static void mlp_tensors(tb *b, coli_role r, const char *base, int64_t inter)
{
	char name[96];
	snprintf(name, sizeof(name), "%s.gate_proj", base);
	linear(b, r, name, inter, b->m->hidden_size);
	snprintf(name, sizeof(name), "%s.up_proj", base);
	linear(b, (coli_role)(r + 1), name, inter, b->m->hidden_size);
	snprintf(name, sizeof(name), "%s.down_proj", base);
	linear(b, (coli_role)(r + 2), name, b->m->hidden_size, inter);
}

/* Routed expert e: gate/up/down (mixtral w1/w3/w2). */
static void expert(tb *b, const char *base, int e)
{
	static const char *const hf[3] = {"gate_proj", "up_proj", "down_proj"};
	static const char *const mx[3] = {"w1", "w3", "w2"};
	const coli_model *m = b->m;
	int64_t h = m->hidden_size, f = m->moe_intermediate_size;
	for (int p = 0; p < 3; p++) {
		char name[128];
		snprintf(name, sizeof(name), "%s.experts.%d.%s.weight", base, e,
			 m->family == COLI_FAM_MIXTRAL ? mx[p] : hf[p]);
		add(b, COLI_TC_EXPERT, COLI_R_EXPERT, name, p == COLI_PROJ_DOWN ? h : f, p == COLI_PROJ_DOWN ? f : h, e, p);
	}
}

static void moe(tb *b)
{
	const coli_model *m = b->m;
	const char *base = m->family == COLI_FAM_MIXTRAL ? "block_sparse_moe" : "mlp";
	char name[96];
	snprintf(name, sizeof(name), "%s.gate.weight", base);
	add(b, COLI_TC_SMALL, COLI_R_ROUTER, name, m->n_experts, m->hidden_size, -1, -1);
	if (m->has_correction_bias) {
		snprintf(name, sizeof(name), "%s.gate.e_score_correction_bias", base);
		small(b, COLI_R_CORR_BIAS, name, m->n_experts);
	}
	if (m->n_shared_experts) { /* qwen3_5_moe: one "shared_expert" behind a sigmoid gate */
		snprintf(name, sizeof(name), "%s.%s", base, m->shared_gate ? "shared_expert" : "shared_experts");
		mlp_tensors(b, COLI_R_SH_GATE, name, m->shared_inter);
	}
	if (m->shared_gate)
		add(b, COLI_TC_SMALL, COLI_R_SH_EXPERT_GATE, "mlp.shared_expert_gate.weight", 1, m->hidden_size, -1, -1);
	if (!b->v) /* counting: 3 tensors per expert, no names made */
		b->n += 3 * m->n_experts;
	for (int e = 0; b->v && e < m->n_experts; e++)
		expert(b, base, e);
}

/* The MTP extras, DeepSeek-V3 naming: the next-token embedding and the projections into the
 * MTP layer, and its own head. */
static void mtp_extras(tb *b)
{
	const coli_model *m = b->m;
	small(b, COLI_R_ENORM, "enorm.weight", m->hidden_size);
	small(b, COLI_R_HNORM, "hnorm.weight", m->hidden_size);
	linear(b, COLI_R_EH_PROJ, "eh_proj", m->hidden_size, 2 * (int64_t)m->hidden_size);
	if (m->family != COLI_FAM_QWEN3_5_MOE) /* Qwen's MTP layer reads the model's embedding and lm_head */
		linear(b, COLI_R_MTP_EMBED, "embed_tokens", m->vocab_size, m->hidden_size);
	small(b, COLI_R_HEAD_NORM, "shared_head.norm.weight", m->hidden_size);
	if (m->family != COLI_FAM_QWEN3_5_MOE)
		linear(b, COLI_R_HEAD, "shared_head.head", m->vocab_size, m->hidden_size);
}

static void layer(tb *b, int l)
{
	const coli_model *m = b->m;
	b->layer = l;
	b->mtp = l >= m->n_layers;
	snprintf(b->prefix, sizeof(b->prefix), "model.layers.%d.", l);
	if (b->mtp)
		mtp_extras(b);
	small(b, COLI_R_ATTN_NORM, "input_layernorm.weight", m->hidden_size);
	if (m->attn == COLI_ATTN_MLA)
		mla(b);
	else if (m->is_linear[l])
		gdn(b);
	else
		gqa(b);
	small(b, COLI_R_MLP_NORM, "post_attention_layernorm.weight", m->hidden_size);
	if (m->is_moe[l])
		moe(b);
	else
		mlp_tensors(b, COLI_R_GATE, "mlp", m->intermediate_size);
}

/* ---- deepseek_v4: DeepSeek's own names (no "model." prefix), docs/deepseek_v4.md section 2 ---- */

/* A compressor of ratio r over cw-wide kv and gate rows, its rows normed at width w. */
static void v4_compressor(tb *b, const char *base, int first_role, int64_t r, int64_t cw, int64_t w)
{
	char name[96];
	snprintf(name, sizeof(name), "%s.wkv", base);
	linear(b, (coli_role)first_role, name, cw, b->m->hidden_size);
	snprintf(name, sizeof(name), "%s.wgate", base);
	linear(b, (coli_role)(first_role + 1), name, cw, b->m->hidden_size);
	snprintf(name, sizeof(name), "%s.ape", base);
	add(b, COLI_TC_SMALL, (coli_role)(first_role + 2), name, r, cw, -1, -1);
	snprintf(name, sizeof(name), "%s.norm.weight", base);
	small(b, (coli_role)(first_role + 3), name, w);
}

/* The attention: q-LoRA with the per-head norm, the one KV head, the sinks, the grouped output;
 * a compressor when the layer's ratio is > 0 (CSA: kv and gate twice as wide, for the
 * overlapping windows, and the indexer with its own compressor). */
static void v4_attention(tb *b)
{
	const coli_model *m = b->m;
	int64_t hd = m->head_dim, q = (int64_t)m->n_heads * hd, r = m->compress[b->layer];
	int csa = m->index_full[b->layer];
	linear(b, COLI_R_Q_A, "attn.wq_a", m->q_lora_rank, m->hidden_size);
	small(b, COLI_R_Q_A_NORM, "attn.q_norm.weight", m->q_lora_rank);
	linear(b, COLI_R_Q_B, "attn.wq_b", q, m->q_lora_rank);
	linear(b, COLI_R_WKV, "attn.wkv", hd, m->hidden_size);
	small(b, COLI_R_KV_NORM, "attn.kv_norm.weight", hd);
	linear(b, COLI_R_WO_A, "attn.wo_a", (int64_t)m->o_groups * m->o_lora_rank, q / m->o_groups);
	linear(b, COLI_R_WO_B, "attn.wo_b", m->hidden_size, (int64_t)m->o_groups * m->o_lora_rank);
	add(b, COLI_TC_SMALL, COLI_R_SINK, "attn.attn_sink", m->n_heads, 0, -1, -1);
	if (r)
		v4_compressor(b, "attn.compressor", COLI_R_CMP_WKV, r, csa ? 2 * hd : hd, hd);
	if (!csa)
		return;
	int64_t ihd = m->index_head_dim;
	linear(b, COLI_R_IDX_WQ_B, "attn.indexer.wq_b", (int64_t)m->index_n_heads * ihd, m->q_lora_rank);
	add(b, COLI_TC_SMALL, COLI_R_IDX_WEIGHTS, "attn.indexer.weights_proj.weight", m->index_n_heads, m->hidden_size,
	    -1, -1);
	v4_compressor(b, "attn.indexer.compressor", COLI_R_IDX_CMP_WKV, r, 2 * ihd, ihd);
}

/* mHC's fn [(2 + S) S, S D], base [(2 + S) S] and scale [3] of one site ("hc_attn", "hc_ffn"), or
 * the head's fn [S, S D], base [S], scale [1]. */
static void v4_hc(tb *b, const char *site, int first_role, int head)
{
	const coli_model *m = b->m;
	int64_t S = m->hc_mult, rows = head ? S : (2 + S) * S;
	char name[64];
	snprintf(name, sizeof(name), "%s_fn", site);
	add(b, COLI_TC_SMALL, (coli_role)first_role, name, rows, S * m->hidden_size, -1, -1);
	snprintf(name, sizeof(name), "%s_base", site);
	small(b, (coli_role)(first_role + 1), name, rows);
	snprintf(name, sizeof(name), "%s_scale", site);
	small(b, (coli_role)(first_role + 2), name, head ? 1 : 3);
}

/* The MoE: the router, with a hash layer's token table or another layer's correction bias; the
 * shared expert; the routed experts w1 (gate), w3 (up), w2 (down). */
static void v4_moe(tb *b)
{
	const coli_model *m = b->m;
	int64_t h = m->hidden_size, f = m->moe_intermediate_size;
	add(b, COLI_TC_SMALL, COLI_R_ROUTER, "ffn.gate.weight", m->n_experts, h, -1, -1);
	if (!b->mtp && b->layer < m->n_hash_layers)
		add(b, COLI_TC_SMALL, COLI_R_TID2EID, "ffn.gate.tid2eid", m->vocab_size, m->top_k, -1, -1);
	else
		small(b, COLI_R_CORR_BIAS, "ffn.gate.bias", m->n_experts);
	if (m->n_shared_experts) {
		linear(b, COLI_R_SH_GATE, "ffn.shared_experts.w1", m->shared_inter, h);
		linear(b, COLI_R_SH_UP, "ffn.shared_experts.w3", m->shared_inter, h);
		linear(b, COLI_R_SH_DOWN, "ffn.shared_experts.w2", h, m->shared_inter);
	}
	if (!b->v) { /* counting: 3 tensors per expert */
		b->n += 3 * m->n_experts;
		return;
	}
	static const char *const w[3] = {"w1", "w3", "w2"};
	for (int e = 0; e < m->n_experts; e++)
		for (int p = 0; p < 3; p++) {
			char name[96];
			snprintf(name, sizeof(name), "ffn.experts.%d.%s.weight", e, w[p]);
			add(b, COLI_TC_EXPERT, COLI_R_EXPERT, name, p == COLI_PROJ_DOWN ? h : f, p == COLI_PROJ_DOWN ? f : h, e, p);
		}
}

/* Layer l ("layers.N.", an MTP layer "mtp.K." with its input projections and its own head). */
static void v4_layer(tb *b, int l)
{
	const coli_model *m = b->m;
	b->layer = l, b->mtp = l >= m->n_layers;
	if (b->mtp)
		snprintf(b->prefix, sizeof(b->prefix), "mtp.%d.", l - m->n_layers);
	else
		snprintf(b->prefix, sizeof(b->prefix), "layers.%d.", l);
	if (b->mtp) {
		small(b, COLI_R_ENORM, "enorm.weight", m->hidden_size);
		small(b, COLI_R_HNORM, "hnorm.weight", m->hidden_size);
		linear(b, COLI_R_E_PROJ, "e_proj", m->hidden_size, m->hidden_size);
		linear(b, COLI_R_H_PROJ, "h_proj", m->hidden_size, m->hidden_size);
		small(b, COLI_R_HEAD_NORM, "norm.weight", m->hidden_size);
		v4_hc(b, "hc_head", COLI_R_HC_HEAD_FN, 1);
	}
	small(b, COLI_R_ATTN_NORM, "attn_norm.weight", m->hidden_size);
	small(b, COLI_R_MLP_NORM, "ffn_norm.weight", m->hidden_size);
	v4_hc(b, "hc_attn", COLI_R_HC_ATTN_FN, 0);
	v4_hc(b, "hc_ffn", COLI_R_HC_FFN_FN, 0);
	v4_attention(b);
	v4_moe(b);
}

static void v4_build(tb *b)
{
	const coli_model *m = b->m;
	b->layer = -1, b->mtp = 0, b->prefix[0] = 0;
	linear(b, COLI_R_EMBED, "embed", m->vocab_size, m->hidden_size);
	small(b, COLI_R_FINAL_NORM, "norm.weight", m->hidden_size);
	if (!m->tie_word_embeddings)
		linear(b, COLI_R_LM_HEAD, "head", m->vocab_size, m->hidden_size);
	v4_hc(b, "hc_head", COLI_R_HC_HEAD_FN, 1);
	for (int l = 0; l < m->n_layers + m->n_mtp_layers; l++)
		v4_layer(b, l);
}

static void build(tb *b)
{
	if (b->m->family == COLI_FAM_DEEPSEEK_V4) {
		v4_build(b);
		return;
	}
	globals(b);
	for (int l = 0; l < b->m->n_layers + b->m->n_mtp_layers; l++)
		layer(b, l);
}

int64_t coli_model_tensor_count(const coli_model *m)
{
	tb b = {.m = m};
	build(&b);
	return b.n;
}

int coli_model_tensors(const coli_model *m, coli_tensor_spec **out, int *n, coli_err *e)
{
	tb b = {.m = m};
	*out = NULL;
	*n = 0;
	build(&b);
	b.v = coli_calloc((size_t)b.n, sizeof(*b.v), e);
	if (!b.v)
		return -1;
	b.n = 0;
	build(&b);
	*out = b.v;
	*n = b.n;
	return 0;
}

/* ---- checkpoint check -------------------------------------------------------------------- */

/* State of one check: the first problem found and how many there are. */
typedef struct chk {
	const coli_model *m;
	const coli_ckpt *c;
	uint8_t *used; /* per checkpoint tensor: claimed by an expected tensor */
	int problems;
	char first[sizeof(((coli_err *)0)->msg)];
} chk;

static void problem(chk *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(chk *k, const char *fmt, ...)
{
	if (k->problems++)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(k->first, sizeof(k->first), fmt, ap);
	va_end(ap);
}

static const coli_st_tensor *claim(chk *k, const char *name)
{
	const coli_st_tensor *t = coli_ckpt_find(k->c, name);
	if (t)
		k->used[t - k->c->tensors] = 1;
	return t;
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
	size_t len = (size_t)snprintf(buf, cap, "[");
	for (int i = 0; i < ndim && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "",
					(long long)shape[i]);
	if (len < cap)
		snprintf(buf + len, cap - len, "]");
}

/* 1 when t has the shape; else reports "<name>: shape [got] expected [want]". */
static int shape_ok(chk *k, const coli_st_tensor *t, int ndim, const int64_t *shape)
{
	int ok = t->ndim == ndim;
	for (int i = 0; ok && i < ndim; i++)
		ok = t->shape[i] == shape[i];
	if (!ok) {
		char got[128], want[64];
		shape_str(got, sizeof(got), t->ndim, t->shape);
		shape_str(want, sizeof(want), ndim, shape);
		problem(k, "%s: shape %s expected %s", t->name, got, want);
	}
	return ok;
}

/* Float weights anywhere; F8_E4M3 only for matrices of an fp8 checkpoint; a hash table's token
 * ids I64 or I32; FP4 experts (expert_dtype fp4) as I8, two codes a byte. */
static int dtype_ok(chk *k, const coli_tensor_spec *s, const coli_st_tensor *t)
{
	int f8 = k->m->fp8 && s->cls != COLI_TC_SMALL;
	if (s->role == COLI_R_TID2EID) {
		if (t->dtype == COLI_DT_I64 || t->dtype == COLI_DT_I32)
			return 1;
		problem(k, "%s: dtype %s not allowed (expected I64 or I32: expert ids)", s->name, coli_dtype_name(t->dtype));
		return 0;
	}
	if (k->m->fp4_experts && s->cls == COLI_TC_EXPERT) {
		if (t->dtype == COLI_DT_I8)
			return 1;
		problem(k, "%s: dtype %s not allowed (expert_dtype fp4: I8, two e2m1 codes a byte)", s->name,
			coli_dtype_name(t->dtype));
		return 0;
	}
	if (t->dtype == COLI_DT_BF16 || t->dtype == COLI_DT_F16 || t->dtype == COLI_DT_F32 ||
	    (f8 && t->dtype == COLI_DT_F8_E4M3))
		return 1;
	problem(k, "%s: dtype %s not allowed (expected BF16, F16%s)", s->name,
		coli_dtype_name(t->dtype), f8 ? ", F32 or F8_E4M3" : " or F32");
	return 0;
}

const coli_st_tensor *coli_model_scale_of(const coli_model *m, const coli_ckpt *c, const char *weight)
{
	char name[sizeof(((coli_tensor_spec *)0)->name) + 16];
	size_t len = strlen(weight), w = len > 7 && !strcmp(weight + len - 7, ".weight") ? len - 7 : len;
	snprintf(name, sizeof(name), "%s_scale_inv", weight);
	const coli_st_tensor *t = coli_ckpt_find(c, name);
	if (t || m->family != COLI_FAM_DEEPSEEK_V4)
		return t;
	snprintf(name, sizeof(name), "%.*s.scale", (int)w, weight);
	return coli_ckpt_find(c, name);
}

/* The scale tensor of weight s (coli_model_scale_of; DeepSeek's converter renames one spelling
 * into the other, so both are accepted) of shape want: F32 as _scale_inv, F8_E8M0 as .scale. */
static void check_scale_of(chk *k, const coli_tensor_spec *s, const int64_t want[2])
{
	const coli_st_tensor *t = coli_model_scale_of(k->m, k->c, s->name);
	if (!t) {
		problem(k, "%s%s: missing (%s weight %s needs it)", s->name,
			k->m->family == COLI_FAM_DEEPSEEK_V4 ? " scale (.scale or _scale_inv)" : "_scale_inv",
			s->cls == COLI_TC_EXPERT && k->m->fp4_experts ? "FP4" : "F8_E4M3", s->name);
		return;
	}
	k->used[t - k->c->tensors] = 1;
	size_t len = strlen(t->name);
	int e8 = len > 6 && !strcmp(t->name + len - 6, ".scale");
	if (shape_ok(k, t, 2, want) && t->dtype != (e8 ? COLI_DT_F8_E8M0 : COLI_DT_F32))
		problem(k, "%s: dtype %s expected %s", t->name, coli_dtype_name(t->dtype), e8 ? "F8_E8M0" : "F32");
}

/* An F8_E4M3 weight [out, in]: scales [ceil(out/b0), ceil(in/b1)]; an FP4 expert's: [out, in/32]. */
static void check_scale(chk *k, const coli_tensor_spec *s)
{
	const int *b = k->m->fp8_block;
	int64_t want[2] = {(s->shape[0] + b[0] - 1) / b[0], (s->shape[1] + b[1] - 1) / b[1]};
	if (k->m->fp4_experts && s->cls == COLI_TC_EXPERT)
		want[0] = s->shape[0], want[1] = s->shape[1] / 32;
	check_scale_of(k, s, want);
}

static void check_one(chk *k, const coli_tensor_spec *s, const char *why_missing)
{
	const coli_st_tensor *t = claim(k, s->name);
	int fp4 = k->m->fp4_experts && s->cls == COLI_TC_EXPERT;
	if (!t) {
		problem(k, "%s: missing%s", s->name, why_missing);
		return;
	}
	if (fp4 && s->shape[1] % 32) {
		problem(k, "%s: %lld columns: FP4 experts come in blocks of 32", s->name, (long long)s->shape[1]);
		return;
	}
	int64_t shape[2] = {s->shape[0], fp4 ? s->shape[1] / 2 : s->shape[1]}; /* FP4: two codes a byte */
	if (!shape_ok(k, t, s->ndim, shape) || !dtype_ok(k, s, t))
		return;
	if (t->dtype == COLI_DT_F8_E4M3 || fp4)
		check_scale(k, s);
}

static void check_leftovers(chk *k)
{
	for (int i = 0; i < k->c->n_tensors; i++) {
		const char *name = k->c->tensors[i].name;
		size_t len = strlen(name);
		if (k->used[i] || coli_model_unused_tensor(k->m, name))
			continue;
		if ((len > 10 && !strcmp(name + len - 10, "_scale_inv")) ||
		    (k->m->family == COLI_FAM_DEEPSEEK_V4 && len > 6 && !strcmp(name + len - 6, ".scale")))
			problem(k, "%s: unexpected tensor (no F8_E4M3 or FP4 weight of that name)", name);
		else
			problem(k, "%s: unexpected tensor", name);
	}
}

/* MTP all or nothing: none present drops the MTP layers from the model. */
static void check_all(chk *k, coli_model *m, const coli_tensor_spec *v, int n)
{
	int mtp = 0, mtp_found = 0;
	char why[96] = "";
	for (int i = 0; i < n; i++)
		if (v[i].mtp && (mtp++, coli_ckpt_find(k->c, v[i].name)))
			mtp_found++;
	if (mtp && !mtp_found)
		m->n_mtp_layers = 0;
	else if (mtp_found < mtp)
		snprintf(why, sizeof(why), " (MTP layers are all or nothing: %d of %d MTP "
			 "tensors present)", mtp_found, mtp);
	for (int i = 0; i < n; i++)
		if (!v[i].mtp || m->n_mtp_layers)
			check_one(k, &v[i], v[i].mtp ? why : "");
	check_leftovers(k);
}

int coli_model_check_ckpt(coli_model *m, const coli_ckpt *c, coli_err *e)
{
	coli_tensor_spec *v;
	int n;
	chk k = {.m = m, .c = c};
	coli_model core = *m; /* the MTP layers may be absent from a checkpoint */
	core.n_mtp_layers = 0;
	int64_t want = coli_model_tensor_count(&core);
	if (want > (int64_t)c->n_tensors) /* refused before a table of that many is made */
		return coli_errf(e, COLI_EDATA, "%s: config.json describes %lld tensors (%d layers, %d experts per MoE "
				 "layer), the checkpoint holds %d", c->dir ? c->dir : "checkpoint", (long long)want,
				 m->n_layers, m->n_experts, c->n_tensors);
	if (coli_model_tensors(m, &v, &n, e))
		return -1;
	k.used = coli_calloc((size_t)c->n_tensors + 1, 1, e);
	if (!k.used) {
		free(v);
		return -1;
	}
	check_all(&k, m, v, n);
	free(v);
	free(k.used);
	if (!k.problems)
		return 0;
	char more[32] = "";
	if (k.problems > 1)
		snprintf(more, sizeof(more), " (and %d more)", k.problems - 1);
	return coli_errf(e, COLI_EDATA, "%s: %s%s", c->dir ? c->dir : "checkpoint", k.first, more);
}

int coli_model_unused_tensor(const coli_model *m, const char *name)
{
	int l, at = 0;
	/* deepseek_v4's MTP layer reads the model's embedding and head; a checkpoint may carry copies */
	if (m->family == COLI_FAM_DEEPSEEK_V4 && sscanf(name, "mtp.%d.%n", &l, &at) == 1 && at > 0)
		return !strncmp(name + at, "emb", 3) || !strcmp(name + at, "head.weight");
	if (!m->index_topk || sscanf(name, "model.layers.%d.self_attn.indexer.%n", &l, &at) != 1 || at == 0)
		return 0;
	return l >= 0 && l < m->n_layers && !m->index_full[l];
}
