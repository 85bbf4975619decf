/* avx2.c: the AVX2 variant: the kernel bodies (body.h) compiled over the AVX2 mapping. */
#include "kernels/isa_avx2.h"

#include "kernels/body.h"
