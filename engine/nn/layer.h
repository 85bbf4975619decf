/* layer.h: one decoder layer over the working memory's batch (internal): what the decoder stack
 * and the MTP layer share, so neither reaches into the other. */
#ifndef COLI_LAYER_H
#define COLI_LAYER_H

#include "engine.h"

/* Decoder layer l over the n rows of the working memory's residual X, at positions kv->n ..
 * kv->n + n - 1 (kv->n is the caller's to advance); ids, wts: the routing log's rows or NULL. */
int fwd_layer(coli_engine *m, coli_kv *kv, int l, int n, int32_t *ids, float *wts, coli_err *e);

#endif
