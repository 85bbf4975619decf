/* enc.h: the encoding table: everything the kernels know of a stored encoding, one row each;
 * internal.
 *
 * A row says how a row of codes is laid out and what each code is worth (formats/layout.h and
 * formats/container.md define the encodings; this is the kernels' reading of them):
 *   block, block_bytes  columns per block of codes and their bytes: an element format is a block of
 *                       1; a quantized one a group of 64 whose rows are padded to whole blocks
 *   code                how a code decodes (the SIMD bodies switch on it: body.h)
 *   scale               the scale type: none, fp16 per row and block, f32 scale_inv per tile,
 *                       UE8M0 (a power of two) per row and block
 *   lut, lut_bias       4-bit codes: the value of each code; lut[i] = i + lut_bias when affine
 *   decode              the reference: columns [c0, c1) of a row, one scale group, times s
 *   lut_signmag         4-bit codes: lut[8 + i] is -lut[i] (sign and magnitude: bit 3 the sign)
 * Adding an encoding is a row here, its name in KERN_ENCS and its decode function (enc.c); the
 * SIMD variants then run it through that decode (body.h, kdec's default) until a vector decode
 * of its code type is written (engine/README.md, "Adding an encoding").
 */
#ifndef COLI_KERNELS_ENC_H
#define COLI_KERNELS_ENC_H

#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"

/* Every encoding the kernels run, as X(ENUM_SUFFIX): the variants instantiate one body per entry. */
#define KERN_ENCS(X) X(F32) X(BF16) X(F16) X(FP8) X(Q8) X(Q4) X(FP4)
/* Those whose rows the SIMD variants may also read in the nibble order (body.h, nib_rows): 4-bit
 * codes in quant.h's packing with fp16 scales per 64 columns, FP4 pairs with UE8M0 per 32. */
#define KERN_NIB_ENCS(X) X(Q4) X(FP4)

typedef enum kern_code {
	KC_OTHER,  /* only the row's decode (the SIMD bodies call it per slice) */
	KC_F32,    /* IEEE binary32 */
	KC_BF16,   /* the upper half of a binary32 */
	KC_F16,    /* IEEE binary16 */
	KC_E4M3,   /* fp8 e4m3fn: no infinities, 0x7F/0xFF NaN */
	KC_I8,     /* two's complement int8 */
	KC_U4_LUT, /* 4-bit index into lut; quant.h's packing: byte 32g + b holds column 64g + b in its
		    * low nibble and 64g + 32 + b in its high one */
	KC_U4_PAIRS, /* 4-bit index into lut; byte b holds column 2b in its low nibble, 2b + 1 in its
		      * high one (FP4 e2m1 as DeepSeek ships it) */
} kern_code;

typedef enum kern_scale_type {
	KS_NONE,
	KS_F16_BLOCK,  /* binary16 per row and block: [rows][ceil(cols / block)] */
	KS_F32_TILE,   /* binary32 scale_inv per tile of W->block[0] rows x W->block[1] columns */
	KS_E8_BLOCK,   /* UE8M0 byte b per row and block, 2^(b - 127): [rows][ceil(cols / block)] */
} kern_scale_type;

typedef void (*kern_decode_fn)(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w);

typedef struct kern_enc {
	int block, block_bytes;
	kern_code code;
	kern_scale_type scale;
	int lut_affine, lut_bias;
	float lut[16];
	kern_decode_fn decode;
	int lut_signmag;
} kern_enc;

void kern_decode_f32(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w);
void kern_decode_bf16(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w);
void kern_decode_f16(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w);
void kern_decode_fp8(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w);
void kern_decode_q8(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w);
void kern_decode_q4(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w);
void kern_decode_fp4(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w);

/* Static so that a constant encoding folds every field where a body is instantiated. */
static const kern_enc kern_encs[COLI_ENC_COUNT] = {
	[COLI_ENC_F32] = {1, 4, KC_F32, KS_NONE, 0, 0, {0}, kern_decode_f32},
	[COLI_ENC_BF16] = {1, 2, KC_BF16, KS_NONE, 0, 0, {0}, kern_decode_bf16},
	[COLI_ENC_F16] = {1, 2, KC_F16, KS_NONE, 0, 0, {0}, kern_decode_f16},
	[COLI_ENC_FP8] = {1, 1, KC_E4M3, KS_F32_TILE, 0, 0, {0}, kern_decode_fp8},
	[COLI_ENC_Q8] = {COLI_GS, COLI_GS, KC_I8, KS_F16_BLOCK, 0, 0, {0}, kern_decode_q8},
	[COLI_ENC_Q4] = {COLI_GS, COLI_GS / 2, KC_U4_LUT, KS_F16_BLOCK, 1, -8,
			 {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}, kern_decode_q4},
	[COLI_ENC_FP4] = {32, 16, KC_U4_PAIRS, KS_E8_BLOCK, 0, 0,
			  {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6}, kern_decode_fp4, 1},
};

static inline const kern_enc *kern_enc_of(coli_enc enc)
{
	return &kern_encs[enc];
}

/* The geometry below takes the encoding apart from the matrix, so that where a body is built for
 * one encoding (a constant) the divisions by its block fold into shifts. */

/* Blocks of a row of cols columns (q4/q8: its scale groups). */
static inline int64_t kern_enc_blocks(coli_enc enc, int64_t cols)
{
	int64_t b = kern_encs[enc].block;
	return (cols + b - 1) / b;
}

static inline int64_t kern_blocks(const coli_mat *W)
{
	return kern_enc_blocks(W->enc, W->cols);
}

/* Bytes of codes of n columns (n a whole number of blocks, or any n for element formats). */
static inline int64_t kern_code_bytes(coli_enc enc, int64_t n)
{
	return n / kern_encs[enc].block * kern_encs[enc].block_bytes;
}

/* Scale groups of W (of encoding enc): columns sharing one scale (the block, fp8's tile width,
 * else the row). */
static inline int64_t kern_enc_scale_width(coli_enc enc, const coli_mat *W)
{
	switch (kern_encs[enc].scale) {
	case KS_F16_BLOCK:
	case KS_E8_BLOCK: return kern_encs[enc].block;
	case KS_F32_TILE: return W->block[1];
	default: return W->cols;
	}
}

static inline int64_t kern_scale_width(const coli_mat *W)
{
	return kern_enc_scale_width(W->enc, W);
}

/* Row r's scales, indexed by scale group; NULL when unscaled. */
static inline const uint8_t *kern_enc_row_scales(coli_enc enc, const coli_mat *W, int64_t r)
{
	switch (kern_encs[enc].scale) {
	case KS_F16_BLOCK: return W->scales + 2 * r * kern_enc_blocks(enc, W->cols);
	case KS_E8_BLOCK: return W->scales + r * kern_enc_blocks(enc, W->cols);
	case KS_F32_TILE: return W->scales + 4 * (r / W->block[0]) * ((W->cols + W->block[1] - 1) / W->block[1]);
	default: return NULL;
	}
}

static inline const uint8_t *kern_row_scales(const coli_mat *W, int64_t r)
{
	return kern_enc_row_scales(W->enc, W, r);
}

/* Bytes of one scale (0: unscaled). */
static inline int kern_scale_bytes(coli_enc enc)
{
	static const int bytes[] = {[KS_NONE] = 0, [KS_F16_BLOCK] = 2, [KS_F32_TILE] = 4, [KS_E8_BLOCK] = 1};
	return bytes[kern_encs[enc].scale];
}

/* A UE8M0 byte's value, 2^(b - 127): the byte as a float's exponent field; 0 is 2^-127 (a
 * subnormal), 255 NaN. */
static inline float kern_e8(uint8_t b)
{
	uint32_t u = b == 255 ? 0x7FC00000u : b == 0 ? 0x00400000u : (uint32_t)b << 23;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* The scale of group b of a row whose scales are sr: 1 when unscaled. Scales need not be
 * aligned in a mapped file, hence memcpy. */
static inline float kern_group_scale(coli_enc enc, const uint8_t *sr, int64_t b)
{
	uint16_t h;
	float s;
	switch (kern_encs[enc].scale) {
	case KS_F16_BLOCK: memcpy(&h, sr + 2 * b, 2); return coli_f16_to_f32(h);
	case KS_F32_TILE: memcpy(&s, sr + 4 * b, 4); return s;
	case KS_E8_BLOCK: return kern_e8(sr[b]);
	default: return 1.0f;
	}
}

/* The scale of row r, scale group b. */
static inline float kern_scale(const coli_mat *W, int64_t r, int64_t b)
{
	return kern_group_scale(W->enc, kern_row_scales(W, r), b);
}

#endif
