/* tokjson.h: the ids a tokenizer.json assigns, read without building a tokenizer (coli-convert
 * checks them against the model's vocabulary; the tokenizer itself is the engine's). */
#ifndef COLI_TOKJSON_H
#define COLI_TOKJSON_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The largest id of model.vocab and added_tokens[].id in the tokenizer.json text buf[len] into
 * *max_id (-1 when it names none), and the token that has it into where (a short quoted form,
 * cap bytes). -1 with e (COLI_EDATA, naming path) when the text is not a JSON object. */
int coli_tokjson_max_id(const char *buf, size_t len, const char *path, int64_t *max_id, char *where, size_t cap,
			coli_err *e);

#endif
