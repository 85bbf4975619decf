/* kernels.h: matrix-vector and batched matrix products over container blobs, in float32
 * activations, for every stored encoding (f32, bf16, f16, fp8 block-scaled, q8 and q4 gs64).
 *
 * Exactness: activations stay float32 (never quantized): a product is, per output row,
 *   y[r] = sum over columns c of W'[r][c] * x[c], W' the float32 value the encoding defines
 *   (quant.h: q x fp16 scale; fp8: code x scale_inv; bf16/f16 widened).
 * Variants (scalar reference, AVX2, AVX-512) differ only in summation order; they agree within
 * the tolerance tests/unit/test_kernels.c states. The variant is the best the CPU flags allow, or
 * one named by the caller (coli-run passes COLI_ISA=scalar|avx2|avx512; an unavailable one is an
 * error).
 * Threads: products split rows over the pool of kernels_set_threads (default: physical cores).
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
} coli_mat;

/* A matrix view of a blob whose bytes start at base. */
coli_mat coli_mat_of(const coli_blob *b, const uint8_t *base);

/* Chooses the ISA: isa ("scalar", "avx2", "avx512") when given, else (NULL or "") the best the
 * CPU has; an unknown or unavailable isa is an error (EUSAGE) naming it. */
int kernels_init(const char *isa, coli_err *e);
const char *kernels_isa(void); /* "scalar", "avx2" or "avx512" */

/* Uses the named variant from now on; an unknown or unavailable one is
 * an error (EUSAGE) and keeps the current choice. */
int kernels_force(const char *isa, coli_err *e);

/* 1 when this CPU (and OS) can run the named variant: avx2 needs AVX2+FMA+F16C, avx512 also
 * AVX-512 F/BW/VL. */
int kernels_available(const char *isa);

/* Stops the worker threads and frees the kernels' buffers (they come back on next use). */
void kernels_release(void);

/* Threads used by the products (1 = the caller only; n < 1 restores the default). */
void kernels_set_threads(int n);
int kernels_threads(void);

/* y[rows] = W x[cols]. */
void mat_vec(const coli_mat *W, const float *x, float *y);

/* y[j] = W[r0 + j] . x for j < nr: a band of rows (one attention head's slice). */
void mat_vec_range(const coli_mat *W, int64_t r0, int64_t nr, const float *x, float *y);

/* y[i] = W[i] x[i] for count (<= 64) independent products in one dispatch over the threads:
 * the decode path for many small matrices (a token's experts). -1 if count is out of range or
 * memory is short (nothing computed then). */
int mat_vec_batch(const coli_mat *const *W, const float *const *x, float *const *y, int count);

/* Y[n][rows] = X[n][cols] W^T: n tokens at once (prefill, verify); reads W once. */
void mat_mul(const coli_mat *W, const float *X, int n, float *Y);

/* y[cols] += sum_r a[r] * W[r][:] for r in [r0, r0 + nr): the transposed product, used by MLA's
 * absorbed attention (W_kb^T q, W_vb applied to a latent). */
void mat_vec_t_acc(const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y);

/* Row r of W as float32 (embedding lookup). */
void mat_row(const coli_mat *W, int64_t r, float *out);

#endif
