/* route.h: route_trace v1, the experts a real model's router chose at every (token position,
 * MoE layer) of one chat turn, as CSV (spec: formats/route.md), read whole into a table for
 * replaying (coli-run --route-from) and for cache studies.
 *
 *   # route_trace v1
 *   # model=PATH arch=ARCH n_layer=L n_expert=E n_expert_used=K
 *   # layer=0 expert_bytes=B dense_bytes=D                    (L lines, layers 0..L-1 in order)
 *   turn,phase,step,layer,slot,expert,weight,residency,expert_bytes
 *   0,0,0,0,0,49,0.221297,0,3059712                           (one row per routed expert)
 *
 * Every field of every line is checked, then the whole: each (position, layer) has exactly K
 * distinct experts in slots 0..K-1, weights non-increasing by slot, positions contiguous from 0,
 * prefill positions before decode ones. The one hole allowed: a prompt position other than the
 * last may lack the last layer (the tracing engine skipped it, its output being unused). */
#ifndef COLI_ROUTE_H
#define COLI_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define COLI_ROUTE_MAX_LAYERS 4096
#define COLI_ROUTE_MAX_EXPERTS 65536
#define COLI_ROUTE_MAX_TOP_K 1024
#define COLI_ROUTE_MAX_POSITIONS (1 << 24)

typedef struct coli_route {
	char *name;                 /* the path (or the memory variant's name), for messages */
	char *model, *arch;         /* the header's model= and arch=, as written */
	int n_layers;               /* n_layer: MoE layers traced */
	int n_experts;              /* n_expert: routed experts per layer */
	int top_k;                  /* n_expert_used: experts per (position, layer) */
	int n_positions;            /* token positions 0 .. n_positions - 1 */
	int n_prefill;              /* the first n_prefill positions are the prompt (phase 0), the
				     * rest decode (phase 1) */
	int n_absent;               /* (position, layer) entries without rows (the hole above) */
	uint64_t *expert_bytes;     /* [n_layers]: the layer lines' sizes in the tracing engine */
	uint64_t *dense_bytes;      /* [n_layers] */
	int32_t *ids;               /* [n_positions][n_layers][top_k], in slot order (weight
				     * descending); -1 in every slot of an absent entry */
	float *weights;             /* same shape; 0 where absent */
} coli_route;

/* Reads and checks the whole file; *out is the caller's (coli_route_close). Errors (COLI_EDATA,
 * COLI_EIO, COLI_ENOMEM) name the file, the line, the field and the value. */
int coli_route_open(coli_route **out, const char *path, coli_err *e);

/* The same over size bytes of data (not NUL-terminated); name stands for the file in messages. */
int coli_route_open_mem(coli_route **out, const char *data, size_t size, const char *name, coli_err *e);

void coli_route_close(coli_route *r); /* accepts NULL */

/* The top_k experts of (position, layer) in slot order, or NULL when the entry is absent or out
 * of range; *w (may be NULL) gets their weights. */
const int32_t *coli_route_at(const coli_route *r, int position, int layer, const float **w);

#endif
