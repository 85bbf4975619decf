/* test_model.c: config.json parsing, expected tensor sets and checkpoint checks (model.h). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "t.h"

static const char *const fixture_names[] = {
	"deepseek_v3-tiny", "deepseek_v3-fp8-tiny", "glm4_moe-tiny",
	"qwen3_moe-tiny", "olmoe-tiny", "mixtral-tiny", "glm_moe_dsa-tiny", "qwen3_5_moe-tiny",
	"deepseek_v4-tiny", "deepseek_v4-fp4-tiny",
};
#define N_FIXTURES ((int)(sizeof(fixture_names) / sizeof(fixture_names[0])))

static void fixture_dir(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s/checkpoint", t_fixtures(), name);
}

static int load_fixture(coli_model *m, const char *name, coli_err *e)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s/checkpoint/config.json", t_fixtures(), name);
	return coli_model_load(m, path, e);
}

/* ---- fixture configs --------------------------------------------------------------------- */

static void test_deepseek(void)
{
	coli_model m;
	coli_err e = {0};
	int rc = load_fixture(&m, "deepseek_v3-tiny", &e);
	T_CHECK("model_deepseek_load", rc == 0, "%s", e.msg);
	if (rc)
		return;
	T_CHECK("model_deepseek_family", m.family == COLI_FAM_DEEPSEEK_V3 &&
		!strcmp(m.model_type, "deepseek_v3") && !strcmp(m.dtype, "bfloat16"),
		"family %d type '%s' dtype '%s'", m.family, m.model_type, m.dtype);
	T_CHECK("model_deepseek_mla", m.attn == COLI_ATTN_MLA && m.q_lora_rank == 32 &&
		m.kv_lora_rank == 32 && m.qk_nope_head_dim == 32 && m.qk_rope_head_dim == 16 &&
		m.v_head_dim == 32 && m.qk_norm == COLI_QKNORM_NONE && !m.qkv_bias,
		"attn %d q_lora %d kv_lora %d", m.attn, m.q_lora_rank, m.kv_lora_rank);
	T_CHECK("model_deepseek_layers", m.n_layers == 4 && !m.is_moe[0] && m.is_moe[1] &&
		m.is_moe[2] && m.is_moe[3] && m.is_moe[4], "n_layers %d moe %d%d%d%d",
		m.n_layers, m.is_moe[0], m.is_moe[1], m.is_moe[2], m.is_moe[3]);
	T_CHECK("model_deepseek_router", m.router == COLI_ROUTER_SIGMOID_GROUP &&
		m.n_group == 4 && m.topk_group == 2 && m.routed_scaling_factor == 2.5 &&
		m.norm_topk_prob && m.has_correction_bias && m.n_experts == 16 && m.top_k == 4 &&
		m.n_shared_experts == 1 && m.moe_intermediate_size == 64,
		"router %d groups %d/%d scale %g", m.router, m.n_group, m.topk_group,
		m.routed_scaling_factor);
	T_CHECK("model_deepseek_rope", m.rope.interleave && m.rope.rotary_dim == 16 &&
		m.rope.theta == 10000.0 && m.rope.scaling == COLI_ROPE_NONE,
		"interleave %d rotary %d", m.rope.interleave, m.rope.rotary_dim);
	T_CHECK("model_deepseek_mtp", m.n_mtp_layers == 1 && !m.fp8 && !m.tie_word_embeddings,
		"n_mtp %d fp8 %d", m.n_mtp_layers, m.fp8);
}

static void test_fp8(void)
{
	coli_model m;
	coli_err e = {0};
	int rc = load_fixture(&m, "deepseek_v3-fp8-tiny", &e);
	T_CHECK("model_fp8_load", rc == 0, "%s", e.msg);
	T_CHECK("model_fp8_block", !rc && m.fp8 && m.fp8_block[0] == 128 &&
		m.fp8_block[1] == 128 && m.hidden_size == 192 && m.v_head_dim == 40,
		"fp8 %d block %d,%d", m.fp8, m.fp8_block[0], m.fp8_block[1]);
}

static void test_glm(void)
{
	coli_model m;
	coli_err e = {0};
	int rc = load_fixture(&m, "glm4_moe-tiny", &e);
	T_CHECK("model_glm_load", rc == 0, "%s", e.msg);
	if (rc)
		return;
	T_CHECK("model_glm_attention", m.attn == COLI_ATTN_GQA && m.head_dim == 32 &&
		m.n_kv_heads == 2 && m.rope.rotary_dim == 16 && !m.rope.interleave &&
		m.qkv_bias == 1 && m.o_bias == 0 && m.qk_norm == COLI_QKNORM_HEAD,
		"head_dim %d rotary %d qkv_bias %d o_bias %d qk_norm %d", m.head_dim,
		m.rope.rotary_dim, m.qkv_bias, m.o_bias, m.qk_norm);
	T_CHECK("model_glm_moe", m.router == COLI_ROUTER_SIGMOID_GROUP && m.n_group == 1 &&
		m.topk_group == 1 && m.routed_scaling_factor == 2.5 && !m.is_moe[0] &&
		m.is_moe[1] && m.n_mtp_layers == 1 && m.rope.theta == 1e6,
		"router %d moe0 %d mtp %d", m.router, m.is_moe[0], m.n_mtp_layers);
}

static void test_qwen3(void)
{
	coli_model m;
	coli_err e = {0};
	int rc = load_fixture(&m, "qwen3_moe-tiny", &e);
	T_CHECK("model_qwen3_load", rc == 0, "%s", e.msg);
	T_CHECK("model_qwen3_fields", !rc && m.qk_norm == COLI_QKNORM_HEAD && m.head_dim == 32 &&
		m.router == COLI_ROUTER_SOFTMAX_TOPK && m.norm_topk_prob && m.n_experts == 32 &&
		m.top_k == 4 && m.is_moe[0] && m.is_moe[3] && !m.n_shared_experts &&
		!m.has_correction_bias && !m.sliding_window && m.n_mtp_layers == 0,
		"qk_norm %d head_dim %d experts %d", m.qk_norm, m.head_dim, m.n_experts);
}

static void test_olmoe(void)
{
	coli_model m;
	coli_err e = {0};
	int rc = load_fixture(&m, "olmoe-tiny", &e);
	T_CHECK("model_olmoe_load", rc == 0, "%s", e.msg);
	T_CHECK("model_olmoe_fields", !rc && m.qk_norm == COLI_QKNORM_WHOLE &&
		m.router == COLI_ROUTER_SOFTMAX_TOPK && !m.norm_topk_prob && m.head_dim == 16 &&
		m.moe_intermediate_size == 64 && m.n_experts == 16 && m.clip_qkv == 0,
		"qk_norm %d norm_topk %d head_dim %d", m.qk_norm, m.norm_topk_prob, m.head_dim);
}

static void test_mixtral(void)
{
	coli_model m;
	coli_err e = {0};
	int rc = load_fixture(&m, "mixtral-tiny", &e);
	T_CHECK("model_mixtral_load", rc == 0, "%s", e.msg);
	T_CHECK("model_mixtral_fields", !rc && m.head_dim == 16 && m.n_kv_heads == 2 &&
		m.router == COLI_ROUTER_TOPK_SOFTMAX && m.n_experts == 8 && m.top_k == 2 &&
		m.moe_intermediate_size == 128 && m.qk_norm == COLI_QKNORM_NONE && !m.qkv_bias &&
		!m.sliding_window && m.rope.theta == 1e6 && m.rope.rotary_dim == 16,
		"head_dim %d router %d", m.head_dim, m.router);
}

/* ---- fixture checkpoints ----------------------------------------------------------------- */

static void test_fixture_ckpts(void)
{
	for (int i = 0; i < N_FIXTURES; i++) {
		char dir[512], tname[96];
		coli_model m;
		coli_ckpt *c = NULL;
		coli_err e = {0};
		fixture_dir(dir, sizeof(dir), fixture_names[i]);
		int rc = load_fixture(&m, fixture_names[i], &e);
		if (!rc)
			rc = coli_ckpt_open(&c, dir, &e);
		int mtp = rc ? 0 : m.n_mtp_layers, skipped;
		if (!rc) /* the released layout seen through the table's names first (qwen3_5_moe) */
			rc = coli_model_map_ckpt(&m, c, &skipped, &e) || coli_model_check_ckpt(&m, c, &e);
		snprintf(tname, sizeof(tname), "model_check_ckpt_%s", fixture_names[i]);
		T_CHECK(tname, rc == 0 && m.n_mtp_layers == mtp, "%s", e.msg);
		coli_ckpt_close(c);
	}
}

static void test_tensor_counts(void)
{
	static const struct { const char *name; int n; } want[] = {
		{"deepseek_v3-tiny", 269}, {"glm4_moe-tiny", 279}, {"qwen3_moe-tiny", 423},
		{"olmoe-tiny", 231}, {"mixtral-tiny", 127},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		coli_model m;
		coli_err e = {0};
		coli_tensor_spec *v = NULL;
		int n = 0;
		char tname[96];
		int rc = load_fixture(&m, want[i].name, &e);
		if (!rc)
			rc = coli_model_tensors(&m, &v, &n, &e);
		snprintf(tname, sizeof(tname), "model_tensor_count_%s", want[i].name);
		T_CHECK(tname, !rc && n == want[i].n, "%d tensors, want %d: %s", n, want[i].n, e.msg);
		free(v);
	}
}

static const coli_tensor_spec *spec_find(const coli_tensor_spec *v, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

static void test_tensor_classes(void)
{
	coli_model m;
	coli_err e = {0};
	coli_tensor_spec *v = NULL;
	int n = 0;
	if (load_fixture(&m, "mixtral-tiny", &e) || coli_model_tensors(&m, &v, &n, &e)) {
		T_CHECK("model_tensor_classes", 0, "%s", e.msg);
		return;
	}
	const coli_tensor_spec *w2 =
		spec_find(v, n, "model.layers.2.block_sparse_moe.experts.5.w2.weight");
	const coli_tensor_spec *gate =
		spec_find(v, n, "model.layers.2.block_sparse_moe.gate.weight");
	const coli_tensor_spec *emb = spec_find(v, n, "model.embed_tokens.weight");
	T_CHECK("model_tensor_classes", w2 && gate && emb && w2->cls == COLI_TC_EXPERT &&
		w2->expert == 5 && w2->proj == COLI_PROJ_DOWN && w2->layer == 2 &&
		w2->shape[0] == 64 && w2->shape[1] == 128 && gate->cls == COLI_TC_SMALL &&
		emb->cls == COLI_TC_MATRIX && emb->layer == -1 && !w2->mtp,
		"w2 %p gate %p emb %p", (const void *)w2, (const void *)gate, (const void *)emb);
	free(v);
}

/* GLM-MoE-DSA: nested rope_parameters (no root rope_theta), the indexer's schedule, MTP. */
static void test_glm_dsa(void)
{
	coli_model m;
	coli_err e = {0};
	coli_tensor_spec *v = NULL;
	int n = 0;
	int rc = load_fixture(&m, "glm_moe_dsa-tiny", &e) || coli_model_tensors(&m, &v, &n, &e);
	T_CHECK("model_dsa_load", rc == 0, "%s", e.msg);
	if (rc)
		return;
	T_CHECK("model_dsa_rope_parameters", m.rope.theta == 8000000.0 && m.rope.interleave &&
		m.rope.scaling == COLI_ROPE_NONE && m.rope.rotary_dim == 16, "theta %g", m.rope.theta);
	T_CHECK("model_dsa_indexer", m.index_topk == 8 && m.index_n_heads == 8 && m.index_head_dim == 32 &&
		m.index_full[0] && m.index_full[1] && !m.index_full[2] && m.index_full[3] && !m.index_full[4] &&
		m.index_full[5] && m.index_share_mtp, "topk %d heads %d hd %d full %d%d%d%d%d mtp %d", m.index_topk,
		m.index_n_heads, m.index_head_dim, m.index_full[0], m.index_full[1], m.index_full[2], m.index_full[3],
		m.index_full[4], m.index_full[5]);
	T_CHECK("model_dsa_layers", m.n_layers == 5 && !m.is_moe[0] && m.is_moe[1] && m.is_moe[4] && m.n_mtp_layers == 1 &&
		m.router == COLI_ROUTER_SIGMOID_GROUP && m.n_group == 1 && m.routed_scaling_factor == 2.5,
		"layers %d mtp %d", m.n_layers, m.n_mtp_layers);
	const coli_tensor_spec *wq = spec_find(v, n, "model.layers.3.self_attn.indexer.wq_b.weight");
	T_CHECK("model_dsa_tensors", wq && wq->role == COLI_R_IDX_WQ_B && wq->shape[0] == 8 * 32 && wq->shape[1] == 32 &&
		!spec_find(v, n, "model.layers.2.self_attn.indexer.wk.weight") &&
		spec_find(v, n, "model.layers.5.self_attn.indexer.wk.weight") &&
		coli_model_unused_tensor(&m, "model.layers.2.self_attn.indexer.wk.weight") &&
		!coli_model_unused_tensor(&m, "model.layers.3.self_attn.indexer.wk.weight"), "wq_b %p", (void *)wq);
	free(v);
}

static void test_tied(void)
{
	coli_model m;
	coli_err e = {0};
	coli_tensor_spec *v = NULL;
	int n = 0;
	const char *cfg = "{\"model_type\": \"mixtral\", \"vocab_size\": 32, \"hidden_size\": 16,"
			  "\"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
			  "\"num_key_value_heads\": 2, \"intermediate_size\": 8,"
			  "\"tie_word_embeddings\": true}";
	int rc = coli_model_parse(&m, cfg, "config.json", &e) || coli_model_tensors(&m, &v, &n, &e);
	T_CHECK("model_tied_no_lm_head", !rc && m.tie_word_embeddings &&
		!spec_find(v, n, "lm_head.weight") && spec_find(v, n, "model.embed_tokens.weight"),
		"rc %d: %s", rc, e.msg);
	free(v);
}

/* ---- corrupt and minimal configs --------------------------------------------------------- */

static const char *const qwen_base =
	"\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 2,"
	"\"num_attention_heads\": 4, \"intermediate_size\": 64";

/* Parses "{<base>, <extra>}" with model_type mt; returns rc and fills e. */
static int parse_with(coli_model *m, const char *mt, const char *extra, coli_err *e)
{
	char buf[2048];
	snprintf(buf, sizeof(buf), "{\"model_type\": \"%s\", %s%s%s}", mt, qwen_base,
		 *extra ? ", " : "", extra);
	memset(e, 0, sizeof(*e));
	return coli_model_parse(m, buf, "config.json", e);
}

/* A config that must fail with a message containing `want`. */
static void expect_fail(const char *tname, const char *mt, const char *extra, const char *want)
{
	coli_model m;
	coli_err e;
	int rc = parse_with(&m, mt, extra, &e);
	T_CHECK(tname, rc < 0 && e.code == COLI_EDATA && strstr(e.msg, want),
		"rc %d msg '%s', want '%s'", rc, e.msg, want);
}

static void test_corrupt(void)
{
	expect_fail("model_bad_model_type", "llama", "",
		    "config.json: model_type 'llama' unsupported (supported: deepseek_v3, "
		    "glm4_moe, qwen3_moe, olmoe, mixtral, glm_moe_dsa, qwen3_5_moe, deepseek_v4)");
	coli_model m;
	coli_err e = {0};
	int rc = coli_model_parse(&m, "{\"model_type\": \"olmoe\", \"vocab_size\": 8}",
				  "config.json", &e);
	T_CHECK("model_missing_hidden_size", rc < 0 && strstr(e.msg, "config.json: hidden_size: "
		"missing"), "%s", e.msg);
	rc = coli_model_parse(&m, "{\"vocab_size\": 8}", "config.json", &e);
	T_CHECK("model_missing_model_type", rc < 0 && strstr(e.msg, "model_type: missing") &&
		strstr(e.msg, "mixtral"), "%s", e.msg);
	rc = coli_model_parse(&m, "{\"model_type\": ", "config.json", &e);
	T_CHECK("model_bad_json", rc < 0 && strstr(e.msg, "config.json: invalid JSON"), "%s",
		e.msg);
	expect_fail("model_wrong_type", "qwen3_moe", "\"num_experts\": \"8\"",
		    "config.json: num_experts: expected an integer, got a string");
	expect_fail("model_wrong_type_bool", "qwen3_moe", "\"norm_topk_prob\": 1",
		    "norm_topk_prob: expected a boolean, got an integer");
	expect_fail("model_topk_exceeds", "deepseek_v3",
		    "\"n_routed_experts\": 16, \"num_experts_per_tok\": 40, \"n_group\": 1,"
		    "\"topk_group\": 1", "config.json: num_experts_per_tok: 40 exceeds "
		    "n_routed_experts 16");
	expect_fail("model_fp8_bad_fmt", "deepseek_v3",
		    "\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e5m2\"}",
		    "quantization_config.fmt: 'e5m2' unsupported");
	expect_fail("model_bad_quant_method", "qwen3_moe",
		    "\"quantization_config\": {\"quant_method\": \"awq\"}",
		    "quantization_config.quant_method: 'awq' unsupported");
	expect_fail("model_hidden_act", "mixtral", "\"hidden_act\": \"gelu\"",
		    "config.json: hidden_act: 'gelu' unsupported");
	expect_fail("model_duplicate_key", "olmoe", "\"hidden_size\": 0",
		    "duplicate");
	expect_fail("model_kv_heads_divide", "qwen3_moe", "\"num_key_value_heads\": 3",
		    "num_attention_heads: 4 not divisible by num_key_value_heads 3");
	expect_fail("model_rope_type", "qwen3_moe",
		    "\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2}",
		    "rope_scaling.rope_type: 'dynamic' unsupported");
	expect_fail("model_rope_factor_missing", "qwen3_moe",
		    "\"rope_scaling\": {\"type\": \"yarn\"}", "rope_scaling.factor: missing");
	expect_fail("model_group_split", "deepseek_v3",
		    "\"n_routed_experts\": 16, \"n_group\": 3, \"num_experts_per_tok\": 2",
		    "n_group: 3 does not split n_routed_experts 16");
	expect_fail("model_mlp_only_range", "qwen3_moe", "\"mlp_only_layers\": [0, 7]",
		    "mlp_only_layers[1]");
	expect_fail("model_rotary_dims", "glm4_moe",
		    "\"num_key_value_heads\": 2, \"partial_rotary_factor\": 0.1",
		    "partial_rotary_factor: 0.1 gives 0 rotary dims");
	expect_fail("model_kv_heads_default", "glm4_moe", "",
		    "num_key_value_heads: 8 out of range [1, 4]");
}

/* A key that would change the computation and that coli does not take is refused, per family:
 * never read with a default in its place. */
static void test_refused_keys(void)
{
	const char *dsa = "\"q_lora_rank\": 16, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 8, "
			  "\"v_head_dim\": 8, \"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"index_topk\": 4, "
			  "\"index_n_heads\": 2, \"index_head_dim\": 16";
	char buf[1024];
	expect_fail("model_refuse_deepseek_kv_heads", "deepseek_v3",
		    "\"n_routed_experts\": 16, \"n_group\": 1, \"topk_group\": 1, \"num_key_value_heads\": 2",
		    "num_key_value_heads: 2 unsupported with MLA");
	expect_fail("model_refuse_glm4_moe_layer_freq", "glm4_moe", "\"num_key_value_heads\": 2, \"moe_layer_freq\": 2",
		    "moe_layer_freq: 2 out of range [1, 1]");
	expect_fail("model_refuse_qwen3_layer_types", "qwen3_moe",
		    "\"layer_types\": [\"full_attention\", \"sliding_attention\"]",
		    "layer_types[1]: 'sliding_attention' unsupported (supported: full_attention)");
	expect_fail("model_refuse_olmoe_head_dim", "olmoe", "\"head_dim\": 16", "head_dim: 16 out of range [8, 8]");
	expect_fail("model_refuse_mixtral_alias", "mixtral", "\"num_key_value_heads\": 2, \"num_local_experts\": 8, \"num_experts\": 4",
		    "num_experts: 4 differs from num_local_experts 8");
	expect_fail("model_refuse_rope_key", "qwen3_moe",
		    "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"attention_factor\": 0.5}",
		    "rope_scaling.attention_factor: unsupported key");
	expect_fail("model_refuse_rope_both", "qwen3_moe",
		    "\"rope_theta\": 1000, \"rope_parameters\": {\"rope_theta\": 5000, \"rope_type\": \"default\"}",
		    "rope_parameters.rope_theta: 5000 differs from rope_theta 1000");
	expect_fail("model_refuse_yarn_key_on_linear", "mixtral",
		    "\"num_key_value_heads\": 2, \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2, \"mscale_all_dim\": 1}",
		    "rope_scaling.mscale_all_dim: set, but only yarn reads it");
	expect_fail("model_refuse_fp8_static", "deepseek_v3",
		    "\"quantization_config\": {\"quant_method\": \"fp8\", \"activation_scheme\": \"static\"}",
		    "quantization_config.activation_scheme: 'static' unsupported");
	snprintf(buf, sizeof(buf), "%s, \"indexer_types\": [\"shared\", \"full\"]", dsa);
	expect_fail("model_refuse_dsa_first_shared", "glm_moe_dsa", buf, "indexer_types[0]: \"shared\"");
	snprintf(buf, sizeof(buf), "%s, \"indexer_rope_interleave\": false", dsa);
	expect_fail("model_refuse_dsa_interleave", "glm_moe_dsa", buf, "indexer_rope_interleave: false unsupported");
	snprintf(buf, sizeof(buf), "%s, \"indexer_types\": [\"full\"]", dsa);
	expect_fail("model_refuse_dsa_types_length", "glm_moe_dsa", buf, "indexer_types: 1 entries, num_hidden_layers is 2");
	snprintf(buf, sizeof(buf), "%s, \"mlp_layer_types\": [\"dense\", \"moe\"]", dsa);
	expect_fail("model_refuse_dsa_mlp_types", "glm_moe_dsa", buf, "mlp_layer_types[1]: expected");
	coli_model m;
	coli_err e;
	snprintf(buf, sizeof(buf), "%s, \"rope_parameters\": {\"rope_theta\": 8000000, \"rope_type\": \"default\"}, "
		 "\"index_topk_freq\": 4, \"index_skip_topk_offset\": 3, \"mlp_layer_types\": [\"dense\", \"sparse\"]",
		 dsa);
	int rc = parse_with(&m, "glm_moe_dsa", buf, &e);
	T_CHECK("model_dsa_schedule", rc == 0 && m.rope.theta == 8e6 && m.index_full[0] && m.index_full[1] &&
		!m.is_moe[0] && m.is_moe[1], "rc %d %s", rc, e.msg);
	snprintf(buf, sizeof(buf), "%s, \"num_hidden_layers\": 78, \"index_topk_freq\": 4, \"index_skip_topk_offset\": 3",
		 dsa);
	char full[2048];
	snprintf(full, sizeof(full), "{\"model_type\": \"glm_moe_dsa\", \"vocab_size\": 64, \"hidden_size\": 32, "
		 "\"num_attention_heads\": 4, \"intermediate_size\": 64, %s}", buf);
	rc = coli_model_parse(&m, full, "config.json", &e);
	int nfull = 0;
	for (int l = 0; rc == 0 && l < m.n_layers; l++)
		nfull += m.index_full[l];
	T_CHECK("model_dsa_glm52_schedule_21_of_78", rc == 0 && nfull == 21 && m.index_full[2] && !m.index_full[3] &&
		m.index_full[6] && m.index_full[74] && !m.index_full[75], "rc %d (%s) full %d", rc, e.msg, nfull);
}

/* Qwen3.5/3.6: the text model's keys under text_config, the hybrid stack, the released layout
 * mapped onto the table (fused experts, mtp.*, the vision tower left out). */
static void test_qwen3_5(void)
{
	coli_model m;
	coli_err e = {0};
	coli_ckpt *c = NULL;
	char dir[512];
	int skipped = 0;
	int rc = load_fixture(&m, "qwen3_5_moe-tiny", &e);
	T_CHECK("model_qwen3_5_load", rc == 0, "%s", e.msg);
	if (rc)
		return;
	T_CHECK("model_qwen3_5_hybrid", m.family == COLI_FAM_QWEN3_5_MOE && m.is_linear[0] && !m.is_linear[1] &&
		m.is_linear[2] && !m.is_linear[3] && !m.is_linear[4] && m.lin_k_heads == 2 && m.lin_v_heads == 4 &&
		m.lin_k_dim == 16 && m.lin_v_dim == 16 && m.lin_conv == 4 && m.attn_gate && m.norm_offset,
		"linear %d%d%d%d", m.is_linear[0], m.is_linear[1], m.is_linear[2], m.is_linear[3]);
	T_CHECK("model_qwen3_5_attention", m.head_dim == 32 && m.n_kv_heads == 2 && m.rope.rotary_dim == 8 &&
		m.rope.theta == 1e7 && !m.rope.interleave && m.qk_norm == COLI_QKNORM_HEAD, "hd %d rot %d theta %g",
		m.head_dim, m.rope.rotary_dim, m.rope.theta);
	T_CHECK("model_qwen3_5_moe", m.router == COLI_ROUTER_SOFTMAX_TOPK && m.norm_topk_prob && m.n_experts == 16 &&
		m.top_k == 4 && m.shared_inter == 64 && m.shared_gate && m.n_mtp_layers == 1 && m.is_moe[0] && m.is_moe[4] &&
		!m.tie_word_embeddings, "experts %d shared %d mtp %d", m.n_experts, m.shared_inter, m.n_mtp_layers);
	fixture_dir(dir, sizeof(dir), "qwen3_5_moe-tiny");
	rc = coli_ckpt_open(&c, dir, &e) || coli_model_map_ckpt(&m, c, &skipped, &e) || coli_model_check_ckpt(&m, c, &e);
	const coli_st_tensor *up = rc ? NULL : coli_ckpt_find(c, "model.layers.2.mlp.experts.5.up_proj.weight");
	T_CHECK("model_qwen3_5_released_layout", rc == 0 && skipped == 21 && up && up->shape[0] == 64 && up->shape[1] == 64 &&
		coli_ckpt_find(c, "model.layers.4.eh_proj.weight") && !coli_ckpt_find(c, "mtp.fc.weight"),
		"rc %d (%s) skipped %d", rc, e.msg, skipped);
	coli_ckpt_close(c);
	const char *gdn = "\"layer_types\": [\"linear_attention\", \"full_attention\"], \"num_key_value_heads\": 2, "
			  "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4";
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s, \"attn_output_gate\": false", gdn);
	expect_fail("model_refuse_qwen3_5_ungated", "qwen3_5_moe", buf, "attn_output_gate: false unsupported");
	snprintf(buf, sizeof(buf), "%s, \"mtp_use_dedicated_embeddings\": true", gdn);
	expect_fail("model_refuse_qwen3_5_mtp_embed", "qwen3_5_moe", buf, "mtp_use_dedicated_embeddings: true unsupported");
	expect_fail("model_refuse_qwen3_5_heads", "qwen3_5_moe",
		    "\"num_key_value_heads\": 2, \"linear_num_key_heads\": 3, \"linear_num_value_heads\": 4",
		    "linear_num_value_heads: 4 is not a multiple of linear_num_key_heads 3");
	expect_fail("model_refuse_qwen3_5_layer_kind", "qwen3_5_moe",
		    "\"num_key_value_heads\": 2, \"layer_types\": [\"linear_attention\", \"sliding_attention\"]",
		    "layer_types[1]: 'sliding_attention' unsupported");
	coli_model d;
	rc = coli_model_parse(&d, "{\"model_type\": \"qwen3_5_moe_text\", \"vocab_size\": 64, \"hidden_size\": 32, "
			      "\"num_hidden_layers\": 8, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
			      "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4}", "config.json", &e);
	T_CHECK("model_qwen3_5_interval_default", rc == 0 && d.is_linear[0] && d.is_linear[2] && !d.is_linear[3] &&
		!d.is_linear[7] && d.is_linear[4], "rc %d %s", rc, e.msg);
}

/* deepseek_v4: the fixture's config read whole (docs/deepseek_v4.md, section 1), its
 * checkpoints in DeepSeek's names (FP8 with UE8M0 .scale tensors, FP4 experts as I8 pairs, the
 * I64 hash tables), and the keys refused. */
static void test_deepseek_v4(void)
{
	coli_model m;
	coli_err e = {0};
	int rc = load_fixture(&m, "deepseek_v4-tiny", &e);
	T_CHECK("model_v4_load", rc == 0, "%s", e.msg);
	if (rc)
		return;
	T_CHECK("model_v4_attention", m.family == COLI_FAM_DEEPSEEK_V4 && m.attn == COLI_ATTN_V4 && m.n_kv_heads == 1 &&
		m.head_dim == 32 && m.qk_rope_head_dim == 8 && m.q_lora_rank == 32 && m.o_groups == 2 &&
		m.o_lora_rank == 16 && m.sliding_window == 8 && m.index_n_heads == 8 && m.index_head_dim == 16 &&
		m.index_topk == 8, "hd %d rd %d W %d", m.head_dim, m.qk_rope_head_dim, m.sliding_window);
	T_CHECK("model_v4_schedule", m.compress[0] == 0 && m.compress[1] == 0 && m.compress[2] == 4 && m.compress[3] == 16 &&
		m.compress[4] == 4 && m.compress[5] == 0 && m.index_full[2] && !m.index_full[3] && m.index_full[4] &&
		!m.index_full[5] && m.n_mtp_layers == 1, "ratios %d %d %d %d %d %d", m.compress[0], m.compress[1],
		m.compress[2], m.compress[3], m.compress[4], m.compress[5]);
	T_CHECK("model_v4_ropes", m.rope.theta == 10000 && m.rope.scaling == COLI_ROPE_NONE && m.rope.interleave &&
		m.rope_compress.theta == 160000 && m.rope_compress.scaling == COLI_ROPE_YARN &&
		m.rope_compress.factor == 16 && m.rope_compress.original_max_position_embeddings == 65536 &&
		m.rope_compress.attn_factor == 1.0 && m.rope_compress.rotary_dim == 8, "main %g compress %g %d",
		m.rope.theta, m.rope_compress.theta, m.rope_compress.scaling);
	T_CHECK("model_v4_moe", m.router == COLI_ROUTER_SQRTSOFTPLUS && m.n_hash_layers == 3 && m.swiglu_limit == 1.5 &&
		m.routed_scaling_factor == 1.5 && m.n_experts == 10 && m.top_k == 4 && m.n_shared_experts == 1 &&
		m.hc_mult == 4 && m.hc_iters == 20 && m.hc_eps == 1e-6 && !m.fp4_experts && m.is_moe[0] && m.is_moe[5],
		"hash %d limit %g", m.n_hash_layers, m.swiglu_limit);
	coli_model f;
	rc = load_fixture(&f, "deepseek_v4-fp4-tiny", &e);
	T_CHECK("model_v4_fp4_load", rc == 0 && f.fp4_experts && f.fp8 && f.fp8_block[0] == 128, "%s", e.msg);
	static const char *const base =
		"\"head_dim\": 16, \"qk_rope_head_dim\": 4, \"q_lora_rank\": 8, \"o_lora_rank\": 8, "
		"\"index_head_dim\": 8, \"moe_intermediate_size\": 16";
	static const struct { const char *name, *extra, *want; } refused[] = {
		{"model_refuse_v4_no_schedule", "", "layer_types and compress_ratios: both missing"},
		{"model_refuse_v4_ratio_kind", ", \"compress_ratios\": [0, 16]", "compress_ratios[1]: 16 has no attention kind"},
		{"model_refuse_v4_ratio_disagrees",
		 ", \"layer_types\": [\"sliding_attention\", \"compressed_sparse_attention\"], \"compress_ratios\": [0, 8]",
		 "compress_ratios[1]: 8, but layer_types[1] 'compressed_sparse_attention' has ratio 4"},
		{"model_refuse_v4_kind", ", \"layer_types\": [\"full_attention\", \"sliding_attention\"]",
		 "layer_types[0]: 'full_attention' unsupported"},
		{"model_refuse_v4_kv_heads", ", \"compress_ratios\": [0, 4], \"num_key_value_heads\": 2", "num_key_value_heads"},
		{"model_refuse_v4_scoring", ", \"compress_ratios\": [0, 4], \"scoring_func\": \"sigmoid\"",
		 "scoring_func: 'sigmoid' unsupported"},
		{"model_refuse_v4_no_renorm", ", \"compress_ratios\": [0, 4], \"norm_topk_prob\": false",
		 "norm_topk_prob: false unsupported"},
		{"model_refuse_v4_groups", ", \"compress_ratios\": [0, 4], \"n_group\": 2", "n_group"},
		{"model_refuse_v4_o_groups", ", \"compress_ratios\": [0, 4], \"o_groups\": 3",
		 "o_groups: 3 does not divide num_attention_heads 4"},
		{"model_refuse_v4_yarn_scaled",
		 ", \"compress_ratios\": [0, 4], \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 16, \"attention_factor\": 1.277}",
		 "rope_scaling.attention_factor: 1.277 unsupported"},
		{"model_refuse_v4_expert_dtype", ", \"compress_ratios\": [0, 4], \"expert_dtype\": \"fp8\"",
		 "expert_dtype: 'fp8' unsupported"},
		{"model_refuse_v4_rotary", ", \"compress_ratios\": [0, 4], \"partial_rotary_factor\": 0.5",
		 "partial_rotary_factor: 0.5 gives 8 rotary dims, qk_rope_head_dim is 4"},
	};
	char buf[1024];
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(buf, sizeof(buf), "%s%s%s", base, strstr(refused[i].extra, "o_groups") ? "" : ", \"o_groups\": 2",
			 refused[i].extra);
		expect_fail(refused[i].name, "deepseek_v4", buf, refused[i].want);
	}
	snprintf(buf, sizeof(buf), "%s, \"o_groups\": 2, \"compress_ratios\": [0, 4, 0]", base);
	coli_model d;
	rc = parse_with(&d, "deepseek_v4", buf, &e);
	T_CHECK("model_v4_from_compress_ratios", rc == 0 && d.compress[0] == 0 && d.compress[1] == 4 &&
		d.index_full[1] && d.n_hash_layers == 3 && d.swiglu_limit == 10 && d.top_k == 6, "rc %d %s", rc, e.msg);
	snprintf(buf, sizeof(buf), "%s, \"o_groups\": 2, \"compress_ratios\": [0, 128]", base);
	expect_fail("model_refuse_v4_ratio_width", "deepseek_v4", buf,
		    "layer 1's compress ratio 128 does not divide head_dim 16");
}

/* Range checks need the field exactly once, so these use a hand-written config. */
static void test_ranges(void)
{
	coli_model m;
	coli_err e = {0};
	const char *c1 = "{\"model_type\": \"olmoe\", \"vocab_size\": 8, \"hidden_size\": 0,"
			 "\"num_hidden_layers\": 1, \"num_attention_heads\": 1,"
			 "\"intermediate_size\": 8}";
	int rc = coli_model_parse(&m, c1, "config.json", &e);
	T_CHECK("model_hidden_size_zero", rc < 0 && strstr(e.msg, "config.json: hidden_size: 0 "
		"out of range"), "%s", e.msg);
	const char *c2 = "{\"model_type\": \"mixtral\", \"vocab_size\": 8, \"hidden_size\": 8,"
			 "\"num_hidden_layers\": 5000, \"num_attention_heads\": 1,"
			 "\"intermediate_size\": 8}";
	rc = coli_model_parse(&m, c2, "config.json", &e);
	T_CHECK("model_layers_max", rc < 0 && strstr(e.msg, "num_hidden_layers: 5000 out of "
		"range [1, 1024]"), "%s", e.msg);
	const char *c3 = "{\"model_type\": \"olmoe\", \"vocab_size\": 8, \"hidden_size\": 10,"
			 "\"num_hidden_layers\": 1, \"num_attention_heads\": 3,"
			 "\"num_key_value_heads\": 3, \"intermediate_size\": 8}";
	rc = coli_model_parse(&m, c3, "config.json", &e);
	T_CHECK("model_heads_divide_hidden", rc < 0 && strstr(e.msg, "hidden_size: 10 not "
		"divisible by num_attention_heads 3"), "%s", e.msg);
	const char *c4 = "{\"model_type\": \"mixtral\", \"vocab_size\": 8, \"hidden_size\": 40,"
			 "\"num_hidden_layers\": 1, \"num_attention_heads\": 5,"
			 "\"num_key_value_heads\": 5, \"intermediate_size\": 8}";
	rc = coli_model_parse(&m, c4, "config.json", &e);
	T_CHECK("model_hidden_not_64_ok", rc == 0 && m.head_dim == 8, "%s", e.msg);
}

static void test_defaults(void)
{
	coli_model m;
	coli_err e;
	int rc = parse_with(&m, "qwen3_moe", "", &e);
	T_CHECK("model_qwen3_defaults", rc == 0 && m.n_kv_heads == 4 && m.head_dim == 8 &&
		m.n_experts == 128 && m.top_k == 8 && m.moe_intermediate_size == 768 &&
		!m.norm_topk_prob && m.rms_norm_eps == 1e-6 && m.rope.theta == 10000.0 &&
		m.max_position_embeddings == 32768 && !m.tie_word_embeddings && !m.qkv_bias &&
		m.is_moe[0] && m.is_moe[1] && !m.sliding_window && !m.dtype[0] && !m.fp8,
		"rc %d kv %d head_dim %d experts %d: %s", rc, m.n_kv_heads, m.head_dim,
		m.n_experts, e.msg);
	rc = parse_with(&m, "qwen3_moe", "\"decoder_sparse_step\": 2, \"mlp_only_layers\": [1],"
			"\"use_sliding_window\": true", &e);
	T_CHECK("model_qwen3_sparse_step", rc == 0 && !m.is_moe[0] && !m.is_moe[1] &&
		m.sliding_window == 4096, "rc %d moe %d%d window %d: %s", rc, m.is_moe[0],
		m.is_moe[1], m.sliding_window, e.msg);
	rc = parse_with(&m, "deepseek_v3", "\"n_routed_experts\": 16, \"num_experts_per_tok\": 4,"
			"\"first_k_dense_replace\": 0, \"moe_layer_freq\": 2, \"q_lora_rank\": null",
			&e);
	T_CHECK("model_deepseek_defaults", rc == 0 && m.q_lora_rank == 0 && m.kv_lora_rank == 512 &&
		m.n_group == 8 && m.topk_group == 4 && m.routed_scaling_factor == 2.5 &&
		m.is_moe[0] && !m.is_moe[1] && m.n_mtp_layers == 0 && m.rope.interleave,
		"rc %d: %s", rc, e.msg);
	rc = parse_with(&m, "glm4_moe", "\"num_key_value_heads\": 4", &e);
	T_CHECK("model_glm_defaults", rc == 0 && m.rope.rotary_dim == 4 && m.head_dim == 8 &&
		m.n_kv_heads == 4 && m.qk_norm == COLI_QKNORM_NONE &&
		m.routed_scaling_factor == 1.0 && !m.is_moe[0] && m.is_moe[1],
		"rc %d rotary %d kv %d: %s", rc, m.rope.rotary_dim, m.n_kv_heads, e.msg);
	rc = parse_with(&m, "olmoe", "\"torch_dtype\": \"float16\", \"clip_qkv\": 8",
			&e);
	T_CHECK("model_torch_dtype", rc == 0 && !strcmp(m.dtype, "float16") && m.clip_qkv == 8,
		"rc %d dtype '%s': %s", rc, m.dtype, e.msg);
	rc = parse_with(&m, "deepseek_v3", "\"n_routed_experts\": 16, \"num_experts_per_tok\": 4,"
			"\"max_position_embeddings\": 8192, \"rope_scaling\": {\"type\": \"yarn\","
			"\"factor\": 40, \"original_max_position_embeddings\": 4096,"
			"\"mscale\": 1.0, \"mscale_all_dim\": 1.0, \"beta_fast\": 32}", &e);
	T_CHECK("model_rope_yarn", rc == 0 && m.rope.scaling == COLI_ROPE_YARN &&
		m.rope.factor == 40 && m.rope.original_max_position_embeddings == 4096 &&
		m.rope.mscale_all_dim == 1.0 && m.rope.beta_slow == 1.0,
		"rc %d scaling %d: %s", rc, m.rope.scaling, e.msg);
	rc = parse_with(&m, "mixtral", "\"rope_scaling\": {\"rope_type\": \"linear\", "
			"\"factor\": 2.0}, \"head_dim\": null, \"eos_token_id\": [1, 2],"
			"\"num_key_value_heads\": null", &e);
	T_CHECK("model_rope_linear", rc == 0 && m.rope.scaling == COLI_ROPE_LINEAR &&
		m.rope.factor == 2.0 && m.head_dim == 8 && m.n_kv_heads == 4, "rc %d: %s", rc, e.msg);
}

/* ---- synthetic checkpoints --------------------------------------------------------------- */

typedef struct st_t {
	char name[224];
	const char *dtype;
	int ndim;
	int64_t shape[2];
} st_t;

static size_t dtype_bytes(const char *dt)
{
	return !strcmp(dt, "F32") ? 4 : !strcmp(dt, "F8_E4M3") ? 1 : 2;
}

/* The JSON header of ts, space-padded to a multiple of 8; *data gets the data size. */
static char *st_header(const st_t *ts, int n, size_t *len, size_t *data)
{
	size_t cap = (size_t)n * 320 + 64, l = 0, off = 0;
	char *h = malloc(cap);
	if (!h)
		return NULL;
	l += (size_t)snprintf(h + l, cap - l, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (int i = 0; i < n; i++) {
		size_t sz = dtype_bytes(ts[i].dtype);
		for (int d = 0; d < ts[i].ndim; d++)
			sz *= (size_t)ts[i].shape[d];
		l += (size_t)snprintf(h + l, cap - l, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld",
				      ts[i].name, ts[i].dtype, (long long)ts[i].shape[0]);
		if (ts[i].ndim == 2)
			l += (size_t)snprintf(h + l, cap - l, ",%lld", (long long)ts[i].shape[1]);
		l += (size_t)snprintf(h + l, cap - l, "],\"data_offsets\":[%zu,%zu]}", off,
				      off + sz);
		off += sz;
	}
	l += (size_t)snprintf(h + l, cap - l, "}");
	while (l % 8)
		h[l++] = ' ';
	*len = l;
	*data = off;
	return h;
}

/* Writes dir/model.safetensors holding ts: u64 LE header length, header, zero data. */
static int write_st(const char *dir, const st_t *ts, int n)
{
	size_t len = 0, data = 0;
	char *h = st_header(ts, n, &len, &data);
	char path[512];
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	FILE *f = h ? fopen(path, "wb") : NULL;
	uint8_t hl[8];
	for (int i = 0; i < 8; i++)
		hl[i] = (uint8_t)((uint64_t)len >> (8 * i));
	void *zero = calloc(data + 1, 1);
	int ok = f && zero && fwrite(hl, 8, 1, f) == 1 && fwrite(h, len, 1, f) == 1 &&
		 (!data || fwrite(zero, data, 1, f) == 1);
	if (f && fclose(f))
		ok = 0;
	free(zero);
	free(h);
	return ok ? 0 : -1;
}

/* A tiny deepseek_v3 with one MTP layer, fp8 with 8x8 blocks. */
static const char *const tiny_ds =
	"{\"model_type\": \"deepseek_v3\", \"vocab_size\": 32, \"hidden_size\": 16,"
	"\"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"intermediate_size\": 24,"
	"\"moe_intermediate_size\": 8, \"n_routed_experts\": 4, \"num_experts_per_tok\": 2,"
	"\"n_group\": 2, \"topk_group\": 1, \"first_k_dense_replace\": 1, \"q_lora_rank\": 8,"
	"\"kv_lora_rank\": 8, \"qk_nope_head_dim\": 4, \"qk_rope_head_dim\": 4,"
	"\"v_head_dim\": 4, \"num_nextn_predict_layers\": 1,"
	"\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\","
	"\"weight_block_size\": [8, 8]}}";

/* The expected set of the tiny model as checkpoint entries (all BF16). */
static st_t *tiny_set(coli_model *m, int *n)
{
	coli_tensor_spec *v;
	coli_err e;
	if (coli_model_parse(m, tiny_ds, "config.json", &e) || coli_model_tensors(m, &v, n, &e))
		return NULL;
	st_t *ts = calloc((size_t)*n + 8, sizeof(*ts));
	for (int i = 0; i < *n; i++) {
		snprintf(ts[i].name, sizeof(ts[i].name), "%s", v[i].name);
		ts[i].dtype = "BF16";
		ts[i].ndim = v[i].ndim;
		ts[i].shape[0] = v[i].shape[0];
		ts[i].shape[1] = v[i].shape[1];
	}
	free(v);
	return ts;
}

static int find_st(const st_t *ts, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(ts[i].name, name))
			return i;
	return -1;
}

static void drop_st(st_t *ts, int *n, const char *name)
{
	int i = find_st(ts, *n, name);
	if (i < 0)
		return;
	memmove(&ts[i], &ts[i + 1], (size_t)(*n - i - 1) * sizeof(*ts));
	(*n)--;
}

static void add_st(st_t *ts, int *n, const char *name, const char *dt, int64_t d0, int64_t d1)
{
	st_t *t = &ts[(*n)++];
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->dtype = dt;
	t->ndim = d1 ? 2 : 1;
	t->shape[0] = d0;
	t->shape[1] = d1;
}

/* Writes ts into a fresh folder and runs the check; fills e and *m. */
static int run_check(const char *tmp, coli_model *m, const st_t *ts, int n, coli_err *e)
{
	coli_ckpt *c = NULL;
	memset(e, 0, sizeof(*e));
	if (write_st(tmp, ts, n))
		return coli_errf(e, COLI_EIO, "cannot write %s", tmp);
	int rc = coli_ckpt_open(&c, tmp, e);
	if (!rc)
		rc = coli_model_check_ckpt(m, c, e);
	coli_ckpt_close(c);
	return rc;
}

/* One mutation of the tiny set; the check must fail with `want` in the message (or pass). */
typedef void (*mutate_fn)(st_t *ts, int *n);

static void check_case(const char *tmp, const char *tname, mutate_fn f, const char *want)
{
	coli_model m;
	coli_err e;
	int n;
	st_t *ts = tiny_set(&m, &n);
	if (!ts) {
		T_CHECK(tname, 0, "tiny config does not parse");
		return;
	}
	if (f)
		f(ts, &n);
	int rc = run_check(tmp, &m, ts, n, &e);
	if (want)
		T_CHECK(tname, rc < 0 && strstr(e.msg, want), "rc %d msg '%s', want '%s'", rc,
			e.msg, want);
	else
		T_CHECK(tname, rc == 0, "%s", e.msg);
	free(ts);
}

static void mut_missing(st_t *ts, int *n)
{
	drop_st(ts, n, "model.layers.1.mlp.experts.2.up_proj.weight");
}

static void mut_extra(st_t *ts, int *n)
{
	add_st(ts, n, "model.layers.0.mlp.extra.weight", "BF16", 4, 4);
}

static void mut_shape(st_t *ts, int *n)
{
	ts[find_st(ts, *n, "model.layers.1.mlp.gate.weight")].shape[0] = 3;
}

static void mut_fp8_ok(st_t *ts, int *n)
{
	int i = find_st(ts, *n, "model.layers.0.mlp.down_proj.weight"); /* [16, 24] */
	ts[i].dtype = "F8_E4M3";
	add_st(ts, n, "model.layers.0.mlp.down_proj.weight_scale_inv", "F32", 2, 3);
}

static void mut_fp8_no_scale(st_t *ts, int *n)
{
	ts[find_st(ts, *n, "model.layers.0.self_attn.o_proj.weight")].dtype = "F8_E4M3";
}

static void mut_fp8_bad_scale(st_t *ts, int *n)
{
	mut_fp8_ok(ts, n);
	ts[find_st(ts, *n, "model.layers.0.mlp.down_proj.weight_scale_inv")].shape[1] = 4;
}

static void mut_orphan_scale(st_t *ts, int *n)
{
	add_st(ts, n, "model.layers.0.mlp.up_proj.weight_scale_inv", "F32", 3, 2);
}

static void mut_small_f8(st_t *ts, int *n)
{
	ts[find_st(ts, *n, "model.norm.weight")].dtype = "F8_E4M3";
}

static void mut_mtp_partial(st_t *ts, int *n)
{
	drop_st(ts, n, "model.layers.2.hnorm.weight");
}

static void mut_three_missing(st_t *ts, int *n)
{
	drop_st(ts, n, "model.norm.weight");
	drop_st(ts, n, "lm_head.weight");
	drop_st(ts, n, "model.layers.0.input_layernorm.weight");
}

/* No MTP tensor at all: the check passes and drops the MTP layer from the model. */
static void test_synthetic_no_mtp(const char *tmp)
{
	coli_model m;
	coli_err e;
	int n, k = 0;
	st_t *ts = tiny_set(&m, &n);
	if (!ts) {
		T_CHECK("model_synth_no_mtp", 0, "tiny config does not parse");
		return;
	}
	for (int i = 0; i < n; i++)
		if (strncmp(ts[i].name, "model.layers.2.", 15))
			ts[k++] = ts[i];
	int rc = run_check(tmp, &m, ts, k, &e);
	T_CHECK("model_synth_no_mtp", rc == 0 && m.n_mtp_layers == 0 && n - k == 32,
		"rc %d n_mtp %d dropped %d: %s", rc, m.n_mtp_layers, n - k, e.msg);
	free(ts);
}

static void test_synthetic(void)
{
	char tmp[] = "/tmp/coli_test_model_XXXXXX";
	if (!mkdtemp(tmp)) {
		T_CHECK("model_synth_mkdtemp", 0, "mkdtemp failed");
		return;
	}
	check_case(tmp, "model_synth_ok", NULL, NULL);
	check_case(tmp, "model_synth_missing", mut_missing,
		   "model.layers.1.mlp.experts.2.up_proj.weight: missing");
	check_case(tmp, "model_synth_extra", mut_extra,
		   "model.layers.0.mlp.extra.weight: unexpected tensor");
	check_case(tmp, "model_synth_shape", mut_shape,
		   "model.layers.1.mlp.gate.weight: shape [3, 16] expected [4, 16]");
	check_case(tmp, "model_synth_fp8_ok", mut_fp8_ok, NULL);
	check_case(tmp, "model_synth_fp8_no_scale", mut_fp8_no_scale,
		   "model.layers.0.self_attn.o_proj.weight_scale_inv: missing");
	check_case(tmp, "model_synth_fp8_bad_scale", mut_fp8_bad_scale,
		   "down_proj.weight_scale_inv: shape [2, 4] expected [2, 3]");
	check_case(tmp, "model_synth_orphan_scale", mut_orphan_scale,
		   "model.layers.0.mlp.up_proj.weight_scale_inv: unexpected tensor");
	check_case(tmp, "model_synth_small_f8", mut_small_f8,
		   "model.norm.weight: dtype F8_E4M3 not allowed");
	check_case(tmp, "model_synth_mtp_partial", mut_mtp_partial,
		   "model.layers.2.hnorm.weight: missing (MTP");
	check_case(tmp, "model_synth_and_more", mut_three_missing, "(and 2 more)");
	test_synthetic_no_mtp(tmp);
	char path[600];
	snprintf(path, sizeof(path), "%s/model.safetensors", tmp);
	unlink(path);
	rmdir(tmp);
}

int main(void)
{
	test_deepseek();
	test_glm_dsa();
	test_qwen3_5();
	test_deepseek_v4();
	test_fp8();
	test_glm();
	test_qwen3();
	test_olmoe();
	test_mixtral();
	test_fixture_ckpts();
	test_tensor_counts();
	test_tensor_classes();
	test_tied();
	test_corrupt();
	test_refused_keys();
	test_ranges();
	test_defaults();
	test_synthetic();
	T_EXIT();
}
