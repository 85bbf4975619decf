/* avx512vnni.c: the q8 products (body_q8.h) over the AVX-512 mapping with AVX512-VNNI's vpdpbusd;
 * kernels.c gives them to the avx512 variant where the CPU has VNNI. */
#define KV_VNNI 1
#include "kernels/isa_avx512.h"

#include "kernels/body_q8.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
