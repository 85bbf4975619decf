/* kv.h: a sequence's state (coli_kv) allocated from the parts its layers declare (internal). */
#ifndef COLI_KV_H
#define COLI_KV_H

#include "engine.h"

/* A state of cap tokens holding the parts of layers [first, last) (coli_model_state_range),
 * zeroed, with a slot in k, v and ix for every layer of the container (main and MTP): layers
 * outside the range have none. kv->n is 0. */
int kv_open_layers(coli_kv *kv, const coli_engine *m, int first, int last, int cap, coli_err *e);

/* Bytes kv_open_layers allocates for a model of config c, layers [first, last), cap tokens and
 * threads compute threads: the parts, each thread's attention scores, the indexer's scores (the
 * few pointer arrays left out). */
uint64_t kv_layers_bytes(const coli_model *c, int first, int last, int cap, int threads);

/* Bytes coli_kv_keep allocates on a state of layers [first, last) of c (0 without fixed parts). */
uint64_t kv_keep_bytes(const coli_model *c, int first, int last);

/* What rolling back the last short forward call needs (coli_kv_keep). */
typedef struct kv_keep {
	int n0, n;                 /* positions n0 .. n0 + n - 1 are kept (n 0: nothing kept) */
	float *snap;               /* every fixed part at n0 but deepseek_v4's, in part order */
	float **R, **Y, **B, **A;  /* [layer] -> per kept token: the Gated DeltaNet's conv inputs [conv_dim],
				    * its q, k, v ready for the delta rule [conv_dim], b and a [v_heads] */
	float **W;                 /* [layer] -> what the kept tokens overwrote in deepseek_v4's fixed
				    * parts (v4_keep_floats; those parts are not in snap) */
} kv_keep;

/* Before n tokens at kv->n (a forward call; the MTP layer's draft steps): the fixed parts'
 * snapshot when n is at most COLI_DRAFT_MAX + 1 (they are then kept), else nothing kept. */
void kv_keep_begin(coli_kv *kv, int n);

/* v4.c: layer l's kept buffer and (*i) p's index among the kept tokens; NULL when p is not kept. */
float *kv_keep_at(coli_kv *kv, int l, int p, int *i);

/* The state cut to its first n tokens (n <= kv->n): exactly, as coli_kv_rollback, where the
 * fixed parts allow it (none, or n within the kept tokens); else only the count (the fixed parts
 * keep the later tokens: for the MTP layer's state, where that costs drafts' quality only).
 * m may be NULL on a state without Gated DeltaNet layers. */
void kv_cut(const coli_engine *m, coli_kv *kv, int n);

/* gdn.c: kept token i of layer l: its rows (copied when the call is kept). */
void kv_keep_rows(coli_kv *kv, const coli_model *c, int l, int i, const float *R, const float *Y, const float *B,
		  const float *A);

#endif
