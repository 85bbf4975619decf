/* kernels.h: matrix-vector and batched matrix products over container blobs, in float32
 * activations, for every stored encoding (f32, bf16, f16, fp8 block-scaled, q8 and q4 gs64), and
 * 8-bit activations for q8 and q4 when a caller opts in (coli_kernels_set_precision).
 *
 * Exactness (the default): activations stay float32 (never quantized): a product is, per output row,
 *   y[r] = sum over columns c of W'[r][c] * x[c], W' the float32 value the encoding defines
 *   (quant.h: q x fp16 scale; fp8: code x scale_inv; bf16/f16 widened).
 * Variants (scalar reference, AVX2, AVX-512, AMX) differ only in summation order (amx's GEMM sums
 * each product as three exact parts: kernels/body_amx.h); they agree within the tolerance
 * tests/unit/test_kernels.c states and the bound tests/unit/test_exact.c checks. The variant is
 * the best the CPU flags (and, for amx, the kernel) allow, or one named by the caller (coli-run
 * passes COLI_ISA=scalar|avx2|avx512|amx; an unavailable one is an error).
 * Threads: products split rows over the context's pool (default: the physical cores).
 * The small vector helpers of the forward pass (nn/blocks.c: norms, softmax, dot, axpy) are
 * plain C for every variant, so one choice of variant covers every kernel.
 */
#ifndef COLI_KERNELS_H
#define COLI_KERNELS_H

#include <stdint.h>

#include "error.h"
#include "layout.h"

/* A matrix as stored: rows of codes (row_bytes apart) and, for q8/q4/fp8, its scales. */
typedef struct coli_mat {
	coli_enc enc;
	int64_t rows, cols;
	int64_t row_bytes;
	int64_t block[2];        /* fp8 scale block */
	const uint8_t *codes;    /* rows x row_bytes */
	const uint8_t *scales;   /* q8/q4: fp16 [rows][ceil(cols/64)]; fp8: f32 [ceil(rows/b0)][ceil(cols/b1)] */
	int exact;               /* 1: float32 activations whatever the precision (coli_kernels_set_precision):
				  * the caller's matrices that choose what attention reads (the DSA indexer's) */
} coli_mat;

/* A matrix view of a blob whose bytes start at base. */
coli_mat coli_mat_of(const coli_blob *b, const uint8_t *base);

/* The kernels' context, owned by whoever runs a model (the engine: one per opened model): the
 * variant every product uses, the threads and their pool, the buffers of prepared activations.
 * One caller at a time. */
typedef struct coli_kernels coli_kernels;

/* isa ("scalar", "avx2", "avx512", "amx") when given, else (NULL or "") the best the CPU has; an
 * unknown or unavailable isa is an error (EUSAGE) naming it. threads < 1: the physical cores. */
int coli_kernels_open(coli_kernels **out, const char *isa, int threads, coli_err *e);
void coli_kernels_close(coli_kernels *k); /* stops the workers; accepts NULL */
const char *coli_kernels_isa(const coli_kernels *k); /* "scalar", "avx2", "avx512" or "amx" */
int coli_kernels_threads(const coli_kernels *k);

/* The activations of the products over integer codes (q4, q8 encodings; kernels/q8.h):
 * COLI_PREC_EXACT float32 (the default, the exactness above); COLI_PREC_Q8 (opt-in, not exact)
 * each token's x quantized per group of 64 columns to int8 with a float32 scale, the products
 * summed in integers per group and scaled in float32 in one fixed order, the same bits in every
 * variant and for any number of tokens or threads. Products over every other encoding (f32
 * routers, bf16, f16, fp8), the transposed product and rows stay float32 whatever the precision;
 * so do the callers' own float32 loops (norms, softmax, the attention core). If the buffer of
 * prepared activations cannot be allocated, a q8 product runs exact. */
typedef enum coli_precision {
	COLI_PREC_EXACT,
	COLI_PREC_Q8,
} coli_precision;

/* "exact" or "q8" into *p; -1 for anything else. */
int coli_precision_parse(const char *name, coli_precision *p);
const char *coli_precision_name(coli_precision p);
void coli_kernels_set_precision(coli_kernels *k, coli_precision p);
coli_precision coli_kernels_precision(const coli_kernels *k);
/* The q8 products' variant ("scalar", "avx2", "avx512", "avx512vnni": the avx512 variant's on a
 * CPU with AVX512-VNNI), or NULL when exact. */
const char *coli_kernels_q8_isa(const coli_kernels *k);
/* 1 when products over W take q8 activations in k. */
int coli_mat_takes_q8(const coli_kernels *k, const coli_mat *W);

/* Sizes the buffers for products over matrices of at most max_cols columns (coli_mat_vec_batch of up
 * to 64 of them, coli_mat_mul of a few tokens), so that none of them allocates. */
int coli_kernels_reserve(coli_kernels *k, int64_t max_cols, coli_err *e);
/* The bytes coli_kernels_reserve takes at most for max_cols (any variant). */
uint64_t coli_kernels_reserve_bytes(uint64_t max_cols);

/* 1 when this CPU (and OS) can run the named variant: avx2 needs AVX2+FMA+F16C, avx512 also
 * AVX-512 F/BW/VL, amx also AVX512-VNNI, AVX512-BF16, AMX tiles, bf16 and int8, and Linux's
 * permission to use the tiles (asked once, arch_prctl ARCH_REQ_XCOMP_PERM). */
int coli_kernels_available(const char *isa);

/* fn over [0, total) in pieces of at most grain (smaller toward the end) on the context's threads
 * (the caller included); returns when all are done. A piece's thread: kpool_self()
 * (kernels/pool.h) for its scratch row. */
void coli_kernels_for(coli_kernels *k, int64_t total, int64_t grain, void (*fn)(void *, int64_t, int64_t), void *arg);

/* y[rows] = W x[cols]. */
void coli_mat_vec(coli_kernels *kc, const coli_mat *W, const float *x, float *y);

/* y[j] = W[r0 + j] . x for j < nr: a band of rows (one attention head's slice). */
void coli_mat_vec_range(coli_kernels *kc, const coli_mat *W, int64_t r0, int64_t nr, const float *x, float *y);

/* y[i] = W[i] x[i] for count (<= 64) independent products in one dispatch over the threads:
 * the decode path for many small matrices (a token's experts). -1 if count is out of range or
 * memory is short (nothing computed then). */
int coli_mat_vec_batch(coli_kernels *kc, const coli_mat *const *W, const float *const *x, float *const *y, int count);

/* Y[n][rows] = X[n][cols] W^T: n tokens at once (prefill, verify); reads W once. Up to COLI_EXACT_N
 * tokens, each token's row has the bits coli_mat_vec gives for it alone (every variant): a speculative
 * verify of k + 1 tokens computes what k + 1 decode steps would, bit for bit. */
#define COLI_EXACT_N 8
void coli_mat_mul(coli_kernels *kc, const coli_mat *W, const float *X, int n, float *Y);

/* Rows [r0, r0 + nr) of W as a matrix of their own (a view of W's bytes, for coli_mat_mul over
 * a band: a grouped projection's group); its products give the bits W's give for those rows.
 * -1 when the band is out of W or (fp8) does not start a tile of scales. */
int coli_mat_band(const coli_mat *W, int64_t r0, int64_t nr, coli_mat *band);

/* y[cols] += sum_r a[r] * W[r][:] for r in [r0, r0 + nr): the transposed product, used by MLA's
 * absorbed attention (W_kb^T q, W_vb applied to a latent). */
void coli_mat_vec_t_acc(coli_kernels *kc, const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y);

/* Row r of W as float32 (embedding lookup). */
void coli_mat_row(const coli_kernels *kc, const coli_mat *W, int64_t r, float *out);

#endif
