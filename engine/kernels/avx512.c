/* avx512.c: the AVX-512 variant: the kernel bodies (body.h) compiled over the AVX-512 mapping. */
#include "kernels/isa_avx512.h"

#include "kernels/body.h"
