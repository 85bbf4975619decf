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

/* Bytes coli_kv_keep allocates on a state of the main layers of c (0 without fixed parts). */
uint64_t kv_keep_bytes(const coli_model *c);

/* What rolling back the last short forward call needs (coli_kv_keep). */
typedef struct kv_keep {
	int n0, n;                 /* the call kept positions n0 .. n0 + n - 1 (n 0: nothing kept) */
	float *snap;               /* every fixed part at n0, in part order */
	float **R, **Y, **B, **A;  /* [layer] -> per kept token: the Gated DeltaNet's conv inputs [conv_dim],
				    * its q, k, v ready for the delta rule [conv_dim], b and a [v_heads] */
} kv_keep;

/* forward.c: before a forward call of n tokens, the fixed parts' snapshot when it is kept. */
void kv_keep_begin(coli_kv *kv, int n);

/* gdn.c: kept token i of layer l: its rows (copied when the call is kept). */
void kv_keep_rows(coli_kv *kv, const coli_model *c, int l, int i, const float *R, const float *Y, const float *B,
		  const float *A);

#endif
