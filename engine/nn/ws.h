/* ws.h: the forward pass's working memory, sized once at coli_engine_open from the model and the
 * largest batch (internal). A forward call of more tokens runs in batches of max_batch; decode
 * allocates nothing. */
#ifndef COLI_WS_H
#define COLI_WS_H

#include <stdint.h>

#include "store.h"
#include "nn/weights.h"

typedef struct fwd_ws {
	int max_batch;                 /* B: tokens per batch */
	int dry;                       /* only counting (ws_bytes) */
	uint64_t bytes;                /* what the buffers take */
	int rows;                      /* max(B, top_k): rows of the MLP products */
	/* the decoder stack */
	float *X, *N, *Y;              /* [B][hidden] residual, normed, block output */
	/* attention: GQA uses Q, A; MLA all of them */
	float *Q;                      /* [B][heads * max(head_dim, nope + rope)] queries */
	float *A;                      /* [B][heads * max(head_dim, v_head_dim)] attention output */
	float *CKV;                    /* [B][kv_lora + rope] kv_a_proj output */
	float *QA;                     /* [B][q_lora] q_a_proj output */
	float *qc, *ctx;               /* MLA: [heads][kv_lora + rope] each head's absorbed query and its
					* rope query, [heads][kv_lora] each head's weighted latent */
	/* DSA (index_topk > 0) */
	float *IQ;                     /* [B][index_heads * index_hd] indexer queries */
	float *IW;                     /* [B][index_heads] per-head weights of the indexer's scores */
	int32_t *sel;                  /* [B][index_topk] each token's selected positions, ascending */
	int *nsel;                     /* [B] how many; -1: every causal position */
	float *GL, *GR;                /* [index_topk][kv_lora], [index_topk][rope]: the selected rows */
	/* Gated DeltaNet (linear layers) and gated attention */
	float *LR, *LY;                /* [B][conv_dim] q, k, v before the conv, after it */
	float *LZ, *LO;                /* [B][value_dim] the output gate, the heads' output */
	float *LB, *LA;                /* [B][v_heads] beta's and the decay's inputs */
	float *LC;                     /* [coli_gdn_scratch_floats] the chunked delta rule's (B > COLI_EXACT_N) */
	float *QG, *AG;                /* [B][heads x 2 hd] q_proj's [query | gate] per head, [B][heads x hd] the gates */
	/* deepseek_v4 (nn/v4.c): a layer over the batch (Q, A, QA, IQ, IW, X, N, Y as above) */
	float *VS;                     /* [B][hc_mult][hidden] the tokens' streams */
	float *VP, *VC;                /* [B][hc_mult], [B][hc_mult^2] each token's mHC post and comb */
	float *VK;                     /* [B][head_dim] the keys (= values) */
	float *VO;                     /* [B][o_groups x o_lora] the grouped output's low-rank rows */
	float *VG, *VT;                /* [B][heads x head_dim / o_groups], [B][o_lora]: one group's in and out */
	float *VCK, *VCZ;              /* [B][2 head_dim] the compressor's kv and gate projections */
	float *VIK, *VIZ;              /* [B][2 index_head_dim] the indexer's compressor's */
	/* MLP: routers, experts, shared experts, dense MLPs */
	float *R;                      /* [B][experts] router logits */
	float *scratch;                /* [3 x experts + 2 x groups] router scores, group scores */
	int32_t *gsel;                 /* [groups] chosen groups */
	float *G;                      /* [B][hidden] the rows of the tokens that chose one expert */
	float *H, *U;                  /* [rows][max ffn] gate and up products */
	float *D;                      /* [rows][hidden] down products */
	float *W;                      /* [B][top_k] routing weights */
	float *wt;                     /* [B] one expert's weight for each of its tokens */
	int32_t *ids;                  /* [B][top_k] chosen experts */
	int32_t *rows_of;              /* [B] the tokens that chose one expert */
	int *uni;                      /* [experts] the union of a batch's experts, ascending */
	/* decode: one token's experts */
	int *order, *want, *js;        /* [top_k] */
	const coli_expert **ex;        /* [top_k] */
	const coli_mat **pm;           /* [2 x top_k] products of one dispatch */
	const float **px;
	float **py;
	/* next-layer prediction */
	float *pN;                     /* [hidden] */
	int32_t *pid;                  /* [top_k] */
	int *pint;                     /* [top_k] */
	float *pw;                     /* [top_k] */
} fwd_ws;

/* Working memory for batches of up to max_batch tokens of the model c with dense part w. */
int ws_open(fwd_ws **out, const coli_model *c, const weights *w, int max_batch, coli_err *e);
void ws_close(fwd_ws *ws); /* accepts NULL */

/* Bytes ws_open allocates for a model of config c (its MTP layers aside) and max_batch. */
uint64_t ws_bytes(const coli_model *c, int max_batch);

/* The most columns of any matrix the forward pass multiplies (what the kernels reserve for). */
int64_t ws_max_cols(const coli_model *c, const weights *w);

#endif
