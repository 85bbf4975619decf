/* crc32.c: zlib's CRC-32 by folding (crc32.h).
 *
 * A 16-byte block loaded little-endian is a register whose bit b is the coefficient of x^(127-b)
 * (zlib's reflected bit order: a byte's low bit comes first). A register V = L x^64 + H (L its
 * low 64 bits) carried D bits further along the message is L x^(64+D) + H x^D; modulo P that is
 * clmul(L, rev64(x^(63+D) mod P)) ^ clmul(H, rev64(x^(D-1) mod P)), the exponents one less
 * because a carry-less product of two reflected operands lands one degree low. Folding the
 * accumulators forward block by block leaves one register congruent to the whole message; its
 * 16 bytes through zlib's table give the CRC, and the bytes after the last whole block go through
 * zlib too. The constants are computed once from P, not tabulated. */
#include "crc32.h"

#include <immintrin.h>
#include <pthread.h>
#include <string.h>
#include <zlib.h>

#define PCL __attribute__((target("pclmul,sse4.1")))
#define VPCL __attribute__((target("vpclmulqdq,avx512f,avx512bw,pclmul,sse4.1")))

/* A fold's two constants: for the register's low 64 bits, for its high 64. */
typedef struct {
	uint64_t lo, hi;
} fold_k;

static fold_k k128, k512, k2048; /* carry a register 16, 64, 256 bytes */

static uint64_t rev64(uint64_t v)
{
	uint64_t r = 0;
	for (int i = 0; i < 64; i++, v >>= 1)
		r = r << 1 | (v & 1);
	return r;
}

/* x^n mod P in plain bit order (bit d: the coefficient of x^d), P = x^32 + 0x04C11DB7. */
static uint64_t xpow_mod(unsigned n)
{
	uint64_t r = 1;
	while (n--) {
		r <<= 1;
		if (r >> 32)
			r ^= 0x104C11DB7ull;
	}
	return r;
}

static fold_k fold_const(unsigned d)
{
	return (fold_k){rev64(xpow_mod(63 + d)), rev64(xpow_mod(d - 1))};
}

static uint32_t crc_zlib(uint32_t crc, const void *buf, size_t len)
{
	return (uint32_t)crc32_z(crc, buf, len);
}

PCL static inline __m128i k_of(fold_k k)
{
	return _mm_set_epi64x((long long)k.hi, (long long)k.lo);
}

/* v carried by k's distance, added to w. */
PCL static inline __m128i fold(__m128i v, __m128i k, __m128i w)
{
	return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(v, k, 0x00), _mm_clmulepi64_si128(v, k, 0x11)), w);
}

PCL static inline __m128i load(const uint8_t *p)
{
	return _mm_loadu_si128((const __m128i *)p);
}

/* The CRC of the message x stands for followed by p's len bytes: the remaining whole blocks
 * folded in, then zlib over x's bytes and the last partial block. */
PCL static uint32_t finish(__m128i x, const uint8_t *p, size_t len)
{
	__m128i k = k_of(k128);
	uint8_t t[16];
	for (; len >= 16; p += 16, len -= 16)
		x = fold(x, k, load(p));
	_mm_storeu_si128((__m128i *)t, x);
	return (uint32_t)crc32_z(crc32_z(0xffffffffu, t, 16), p, len);
}

/* Four 128-bit accumulators, 64 bytes a step. */
PCL static uint32_t crc_pclmul(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	if (len < 64)
		return crc_zlib(crc, p, len);
	__m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128((int)~crc));
	__m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
	__m128i k4 = k_of(k512), k1 = k_of(k128);
	for (p += 64, len -= 64; len >= 64; p += 64, len -= 64) {
		x0 = fold(x0, k4, load(p));
		x1 = fold(x1, k4, load(p + 16));
		x2 = fold(x2, k4, load(p + 32));
		x3 = fold(x3, k4, load(p + 48));
	}
	return finish(fold(fold(fold(x0, k1, x1), k1, x2), k1, x3), p, len);
}

VPCL static inline __m512i k512_of(fold_k k)
{
	return _mm512_broadcast_i32x4(k_of(k));
}

VPCL static inline __m512i fold512(__m512i v, __m512i k, __m512i w)
{
	return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(v, k, 0x00), _mm512_clmulepi64_epi128(v, k, 0x11),
					 w, 0x96); /* a ^ b ^ c */
}

VPCL static inline __m512i load512(const uint8_t *p)
{
	return _mm512_loadu_si512((const void *)p);
}

/* Four 512-bit accumulators (16 lanes of 128 bits), 256 bytes a step. */
VPCL static uint32_t crc_vpclmul(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	if (len < 256)
		return crc_pclmul(crc, p, len);
	__m512i z0 = _mm512_xor_si512(load512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)~crc)));
	__m512i z1 = load512(p + 64), z2 = load512(p + 128), z3 = load512(p + 192);
	__m512i k16 = k512_of(k2048), k4 = k512_of(k512);
	for (p += 256, len -= 256; len >= 256; p += 256, len -= 256) {
		z0 = fold512(z0, k16, load512(p));
		z1 = fold512(z1, k16, load512(p + 64));
		z2 = fold512(z2, k16, load512(p + 128));
		z3 = fold512(z3, k16, load512(p + 192));
	}
	z0 = fold512(fold512(fold512(z0, k4, z1), k4, z2), k4, z3);
	for (; len >= 64; p += 64, len -= 64)
		z0 = fold512(z0, k4, load512(p));
	__m128i k1 = k_of(k128), x = _mm512_extracti32x4_epi32(z0, 0);
	x = fold(x, k1, _mm512_extracti32x4_epi32(z0, 1));
	x = fold(x, k1, _mm512_extracti32x4_epi32(z0, 2));
	x = fold(x, k1, _mm512_extracti32x4_epi32(z0, 3));
	return finish(x, p, len);
}

static int has_pclmul(void)
{
	return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}

static int has_vpclmul(void)
{
	return has_pclmul() && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512bw");
}

static const struct {
	const char *name;
	coli_crc32_fn fn;
	int (*runs)(void); /* NULL: every CPU */
} variants[] = {{"vpclmul", crc_vpclmul, has_vpclmul}, {"pclmul", crc_pclmul, has_pclmul}, {"zlib", crc_zlib, NULL}};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int best; /* index in variants: the first this CPU runs */

static void init(void)
{
	k128 = fold_const(128), k512 = fold_const(512), k2048 = fold_const(2048);
	while (variants[best].runs && !variants[best].runs())
		best++;
}

uint32_t coli_crc32(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, init);
	return variants[best].fn(crc, buf, len);
}

coli_crc32_fn coli_crc32_variant(const char *name)
{
	pthread_once(&once, init);
	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
		if (strcmp(variants[i].name, name) == 0)
			return !variants[i].runs || variants[i].runs() ? variants[i].fn : NULL;
	return NULL;
}

const char *coli_crc32_name(void)
{
	pthread_once(&once, init);
	return variants[best].name;
}
