/* state.h: the state a model keeps per sequence, declared per layer as typed parts.
 *
 * Each decoder layer declares what it keeps for a sequence: GQA keys and values, MLA's latent and
 * rotated rope key, the DSA indexer's keys (all growing by one row per token), DeepSeek V4's
 * compressed rows (growing by a row's share per token), and, for the families that have them,
 * fixed-size parts (a recurrent state, a convolution tail, a window of keys). The KV cache,
 * RAM budgets (coli-run --ram, coli-plan), sessions (.coli_kv, formats/kv.md) and speculative
 * decoding's rollback all work from this one declaration. */
#ifndef COLI_STATE_H
#define COLI_STATE_H

#include <stdint.h>

#include "model.h"

/* Part kinds; the numbers are stored in .coli_kv files (never renumber). */
typedef enum coli_state_kind {
	COLI_STATE_KEY = 1,       /* GQA keys after norm and RoPE: kv_heads x head_dim per token */
	COLI_STATE_VALUE = 2,     /* GQA values: kv_heads x head_dim per token */
	COLI_STATE_LATENT = 3,    /* MLA: the normalised kv latent, kv_lora_rank per token */
	COLI_STATE_ROPE_KEY = 4,  /* MLA: the rotated shared rope key, qk_rope_head_dim per token */
	COLI_STATE_INDEX_KEY = 5, /* DSA: the indexer's key after LayerNorm and RoPE, index_head_dim per token */
	COLI_STATE_CONV = 6,      /* Gated DeltaNet: the causal conv's last kernel - 1 inputs [kernel - 1][conv_dim] (fixed) */
	COLI_STATE_RECURRENT = 7, /* Gated DeltaNet: the delta rule's S^T, [v_heads][v_head_dim][k_head_dim] (fixed) */
	/* deepseek_v4 (docs/deepseek_v4.md, section 4): */
	COLI_STATE_WINDOW = 8,    /* the last sliding_window keys (= values), [window][head_dim], slot p % window (fixed) */
	COLI_STATE_COMP_ROW = 9,  /* the compressor's rows, head_dim / ratio per token: row w complete once its
				   * window's ratio tokens are in (growing) */
	COLI_STATE_COMP_WINDOW = 10, /* the compressor's kv and gate rows of its previous and current window,
				      * [kv, gate][previous, current][ratio][cw] (fixed; cw head_dim, CSA 2 head_dim) */
	COLI_STATE_INDEX_ROW = 11, /* CSA: the indexer's rows, index_head_dim / ratio per token (growing) */
	COLI_STATE_INDEX_WINDOW = 12, /* CSA: the indexer compressor's, as COMP_WINDOW with cw 2 index_head_dim (fixed) */
	COLI_STATE_KIND_MAX = 12
} coli_state_kind;

#define COLI_STATE_LAYER_MAX 8 /* parts one layer may declare, at most */

typedef struct coli_state_part {
	int layer; /* decoder layer (main layers; MTP layers keep theirs apart and are never saved) */
	int kind;  /* coli_state_kind */
	int width; /* floats per token (a part that grows with the sequence); 0 for a fixed part */
	int fixed; /* floats per sequence (a fixed-size part); 0 for a growing part */
} coli_state_part;

/* The parts of layers [first, last) in layer order, each layer's in kind order; out NULL only
 * counts. Returns the count. */
int coli_model_state_range(const coli_model *m, int first, int last, coli_state_part *out);

/* The main layers' parts (what a session saves): coli_model_state_range(m, 0, n_layers, out). */
int coli_model_state(const coli_model *m, coli_state_part *out);

/* Bytes layer l's growing parts take per token (an MTP layer's included). */
uint64_t coli_model_layer_token_bytes(const coli_model *m, int l);
/* Bytes of layer l's fixed-size parts (a Gated DeltaNet's conv and recurrent state; 0 elsewhere). */
uint64_t coli_model_layer_fixed_bytes(const coli_model *m, int l);

/* Bytes the main layers' growing parts take per token, and their fixed parts per sequence. */
uint64_t coli_model_state_token_bytes(const coli_model *m);
uint64_t coli_model_state_fixed_bytes(const coli_model *m);

/* "key", "value", "latent", "rope_key", "index_key", "conv", "recurrent"; "?" for another number. */
const char *coli_state_kind_name(int kind);

#endif
