/* tokenizer.h: byte-level BPE tokenizer driven by a Hugging Face tokenizer.json.
 *
 * Encoding follows Hugging Face `tokenizers` (the Rust library) step by step:
 *   1. added tokens that are not "normalized" are cut out of the raw text (leftmost-longest
 *      match, with their lstrip / rstrip / single_word flags);
 *   2. each remaining piece goes through the normalizer (NFC, NFD, NFKC, NFKD, Sequence);
 *   3. "normalized" added tokens are cut out of the normalized pieces;
 *   4. the pre-tokenizer (Split steps, Digits, then ByteLevel) cuts each piece into words;
 *   5. each word is byte-level mapped and merged by BPE ranks into ids.
 * No BOS/EOS is added (the post_processor is not applied); truncation and padding are ignored.
 * Regexes mean what they mean in Oniguruma, HF's regex engine (\s is Unicode White_Space,
 * class intersection [A&&B] works), though they run on PCRE2 (see tok/regex.c).
 *
 * Input text must be valid UTF-8: anything else is rejected (COLI_EDATA, as is text a regex
 * cannot match within PCRE2's match limit) with the byte offset of the first bad byte. Decoding maps ids back to bytes through the ByteLevel decoder; invalid UTF-8 in
 * the result (a token sequence cut inside a character) becomes U+FFFD, one per maximal
 * invalid subsequence, as Rust's String::from_utf8_lossy does. Added tokens decode to their
 * content verbatim.
 *
 * Unsupported tokenizer.json features (another model type, byte_fallback, other
 * pre-tokenizers, normalizers or decoders) fail at load with the JSON field and value.
 * A coli_tok is read-only after load except for its encoding cache and regex scratch:
 * do not call coli_tok_encode on the same coli_tok from two threads at once. */
#ifndef COLI_TOKENIZER_H
#define COLI_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct coli_tok coli_tok;

/* Loads and validates tokenizer.json. On success *out owns the tokenizer (coli_tok_free).
 * The JSON's tree (the load's peak: 82 MiB of RSS for Qwen3's 11.4 MB, 151k entries) is freed
 * before it returns and its memory handed back to the system (malloc_trim): afterwards the
 * process holds the tables only (coli_tok_bytes). */
int coli_tok_load(coli_tok **out, const char *tokenizer_json_path, coli_err *e);
/* The tokenizer.json of the container folder dir: coli_tok_load, or *out NULL and 0 when the
 * folder has none. */
int coli_tok_load_dir(coli_tok **out, const char *dir, coli_err *e);
void coli_tok_free(coli_tok *t); /* accepts NULL */

/* The bytes t's tables hold after load (vocabulary, merges, added tokens, regexes, decoding
 * table): what a run keeps for it (policy.h, coli_run_ask.tok). Encoding's scratch and word cache
 * grow with the text encoded and are not in it. */
size_t coli_tok_bytes(const coli_tok *t);

/* Encodes len bytes of UTF-8 text. parse_special: 1 to turn special added tokens written in
 * the text (e.g. "<|im_start|>") into their ids, as Hugging Face does by default; 0 to encode
 * them as plain text (non-special added tokens such as "<think>" are always recognized).
 * *ids is malloc'ed, caller frees (NULL when *n is 0). */
int coli_tok_encode(coli_tok *t, const char *utf8, size_t len, int parse_special, int32_t **ids,
		    int *n, coli_err *e);

/* The offset of the first byte of s[0..n) that is not valid UTF-8, n when all of it is. */
size_t coli_tok_utf8_invalid(const char *s, size_t n);

/* Number of ids: one more than the largest id of the vocabulary and the added tokens. */
int coli_tok_vocab_size(const coli_tok *t);

/* Id of a token given by its exact string (added tokens first, then the vocabulary), -1 if
 * absent. Vocabulary strings are in byte-level form ("Ġthe" for " the"). */
int coli_tok_id(const coli_tok *t, const char *token);

/* The token string of an id (NUL-terminated, owned by t), NULL if the id has no token. */
const char *coli_tok_token(const coli_tok *t, int32_t id);

/* 1 if id is an added token marked "special" (skipped by skip_special), else 0. */
int coli_tok_is_special(const coli_tok *t, int32_t id);

/* Decodes n ids to UTF-8 text. skip_special: 1 to drop special tokens. *out is malloc'ed and
 * NUL-terminated, caller frees. An id without a token (a model's vocabulary padded beyond the
 * tokenizer's, or a hole in it) decodes to nothing; a negative id is an error (COLI_EUSAGE). */
int coli_tok_decode(const coli_tok *t, const int32_t *ids, int n, int skip_special, char **out,
		    size_t *len, coli_err *e);

/* Streaming decoder for generation: feed ids one at a time; each call returns only complete
 * UTF-8 (bytes of a character split over several tokens are held back until it completes).
 * The concatenation of all outputs and the final flush equals coli_tok_decode of the ids. */
typedef struct coli_detok coli_detok;

int coli_detok_new(coli_detok **out, const coli_tok *t, int skip_special, coli_err *e);
void coli_detok_free(coli_detok *d); /* accepts NULL */

/* Feeds one id; *text / *len receive the newly completed text (possibly empty), valid until
 * the next call on d. */
int coli_detok_feed(coli_detok *d, int32_t id, const char **text, size_t *len, coli_err *e);

/* Ends the stream: a held-back incomplete character comes out as U+FFFD. d may be reused. */
void coli_detok_flush(coli_detok *d, const char **text, size_t *len);

#endif
