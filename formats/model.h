/* model.h: the model description read from an HF config.json, and the tensor set it implies.
 *
 * Eight families (model_type): deepseek_v3, glm4_moe, qwen3_moe, olmoe, mixtral, glm_moe_dsa,
 * qwen3_5_moe, deepseek_v4. A family is a description over shared blocks: attention kind, q/k norm kind,
 * router kind, which layers are MoE, which run the DSA indexer, which are Gated DeltaNet, and one
 * tensor table (model_tensors.c) that the converter and the engine both read. HF's defaults apply to every field config.json leaves out;
 * a key that would change the computation and is not understood is refused.
 */
#ifndef COLI_MODEL_H
#define COLI_MODEL_H

#include <stdint.h>

#include "error.h"
#include "safetensors.h"

#define COLI_MAX_LAYERS 1024

typedef enum coli_family {
	COLI_FAM_DEEPSEEK_V3,
	COLI_FAM_GLM4_MOE,
	COLI_FAM_QWEN3_MOE,
	COLI_FAM_OLMOE,
	COLI_FAM_MIXTRAL,
	COLI_FAM_GLM_MOE_DSA,
	COLI_FAM_QWEN3_5_MOE,
	COLI_FAM_DEEPSEEK_V4,
	COLI_FAM_COUNT
} coli_family;

/* V4: DeepSeek V4's attention: one shared KV head (key = value) of head_dim, a window of
 * sliding_window raw positions on every layer, and a compressor per layer of ratio > 0. */
typedef enum coli_attn_kind { COLI_ATTN_GQA, COLI_ATTN_MLA, COLI_ATTN_V4 } coli_attn_kind;

typedef enum coli_qknorm_kind {
	COLI_QKNORM_NONE,
	COLI_QKNORM_HEAD,  /* RMSNorm over each head's head_dim (qwen3_moe, glm4_moe use_qk_norm) */
	COLI_QKNORM_WHOLE, /* RMSNorm over the whole q (n_heads*head_dim) and k projection (olmoe) */
} coli_qknorm_kind;

typedef enum coli_router_kind {
	COLI_ROUTER_SOFTMAX_TOPK,  /* softmax over all experts, top-k, renormalise if norm_topk_prob */
	COLI_ROUTER_TOPK_SOFTMAX,  /* top-k logits, softmax over those k (mixtral) */
	COLI_ROUTER_SIGMOID_GROUP, /* sigmoid + e_score_correction_bias, group-limited top-k,
				      weights = sigmoid (no bias), renorm if norm_topk_prob,
				      x routed_scaling_factor (deepseek_v3, glm4_moe) */
	COLI_ROUTER_SQRTSOFTPLUS,  /* score sqrt(softplus(logit)); the first n_hash_layers route by
				      token id (the layer's tid2eid table), the others by the top-k of
				      score + e_score_correction_bias; weights = the chosen scores
				      renormalised (sum + 1e-20) x routed_scaling_factor (deepseek_v4) */
} coli_router_kind;

/* rope_scaling from config.json; type NONE when null or absent. */
typedef enum coli_rope_type { COLI_ROPE_NONE, COLI_ROPE_LINEAR, COLI_ROPE_YARN } coli_rope_type;

typedef struct coli_rope {
	double theta;
	int rotary_dim;       /* dims rotated per head (head_dim x partial_rotary_factor; MLA: qk_rope_head_dim) */
	int interleave;       /* 1: rotate pairs (x[2i], x[2i+1]) (DeepSeek rope_interleave); 0: rotate_half */
	coli_rope_type scaling;
	double factor;        /* linear / yarn */
	double original_max_position_embeddings;
	double beta_fast, beta_slow, mscale, mscale_all_dim; /* yarn; HF defaults 32, 1, 1, 0 */
	double attn_factor;   /* yarn: cos and sin scaled by this; 0: HF's derivation from mscale
			       * (deepseek_v4 fixes 1: its YaRN leaves them unscaled) */
} coli_rope;

typedef struct coli_model {
	coli_family family;
	char model_type[32];
	char dtype[16];             /* "bfloat16", from "dtype" or "torch_dtype"; "" if absent */

	int vocab_size, hidden_size, n_layers;
	int n_heads, n_kv_heads, head_dim;
	int intermediate_size;      /* dense MLP layers */
	int max_position_embeddings;
	double rms_norm_eps;
	int tie_word_embeddings;

	coli_attn_kind attn;
	coli_qknorm_kind qk_norm;
	int qkv_bias, o_bias;       /* projection biases present */
	double clip_qkv;            /* olmoe; 0 = off */
	int sliding_window;         /* 0 = none */
	coli_rope rope;

	/* MLA (attn == COLI_ATTN_MLA) */
	int q_lora_rank;            /* 0: q_proj directly, no q_a/q_b */
	int kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;

	/* MoE */
	coli_router_kind router;
	int n_experts, top_k;
	int moe_intermediate_size;
	int n_shared_experts;       /* shared experts (0: none) */
	int shared_inter;           /* their intermediate size: moe_intermediate_size x n_shared, or
				       qwen3_5_moe's shared_expert_intermediate_size */
	int shared_gate;            /* the shared expert scaled by sigmoid(shared_expert_gate x) */
	int norm_topk_prob;
	double routed_scaling_factor; /* 1.0 when the family has none */
	int n_group, topk_group;    /* group-limited routing; 1,1 = plain top-k */
	int has_correction_bias;    /* e_score_correction_bias tensor */
	uint8_t is_moe[COLI_MAX_LAYERS]; /* per layer: 1 MoE, 0 dense MLP */

	/* DSA lightning indexer (glm_moe_dsa; index_topk 0: none): on a "full" layer index_n_heads
	 * heads of index_head_dim score every earlier position and attention looks at the
	 * index_topk best; a "shared" layer reuses the previous full layer's selection. */
	int index_topk, index_n_heads, index_head_dim;
	uint8_t index_full[COLI_MAX_LAYERS]; /* per layer (MTP layers included): 1 runs the indexer */
	int index_share_mtp;        /* index_share_for_mtp_iteration (drafting only) */

	/* Hybrid stacks (qwen3_5_moe): Gated DeltaNet ("linear_attention") layers beside gated full
	 * attention ones. */
	uint8_t is_linear[COLI_MAX_LAYERS]; /* per layer: 1 Gated DeltaNet, 0 attention */
	int lin_k_heads, lin_v_heads;       /* linear_num_key_heads, linear_num_value_heads */
	int lin_k_dim, lin_v_dim;           /* linear_key_head_dim, linear_value_head_dim */
	int lin_conv;                       /* linear_conv_kernel_dim: the causal conv's taps */
	int attn_gate;              /* attention output x sigmoid(gate), the gate from q_proj's second half per head */
	int norm_offset;            /* RMSNorm weights stored centred on 0: x is scaled by (1 + w) */

	/* DeepSeek V4 (attn COLI_ATTN_V4): per layer (MTP layers included) the compressor's ratio:
	 * 0 window only, 4 overlapping windows with the lightning indexer over the compressed rows
	 * (CSA: index_full set; index_topk, index_n_heads, index_head_dim), another m every row
	 * attended (HCA). The compressed layers rotate with rope_compress, the others with rope. */
	uint16_t compress[COLI_MAX_LAYERS];
	coli_rope rope_compress;
	int o_groups, o_lora_rank;  /* the grouped output projection */
	int hc_mult, hc_iters;      /* mHC: residual streams, Sinkhorn iterations */
	double hc_eps;
	int n_hash_layers;          /* the first layers route by token id (COLI_ROUTER_SQRTSOFTPLUS) */
	double swiglu_limit;        /* experts' gate clamped to <= it, up to [-it, it]; 0: none */
	int fp4_experts;            /* expert_dtype fp4: routed experts e2m1 with a UE8M0 scale per 32 */

	int n_mtp_layers;           /* num_nextn_predict_layers; set to 0 by coli_model_check_ckpt
				       when the checkpoint carries no MTP tensors */

	/* fp8 quantization_config (quant_method "fp8", fmt "e4m3") */
	int fp8;
	int fp8_block[2];           /* weight_block_size, e.g. 128,128 */
} coli_model;

const char *coli_family_name(coli_family f);

/* Parses config.json. Unknown model_type: error listing the supported ones. Every required
 * field missing or out of range is an error naming the file and the field. */
int coli_model_load(coli_model *m, const char *config_path, coli_err *e);

/* Same from an in-memory JSON text (name used in messages). */
int coli_model_parse(coli_model *m, const char *json_text, const char *name, coli_err *e);

/* What a tensor is for; decides its storage class in the container. */
typedef enum coli_tclass {
	COLI_TC_SMALL,  /* norms, biases, routers, correction bias: always f32 */
	COLI_TC_MATRIX, /* embeddings, lm_head, attention, dense and shared MLPs: --dense-bits */
	COLI_TC_EXPERT, /* routed expert gate/up/down: one record per (layer, expert) */
} coli_tclass;

typedef enum coli_proj { COLI_PROJ_GATE, COLI_PROJ_UP, COLI_PROJ_DOWN } coli_proj;

/* What the forward pass does with a tensor: the engine places each tensor of the table by its
 * role, so the names live in one place (model_tensors.c). */
typedef enum coli_role {
	COLI_R_EXPERT,          /* a routed expert's gate/up/down (the expert store's) */
	COLI_R_EMBED, COLI_R_FINAL_NORM, COLI_R_LM_HEAD,
	/* per layer */
	COLI_R_ATTN_NORM, COLI_R_MLP_NORM,
	COLI_R_Q, COLI_R_K, COLI_R_V, COLI_R_O,       /* GQA projections (O also MLA's) */
	COLI_R_Q_BIAS, COLI_R_K_BIAS, COLI_R_V_BIAS, COLI_R_O_BIAS,
	COLI_R_Q_NORM, COLI_R_K_NORM,
	COLI_R_Q_A, COLI_R_Q_A_NORM, COLI_R_Q_A_BIAS, /* MLA q-LoRA */
	COLI_R_Q_B,                                   /* MLA q_b_proj, or q_proj without q-LoRA */
	COLI_R_KV_A, COLI_R_KV_A_NORM, COLI_R_KV_A_BIAS, COLI_R_KV_B,
	COLI_R_IDX_WQ_B, COLI_R_IDX_WK, COLI_R_IDX_K_NORM, COLI_R_IDX_K_BIAS, COLI_R_IDX_WEIGHTS, /* DSA */
	COLI_R_LIN_QKV, COLI_R_LIN_Z, COLI_R_LIN_B, COLI_R_LIN_A,      /* Gated DeltaNet projections */
	COLI_R_LIN_CONV, COLI_R_LIN_A_LOG, COLI_R_LIN_DT_BIAS, COLI_R_LIN_NORM, COLI_R_LIN_OUT,
	COLI_R_GATE, COLI_R_UP, COLI_R_DOWN,          /* dense MLP */
	COLI_R_ROUTER, COLI_R_CORR_BIAS,
	COLI_R_SH_GATE, COLI_R_SH_UP, COLI_R_SH_DOWN, /* shared expert */
	COLI_R_SH_EXPERT_GATE,                        /* its sigmoid gate [1, hidden] */
	COLI_R_ENORM, COLI_R_HNORM, COLI_R_EH_PROJ, COLI_R_MTP_EMBED, COLI_R_HEAD_NORM, COLI_R_HEAD, /* MTP */
	/* deepseek_v4 (docs/deepseek_v4.md): the shared KV head and its norm, the grouped output,
	 * the sinks; the compressor and the indexer's own (kv and gate projections, position
	 * biases, norm); the hash table; mHC before attention, before the MoE and at the head (fn,
	 * base, scale each); the MTP layer's two projections */
	COLI_R_WKV, COLI_R_KV_NORM, COLI_R_WO_A, COLI_R_WO_B, COLI_R_SINK,
	COLI_R_CMP_WKV, COLI_R_CMP_WGATE, COLI_R_CMP_APE, COLI_R_CMP_NORM,
	COLI_R_IDX_CMP_WKV, COLI_R_IDX_CMP_WGATE, COLI_R_IDX_CMP_APE, COLI_R_IDX_CMP_NORM,
	COLI_R_TID2EID,
	COLI_R_HC_ATTN_FN, COLI_R_HC_ATTN_BASE, COLI_R_HC_ATTN_SCALE,
	COLI_R_HC_FFN_FN, COLI_R_HC_FFN_BASE, COLI_R_HC_FFN_SCALE,
	COLI_R_HC_HEAD_FN, COLI_R_HC_HEAD_BASE, COLI_R_HC_HEAD_SCALE,
	COLI_R_E_PROJ, COLI_R_H_PROJ,
	COLI_R_COUNT
} coli_role;

typedef struct coli_tensor_spec {
	char name[192];
	int ndim;
	int64_t shape[2];
	coli_tclass cls;
	int layer;   /* -1 for embeddings, final norm, lm_head */
	int expert;  /* routed expert index, else -1 */
	int proj;    /* coli_proj for experts, else -1 */
	int mtp;     /* 1 inside an MTP layer (layer >= n_layers) */
	coli_role role;
} coli_tensor_spec;

/* The full expected tensor set (main layers, then MTP layers when n_mtp_layers > 0), in a
 * stable order: globals, then per layer attention, MLP/router, experts by index, gate/up/down.
 * *out is malloc'd; caller frees. Does not include fp8 *_scale_inv companions. */
int coli_model_tensors(const coli_model *m, coli_tensor_spec **out, int *n, coli_err *e);

/* How many tensors coli_model_tensors would list (counted without making them: cheap even for
 * a config that describes millions). */
int64_t coli_model_tensor_count(const coli_model *m);

/* Checks the checkpoint against the expected set: a checkpoint with fewer tensors than the main
 * layers need is refused before the set is made; every expected tensor present with the
 * expected shape and an allowed dtype (BF16, F16, F32, F8_E4M3 for matrices when fp8), every
 * F8_E4M3 weight with its F32 "<name>_scale_inv" of shape [ceil(out/b0), ceil(in/b1)], and no
 * tensor left over. MTP tensors: if none is present, m->n_mtp_layers becomes 0; if some are,
 * all must be. Errors name the tensor and both shapes, e.g.
 * "model.layers.1.mlp.gate.weight: shape [16, 64] expected [32, 64]". */
int coli_model_check_ckpt(coli_model *m, const coli_ckpt *c, coli_err *e);

/* The block scales of weight `weight` in c: "<weight>_scale_inv" (F32), or deepseek_v4's
 * "<base>.scale" (F8_E8M0, each byte b the scale 2^(b - 127); base: weight without ".weight");
 * NULL when neither is there. */
const coli_st_tensor *coli_model_scale_of(const coli_model *m, const coli_ckpt *c, const char *weight);

/* The family's released layout seen through the table's names (ckpt_map.c): qwen3_5_moe's
 * model.language_model.* as model.*, mtp.* as MTP layer n_layers (DeepSeek-V3 naming), fused
 * experts as one view per expert and projection, the conv taps [C, 1, K] as [C, K]; the vision
 * tower model.visual.* left out (*skipped: how many tensors). Views share the shards' bytes.
 * Other families: nothing changes. Call before coli_model_check_ckpt. */
int coli_model_map_ckpt(const coli_model *m, coli_ckpt *c, int *skipped, coli_err *e);

/* 1 when a checkpoint of the family may carry the tensor `name` that the computation never uses
 * (the DSA indexer's weights on a "shared" layer; deepseek_v4's MTP copies of the embedding and
 * head, mtp.K.emb* and mtp.K.head.weight, the main ones being what it reads): accepted by the
 * check, never converted. */
int coli_model_unused_tensor(const coli_model *m, const char *name);

/* The coli_dtype the family's released checkpoint stores tensor s in (release.c): the config's
 * float type (dtype or torch_dtype; bf16 when absent), F8_E4M3 for the matrices an fp8 release
 * quantizes (quantization_config), I8 for deepseek_v4's FP4 experts (expert_dtype fp4), F32 and
 * I64 where the release keeps them. fused: the routed experts stored fused per layer (as
 * qwen3_5_moe's release: never fp8). What coli-synth writes and what a container described from
 * config.json alone assumes. */
int coli_model_release_dtype(const coli_model *m, const coli_tensor_spec *s, int fused);

#endif
