/* kvfile.h: .coli_kv, a saved conversation: its tokens and the KV cache that encodes them, tied
 * to one container's identity (spec: formats/kv.md).
 *
 *   128-byte header (magic, version, identity, shape, payload length and CRC, header CRC)
 *   int32 tokens[n_tokens]
 *   per layer: float32 k[n_cached][k_width], float32 v[n_cached][v_width]
 *
 * Written to a temporary name, fsynced and renamed: a crash leaves the old file or the new one.
 * Readers check everything, the payload CRC included, before use. */
#ifndef COLI_KVFILE_H
#define COLI_KVFILE_H

#include <stdint.h>

#include "error.h"

#define COLI_KV_VERSION 1u
#define COLI_KV_HEADER 128u

typedef struct coli_kvfile {
	uint8_t identity[32];     /* the container's identity hash */
	int n_layers, k_width, v_width;
	int n_tokens;             /* tokens of the conversation */
	int n_cached;             /* leading tokens whose keys/values are stored (<= n_tokens) */
	int32_t *tokens;
	float **k, **v;           /* [layer] -> [n_cached * width] */
} coli_kvfile;

int coli_kvfile_write(const char *path, const coli_kvfile *f, coli_err *e);

/* Reads path; refuses a file of another container (identity), another version or header size,
 * non-zero reserved bytes, a torn or corrupt one, a token id outside [0, vocab), a non-finite
 * key or value. The header holds no vocabulary size: the caller passes the model's (vocab 0
 * checks only that ids are >= 0). Allocates tokens, k and v (release with coli_kvfile_release). */
int coli_kvfile_load(const char *path, const uint8_t identity[32], int vocab, coli_kvfile *f, coli_err *e);

void coli_kvfile_release(coli_kvfile *f);

#endif
