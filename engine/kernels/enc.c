/* enc.c: the encoding table's decode functions: the float32 value the encoding defines of
 * columns [c0, c1) of one row, c0 .. c1 inside one scale group of scale s (enc.h). */
#include "kernels/enc.h"

void kern_decode_f32(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w)
{
	(void)s;
	memcpy(w, codes + 4 * c0, (size_t)(4 * (c1 - c0)));
}

/* 16-bit codes widened by cvt. */
static void decode16(const uint8_t *codes, int64_t c0, int64_t c1, float (*cvt)(uint16_t), float *w)
{
	uint16_t h;
	for (int64_t c = c0; c < c1; c++) {
		memcpy(&h, codes + 2 * c, 2);
		w[c - c0] = cvt(h);
	}
}

void kern_decode_bf16(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w)
{
	(void)s;
	decode16(codes, c0, c1, coli_bf16_to_f32, w);
}

void kern_decode_f16(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w)
{
	(void)s;
	decode16(codes, c0, c1, coli_f16_to_f32, w);
}

void kern_decode_fp8(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w)
{
	for (int64_t c = c0; c < c1; c++)
		w[c - c0] = coli_fp8e4m3_to_f32(codes[c]) * s;
}

void kern_decode_q8(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w)
{
	for (int64_t c = c0; c < c1; c++)
		w[c - c0] = (float)(int8_t)codes[c] * s;
}

void kern_decode_q4(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w)
{
	for (int64_t c = c0; c < c1; c++) {
		uint8_t byte = codes[32 * (c / 64) + (c & 31)];
		w[c - c0] = kern_encs[COLI_ENC_Q4].lut[(c & 32) ? byte >> 4 : byte & 15] * s;
	}
}

void kern_decode_fp4(const uint8_t *codes, int64_t c0, int64_t c1, float s, float *w)
{
	for (int64_t c = c0; c < c1; c++) {
		uint8_t byte = codes[c / 2];
		w[c - c0] = kern_encs[COLI_ENC_FP4].lut[(c & 1) ? byte >> 4 : byte & 15] * s;
	}
}
