/* kvfile.h: .coli_kv, a saved conversation: its tokens and the per-layer state that encodes them
 * (formats/state.h), tied to one container's identity (spec: formats/kv.md).
 *
 *   128-byte header (magic, version 2, identity, n_parts, n_tokens, n_cached, payload length and
 *                    CRC, header CRC)
 *   part table: n_parts x {u32 layer, kind, width, fixed}, sorted by (layer, kind)
 *   int32 tokens[n_tokens]
 *   per part, in table order: float32 [n_cached][width] (growing) or [fixed] (fixed-size)
 *
 * Version 1 (keys and values only: per layer k[n_cached][k_width], v[n_cached][v_width]) is still
 * read for a model whose state is exactly those two parts per layer. Writers write version 2, to
 * a temporary name, fsynced and renamed: a crash leaves the old file or the new one. Readers
 * check everything, the payload CRC included, before use. */
#ifndef COLI_KVFILE_H
#define COLI_KVFILE_H

#include <stdint.h>

#include "error.h"
#include "state.h"

#define COLI_KV_VERSION 2u           /* what writers write */
#define COLI_KV_HEADER 128u
#define COLI_KV_MAX_PARTS (1 << 20)  /* n_parts in [1, COLI_KV_MAX_PARTS] */
#define COLI_KV_MAX_LAYER 65535      /* parts[i].layer in [0, COLI_KV_MAX_LAYER] */
#define COLI_KV_MAX_WIDTH (1 << 28)  /* parts[i].width and .fixed at most this many floats */

typedef struct coli_kvfile {
	uint8_t identity[32];     /* the container's identity hash */
	int n_parts;
	coli_state_part *parts;   /* [n_parts], sorted by (layer, kind) */
	int n_tokens;             /* tokens of the conversation */
	int n_cached;             /* leading tokens the state holds: n_tokens or n_tokens - 1 */
	int32_t *tokens;          /* [n_tokens] */
	float **data;             /* [part] -> n_cached * width floats (growing), fixed floats (fixed) */
	void *block;              /* loaded files only: the payload that tokens and data point into */
} coli_kvfile;

/* Writes f as version 2 (block is not used). Refuses (COLI_EUSAGE) a part table the reader would
 * refuse: a kind outside [1, COLI_STATE_KIND_MAX], width and fixed not exactly one non-zero,
 * entries not strictly increasing by (layer, kind), n_cached not n_tokens or n_tokens - 1. */
int coli_kvfile_write(const char *path, const coli_kvfile *f, coli_err *e);

/* Reads path for a model whose state is want[n_want] (coli_model_state; its rules as above, else
 * COLI_EUSAGE). Refuses (COLI_EDATA) a file of another container (identity), a version other
 * than 1 and 2, a header size other than 128, non-zero reserved bytes, a torn or corrupt file, a
 * part table that breaks the rules or differs from want (naming the first differing entry), a
 * version 1 file unless want is two growing parts per layer, key and value or latent and
 * rope_key, of v1's layer count and widths; a token id outside [0, vocab) (vocab 0 checks only
 * that ids are >= 0), a non-finite float. want NULL (n_want 0) accepts any valid part table of a
 * version 2 file and refuses version 1 (its kinds are the model's). On success f holds the parts
 * (want's for a version 1 file), tokens and data, all allocated: release with
 * coli_kvfile_release. On failure f is left empty. */
int coli_kvfile_load(const char *path, const uint8_t identity[32], int vocab, const coli_state_part *want, int n_want,
		     coli_kvfile *f, coli_err *e);

/* Frees what coli_kvfile_load allocated and empties f; f may be empty. */
void coli_kvfile_release(coli_kvfile *f);

#endif
