/* fuzz_tokenizer.c: tokenizer.json through coli_tok_load; a loaded tokenizer then encodes and
 * decodes a few texts (and the input's own first bytes), decodes its first ids one by one and
 * streams them. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tokenizer.h"

#define TEXT_MAX 256 /* bytes of the input encoded as text */
#define IDS_MAX 64   /* ids decoded in order */

static const char *const texts[] = {
	"Hello, world! 123 4567",
	"<|im_start|>user\nwhat's up?<|im_end|>\n<think>",
	"  tabs\tand\r\nnewlines\n\n  ",
	"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xef\xac\x81", /* NFC/NFKC matter */
};

/* Encodes then decodes len bytes of text both ways of parse_special; errors are expected. */
static void round_trip(coli_tok *t, const char *text, size_t len)
{
	for (int special = 0; special < 2; special++) {
		int32_t *ids = NULL;
		int n = 0;
		char *out = NULL;
		size_t out_len = 0;
		coli_err e;
		if (coli_tok_encode(t, text, len, special, &ids, &n, &e) == 0)
			coli_tok_decode(t, ids, n, special, &out, &out_len, &e);
		free(out);
		free(ids);
	}
}

/* Ids 0..IDS_MAX-1: each token's string, a whole decode and the streaming decoder. */
static void decode_ids(coli_tok *t)
{
	int32_t ids[IDS_MAX];
	int n = coli_tok_vocab_size(t) < IDS_MAX ? coli_tok_vocab_size(t) : IDS_MAX;
	coli_detok *d = NULL;
	char *out = NULL;
	size_t len;
	const char *piece;
	coli_err e;
	for (int i = 0; i < n; i++) {
		const char *s = coli_tok_token(t, i);
		ids[i] = i;
		if (s) /* not required to find i: a token may hold a NUL or share its string */
			coli_tok_id(t, s);
		coli_tok_is_special(t, i);
	}
	coli_tok_decode(t, ids, n, 1, &out, &len, &e);
	free(out);
	if (coli_detok_new(&d, t, 0, &e) == 0) {
		for (int i = 0; i < n && coli_detok_feed(d, ids[i], &piece, &len, &e) == 0; i++)
			;
		coli_detok_flush(d, &piece, &len);
	}
	coli_detok_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_write("tokenizer.json", data, size, 0);
	coli_tok *t = NULL;
	coli_err e;
	if (!path || coli_tok_load(&t, path, &e) < 0)
		return 0;
	for (size_t i = 0; i < sizeof(texts) / sizeof(*texts); i++)
		round_trip(t, texts[i], strlen(texts[i]));
	round_trip(t, (const char *)data, size < TEXT_MAX ? size : TEXT_MAX);
	decode_ids(t);
	coli_tok_free(t);
	return 0;
}
