/* quant.h: number formats: bf16/f16/fp8-e4m3 decoding, f16 rounding, gs64 int4/int8 quantization.
 *
 * gs64 (formats/container.md, "Encodings"): per row, groups of 64 consecutive columns;
 *   amax = max|w|; scale = (fp16, RNE)(amax / QMAX); s = (float)scale;
 *   q = s == 0 ? 0 : clamp(roundf(w / s), QMIN, QMAX); w' = (float)q * s
 *   int4: QMIN -8, QMAX 7; int8: QMIN -128, QMAX 127.
 *
 * Storage of one quantized row of C columns (C % 64 == 0):
 *   int8: C bytes, two's complement codes in column order.
 *   int4: C/2 bytes; for group g and byte b in 0..31, byte 32g+b holds column 64g+b in its low
 *         nibble and column 64g+32+b in its high nibble, each as the unsigned value q+8 (0..15).
 *         (Low/high halves unpack to two contiguous 32-column vectors with one AND and one shift.)
 *   scales: C/64 IEEE binary16 values, little-endian.
 */
#ifndef COLI_QUANT_H
#define COLI_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define COLI_GS 64

float coli_bf16_to_f32(uint16_t h);
float coli_f16_to_f32(uint16_t h);
uint16_t coli_f32_to_f16(float f); /* round to nearest even; overflow -> inf; NaN kept NaN */
float coli_fp8e4m3_to_f32(uint8_t c); /* 0x7F/0xFF -> NaN; no infinities */

/* Quantizes one row of `cols` floats (cols % 64 == 0). codes: cols/2 (int4) or cols (int8)
 * bytes; scales: cols/64 fp16 values. */
void coli_q4_quantize_row(const float *w, size_t cols, uint8_t *codes, uint16_t *scales);
void coli_q8_quantize_row(const float *w, size_t cols, int8_t *codes, uint16_t *scales);

/* Inverse: w'[i] = (float)q * (float)scale. */
void coli_q4_dequantize_row(const uint8_t *codes, const uint16_t *scales, size_t cols, float *w);
void coli_q8_dequantize_row(const int8_t *codes, const uint16_t *scales, size_t cols, float *w);

/* Signed int4 code of column i of a packed row (for tests and scalar kernels). */
int coli_q4_code(const uint8_t *codes, size_t i);

/* An FP4 row (deepseek_v4's experts) as float32: cols e2m1 codes two a byte, the low nibble
 * the even column (sign bit 3, exponent bits 1-2 with bias 1, mantissa bit 0: 0, 0.5, 1, 1.5,
 * 2, 3, 4, 6 and their negatives), each times its 32 columns' scale scales[c / 32] (NULL: 1). */
void coli_fp4_row_f32(const uint8_t *codes, size_t cols, const float *scales, float *out);

/* UE8M0 (deepseek_v4's scales): byte b is 2^(b - 127) (b 0: 2^-127, a subnormal float), 255 NaN. */
float coli_e8m0_to_f32(uint8_t b);
/* The UE8M0 byte of s: s a power of two in [2^-127, 2^127], or NaN (255); -1 for anything else. */
int coli_f32_to_e8m0(float s);

/* Row r of a source tensor [rows, cols] as float32, exactly as the checkpoint defines it.
 *   BF16/F16/F32: plain conversion of the stored row.
 *   F8_E4M3 with block scales scale_inv [ceil(rows/bs0), ceil(cols/bs1)] (f32):
 *     w[c] = (float)(fp8(code[r][c]) * scale_inv[r / bs0][c / bs1])   one f32 multiply.
 *   I64/I32 (deepseek_v4's token -> expert tables): the integer as a float (exact below 2^24).
 * dtype is a coli_dtype value; scale_inv is NULL for non-fp8 sources. */
void coli_source_row_f32(int dtype, const void *data, size_t rows, size_t cols, size_t r,
			 const float *scale_inv, size_t bs0, size_t bs1, float *out);

#endif
