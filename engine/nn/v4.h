/* v4.h: DeepSeek V4's forward pass (deepseek_v4; docs/deepseek_v4.md) and what it adds to a
 * sequence's state (internal): per layer its views of the state parts (the window of the last
 * sliding_window keys, the compressor's rows and its last two windows of projections, the
 * indexer's rows and windows: formats/state.h), the two RoPEs, the token's streams and scratch.
 * Tokens run one at a time through every layer (the reference's incremental form, which equals
 * its batched one). */
#ifndef COLI_V4_H
#define COLI_V4_H

#include "engine.h"

/* The views of kv's parts and the scratch of a sequence of cap tokens over layers [first,
 * last), into kv->v4 (kv's parts already allocated). -1 with e on allocation failure. */
int v4_kv_open(coli_kv *kv, const coli_engine *m, int first, int last, int cap, coli_err *e);
void v4_kv_close(coli_kv *kv);

/* Bytes v4_kv_open allocates (the parts apart). */
uint64_t v4_kv_bytes(const coli_model *c, int first, int last, int cap);

/* n tokens at positions kv->n .. through the decoder stack and the head (forward.c's batch for
 * deepseek_v4): logits of every token ([n][vocab]) and/or of the last; the routing log's rows
 * from row `at` of its n_all. Advances kv->n by n. */
int v4_batch(coli_engine *m, coli_kv *kv, const int32_t *tokens, int n, float *logits, float *last,
	     coli_routing_log *routing, int at, int n_all, coli_err *e);

#endif
