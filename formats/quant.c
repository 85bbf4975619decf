/* quant.c: number formats (bf16, f16, fp8-e4m3) and gs64 int4/int8 quantization, bit-exact. */
#include "quant.h"

#include "hot.h"

#include <math.h>
#include <string.h>

#include "safetensors.h"

/* E4M3 magnitude of the low 7 bits: E == 0 -> M * 2^-9, else (8 + M) * 2^(E-10) = (1+M/8) 2^(E-7);
 * 0x7F is NaN. A constant expression, so the table below is built at compile time. */
#define FP8_E(c) (((c) >> 3) & 15)
#define FP8_MAG(c)                                                                            \
	(((c) & 0x7F) == 0x7F ? NAN                                                           \
	 : FP8_E(c) == 0      ? (float)((c) & 7) * 0x1p-9f                                   \
			      : (float)(8 + ((c) & 7)) * (float)(1u << FP8_E(c)) * 0x1p-10f)
#define FP8(c) (((c) & 0x80) ? -FP8_MAG((c) & 0x7F) : FP8_MAG(c))
#define FP8_4(c) FP8(c), FP8((c) + 1), FP8((c) + 2), FP8((c) + 3)
#define FP8_16(c) FP8_4(c), FP8_4((c) + 4), FP8_4((c) + 8), FP8_4((c) + 12)
#define FP8_64(c) FP8_16(c), FP8_16((c) + 16), FP8_16((c) + 32), FP8_16((c) + 48)

static const float fp8_table[256] = {FP8_64(0), FP8_64(64), FP8_64(128), FP8_64(192)};

static inline float f32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

float coli_bf16_to_f32(uint16_t h)
{
	return f32_from_bits((uint32_t)h << 16);
}

/* Normal values rebias the exponent (15 -> 127); subnormals M * 2^-24 are exact in float32. */
static inline float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
	if (e == 0x1F)
		return f32_from_bits(sign | 0x7F800000u | (m << 13));
	if (e == 0)
		return f32_from_bits(sign | f32_bits((float)m * 0x1p-24f));
	return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
}

float coli_f16_to_f32(uint16_t h)
{
	return f16_to_f32(h);
}

/* Rounds the integer a >> shift to nearest, ties to even. */
static inline uint32_t shift_rne(uint32_t a, unsigned shift)
{
	uint32_t r = a >> shift, rem = a & ((1u << shift) - 1), half = 1u << (shift - 1);
	return r + (rem > half || (rem == half && (r & 1)));
}

/* Three ranges of |f|: >= 65520 (the midpoint above 65504) is inf; below 2^-14 the result is
 * the subnormal round(|f| / 2^-24); otherwise rebias and round the mantissa, where a carry
 * into the exponent is the correct result. */
uint16_t coli_f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	x &= 0x7FFFFFFFu;
	if (x > 0x7F800000u) /* NaN: quiet, top payload bits kept */
		return (uint16_t)(sign | 0x7E00 | ((x >> 13) & 0x3FF));
	if (x >= 0x477FF000u)
		return (uint16_t)(sign | 0x7C00);
	if (x < 0x38800000u) {
		uint32_t e = x >> 23;
		if (e < 102) /* < 2^-25: rounds to zero */
			return sign;
		return (uint16_t)(sign | shift_rne((x & 0x7FFFFFu) | 0x800000u, 126 - e));
	}
	return (uint16_t)(sign | shift_rne(x - 0x38000000u, 13));
}

float coli_fp8e4m3_to_f32(uint8_t c)
{
	return fp8_table[c];
}

/* The hot row loops are multiversioned (hot.h); every variant computes the same bits, since the
 * loops use only exact operations (division, integer compares, conversions) in a fixed order. */
/* The fp16 scale of one group of 64: (fp16)(amax / qmax), float32 division. The max runs on the
 * bits of |w| (ordered like the values, vectorizable); a NaN weight gives a NaN scale. */
static inline __attribute__((always_inline)) uint16_t group_scale(const float *w, float qmax)
{
	uint32_t m = 0;
	for (int i = 0; i < COLI_GS; i++) {
		uint32_t u = f32_bits(w[i]) & 0x7FFFFFFFu;
		m = u > m ? u : m;
	}
	return coli_f32_to_f16(f32_from_bits(m) / qmax);
}

/* Codes of one group as int32 (a local array, so the loop vectorizes without alias checks).
 * |w / s| is first limited to 256 on its bits (exact below 256; NaN -> +-256) so the int
 * conversion is defined; then roundf (half away from zero) is the truncation plus the sign of
 * the exact remainder when |rem| >= 0.5, and the clamp to [qmin, qmax] happens on integers.
 * Float compares against the bounds would let the compiler fold the clamped paths into branches
 * that block vectorization. */
static inline __attribute__((always_inline)) void group_codes(const float *w, float s, int32_t qmin,
							     int32_t qmax, int32_t *q)
{
	const uint32_t lim = 0x43800000u; /* 256.0f */
	if (s == 0.0f) {
		memset(q, 0, COLI_GS * sizeof(*q));
		return;
	}
	for (int i = 0; i < COLI_GS; i++) {
		uint32_t u = f32_bits(w[i] / s), a = u & 0x7FFFFFFFu;
		float x = f32_from_bits((a < lim ? a : lim) | (u & 0x80000000u));
		int32_t t = (int32_t)x;
		float d = x - (float)t;
		t += (d >= 0.5f) - (d <= -0.5f);
		t = t < qmax ? t : qmax;
		q[i] = t > qmin ? t : qmin;
	}
}

COLI_HOT void coli_q4_quantize_row(const float *w, size_t cols, uint8_t *codes, uint16_t *scales)
{
	int32_t q[COLI_GS];
	for (size_t g = 0; g < cols / COLI_GS; g++) {
		const float *wg = w + g * COLI_GS;
		scales[g] = group_scale(wg, 7.0f);
		group_codes(wg, f16_to_f32(scales[g]), -8, 7, q);
		uint8_t *cg = codes + g * (COLI_GS / 2);
		for (int b = 0; b < COLI_GS / 2; b++)
			cg[b] = (uint8_t)((q[b] + 8) | ((q[b + 32] + 8) << 4));
	}
}

COLI_HOT void coli_q8_quantize_row(const float *w, size_t cols, int8_t *codes, uint16_t *scales)
{
	int32_t q[COLI_GS];
	for (size_t g = 0; g < cols / COLI_GS; g++) {
		const float *wg = w + g * COLI_GS;
		scales[g] = group_scale(wg, 127.0f);
		group_codes(wg, f16_to_f32(scales[g]), -128, 127, q);
		for (int i = 0; i < COLI_GS; i++)
			codes[g * COLI_GS + i] = (int8_t)q[i];
	}
}

void coli_q4_dequantize_row(const uint8_t *codes, const uint16_t *scales, size_t cols, float *w)
{
	for (size_t g = 0; g < cols / COLI_GS; g++) {
		float s = f16_to_f32(scales[g]);
		const uint8_t *cg = codes + g * (COLI_GS / 2);
		float *wg = w + g * COLI_GS;
		for (int b = 0; b < COLI_GS / 2; b++) {
			wg[b] = (float)((cg[b] & 15) - 8) * s;
			wg[b + 32] = (float)((cg[b] >> 4) - 8) * s;
		}
	}
}

void coli_q8_dequantize_row(const int8_t *codes, const uint16_t *scales, size_t cols, float *w)
{
	for (size_t g = 0; g < cols / COLI_GS; g++) {
		float s = f16_to_f32(scales[g]);
		for (int i = 0; i < COLI_GS; i++)
			w[g * COLI_GS + i] = (float)codes[g * COLI_GS + i] * s;
	}
}

int coli_q4_code(const uint8_t *codes, size_t i)
{
	size_t j = i % COLI_GS;
	uint8_t byte = codes[(i / COLI_GS) * (COLI_GS / 2) + (j & 31)];
	return (j < 32 ? byte & 15 : byte >> 4) - 8;
}

/* Whole chunks of 64 go through local arrays: mapped tensors need not be 2-byte aligned, and a
 * fixed trip count between local arrays vectorizes at -O2 (no alias checks, no epilogue). */
COLI_HOT static void bf16_row(const uint8_t *p, size_t n, float *out)
{
	uint16_t h[64];
	uint32_t u[64];
	size_t c0 = 0;
	for (; c0 + 64 <= n; c0 += 64) {
		memcpy(h, p + 2 * c0, sizeof(h));
		for (int i = 0; i < 64; i++)
			u[i] = (uint32_t)h[i] << 16;
		memcpy(out + c0, u, sizeof(u));
	}
	for (; c0 < n; c0++) {
		memcpy(h, p + 2 * c0, 2);
		out[c0] = coli_bf16_to_f32(h[0]);
	}
}

/* F16 sources are rare (checkpoints are BF16 or FP8): a plain scalar loop. */
COLI_HOT static void f16_row(const uint8_t *p, size_t n, float *out)
{
	for (size_t c = 0; c < n; c++) {
		uint16_t h;
		memcpy(&h, p + 2 * c, 2);
		out[c] = f16_to_f32(h);
	}
}

/* One float32 multiply per element by the block's scale_inv; without scales, the plain decode. */
COLI_HOT static void fp8_row(const uint8_t *p, size_t cols, const float *sinv_row, size_t bs1, float *out)
{
	if (!sinv_row) {
		for (size_t c = 0; c < cols; c++)
			out[c] = fp8_table[p[c]];
		return;
	}
	for (size_t c0 = 0, b = 0; c0 < cols; c0 += bs1, b++) {
		size_t end = c0 + bs1 < cols ? c0 + bs1 : cols;
		float s = sinv_row[b];
		for (size_t c = c0; c < end; c++)
			out[c] = fp8_table[p[c]] * s;
	}
}

void coli_fp4_row_f32(const uint8_t *codes, size_t cols, const float *scales, float *out)
{
	static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
	for (size_t c = 0; c < cols; c++) {
		uint8_t b = codes[c / 2];
		out[c] = e2m1[c % 2 ? b >> 4 : b & 15] * (scales ? scales[c / 32] : 1.0f);
	}
}

float coli_e8m0_to_f32(uint8_t b)
{
	return b == 255 ? NAN : b == 0 ? 0x1p-127f : f32_from_bits((uint32_t)b << 23);
}

int coli_f32_to_e8m0(float s)
{
	uint32_t u = f32_bits(s);
	if (isnan(s))
		return 255;
	if (u == 0x00400000u) /* 2^-127 */
		return 0;
	return (u & 0x807FFFFFu) == 0 && (u >> 23) >= 1 && (u >> 23) <= 254 ? (int)(u >> 23) : -1;
}

static void nan_row(size_t cols, float *out)
{
	for (size_t c = 0; c < cols; c++)
		out[c] = NAN;
}

/* Unknown dtypes and zero block sizes give NaN rows, so a caller's missing check cannot pass
 * as plausible weights. */
void coli_source_row_f32(int dtype, const void *data, size_t rows, size_t cols, size_t r,
			 const float *scale_inv, size_t bs0, size_t bs1, float *out)
{
	const uint8_t *base = data;
	(void)rows;
	switch (dtype) {
	case COLI_DT_BF16:
		bf16_row(base + r * cols * 2, cols, out);
		break;
	case COLI_DT_F16:
		f16_row(base + r * cols * 2, cols, out);
		break;
	case COLI_DT_F32:
		memcpy(out, base + r * cols * 4, cols * 4);
		break;
	case COLI_DT_F8_E4M3: {
		if (scale_inv && (bs0 == 0 || bs1 == 0)) {
			nan_row(cols, out);
			break;
		}
		size_t nb1 = scale_inv ? (cols + bs1 - 1) / bs1 : 0;
		const float *srow = scale_inv ? scale_inv + (r / bs0) * nb1 : NULL;
		fp8_row(base + r * cols, cols, srow, bs1, out);
		break;
	}
	case COLI_DT_I64: /* token -> expert tables: small integers, exact in float32 */
		for (size_t c = 0; c < cols; c++) {
			int64_t v;
			memcpy(&v, base + (r * cols + c) * 8, 8);
			out[c] = (float)v;
		}
		break;
	case COLI_DT_I32:
		for (size_t c = 0; c < cols; c++) {
			int32_t v;
			memcpy(&v, base + (r * cols + c) * 4, 4);
			out[c] = (float)v;
		}
		break;
	default:
		nan_row(cols, out);
	}
}
