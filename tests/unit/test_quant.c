/* test_quant.c: bit-exact tests of quant.c: number formats, gs64 quantization, golden q4 codes. */
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "safetensors.h"
#include "t.h"

#if defined(__FLT16_MAX__) && (defined(__x86_64__) || defined(__aarch64__))
#define HAVE_FLOAT16 1
#endif

static uint32_t fbits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static float ffrom(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Same value and, for non-NaN, same bits (tells -0 from +0). */
static int same(float a, float b)
{
	return isnan(a) ? isnan(b) : fbits(a) == fbits(b);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

/* Gaussian-ish value in about [-3, 3] (sum of uniforms), times `scale`. */
static float rnd_weight(float scale)
{
	float s = 0;
	for (int i = 0; i < 4; i++)
		s += (float)(rng() & 0xFFFFFF) / 16777216.0f - 0.5f;
	return s * 1.7f * scale;
}

/* ---- half-precision formats ---- */

/* Independent decode of a binary format with `mbits` mantissa bits and exponent bias `bias`. */
static float ref_decode(uint32_t sign, int e, uint32_t m, int mbits, int emax, int bias)
{
	double v;
	if (e == emax)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp((double)m, 1 - bias - mbits);
	else
		v = ldexp(1.0 + ldexp((double)m, -mbits), e - bias);
	return (float)(sign ? -v : v);
}

static void test_bf16_all(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float want = ref_decode(h >> 15, (h >> 7) & 0xFF, h & 0x7F, 7, 255, 127);
		float got = coli_bf16_to_f32((uint16_t)h);
		bad += !same(got, want) || (isnan(got) && fbits(got) != h << 16);
	}
	T_CHECK("quant: all 65536 bf16 patterns decode", bad == 0, "%d wrong", bad);
}

static void test_f16_all(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float want = ref_decode(h >> 15, (h >> 10) & 0x1F, h & 0x3FF, 10, 31, 15);
		bad += !same(coli_f16_to_f32((uint16_t)h), want);
	}
	T_CHECK("quant: all 65536 f16 patterns decode (ldexp formula)", bad == 0, "%d wrong", bad);
	T_CHECK("quant: f16 specials decode",
		coli_f16_to_f32(0x0001) == 0x1p-24f && coli_f16_to_f32(0x03FF) == 0x3FFp-24f &&
			coli_f16_to_f32(0x0400) == 0x1p-14f && coli_f16_to_f32(0x7BFF) == 65504.0f &&
			coli_f16_to_f32(0x7C00) == INFINITY && coli_f16_to_f32(0xFC00) == -INFINITY &&
			isnan(coli_f16_to_f32(0x7E00)) && isnan(coli_f16_to_f32(0xFC01)) &&
			fbits(coli_f16_to_f32(0x8000)) == 0x80000000u,
		"a special value decodes wrong");
}

/* The f16 value of h as float (after test_f16_all vouched for the decoder). */
static float h2f(uint32_t h)
{
	return coli_f16_to_f32((uint16_t)h);
}

static void test_f32_to_f16_exact(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF))
			continue; /* NaN, below */
		bad += coli_f32_to_f16(h2f(h)) != h;
	}
	T_CHECK("quant: f32->f16 keeps every non-NaN f16 value", bad == 0, "%d wrong", bad);
}

/* Midpoint between f16 h and h+1 (h+1 may be inf: then the midpoint is 65520). */
static float f16_midpoint(uint32_t h)
{
	double a = h2f(h);
	double b = h == 0x7BFF ? 65536.0 : (double)h2f(h + 1);
	return (float)((a + b) / 2); /* 12 significant bits: exact in float */
}

static void test_f32_to_f16_midpoints(void)
{
	int tie = 0, above = 0, below = 0;
	for (uint32_t h = 0; h < 0x7C00; h++) {
		float m = f16_midpoint(h);
		uint16_t even = (uint16_t)((h & 1) ? h + 1 : h);
		tie += coli_f32_to_f16(m) != even || coli_f32_to_f16(-m) != (even | 0x8000);
		above += coli_f32_to_f16(nextafterf(m, INFINITY)) != h + 1 ||
			 coli_f32_to_f16(-nextafterf(m, INFINITY)) != ((h + 1) | 0x8000);
		below += coli_f32_to_f16(nextafterf(m, 0.0f)) != h ||
			 coli_f32_to_f16(-nextafterf(m, 0.0f)) != (h | 0x8000);
	}
	T_CHECK("quant: f32->f16 midpoints round to even", tie == 0, "%d wrong", tie);
	T_CHECK("quant: f32->f16 just above midpoints round up", above == 0, "%d wrong", above);
	T_CHECK("quant: f32->f16 just below midpoints round down", below == 0, "%d wrong", below);
}

static void test_f32_to_f16_edges(void)
{
	T_CHECK("quant: f32->f16 overflow: 65520 -> inf, 65519.99 -> 65504",
		coli_f32_to_f16(65520.0f) == 0x7C00 && coli_f32_to_f16(65519.99f) == 0x7BFF &&
			coli_f32_to_f16(-65520.0f) == 0xFC00 && coli_f32_to_f16(1e10f) == 0x7C00 &&
			coli_f32_to_f16(INFINITY) == 0x7C00 && coli_f32_to_f16(-INFINITY) == 0xFC00 &&
			coli_f32_to_f16(FLT_MAX) == 0x7C00,
		"65520 -> %#x, 65519.99 -> %#x", coli_f32_to_f16(65520.0f),
		coli_f32_to_f16(65519.99f));
	T_CHECK("quant: f32->f16 underflow: 2^-25 -> 0, just above -> 2^-24, -1e-30 -> -0",
		coli_f32_to_f16(0x1p-25f) == 0 && coli_f32_to_f16(nextafterf(0x1p-25f, 1)) == 1 &&
			coli_f32_to_f16(0x1.8p-25f) == 1 && coli_f32_to_f16(0x1.8p-24f) == 2 &&
			coli_f32_to_f16(1e-30f) == 0 && coli_f32_to_f16(-1e-30f) == 0x8000 &&
			coli_f32_to_f16(0x1p-149f) == 0 && coli_f32_to_f16(-0.0f) == 0x8000,
		"2^-25 -> %#x", coli_f32_to_f16(0x1p-25f));
	T_CHECK("quant: f32->f16 subnormal rounds into the smallest normal",
		coli_f32_to_f16(0x3FF.8p-24f) == 0x0400 && coli_f32_to_f16(0x3FE.8p-24f) == 0x03FE,
		"got %#x", coli_f32_to_f16(0x3FF.8p-24f));
	uint16_t n1 = coli_f32_to_f16(NAN), n2 = coli_f32_to_f16(ffrom(0xFF800001u));
	T_CHECK("quant: f32->f16 NaN stays NaN",
		(n1 & 0x7C00) == 0x7C00 && (n1 & 0x3FF) && (n2 & 0x7C00) == 0x7C00 && (n2 & 0x3FF) &&
			(n2 & 0x8000),
		"NaN -> %#x, -sNaN -> %#x", n1, n2);
}

#ifdef HAVE_FLOAT16
/* Cross-checks against the compiler's _Float16 (libgcc soft-fp or F16C, both RNE). */
static void test_float16_crosscheck(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		_Float16 x;
		uint16_t u = (uint16_t)h;
		memcpy(&x, &u, 2);
		bad += !same(coli_f16_to_f32(u), (float)x);
	}
	T_CHECK("quant: f16 decode matches _Float16 on all patterns", bad == 0, "%d wrong", bad);
	bad = 0;
	long n = 0;
	for (uint64_t u = 0; u < (1ull << 32); u += 997, n++) {
		float f = ffrom((uint32_t)u);
		_Float16 x = (_Float16)f;
		uint16_t want, got = coli_f32_to_f16(f);
		memcpy(&want, &x, 2);
		bad += isnan(f) ? (got & 0x7FFF) <= 0x7C00 : got != want;
	}
	T_CHECK("quant: f32->f16 matches _Float16 on 4.3M sampled f32 patterns", bad == 0,
		"%d of %ld wrong", bad, n);
}
#endif

/* ---- fp8 e4m3 ---- */

static void test_fp8_all(void)
{
	int bad = 0;
	for (uint32_t c = 0; c < 256; c++) {
		uint32_t e = (c >> 3) & 15, m = c & 7;
		double v = e == 0 ? ldexp((double)m, -9) : ldexp(1.0 + m / 8.0, (int)e - 7);
		float want = (c & 0x7F) == 0x7F ? NAN : (float)((c >> 7) ? -v : v);
		bad += !same(coli_fp8e4m3_to_f32((uint8_t)c), want);
	}
	T_CHECK("quant: all 256 fp8 e4m3 codes decode", bad == 0, "%d wrong", bad);
	T_CHECK("quant: fp8 specials: 0x7E=448, 0x01=2^-9, 0x80=-0, 0x7F/0xFF NaN, 0x08=2^-6",
		coli_fp8e4m3_to_f32(0x7E) == 448.0f && coli_fp8e4m3_to_f32(0xFE) == -448.0f &&
			coli_fp8e4m3_to_f32(0x01) == 0x1p-9f && coli_fp8e4m3_to_f32(0x08) == 0x1p-6f &&
			fbits(coli_fp8e4m3_to_f32(0x80)) == 0x80000000u &&
			fbits(coli_fp8e4m3_to_f32(0x00)) == 0 && isnan(coli_fp8e4m3_to_f32(0x7F)) &&
			isnan(coli_fp8e4m3_to_f32(0xFF)),
		"a special code decodes wrong");
}

/* ---- gs64 ---- */

/* Reference quantizer written straight from the recipe of formats/container.md ("Encodings"), codes unpacked (one int per column). */
static void ref_quant(const float *w, size_t cols, int qmin, int qmax, int *q, uint16_t *scales)
{
	for (size_t g = 0; g < cols / 64; g++) {
		float amax = 0;
		for (size_t i = 0; i < 64; i++)
			amax = fmaxf(amax, fabsf(w[64 * g + i]));
		scales[g] = coli_f32_to_f16(amax / (float)qmax);
		float s = coli_f16_to_f32(scales[g]);
		for (size_t i = 0; i < 64; i++) {
			float r = s == 0 ? 0 : roundf(w[64 * g + i] / s);
			q[64 * g + i] = (int)fminf(fmaxf(r, (float)qmin), (float)qmax);
		}
	}
}

/* Group of 64: w[0..n) as given, the rest zero. */
static void make_group(float *g, const float *vals, int n)
{
	memset(g, 0, 64 * sizeof(*g));
	memcpy(g, vals, (size_t)n * sizeof(*g));
}

/* q4 codes of a one-group row, unpacked. */
static uint16_t q4_group(const float *g, int *q)
{
	uint8_t codes[32];
	uint16_t scale;
	coli_q4_quantize_row(g, 64, codes, &scale);
	for (int i = 0; i < 64; i++)
		q[i] = coli_q4_code(codes, (size_t)i);
	return scale;
}

static void test_q4_ties_unit_scale(void)
{
	float g[64];
	int q[64];
	const float v[] = {7, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, 3.5f, 6.5f, -6.5f, 0.49999997f};
	const int want[] = {7, 3, -3, 1, -1, 2, 4, 7, -7, 0};
	make_group(g, v, 10);
	uint16_t scale = q4_group(g, q);
	int bad = 0;
	for (int i = 0; i < 10; i++)
		bad += q[i] != want[i];
	T_CHECK("quant: q4 ties round half away from zero (scale 1)", scale == 0x3C00 && bad == 0,
		"scale %#x, %d codes wrong", scale, bad);
}

/* s = 1.19921875 (f16 0x3CCC): w = 0.5 s and 3.5 s give exact ties under w / s, while
 * w * (1/s) lands one ulp below the tie and would round toward zero. */
static void test_q4_ties_division(void)
{
	const float s = 1.19921875f;
	float g[64];
	int q[64];
	const float v[] = {7 * s, 0.5f * s, 3.5f * s, -0.5f * s, -3.5f * s};
	const int want[] = {7, 1, 4, -1, -4};
	volatile float rcp = 1.0f / s;
	int recip_differs = roundf(v[2] * rcp) != 4.0f && roundf(v[1] * rcp) != 1.0f;
	make_group(g, v, 5);
	uint16_t scale = q4_group(g, q);
	int bad = 0;
	for (int i = 0; i < 5; i++)
		bad += q[i] != want[i];
	T_CHECK("quant: q4 ties use w / s, not w * (1/s)",
		recip_differs && scale == 0x3CCC && bad == 0,
		"recip_differs %d, scale %#x, %d codes wrong", recip_differs, scale, bad);
}

static void test_q8_ties_division(void)
{
	const float s = 1.19921875f;
	float g[64];
	int8_t codes[64];
	uint16_t scale;
	const float v[] = {127 * s, 0.5f * s, 3.5f * s, -0.5f * s, -3.5f * s, -126.5f * s, 2.5f};
	const int8_t want[] = {127, 1, 4, -1, -4, -127, 2};
	make_group(g, v, 7);
	coli_q8_quantize_row(g, 64, codes, &scale);
	T_CHECK("quant: q8 ties round half away from zero with w / s",
		scale == 0x3CCC && memcmp(codes, want, sizeof(want)) == 0, "scale %#x, codes %d %d %d",
		scale, codes[1], codes[2], codes[5]);
}

static void test_zero_groups(void)
{
	float g[64] = {0};
	uint8_t c4[32];
	int8_t c8[64];
	uint16_t s4 = 1, s8 = 1;
	coli_q4_quantize_row(g, 64, c4, &s4);
	coli_q8_quantize_row(g, 64, c8, &s8);
	int bad = 0;
	for (int i = 0; i < 32; i++)
		bad += c4[i] != 0x88;
	for (int i = 0; i < 64; i++)
		bad += c8[i] != 0;
	T_CHECK("quant: zero group gives code 0 (nibble 8) and scale 0", s4 == 0 && s8 == 0 && !bad,
		"scales %#x %#x, %d bytes wrong", s4, s8, bad);
	g[3] = -1e-9f; /* amax / 7 underflows f16 to 0 */
	g[9] = 5e-10f;
	coli_q4_quantize_row(g, 64, c4, &s4);
	T_CHECK("quant: group whose scale underflows to 0 gives code 0",
		s4 == 0 && c4[3] == 0x88 && c4[9] == 0x88, "scale %#x", s4);
}

static void test_q4_negative_amax(void)
{
	const float s = 3.0f;
	float g[64];
	int q[64];
	const float v[] = {-7 * s, 6.9f * s, 2.5f * s, -1 * s};
	const int want[] = {-7, 7, 3, -1};
	make_group(g, v, 4);
	uint16_t scale = q4_group(g, q);
	int bad = 0;
	for (int i = 0; i < 4; i++)
		bad += q[i] != want[i];
	T_CHECK("quant: q4 negative amax gives -7, not -8", scale == 0x4200 && bad == 0,
		"scale %#x, %d codes wrong", scale, bad);
}

/* amax / 7 = 1.4 * 2^-24 rounds to the subnormal scale 2^-24, so w / s reaches +-9.8. */
static void test_q4_clamp(void)
{
	const float u = 0x1p-24f;
	float g[64];
	int q[64];
	const float v[] = {9.8f * u, -9.8f * u, 7.5f * u, -8.5f * u, -7.5f * u, 2.5f * u, 6.4f * u};
	const int want[] = {7, -8, 7, -8, -8, 3, 6};
	make_group(g, v, 7);
	uint16_t scale = q4_group(g, q);
	int bad = 0;
	for (int i = 0; i < 7; i++)
		bad += q[i] != want[i];
	T_CHECK("quant: q4 clamps to [-8, 7]", scale == 0x0001 && bad == 0,
		"scale %#x, codes %d %d %d %d", scale, q[0], q[1], q[2], q[3]);
}

static void test_q8_clamp(void)
{
	const float u = 0x1p-24f;
	float g[64];
	int8_t c[64];
	uint16_t scale;
	const float v[] = {177.8f * u, -177.8f * u, -128.5f * u, 126.5f * u};
	const int8_t want[] = {127, -128, -128, 127};
	make_group(g, v, 4);
	coli_q8_quantize_row(g, 64, c, &scale);
	T_CHECK("quant: q8 clamps to [-128, 127]", scale == 0x0001 && !memcmp(c, want, 4),
		"scale %#x, codes %d %d %d %d", scale, c[0], c[1], c[2], c[3]);
}

/* Random rows of 256 columns with groups of very different magnitudes. */
static void random_row(float *w, size_t cols)
{
	for (size_t g = 0; g < cols / 64; g++) {
		float mag = ldexpf(1.0f, (int)(rng() % 40) - 30);
		for (size_t i = 0; i < 64; i++)
			w[64 * g + i] = rnd_weight(mag);
	}
}

static void test_q4_random(void)
{
	enum { C = 256 };
	float w[C], back[C];
	uint8_t codes[C / 2];
	uint16_t sc[C / 64], rsc[C / 64];
	int q[C], bad_code = 0, bad_pack = 0, bad_deq = 0, bad_scale = 0;
	for (int it = 0; it < 2000; it++) {
		random_row(w, C);
		ref_quant(w, C, -8, 7, q, rsc);
		coli_q4_quantize_row(w, C, codes, sc);
		coli_q4_dequantize_row(codes, sc, C, back);
		bad_scale += memcmp(sc, rsc, sizeof(sc)) != 0;
		for (int i = 0; i < C; i++) {
			int g = i / 64, b = i % 64, byte = codes[32 * g + b % 32];
			int nib = b < 32 ? byte & 15 : byte >> 4;
			bad_code += coli_q4_code(codes, (size_t)i) != q[i];
			bad_pack += nib != q[i] + 8;
			bad_deq += !same(back[i], (float)q[i] * coli_f16_to_f32(sc[g]));
		}
	}
	T_CHECK("quant: q4 random rows match the container.md recipe", !bad_code && !bad_scale,
		"%d codes, %d rows of scales wrong", bad_code, bad_scale);
	T_CHECK("quant: q4 packing: low nibble col 64g+b, high nibble col 64g+32+b, q+8",
		bad_pack == 0, "%d nibbles wrong", bad_pack);
	T_CHECK("quant: q4 dequantize equals (float)q * (float)scale", bad_deq == 0, "%d wrong",
		bad_deq);
}

static void test_q8_random(void)
{
	enum { C = 256 };
	float w[C], back[C];
	int8_t codes[C];
	uint16_t sc[C / 64], rsc[C / 64];
	int q[C], bad_code = 0, bad_deq = 0, bad_scale = 0;
	for (int it = 0; it < 2000; it++) {
		random_row(w, C);
		ref_quant(w, C, -128, 127, q, rsc);
		coli_q8_quantize_row(w, C, codes, sc);
		coli_q8_dequantize_row(codes, sc, C, back);
		bad_scale += memcmp(sc, rsc, sizeof(sc)) != 0;
		for (int i = 0; i < C; i++) {
			bad_code += codes[i] != q[i];
			bad_deq += !same(back[i], (float)q[i] * coli_f16_to_f32(sc[i / 64]));
		}
	}
	T_CHECK("quant: q8 random rows match the container.md recipe", !bad_code && !bad_scale,
		"%d codes, %d rows of scales wrong", bad_code, bad_scale);
	T_CHECK("quant: q8 dequantize equals (float)q * (float)scale", bad_deq == 0, "%d wrong",
		bad_deq);
}

/* ---- source rows ---- */

static void test_source_plain(void)
{
	const uint16_t bf[6] = {0x3F80, 0xC000, 0x0000, 0x8000, 0x7F80, 0x3E80};
	const uint16_t hf[6] = {0x3C00, 0xC000, 0x0001, 0x8000, 0x7C00, 0x3400};
	const float f32[6] = {1, -2, 3.5f, -0.0f, 1e30f, 0.25f};
	float out[3];
	int bad = 0;
	for (size_t r = 0; r < 2; r++) {
		coli_source_row_f32(COLI_DT_BF16, bf, 2, 3, r, NULL, 0, 0, out);
		for (size_t c = 0; c < 3; c++)
			bad += !same(out[c], coli_bf16_to_f32(bf[3 * r + c]));
		coli_source_row_f32(COLI_DT_F16, hf, 2, 3, r, NULL, 0, 0, out);
		for (size_t c = 0; c < 3; c++)
			bad += !same(out[c], coli_f16_to_f32(hf[3 * r + c]));
		coli_source_row_f32(COLI_DT_F32, f32, 2, 3, r, NULL, 0, 0, out);
		for (size_t c = 0; c < 3; c++)
			bad += !same(out[c], f32[3 * r + c]);
	}
	T_CHECK("quant: source rows BF16/F16/F32", bad == 0, "%d values wrong", bad);
	enum { R = 3, C = 130 }; /* two chunks of 64 and a tail, at an odd address */
	static uint8_t raw[1 + R * C * 2];
	float row[C];
	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = (uint8_t)rng();
	bad = 0;
	for (size_t r = 0; r < R; r++) {
		coli_source_row_f32(COLI_DT_BF16, raw + 1, R, C, r, NULL, 0, 0, row);
		for (size_t c = 0; c < C; c++) {
			const uint8_t *b = raw + 1 + 2 * (r * C + c);
			bad += !same(row[c], coli_bf16_to_f32((uint16_t)(b[0] | b[1] << 8)));
		}
	}
	T_CHECK("quant: source rows BF16 of 130 columns at an odd address", bad == 0,
		"%d values wrong", bad);
	coli_source_row_f32(COLI_DT_U8, f32, 2, 3, 0, NULL, 0, 0, out);
	T_CHECK("quant: source row of a non-weight dtype is NaN", isnan(out[0]) && isnan(out[2]),
		"got %g", out[0]);
	const int64_t ids64[3] = {0, 9, 255};
	const int32_t ids32[3] = {7, 0, 3};
	coli_source_row_f32(COLI_DT_I64, ids64, 1, 3, 0, NULL, 0, 0, out);
	int ok = out[0] == 0 && out[1] == 9 && out[2] == 255;
	coli_source_row_f32(COLI_DT_I32, ids32, 1, 3, 0, NULL, 0, 0, out);
	T_CHECK("quant: source rows of I64 and I32 token -> expert tables are their integers", ok && out[0] == 7 &&
		out[1] == 0 && out[2] == 3, "got %g %g %g", out[0], out[1], out[2]);
}

/* 5 x 7 fp8 with 2 x 3 blocks: a [3, 3] grid with partial blocks at the bottom and right. */
static void test_source_fp8(void)
{
	uint8_t code[35];
	float sinv[9], out[7];
	for (int i = 0; i < 35; i++)
		code[i] = (uint8_t)((i * 37 + 11) % 256);
	for (int i = 0; i < 9; i++)
		sinv[i] = 0.001f * (float)(i + 1) + 1e-7f;
	int bad = 0;
	for (size_t r = 0; r < 5; r++) {
		coli_source_row_f32(COLI_DT_F8_E4M3, code, 5, 7, r, sinv, 2, 3, out);
		for (size_t c = 0; c < 7; c++) {
			float want = coli_fp8e4m3_to_f32(code[7 * r + c]) * sinv[(r / 2) * 3 + c / 3];
			bad += !same(out[c], want);
		}
	}
	T_CHECK("quant: source rows F8_E4M3 with partial 2x3 blocks", bad == 0, "%d wrong", bad);
}

/* ---- golden: quant_ref_q4.safetensors of the reference fixtures ---- */

/* A whole safetensors file in memory with its parsed header (private: safetensors.c is tested
 * elsewhere, and this keeps the golden test independent of it). */
typedef struct stf {
	uint8_t *buf;
	size_t size;
	size_t data;
	json_t *hdr;
} stf;

static uint8_t *read_all(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*size = (size_t)n;
	return b;
}

static int stf_open(stf *f, const char *path)
{
	memset(f, 0, sizeof(*f));
	f->buf = read_all(path, &f->size);
	if (!f->buf || f->size < 8)
		return -1;
	uint64_t n;
	memcpy(&n, f->buf, 8);
	if (n > f->size - 8)
		return -1;
	f->data = 8 + (size_t)n;
	f->hdr = json_loadb((const char *)f->buf + 8, (size_t)n, 0, NULL);
	return f->hdr ? 0 : -1;
}

static void stf_close(stf *f)
{
	json_decref(f->hdr);
	free(f->buf);
	memset(f, 0, sizeof(*f));
}

/* Tensor `name` of 1 or 2 dims (a 1-dim shape reads as [1, d0]) and the given dtype; NULL if
 * absent, of another dtype, or out of the file. */
static const void *stf_tensor(const stf *f, const char *name, const char *dtype, size_t dsize,
			      size_t *rows, size_t *cols)
{
	json_t *t = f->hdr ? json_object_get(f->hdr, name) : NULL;
	json_t *shape = json_object_get(t, "shape"), *off = json_object_get(t, "data_offsets");
	const char *dt = json_string_value(json_object_get(t, "dtype"));
	if (!t || !dt || strcmp(dt, dtype) || !json_is_array(shape) || json_array_size(off) != 2)
		return NULL;
	size_t nd = json_array_size(shape);
	if (nd < 1 || nd > 2)
		return NULL;
	*rows = nd == 2 ? (size_t)json_integer_value(json_array_get(shape, 0)) : 1;
	*cols = (size_t)json_integer_value(json_array_get(shape, nd - 1));
	size_t b = (size_t)json_integer_value(json_array_get(off, 0));
	size_t e = (size_t)json_integer_value(json_array_get(off, 1));
	if (e < b || e - b != *rows * *cols * dsize || e > f->size - f->data)
		return NULL;
	return f->buf + f->data + b;
}

enum { MAX_SHARDS = 8 };

/* A checkpoint folder: every shard its index names. */
typedef struct ckpt {
	int n;
	stf shard[MAX_SHARDS];
	int bs0, bs1; /* fp8 weight_block_size, 0 without quantization_config */
} ckpt;

static int shard_known(const ckpt *c, char names[][256], const char *name)
{
	for (int i = 0; i < c->n; i++)
		if (!strcmp(names[i], name))
			return 1;
	return 0;
}

static int ckpt_open(ckpt *c, const char *dir)
{
	char path[1024], names[MAX_SHARDS][256];
	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	json_t *idx = json_load_file(path, 0, NULL), *v;
	const char *k;
	json_object_foreach(json_object_get(idx, "weight_map"), k, v) {
		const char *s = json_string_value(v);
		if (!s || shard_known(c, names, s))
			continue;
		if (c->n == MAX_SHARDS)
			break;
		snprintf(names[c->n], 256, "%s", s);
		snprintf(path, sizeof(path), "%s/%s", dir, s);
		if (stf_open(&c->shard[c->n++], path))
			break;
	}
	json_decref(idx);
	snprintf(path, sizeof(path), "%s/config.json", dir);
	json_t *cfg = json_load_file(path, 0, NULL);
	json_t *bs = json_object_get(json_object_get(cfg, "quantization_config"), "weight_block_size");
	c->bs0 = (int)json_integer_value(json_array_get(bs, 0));
	c->bs1 = (int)json_integer_value(json_array_get(bs, 1));
	json_decref(cfg);
	for (int i = 0; i < c->n; i++)
		if (!c->shard[i].hdr)
			return -1;
	return c->n > 0 ? 0 : -1;
}

static void ckpt_close(ckpt *c)
{
	for (int i = 0; i < c->n; i++)
		stf_close(&c->shard[i]);
}

static const void *ckpt_tensor(const ckpt *c, const char *name, const char *dtype, size_t dsize,
			       size_t *rows, size_t *cols)
{
	for (int i = 0; i < c->n; i++) {
		const void *p = stf_tensor(&c->shard[i], name, dtype, dsize, rows, cols);
		if (p)
			return p;
	}
	return NULL;
}

/* Golden counters of one folder. */
typedef struct gold {
	int tensors, bad_tensors;
	long codes, bad_codes, scales, bad_scales, ties, q8_bad;
} gold;

/* Source weight `src` as float32 rows, [rows, cols]; NULL when absent or malformed. */
static float *load_source(const ckpt *c, const char *src, size_t rows, size_t cols)
{
	size_t r, k, sr, sc;
	int dt = COLI_DT_BF16;
	const void *p = ckpt_tensor(c, src, "BF16", 2, &r, &k);
	const float *sinv = NULL;
	if (!p) {
		char sname[600];
		dt = COLI_DT_F8_E4M3;
		p = ckpt_tensor(c, src, "F8_E4M3", 1, &r, &k);
		snprintf(sname, sizeof(sname), "%s_scale_inv", src);
		sinv = ckpt_tensor(c, sname, "F32", 4, &sr, &sc);
		if (!sinv || c->bs0 <= 0 || c->bs1 <= 0 ||
		    sr != (rows + (size_t)c->bs0 - 1) / (size_t)c->bs0 ||
		    sc != (cols + (size_t)c->bs1 - 1) / (size_t)c->bs1)
			return NULL;
	}
	if (!p || r != rows || k != cols)
		return NULL;
	float *w = malloc(rows * cols * sizeof(*w));
	for (size_t i = 0; w && i < rows; i++)
		coli_source_row_f32(dt, p, rows, cols, i, sinv, (size_t)c->bs0, (size_t)c->bs1,
				    w + i * cols);
	return w;
}

/* Exact .5 ties of w / s inside the code range: where roundf differs from round-to-even. */
static long count_ties(const float *w, size_t cols, const uint16_t *scales)
{
	long n = 0;
	for (size_t i = 0; i < cols; i++) {
		float s = coli_f16_to_f32(scales[i / 64]);
		float x = s == 0 ? 0 : w[i] / s;
		n += fabsf(x - truncf(x)) == 0.5f && fabsf(x) < 7.5f;
	}
	return n;
}

/* Quantizes one row and compares it with the reference codes and scales. */
static void check_row(gold *g, const float *w, size_t cols, const int8_t *ref_q,
		      const uint16_t *ref_s)
{
	uint8_t *codes = malloc(cols / 2);
	int8_t *c8 = malloc(cols);
	uint16_t *sc = malloc(cols / 64 * sizeof(*sc)), *rs = malloc(cols / 64 * sizeof(*rs));
	int *q = malloc(cols * sizeof(*q));
	coli_q4_quantize_row(w, cols, codes, sc);
	for (size_t i = 0; i < cols; i++)
		g->bad_codes += coli_q4_code(codes, i) != ref_q[i];
	for (size_t j = 0; j < cols / 64; j++) {
		uint16_t s;
		memcpy(&s, ref_s + j, 2);
		g->bad_scales += sc[j] != s;
	}
	g->codes += (long)cols;
	g->scales += (long)(cols / 64);
	g->ties += count_ties(w, cols, sc);
	coli_q8_quantize_row(w, cols, c8, sc);
	ref_quant(w, cols, -128, 127, q, rs);
	for (size_t i = 0; i < cols; i++)
		g->q8_bad += c8[i] != q[i];
	g->q8_bad += memcmp(sc, rs, cols / 64 * sizeof(*sc)) != 0;
	free(codes);
	free(c8);
	free(sc);
	free(rs);
	free(q);
}

static void check_tensor(gold *g, const ckpt *c, const stf *ref, const char *qname)
{
	char src[512], sname[600];
	size_t rows, cols, srows, scols;
	long before = g->bad_codes + g->bad_scales;
	snprintf(src, sizeof(src), "%.*s", (int)(strlen(qname) - 3), qname);
	snprintf(sname, sizeof(sname), "%s_scales", qname);
	const int8_t *rq = stf_tensor(ref, qname, "I8", 1, &rows, &cols);
	const uint16_t *rs = stf_tensor(ref, sname, "F16", 2, &srows, &scols);
	float *w = rq && rs ? load_source(c, src, rows, cols) : NULL;
	g->tensors++;
	if (!w || cols % 64 || srows != rows || scols != cols / 64) {
		g->bad_tensors++;
		free(w);
		return;
	}
	for (size_t r = 0; r < rows; r++)
		check_row(g, w + r * cols, cols, rq + r * cols, rs + r * scols);
	g->bad_tensors += g->bad_codes + g->bad_scales != before;
	free(w);
}

static void test_golden(const char *fam)
{
	char dir[512], path[600], name[256];
	stf ref;
	ckpt c;
	gold g = {0};
	snprintf(dir, sizeof(dir), "%s/%s-tiny", t_fixtures(), fam);
	snprintf(path, sizeof(path), "%s/quant_ref_q4.safetensors", dir);
	int ok_ref = stf_open(&ref, path) == 0;
	snprintf(path, sizeof(path), "%s/checkpoint", dir);
	int ok_ck = ckpt_open(&c, path) == 0;
	const char *k;
	json_t *v;
	if (ok_ref && ok_ck)
		json_object_foreach(ref.hdr, k, v) {
			size_t n = strlen(k);
			if (n > 3 && !strcmp(k + n - 3, ".q4"))
				check_tensor(&g, &c, &ref, k);
		}
	snprintf(name, sizeof(name),
		 "quant: q4 codes match reference for %s-tiny (%d tensors, %ld codes, %ld exact .5 ties)",
		 fam, g.tensors, g.codes, g.ties);
	T_CHECK(name, ok_ref && ok_ck && g.tensors > 0 && !g.bad_tensors && !g.bad_codes,
		"ref %d ckpt %d; %d of %d tensors bad, %ld of %ld codes wrong", ok_ref, ok_ck,
		g.bad_tensors, g.tensors, g.bad_codes, g.codes);
	snprintf(name, sizeof(name), "quant: q4 scales match reference for %s-tiny (%ld scales)",
		 fam, g.scales);
	T_CHECK(name, g.scales > 0 && !g.bad_scales, "%ld of %ld scales wrong", g.bad_scales,
		g.scales);
	snprintf(name, sizeof(name), "quant: q8 of %s-tiny experts matches the formula", fam);
	T_CHECK(name, g.codes > 0 && !g.q8_bad, "%ld wrong", g.q8_bad);
	if (ok_ref)
		stf_close(&ref);
	ckpt_close(&c);
}

int main(void)
{
	test_bf16_all();
	test_f16_all();
	test_f32_to_f16_exact();
	test_f32_to_f16_midpoints();
	test_f32_to_f16_edges();
#ifdef HAVE_FLOAT16
	test_float16_crosscheck();
#endif
	test_fp8_all();
	test_q4_ties_unit_scale();
	test_q4_ties_division();
	test_q8_ties_division();
	test_zero_groups();
	test_q4_negative_amax();
	test_q4_clamp();
	test_q8_clamp();
	test_q4_random();
	test_q8_random();
	test_source_plain();
	test_source_fp8();
	const char *fams[] = {"olmoe", "qwen3_moe", "mixtral", "deepseek_v3", "glm4_moe",
			      "deepseek_v3-fp8"};
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++)
		test_golden(fams[i]);
	T_EXIT();
}
