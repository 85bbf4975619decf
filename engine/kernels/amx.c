/* amx.c: the amx variant: the kernel bodies (body.h) over the AVX-512 mapping with AVX512-VNNI and
 * AVX512-BF16, and the GEMM over AMX's tiles (body_amx.h); kernels.c picks it where the CPU has
 * AMX and the kernel lets the process use its tiles. */
#define KV_AMX 1
#include "kernels/isa_avx512.h"

#include "kernels/body.h"
