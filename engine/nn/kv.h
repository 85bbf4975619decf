/* kv.h: a sequence's state (coli_kv) allocated from the parts its layers declare (internal). */
#ifndef COLI_KV_H
#define COLI_KV_H

#include "engine.h"

/* A state of cap tokens holding the parts of layers [first, last) (coli_model_state_range),
 * zeroed, with a slot in k, v and ix for every layer of the container (main and MTP): layers
 * outside the range have none. kv->n is 0. */
int kv_open_layers(coli_kv *kv, const coli_engine *m, int first, int last, int cap, coli_err *e);

#endif
