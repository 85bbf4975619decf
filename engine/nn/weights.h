/* weights.h: the dense part of a container in RAM (dense.bin and mtp.bin read whole, every
 * tensor's CRC checked), each tensor placed by the role the model's tensor table gives it
 * (formats/model_tensors.c: the one table of names, read by the converter and the engine). */
#ifndef COLI_WEIGHTS_H
#define COLI_WEIGHTS_H

#include "container.h"
#include "kernels.h"

/* One decoder layer's dense tensors; a matrix with rows == 0 or a NULL vector is absent. */
typedef struct layer_w {
	const float *attn_norm;        /* [hidden] input_layernorm */
	const float *mlp_norm;         /* [hidden] post_attention_layernorm */
	/* GQA */
	coli_mat q, k, v, o;           /* [heads*hd, hidden] [kv*hd, hidden] [kv*hd, hidden] [hidden, heads*hd] */
	const float *q_bias, *k_bias, *v_bias, *o_bias;
	const float *q_norm, *k_norm;  /* [hd] per head, or [heads*hd] / [kv*hd] whole (olmoe) */
	/* MLA */
	coli_mat q_a, q_b;             /* [q_lora, hidden], [heads*(nope+rope), q_lora]; q_b = q_proj without lora */
	coli_mat kv_a, kv_b;           /* [kv_lora+rope, hidden], [heads*(nope+v), kv_lora] */
	const float *q_a_norm;         /* [q_lora] */
	const float *kv_a_norm;        /* [kv_lora] */
	const float *q_a_bias, *kv_a_bias; /* MLA attention_bias */
	/* DSA lightning indexer ("full" layers) */
	coli_mat idx_wq_b;             /* [index_heads*index_hd, q_lora] */
	coli_mat idx_wk;               /* [index_hd, hidden] */
	const float *idx_k_norm, *idx_k_bias; /* [index_hd] LayerNorm weight and bias */
	coli_mat idx_weights;          /* [index_heads, hidden] f32 weights_proj */
	/* Gated DeltaNet ("linear_attention" layers) */
	coli_mat lin_qkv;              /* [2 x key_dim + value_dim, hidden] q, k, v before the conv */
	coli_mat lin_z;                /* [value_dim, hidden] the output gate */
	coli_mat lin_b, lin_a;         /* [v_heads, hidden] f32: beta's and the decay's inputs */
	coli_mat lin_conv;             /* [2 x key_dim + value_dim, kernel] f32 causal conv taps */
	const float *lin_a_log, *lin_dt_bias; /* [v_heads] */
	const float *lin_norm;         /* [v_head_dim] the gated RMSNorm's weight */
	coli_mat lin_out;              /* [hidden, value_dim] */
	/* MLP: dense, or router + shared expert (experts come from the store) */
	coli_mat gate, up, down;       /* dense MLP [ffn, hidden] [ffn, hidden] [hidden, ffn] */
	coli_mat router;               /* [experts, hidden] f32 */
	const float *corr_bias;        /* [experts] e_score_correction_bias */
	coli_mat sh_gate, sh_up, sh_down; /* shared expert */
	coli_mat sh_expert_gate;       /* [1, hidden] f32: the shared expert x sigmoid(this . x) */
	/* deepseek_v4 (docs/deepseek_v4.md): the shared KV head, the grouped output, the sinks */
	coli_mat wkv;                  /* [hd, hidden] */
	const float *kv_norm;          /* [hd] */
	coli_mat wo_a, wo_b;           /* [groups x o_lora, heads x hd / groups], [hidden, groups x o_lora] */
	const float *sink;             /* [heads] */
	coli_mat cmp_wkv, cmp_wgate;   /* the compressor: [cw, hidden] each (cw: hd, CSA 2 hd) */
	const float *cmp_ape, *cmp_norm; /* [ratio][cw] position biases of the gates, [hd] the rows' norm */
	coli_mat icmp_wkv, icmp_wgate; /* the indexer's compressor (CSA): [2 index_hd, hidden] each */
	const float *icmp_ape, *icmp_norm; /* [ratio][2 index_hd], [index_hd] */
	const float *tid2eid;          /* hash layers: [vocab][top_k] expert ids (as floats) */
	const float *hc_fn[3], *hc_base[3], *hc_scale[3]; /* mHC before attention, before the MoE, at the head */
	coli_mat e_proj, h_proj;       /* the MTP layer's [hidden, hidden] each */
	/* MTP layer extras */
	const float *enorm, *hnorm;    /* [hidden] */
	coli_mat eh_proj;              /* [hidden, 2*hidden] */
	coli_mat embed;                /* [vocab, hidden] the MTP layer's own embed_tokens */
	const float *head_norm;        /* shared_head.norm [hidden] */
	coli_mat head;                 /* shared_head.head [vocab, hidden] */
} layer_w;

typedef struct weights {
	uint8_t *data[2];              /* dense.bin, mtp.bin contents (4096-aligned) */
	coli_mat embed;                /* [vocab, hidden] */
	const float *final_norm;       /* [hidden] */
	coli_mat lm_head;              /* [vocab, hidden] (the embedding when tied) */
	int n_layers;                  /* main + MTP */
	layer_w *layers;
	layer_w top;                   /* per-layer roles a model also has outside its layers
					* (deepseek_v4's mHC head: top.hc_fn[2] ...) */
} weights;

/* Reads and checks the dense and MTP sections of c, and resolves every tensor. */
int weights_load(weights *w, const coli_container *c, coli_err *e);
void weights_release(weights *w);

#endif
