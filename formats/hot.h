/* hot.h: COLI_HOT marks a loop-heavy function to be built for AVX-512, AVX2 and baseline
 * x86-64 and picked at load time (gcc function multiversioning). Its helpers must be inlined
 * (static inline, always_inline) to be built for each variant too. */
#ifndef COLI_HOT_H
#define COLI_HOT_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COLI_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define COLI_HOT
#endif

#endif
