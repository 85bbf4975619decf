/* v4.h: DeepSeek V4's forward pass (deepseek_v4; docs/deepseek_v4.md) and what it adds to a
 * sequence's state (internal): per layer its views of the state parts (the window of the last
 * sliding_window keys, the compressor's rows and its last two windows of projections, the
 * indexer's rows and windows: formats/state.h), the two RoPEs, the token's streams and scratch;
 * its MTP layer and the replay its rollback needs. A batch runs layer by layer: its products
 * over the batch (the engine's working memory, nn/ws.h), the attention core and the state it
 * updates token by token in position order (the reference's incremental form, which equals its
 * batched one); products of up to COLI_EXACT_N tokens have each token's bits alone, so a verify
 * of k + 1 tokens computes the bits of k + 1 decode steps. */
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
 * from row `at` of its n_all; each token's final streams (before the head) into hid ([n][S][D],
 * what the MTP layer reads; NULL: not kept). Advances kv->n by n. */
int v4_batch(coli_engine *m, coli_kv *kv, const int32_t *tokens, int n, float *logits, float *last,
	     coli_routing_log *routing, int at, int n_all, float *hid, coli_err *e);

/* The MTP layer l (DeepSeek's MTPBlock; docs/deepseek_v4.md, section 3.10) over n rows at its
 * positions kv->n .., in batches of COLI_EXACT_N (the bits of one row at a time, however the rows
 * were queued): row i from the main model's final streams hid[i] ([S][D]) and the token
 * tok[i] after them: e_proj enorm(embed(tok)) + h_proj hnorm(stream) on every stream, the
 * layer's attention (its own window) and MoE between their mHC mixings, then its mHC head, its
 * norm and the model's head: the last row's logits (NULL: none). The last row's streams (before
 * the head) into h ([S][D], the next draft step's hid; may be hid's last row). Advances kv->n. */
int v4_mtp(coli_engine *m, coli_kv *kv, int l, const float *hid, const int32_t *tok, int n, float *logits, float *h,
	   coli_err *e);

/* Floats rolling back layer l keeps (nn/kv.h's kv_keep) over COLI_DRAFT_MAX + 1 tokens: per
 * token what it overwrites in the layer's fixed parts (its window slot, its slots of the
 * compressors' current windows), and per window those tokens complete the previous windows it
 * replaces. */
size_t v4_keep_floats(const coli_model *c, int l);

/* Layer l's fixed parts from position old back to n (n0 <= n <= old, the kept tokens from n0
 * on, base what they kept): each token's overwritten slots put back, the latest first; the
 * compressed rows completed at positions n .. old - 1 zeroed. The state is then, bit for bit,
 * that of a run of n tokens. */
void v4_undo(coli_kv *kv, int l, float *base, int n0, int n, int old);

#endif
