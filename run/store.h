/* store.h: the expert store, the one way the forward pass gets routed experts.
 *
 * The forward pass asks for (layer, expert) and releases it when the product is done; what
 * stands behind (all in RAM, or streamed from disk with a cache) is the store's business and
 * never changes the bytes multiplied. Layers count as in the container (MTP layers after the
 * main ones). */
#ifndef COLI_STORE_H
#define COLI_STORE_H

#include "container.h"
#include "kernels.h"

typedef struct coli_expert {
	coli_mat gate, up, down; /* [ffn, hidden] [ffn, hidden] [hidden, ffn] */
} coli_expert;

typedef struct coli_store coli_store;

typedef struct coli_store_ops {
	/* The expert's matrices, valid until released; NULL with e filled on error. */
	const coli_expert *(*get)(coli_store *s, int layer, int expert, coli_err *e);
	void (*release)(coli_store *s, int layer, int expert);
	void (*close)(coli_store *s);
} coli_store_ops;

struct coli_store {
	const coli_store_ops *ops;
};

static inline const coli_expert *store_get(coli_store *s, int layer, int expert, coli_err *e)
{
	return s->ops->get(s, layer, expert, e);
}

static inline void store_release(coli_store *s, int layer, int expert) { s->ops->release(s, layer, expert); }

static inline void store_close(coli_store *s)
{
	if (s)
		s->ops->close(s);
}

/* Every expert record read into RAM at open, each CRC checked. */
int store_ram_open(coli_store **out, const coli_container *c, coli_err *e);

#endif
