/* layout.h: where every byte of a container goes: tensor encodings, blob geometry, and the
 * placement of dense tensors, MTP tensors and expert records in the three section files.
 *
 * A blob is one stored matrix or vector: codes (row-major, row_bytes per row) followed, at the
 * next 64-byte boundary, by its scales when the encoding has any. Encodings:
 *   f32, bf16, f16   cols x 4 / 2 / 2 bytes per row, no scales
 *   fp8              e4m3 codes, cols bytes per row; scales: f32 scale_inv[ceil(rows/b0)][ceil(cols/b1)]
 *   q8               gs64 int8, ceil(cols/64) x 64 bytes per row; scales: fp16 [rows][ceil(cols/64)]
 *   q4               gs64 int4 (quant.h packing), ceil(cols/64) x 32 bytes per row; scales as q8
 *   fp4              e2m1 codes two a byte (low nibble the even column), ceil(cols/32) x 16 bytes
 *                    per row; scales: UE8M0 bytes [rows][ceil(cols/32)], each 2^(b - 127)
 * A row whose length is not a multiple of 64 is quantized as if zero-padded to one.
 * Sections: dense.bin (globals and main layers), mtp.bin (MTP layers), experts.bin (records).
 * Every section file starts with a 4096-byte header; tensors are 64-aligned; expert records are
 * 4096-aligned, 4096-multiple sized, layer-major, experts ascending; files end 4096-aligned.
 */
#ifndef COLI_LAYOUT_H
#define COLI_LAYOUT_H

#include <stdint.h>

#include "error.h"
#include "model.h"
#include "safetensors.h"

#define COLI_SECTION_HEADER 4096u
#define COLI_RECORD_ALIGN 4096u
#define COLI_TENSOR_ALIGN 64u

typedef enum coli_enc {
	COLI_ENC_F32,
	COLI_ENC_BF16,
	COLI_ENC_F16,
	COLI_ENC_FP8,
	COLI_ENC_Q8,
	COLI_ENC_Q4,
	COLI_ENC_FP4,
	COLI_ENC_COUNT
} coli_enc;

typedef enum coli_section { COLI_SEC_DENSE, COLI_SEC_MTP, COLI_SEC_EXPERTS, COLI_SEC_COUNT } coli_section;

const char *coli_enc_name(coli_enc enc);
int coli_enc_parse(const char *s); /* -1 when unknown */
const char *coli_section_file(coli_section s); /* "dense.bin", "mtp.bin", "experts.bin" */

typedef struct coli_blob {
	coli_enc enc;
	int64_t rows, cols;      /* a vector is rows = 1 */
	int64_t block[2];        /* fp8 scale block, else 0 */
	uint64_t row_bytes;      /* bytes of codes per row */
	uint64_t codes_bytes;    /* rows x row_bytes */
	uint64_t scales_off;     /* from the blob start, 64-aligned; 0 when no scales */
	uint64_t scales_bytes;
	uint64_t nbytes;         /* whole blob */
} coli_blob;

/* Fills the geometry of a blob; errors on non-positive sizes or overflow. */
int coli_blob_init(coli_blob *b, coli_enc enc, int64_t rows, int64_t cols, const int64_t block[2],
		   coli_err *e);

/* One dense or MTP tensor. */
typedef struct coli_ltensor {
	char *name;
	coli_section section;
	int layer;               /* -1 for globals */
	coli_tclass cls;
	int ndim;                /* as in the source: 1 or 2 */
	coli_blob blob;
	uint64_t offset;         /* absolute in the section file */
	uint32_t crc;            /* crc32 of the blob's nbytes bytes */
} coli_ltensor;

/* The expert records of one MoE layer (main or MTP). */
typedef struct coli_lexperts {
	int layer;
	int mtp;
	int n_experts;
	coli_blob part[3];       /* gate [ffn, hidden], up [ffn, hidden], down [hidden, ffn] */
	uint64_t part_off[3];    /* offsets inside a record, 64-aligned */
	uint64_t record_size;    /* multiple of 4096 */
	uint64_t offset;         /* absolute offset of expert 0's record in experts.bin */
	uint32_t *crc;           /* [n_experts] crc32 of each whole record (padding included) */
	int part_dtype[3];       /* source coli_dtype of the parts (planning only; not stored) */
} coli_lexperts;

typedef struct coli_layout {
	int n_tensors;
	coli_ltensor *tensors;
	int n_elayers;
	coli_lexperts *elayers;
	uint64_t section_size[COLI_SEC_COUNT]; /* file sizes, header included, 4096-aligned */
} coli_layout;

/* Plans a container for model m from checkpoint src with the given bits (4, 8 or 16 for each
 * class; 16 keeps the source encoding). Small tensors are f32. FP4 experts (I8 sources) are never
 * requantized: fp4 below 16 bits, their exact bf16 values at 16. CRCs are left 0. */
int coli_layout_plan(coli_layout *L, const coli_model *m, const coli_ckpt *src, int expert_bits,
		     int dense_bits, int mtp_bits, coli_err *e);

/* Places tensors and records (offsets, record sizes, section sizes) once blobs are known; used
 * by the planner and by readers to check a manifest's offsets. */
int coli_layout_place(coli_layout *L, coli_err *e);

void coli_layout_release(coli_layout *L);

/* Offset of expert x's record of elayer l in experts.bin. */
static inline uint64_t coli_record_offset(const coli_lexperts *l, int x)
{
	return l->offset + (uint64_t)x * l->record_size;
}

#endif
