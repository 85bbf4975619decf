/* tok/internal.h: state shared by the tokenizer's modules (tok_*.c, tokenizer.c); not an API. */
#ifndef COLI_TOK_INTERNAL_H
#define COLI_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "tokenizer.h"

#define TOK_MAX_ID (1 << 24)    /* ids at or above this are rejected at load */
#define TOK_MAX_NORM 8          /* normalizer steps after flattening Sequences */
#define TOK_CACHE_MAX_WORD 256  /* longer words are not cached (as in HF) */

/* ---- growable buffers (tok/util.c) ---- */

typedef struct tok_buf {
	char *p;
	size_t n, cap;
} tok_buf;

typedef struct tok_ids {
	int32_t *p;
	size_t n, cap;
} tok_ids;

typedef struct tok_span {
	size_t off, len;
} tok_span;

typedef struct tok_spans {
	tok_span *p;
	size_t n, cap;
} tok_spans;

int tok_buf_put(tok_buf *b, const void *s, size_t n, coli_err *e);
int tok_ids_push(tok_ids *v, int32_t id, coli_err *e);
int tok_ids_put(tok_ids *v, const int32_t *ids, size_t n, coli_err *e);
int tok_spans_push(tok_spans *v, size_t off, size_t len, coli_err *e);
void *tok_alloc(size_t n, size_t size, const char *what, coli_err *e); /* calloc or error */

/* ---- UTF-8 and Unicode helpers (tok/util.c) ---- */

/* Offset of the first byte that does not start a valid UTF-8 sequence, or n if all valid. */
size_t tok_utf8_invalid(const uint8_t *s, size_t n);
/* Decodes the valid UTF-8 character at s (n > 0 bytes left); returns its length. */
int tok_utf8_next(const uint8_t *s, size_t n, int32_t *cp);
/* Code point of the character ending at s + n (n > 0); valid UTF-8 assumed. */
int32_t tok_utf8_prev(const uint8_t *s, size_t n);
int tok_utf8_put(uint8_t out[4], int32_t cp);
int tok_is_white_space(int32_t cp); /* Unicode White_Space */
int tok_is_word(int32_t cp);        /* regex \w: letters, marks, Nd, Nl, Pc, joiners */

/* ---- byte-level alphabet (tok/util.c) ---- */

/* GPT-2's byte <-> printable character table: byte b is shown as code point tok_bl_cp[b]. */
extern int32_t tok_bl_cp[256];
void tok_bl_init(void);
int tok_bl_byte(int32_t cp); /* byte shown as cp, -1 if cp is not in the alphabet */

/* ---- string -> int32 hash map with its own key arena (tok/map.c) ---- */

typedef struct tok_strmap {
	char *keys;          /* key bytes, each followed by a NUL */
	size_t keys_n, keys_cap;
	uint32_t *koff, *klen;
	int32_t *val;
	uint32_t count, cap; /* entries used / allocated */
	uint32_t *slots;     /* entry index + 1, 0 = empty */
	uint32_t mask;
} tok_strmap;

int tok_strmap_init(tok_strmap *m, size_t expect, coli_err *e);
void tok_strmap_release(tok_strmap *m);
/* The bytes m's arrays hold. */
size_t tok_strmap_bytes(const tok_strmap *m);
/* Entry of key, or -1. */
int32_t tok_strmap_find(const tok_strmap *m, const char *k, size_t n);
/* Inserts key (or finds it): returns its entry index, *added 1 if new; -1 on error. */
int32_t tok_strmap_put(tok_strmap *m, const char *k, size_t n, int32_t val, int *added,
		       coli_err *e);

/* BPE merges: (left id, right id) -> (rank, merged id). */
typedef struct tok_merges {
	uint64_t *key; /* UINT64_MAX = empty */
	int32_t *rank, *merged;
	uint32_t mask, count;
} tok_merges;

int tok_merges_init(tok_merges *m, size_t expect, coli_err *e);
void tok_merges_release(tok_merges *m);
/* The bytes m's arrays hold. */
size_t tok_merges_bytes(const tok_merges *m);
/* Sets the pair; a repeated pair takes the later rank (as HF's HashMap collect does). */
void tok_merges_set(tok_merges *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
/* 1 and *rank / *merged if the pair merges, else 0. */
int tok_merges_get(const tok_merges *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged);

/* ---- regexes (tok/regex.c) ---- */

typedef struct tok_regex {
	pcre2_code *code;
	pcre2_match_data *md;
} tok_regex;

/* Compiles an Oniguruma-syntax pattern (as HF uses) with PCRE2; literal = plain string.
 * field names the JSON field in errors. */
int tok_regex_compile(tok_regex *r, const char *pat, size_t n, int literal, const char *path,
		      const char *field, coli_err *e);
void tok_regex_release(tok_regex *r);
/* The bytes r holds: its compiled pattern, JIT code and match data (0 when not compiled). */
size_t tok_regex_bytes(const tok_regex *r);
/* Rewrites Oniguruma escapes whose meaning differs in PCRE2; *out malloc'ed. */
int tok_regex_translate(const char *pat, size_t n, char **out, size_t *out_n, char *why,
			size_t why_n);
/* Next match in s[0..n) at or after *pos (HF find_iter semantics); 1 found, 0 none, -1 error. */
int tok_regex_next(tok_regex *r, const char *s, size_t n, size_t *pos, size_t *mstart,
		   size_t *mend, coli_err *e);

/* ---- pre-tokenizer (tok/pretok.c) ---- */

enum tok_behavior {
	TOK_REMOVED,
	TOK_ISOLATED,
	TOK_MERGED_PREV,
	TOK_MERGED_NEXT,
	TOK_CONTIGUOUS,
};

typedef struct tok_piece {
	size_t a, b;
	int match; /* a regex match (or, after a behavior is applied, a piece to remove) */
} tok_piece;

typedef struct tok_split {
	tok_regex re;
	int behavior; /* enum tok_behavior */
	int invert;
} tok_split;

/* ---- added tokens (tok/added.c) ---- */

typedef struct tok_added {
	int32_t id;
	char *content; /* as written in the JSON */
	size_t len;
	char *match;   /* what is searched: content, normalized if the token is "normalized" */
	size_t match_len;
	uint8_t special, normalized, lstrip, rstrip, single_word;
} tok_added;

typedef struct tok_trie_node {
	int32_t child, sibling; /* node indexes, -1 none */
	int32_t token;          /* index into coli_tok.added ending here, -1 none */
	uint8_t byte;
} tok_trie_node;

typedef struct tok_trie {
	tok_trie_node *n; /* n[0] is the root */
	size_t count, cap;
	uint8_t first[32]; /* bitmap of first bytes */
} tok_trie;

typedef struct tok_section {
	size_t off, len;
	int32_t added; /* index into coli_tok.added, -1 for text */
} tok_section;

typedef struct tok_sections {
	tok_section *p;
	size_t n, cap;
} tok_sections;

int tok_trie_build(tok_trie *tr, const tok_added *added, int n_added, int normalized,
		   coli_err *e);
void tok_trie_release(tok_trie *tr);
/* The bytes tr's nodes hold. */
size_t tok_trie_bytes(const tok_trie *tr);
/* Cuts s[0..n) into added-token and text sections (HF find_matches); appends to out. */
int tok_added_split(const coli_tok *t, const tok_trie *tr, const char *s, size_t n,
		    int parse_special, tok_sections *out, coli_err *e);

/* ---- the tokenizer ---- */

typedef struct tok_cache {
	tok_strmap words; /* word bytes -> entry; entry's ids in ids[off[i] .. off[i] + n[i]) */
	uint32_t *off, *n;
	size_t cap;
	tok_ids ids;
} tok_cache;

struct coli_tok {
	char *path;

	/* model */
	tok_strmap vocab;       /* token string -> id */
	int32_t n_ids;          /* max id + 1 over vocab and added tokens */
	int32_t *vocab_entry;   /* [n_ids] vocab entry of each id, -1 none */
	tok_merges merges;
	int32_t byte_id[256];   /* id of the byte-level character of each byte, -1 absent */
	int32_t unk_id;         /* -1 when no unk_token */
	int fuse_unk, ignore_merges;

	/* normalizer: utf8proc option sets applied in order */
	int norm[TOK_MAX_NORM];
	int n_norm;

	/* pre-tokenizer: Split steps, then ByteLevel */
	tok_split *splits;
	int n_splits;
	int bl_prefix_space, bl_use_regex;
	tok_regex bl_regex;     /* GPT-2 pattern when bl_use_regex */

	/* added tokens */
	tok_added *added;
	int n_added;
	int32_t *added_of_id;   /* [n_ids] index into added, -1 none */
	tok_trie trie_raw, trie_norm;

	/* decoding: bytes each id decodes to, in dec[dec_off[id] .. dec_off[id + 1]) */
	char *dec;
	size_t dec_cap;         /* bytes allocated at dec */
	uint32_t *dec_off;      /* [n_ids + 1] */

	/* encoding scratch (makes encoding single-threaded per coli_tok) */
	tok_cache cache;
	tok_spans sp_a, sp_b;
	tok_piece *pieces;
	size_t pieces_cap;
	tok_buf prefixed, norm_buf;
	tok_sections sec_b;
	struct tok_bpe_scratch *bpe;
};

/* tok/load.c: parses and validates the JSON into t (t->path set). */
int tok_load_json(coli_tok *t, coli_err *e);

/* tok/pretok.c: normalization and pre-tokenization + BPE of one text section. */
int tok_normalize(coli_tok *t, const char *s, size_t n, const char **out, size_t *out_n,
		  coli_err *e);
int tok_pretok_encode(coli_tok *t, const char *s, size_t n, tok_ids *out, coli_err *e);
/* Splits s[0..n) per one Split step, appending the kept spans (offset by base) to out. */
int tok_split_apply(coli_tok *t, tok_split *sp, const char *s, size_t n, size_t base,
		    tok_spans *out, coli_err *e);

/* tok/bpe.c: BPE of one pre-token (raw bytes, byte-level mapped internally). */
int tok_bpe_word(coli_tok *t, const uint8_t *s, size_t n, tok_ids *out, coli_err *e);
void tok_bpe_release(coli_tok *t);

/* tok/decode.c: builds the per-id decode table after load. */
int tok_decode_build(coli_tok *t, coli_err *e);

#endif
