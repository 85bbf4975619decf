/* gguf.h: coli-synth's GGUF writer (llama.cpp's single-file model format), internal interfaces.
 *
 * File layout (GGUF version 3, little-endian; strings are a u64 byte count and the bytes):
 *   "GGUF" | u32 version 3 | u64 tensor count | u64 key-value count
 *   key-values: string key | u32 value type | value (arrays: u32 element type, u64 count, elements)
 *   tensor infos: string name | u32 n_dims | u64 ne[n_dims] (ne[0] the fastest, contiguous
 *                 dimension) | u32 ggml type | u64 offset inside the data section
 *   zero padding to general.alignment (32), then the data section: each tensor at its offset, a
 *   multiple of the alignment, zero padding between tensors.
 * Types written: F32 (0), Q4_0 (2: per 32 values an f16 scale d and 16 bytes of 4-bit codes q,
 * value (q - 8) d, byte j holding values j (low nibble) and j + 16 (high)), Q4_1 (3: f16 d, f16
 * min m, 16 bytes of codes, value q d + m).
 *
 * gguf.c holds the format (key-values, tensor infos, quantization, the parallel data writer, the
 * value transforms a conversion asks for); gguf_qwen.c the qwen3moe mapping (tensor names and
 * shapes, hyperparameters) and the tokenizer; gguf_qwen35.c the qwen35moe mapping.
 */
#ifndef COLI_SYNTH_GGUF_H
#define COLI_SYNTH_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "synth.h"

#define GG_ALIGN 32
enum { GG_F32 = 0, GG_Q4_0 = 2, GG_Q4_1 = 3 };               /* ggml_type */
enum { GV_U32 = 4, GV_I32 = 5, GV_F32 = 6, GV_BOOL = 7, GV_STR = 8, GV_ARR = 9 }; /* gguf_type */

/* A growable byte buffer; oom set on the first failed growth (later puts do nothing). */
typedef struct gg_buf {
	uint8_t *p;
	size_t n, cap;
	int oom;
	uint64_t n_kv; /* key-values put so far */
} gg_buf;

void gg_put(gg_buf *b, const void *data, size_t n);
void gg_u32(gg_buf *b, uint32_t v);
void gg_u64(gg_buf *b, uint64_t v);
void gg_str(gg_buf *b, const char *s);
void gg_kv_u32(gg_buf *b, const char *key, uint32_t v);
void gg_kv_f32(gg_buf *b, const char *key, float v);
void gg_kv_bool(gg_buf *b, const char *key, int v);
void gg_kv_str(gg_buf *b, const char *key, const char *v);
/* Key, array type, element type and count; the caller puts the elements. */
void gg_kv_arr(gg_buf *b, const char *key, uint32_t elem_type, uint64_t count);

/* What a conversion does to the values on the way (llama.cpp's convert_hf_to_gguf.py): nothing,
 * x + 1 (a (1 + w) RMSNorm's weight, stored as the factor itself), or -exp(x) (A_log as ssm_a). */
enum { GG_X_NONE, GG_X_PLUS1, GG_X_NEG_EXP };

/* A reorder of value heads along one axis of a tensor, from grouped by key head (HF: value head
 * g r + j belongs to key head g, r = value heads / key heads) to tiled (head j nk + g, so that
 * ggml's broadcast of the nk key heads meets them): the span [start, start + nk r dim) of rows
 * (axis GG_AXIS_ROWS) or of columns (GG_AXIS_COLS) in blocks of dim. */
enum { GG_AXIS_NONE, GG_AXIS_ROWS, GG_AXIS_COLS };
typedef struct gg_vperm {
	int axis;
	int64_t start, dim;
	int nk, r;
} gg_vperm;

/* One GGUF tensor, made of parts (1, or one per expert stacked along the slowest dimension);
 * part i is the HF tensor "<hf><i><hf_tail>" when parts > 1, else "<hf>". */
typedef struct gg_tensor {
	char name[64];
	int type;
	int n_dims;
	int64_t ne[3];
	int parts;
	char hf[160], hf_tail[48];
	int xform;     /* GG_X_* */
	gg_vperm perm; /* axis GG_AXIS_NONE: none */
	uint64_t offset, nbytes;
} gg_tensor;

typedef struct gg_model {
	gg_tensor *t;
	int n, cap;
} gg_model;

/* Appends a tensor (type F32 when its rows are not a multiple of 32 values); -1 out of memory. */
int gg_add(gg_model *g, const char *name, int type, int n_dims, const int64_t *ne,
	   const char *hf, int parts, const char *hf_tail, coli_err *e);
/* The tensor gg_add appended last (to set its xform and perm). */
gg_tensor *gg_last(gg_model *g);
/* The source row or column of row or column i of a tensor with reorder p. */
int64_t gg_vperm_src(const gg_vperm *p, int64_t i);
/* HF name of part i of t. */
void gg_part_name(const gg_tensor *t, int i, char *buf, size_t cap);
uint64_t gg_row_bytes(int type, int64_t cols);
/* One row of cols values (a multiple of 32 for the 4-bit types) encoded as type. */
void gg_encode_row(int type, const float *x, int64_t cols, uint8_t *out);
uint16_t gg_f16(float f);

/* "<hf>" [out, in] as the GGUF tensor name, ne = [in, out] (1-D when out is 1). */
int gg_add2(gg_model *g, const char *name, int type, int64_t in, int64_t out, const char *hf,
	    coli_err *e);
/* Layer l's routed experts stacked into blk.l.ffn_{gate,up,down}_exps. */
int gg_experts(gg_model *g, const coli_model *m, int l, int type, coli_err *e);

/* The qwen3moe tensors of the model (gguf_qwen.c): dense matrices dense_type, routed experts
 * expert_type. */
int gg_qwen_tensors(gg_model *g, const coli_model *m, int dense_type, int expert_type, coli_err *e);
/* Its hyperparameters and tokenizer as key-values. */
int gg_qwen_metadata(gg_buf *b, const synth_opts *o, const coli_model *m, const synth_tok *tok,
		     const synth_shape *s, coli_err *e);
/* general.* (architecture arch; -1 without a tokenizer) and the tokenizer's key-values,
 * pre-tokenizer pre (gguf_qwen.c). */
int gg_general(gg_buf *b, const synth_opts *o, const synth_tok *tok, const char *arch,
	       const char *family, coli_err *e);
int gg_tokenizer(gg_buf *b, const synth_tok *tok, int64_t n_vocab, const synth_shape *s,
		 const char *pre, coli_err *e);

/* The qwen35moe tensors (gguf_qwen35.c): llama.cpp's Qwen3_5MoeTextModel conversion. */
int gg_qwen35_tensors(gg_model *g, const coli_model *m, int dense_type, int expert_type,
		      coli_err *e);
int gg_qwen35_metadata(gg_buf *b, const synth_opts *o, const coli_model *m, const synth_tok *tok,
		       const synth_shape *s, coli_err *e);

#endif
