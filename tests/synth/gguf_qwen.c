/* gguf_qwen.c: the qwen3_moe checkpoint as llama.cpp's "qwen3moe" GGUF: tensor names and shapes,
 * hyperparameter keys; and what every GGUF of coli-synth shares: general.* and the tokenizer
 * (tokenizer.json as a gpt2 BPE vocabulary).
 *
 * A HF linear [out, in] is a GGUF tensor of ne = [in, out] with the same bytes in the same order
 * (rows of `in` values); a layer's routed experts are stacked into one tensor of ne = [in, out,
 * n_experts], expert e's rows at e x out. Qwen3 rotates halves (neox RoPE in llama.cpp), so q and
 * k need no permutation. Routers and norms stay F32 (as llama.cpp's own quantizer leaves routers),
 * every other matrix is Q4_0 (or F32: --gguf-dense), the routed experts Q4_0, Q4_1 or F32.
 */
#include "gguf.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5 }; /* llama.cpp token types */

/* ---- tensors ---------------------------------------------------------------------------------- */

int gg_add2(gg_model *g, const char *name, int type, int64_t in, int64_t out, const char *hf,
	    coli_err *e)
{
	int64_t ne[2] = {in, out};
	return gg_add(g, name, type, out > 1 ? 2 : 1, ne, hf, 1, NULL, e);
}

static int attention(gg_model *g, const coli_model *m, int l, int dense, coli_err *e)
{
	int64_t h = m->hidden_size, q = (int64_t)m->n_heads * m->head_dim,
		kv = (int64_t)m->n_kv_heads * m->head_dim;
	char n[64], hf[160];
	struct { const char *gg, *hf; int64_t in, out; int type; } t[] = {
		{"attn_norm", "input_layernorm", h, 1, GG_F32},
		{"attn_q", "self_attn.q_proj", h, q, dense},
		{"attn_k", "self_attn.k_proj", h, kv, dense},
		{"attn_v", "self_attn.v_proj", h, kv, dense},
		{"attn_output", "self_attn.o_proj", q, h, dense},
		{"attn_q_norm", "self_attn.q_norm", m->head_dim, 1, GG_F32},
		{"attn_k_norm", "self_attn.k_norm", m->head_dim, 1, GG_F32},
		{"ffn_norm", "post_attention_layernorm", h, 1, GG_F32},
		{"ffn_gate_inp", "mlp.gate", h, m->n_experts, GG_F32},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(n, sizeof(n), "blk.%d.%s.weight", l, t[i].gg);
		snprintf(hf, sizeof(hf), "model.layers.%d.%s.weight", l, t[i].hf);
		if (gg_add2(g, n, t[i].type, t[i].in, t[i].out, hf, e))
			return -1;
	}
	return 0;
}

int gg_experts(gg_model *g, const coli_model *m, int l, int type, coli_err *e)
{
	static const char *const gg[3] = {"gate", "up", "down"};
	int64_t h = m->hidden_size, f = m->moe_intermediate_size;
	char n[64], hf[160], tail[48];
	for (int p = 0; p < 3; p++) {
		int64_t ne[3] = {p == 2 ? f : h, p == 2 ? h : f, m->n_experts};
		snprintf(n, sizeof(n), "blk.%d.ffn_%s_exps.weight", l, gg[p]);
		snprintf(hf, sizeof(hf), "model.layers.%d.mlp.experts.", l);
		snprintf(tail, sizeof(tail), ".%s_proj.weight", gg[p]);
		if (gg_add(g, n, type, 3, ne, hf, m->n_experts, tail, e))
			return -1;
	}
	return 0;
}

int gg_qwen_tensors(gg_model *g, const coli_model *m, int dense_type, int expert_type, coli_err *e)
{
	int64_t h = m->hidden_size, v = m->vocab_size;
	if (m->family != COLI_FAM_QWEN3_MOE || m->tie_word_embeddings)
		return coli_errf(e, COLI_EUSAGE, "--gguf: family '%s' is not qwen3_moe (the only one "
				 "written as GGUF)", coli_family_name(m->family));
	if (gg_add2(g, "token_embd.weight", dense_type, h, v, "model.embed_tokens.weight", e))
		return -1;
	for (int l = 0; l < m->n_layers; l++) {
		if (!m->is_moe[l])
			return coli_errf(e, COLI_EUSAGE, "--gguf: layer %d is dense (not written)", l);
		if (attention(g, m, l, dense_type, e) || gg_experts(g, m, l, expert_type, e))
			return -1;
	}
	return gg_add2(g, "output_norm.weight", GG_F32, h, 1, "model.norm.weight", e) ||
	       gg_add2(g, "output.weight", dense_type, h, v, "lm_head.weight", e) ? -1 : 0;
}

/* ---- hyperparameters ------------------------------------------------------------------------- */

static void hparams(gg_buf *b, const coli_model *m)
{
	struct { const char *key; int v; } u[] = {
		{"qwen3moe.block_count", m->n_layers},
		{"qwen3moe.context_length", m->max_position_embeddings},
		{"qwen3moe.embedding_length", m->hidden_size},
		{"qwen3moe.feed_forward_length", m->intermediate_size},
		{"qwen3moe.attention.head_count", m->n_heads},
		{"qwen3moe.attention.head_count_kv", m->n_kv_heads},
		{"qwen3moe.attention.key_length", m->head_dim},
		{"qwen3moe.attention.value_length", m->head_dim},
		{"qwen3moe.expert_count", m->n_experts},
		{"qwen3moe.expert_used_count", m->top_k},
		{"qwen3moe.expert_feed_forward_length", m->moe_intermediate_size},
	};
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		gg_kv_u32(b, u[i].key, (uint32_t)u[i].v);
	gg_kv_f32(b, "qwen3moe.rope.freq_base", (float)m->rope.theta);
	gg_kv_f32(b, "qwen3moe.attention.layer_norm_rms_epsilon", (float)m->rms_norm_eps);
}

/* ---- tokenizer ---------------------------------------------------------------------------------- */

typedef struct vocab {
	const char **text; /* [n]: NULL for ids the tokenizer lacks */
	int32_t *type;
	int64_t n;
} vocab;

/* Added tokens marked special, or looking like "<|...|>", are control tokens. */
static int added_type(json_t *tok, const char *s)
{
	size_t len = strlen(s);
	int looks = len >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + len - 2, "|>");
	return json_is_true(json_object_get(tok, "special")) || looks ? TT_CONTROL : TT_USER;
}

static void fill_vocab(vocab *v, json_t *root)
{
	const char *k;
	json_t *id, *tok;
	size_t i;
	json_object_foreach(json_object_get(json_object_get(root, "model"), "vocab"), k, id) {
		json_int_t n = json_integer_value(id);
		if (json_is_integer(id) && n >= 0 && n < v->n)
			v->text[n] = k, v->type[n] = TT_NORMAL;
	}
	json_array_foreach(json_object_get(root, "added_tokens"), i, tok) {
		json_int_t n = json_integer_value(json_object_get(tok, "id"));
		const char *s = json_string_value(json_object_get(tok, "content"));
		if (s && n >= 0 && n < v->n)
			v->text[n] = s, v->type[n] = added_type(tok, s);
	}
}

/* tokenizer.ggml.tokens and token_type: every id below vocab_size, "[PAD<id>]" (unused) for
 * the ids the tokenizer does not define. */
static void put_tokens(gg_buf *b, const vocab *v)
{
	char pad[32];
	gg_kv_arr(b, "tokenizer.ggml.tokens", GV_STR, (uint64_t)v->n);
	for (int64_t i = 0; i < v->n; i++) {
		snprintf(pad, sizeof(pad), "[PAD%lld]", (long long)i);
		gg_str(b, v->text[i] ? v->text[i] : pad);
	}
	gg_kv_arr(b, "tokenizer.ggml.token_type", GV_I32, (uint64_t)v->n);
	for (int64_t i = 0; i < v->n; i++) {
		int32_t t = v->text[i] ? v->type[i] : TT_UNUSED;
		gg_put(b, &t, 4);
	}
}

/* tokenizer.ggml.merges: "a b" for each merge, given as "a b" or ["a", "b"]. */
static int put_merges(gg_buf *b, json_t *root, const char *path, coli_err *e)
{
	json_t *merges = json_object_get(json_object_get(root, "model"), "merges"), *mg;
	size_t i;
	gg_kv_arr(b, "tokenizer.ggml.merges", GV_STR, json_array_size(merges));
	json_array_foreach(merges, i, mg) {
		const char *a = json_string_value(json_is_array(mg) ? json_array_get(mg, 0) : mg);
		const char *c = json_is_array(mg) ? json_string_value(json_array_get(mg, 1)) : NULL;
		if (!a || (json_is_array(mg) && !c))
			return coli_errf(e, COLI_EDATA, "%s: model.merges[%zu]: not a string or a pair "
					 "of strings", path, i);
		gg_u64(b, strlen(a) + (c ? strlen(c) + 1 : 0));
		gg_put(b, a, strlen(a));
		if (c)
			gg_put(b, " ", 1), gg_put(b, c, strlen(c));
	}
	return 0;
}

int gg_tokenizer(gg_buf *b, const synth_tok *tok, int64_t n_vocab, const synth_shape *s,
		 const char *pre, coli_err *e)
{
	json_error_t je;
	json_t *root = json_load_file(tok->json_path, 0, &je);
	if (!root)
		return coli_errf(e, COLI_EDATA, "%s: line %d: %s", tok->json_path, je.line, je.text);
	vocab v = {calloc((size_t)n_vocab, sizeof(char *)), calloc((size_t)n_vocab, 4), n_vocab};
	int rc = v.text && v.type ? 0 : coli_errf(e, COLI_ENOMEM, "out of memory (%lld tokens)",
						     (long long)n_vocab);
	if (rc == 0) {
		fill_vocab(&v, root);
		gg_kv_str(b, "tokenizer.ggml.model", "gpt2");
		gg_kv_str(b, "tokenizer.ggml.pre", pre);
		put_tokens(b, &v);
		rc = put_merges(b, root, tok->json_path, e);
		gg_kv_u32(b, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos);
		gg_kv_u32(b, "tokenizer.ggml.eos_token_id", (uint32_t)s->eos);
		gg_kv_u32(b, "tokenizer.ggml.padding_token_id", (uint32_t)s->pad);
		gg_kv_bool(b, "tokenizer.ggml.add_bos_token", 0);
	}
	free(v.text);
	free(v.type);
	json_decref(root);
	return rc;
}

/* general.file_type: 2 (mostly Q4_0), 3 (mostly Q4_1) or 0 (all F32), as the experts are. */
int gg_general(gg_buf *b, const synth_opts *o, const synth_tok *tok, const char *arch,
	       const char *family, coli_err *e)
{
	char name[96];
	if (!tok || !tok->json_path)
		return coli_errf(e, COLI_EUSAGE, "--gguf needs the tokenizer (not --no-tokenizer)");
	snprintf(name, sizeof(name), "coli-synth %s seed %llu", family, (unsigned long long)o->seed);
	gg_kv_str(b, "general.architecture", arch);
	gg_kv_str(b, "general.name", name);
	gg_kv_u32(b, "general.alignment", GG_ALIGN);
	gg_kv_u32(b, "general.file_type", (uint32_t)o->gguf_experts);
	return 0;
}

int gg_qwen_metadata(gg_buf *b, const synth_opts *o, const coli_model *m, const synth_tok *tok,
		     const synth_shape *s, coli_err *e)
{
	if (gg_general(b, o, tok, "qwen3moe", "qwen3_moe", e))
		return -1;
	hparams(b, m);
	if (gg_tokenizer(b, tok, m->vocab_size, s, "qwen2", e))
		return -1;
	return b->oom ? coli_errf(e, COLI_ENOMEM, "out of memory building the GGUF metadata") : 0;
}
