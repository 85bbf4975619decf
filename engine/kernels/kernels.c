/* kernels.c: the kernels' public face: ISA choice, matrix views, row splits over the pool. */
#include "kernels.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/impl.h"
#include "kernels/q8.h"
#include "fileio.h"
#include "machine.h"
#include "kernels/pool.h"

#define SMALL_WORK 65536 /* multiply-adds below which a product runs on the caller only
			  * (measured: 2 threads gain nothing below, the pool costs ~1 us) */
#define VEC_UNIT 16      /* rows: pieces of a split start at multiples of these */
#define MUL_UNIT 32
#define COL_UNIT 128     /* columns, for the transposed product */
#define GEMM_L2 (768 << 10) /* bytes of a variant's prepared GEMM activations a step (tiles_mul) */

/* The kernels' context: the variant, the threads, their pool, the prepared-activation buffer. */
struct coli_kernels {
	const kern_ops *ops;
	int threads;
	kpool *pool;
	void *xbuf;    /* prepared activations, shared read-only by the workers */
	size_t xcap;   /* bytes */
	const kern_q8_ops *q8; /* precision q8: the q8 products; NULL: exact */
};

coli_mat coli_mat_of(const coli_blob *b, const uint8_t *base)
{
	coli_mat m = {
		.enc = b->enc,
		.rows = b->rows,
		.cols = b->cols,
		.row_bytes = (int64_t)b->row_bytes,
		.block = {b->block[0], b->block[1]},
		.codes = base,
		.scales = b->scales_off ? base + b->scales_off : NULL,
	};
	return m;
}

int coli_mat_band(const coli_mat *W, int64_t r0, int64_t nr, coli_mat *band)
{
	int tile = kern_encs[W->enc].scale == KS_F32_TILE;
	if (r0 < 0 || nr < 1 || r0 + nr > W->rows || (tile && r0 % W->block[0] != 0))
		return -1;
	*band = *W;
	band->rows = nr;
	band->codes = W->codes + r0 * W->row_bytes;
	band->scales = W->scales ? kern_row_scales(W, r0) : NULL;
	return 0;
}

static const kern_ops *variant(const char *isa)
{
	if (strcmp(isa, "scalar") == 0)
		return &kern_scalar;
	if (strcmp(isa, "avx2") == 0)
		return &kern_avx2;
	if (strcmp(isa, "avx512") == 0)
		return &kern_avx512;
	if (strcmp(isa, "amx") == 0)
		return &kern_amx;
	return NULL;
}

/* Whether Linux lets this process use AMX's tile data (arch_prctl ARCH_REQ_XCOMP_PERM for
 * XFEATURE_XTILEDATA, since 5.16; once granted, for every thread of the process). */
static int amx_permitted(void)
{
#ifdef SYS_arch_prctl
	static int granted = -1;
	if (granted < 0)
		granted = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
	return granted;
#else
	return 0;
#endif
}

int coli_kernels_available(const char *isa)
{
	__builtin_cpu_init();
	if (strcmp(isa, "scalar") == 0)
		return 1;
	int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
		   __builtin_cpu_supports("f16c");
	if (strcmp(isa, "avx2") == 0)
		return avx2;
	int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		     __builtin_cpu_supports("avx512vl");
	if (strcmp(isa, "avx512") == 0)
		return avx512;
	if (strcmp(isa, "amx") == 0)
		return avx512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16") &&
		       __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
		       __builtin_cpu_supports("amx-int8") && amx_permitted();
	return 0;
}

/* The named variant, checked; NULL with e filled when unknown or unavailable. */
static const kern_ops *named(const char *isa, coli_err *e)
{
	const kern_ops *k = variant(isa);
	if (!k)
		return coli_errf(e, COLI_EUSAGE, "ISA '%s': unknown (expected scalar, avx2, avx512 or amx)", isa), NULL;
	if (!coli_kernels_available(isa))
		return coli_errf(e, COLI_EUSAGE, "ISA '%s': this CPU lacks %s", isa,
				 strcmp(isa, "avx2") == 0     ? "AVX2, FMA or F16C"
				 : strcmp(isa, "avx512") == 0 ? "AVX-512"
							      : "AMX (tiles, bf16, int8 and the kernel's permission), AVX512-BF16 or AVX512-VNNI"),
		       NULL;
	return k;
}

static const kern_ops *best(void)
{
	return coli_kernels_available("amx")      ? &kern_amx
	       : coli_kernels_available("avx512") ? &kern_avx512
	       : coli_kernels_available("avx2")   ? &kern_avx2
						  : &kern_scalar;
}

int coli_kernels_open(coli_kernels **out, const char *isa, int threads, coli_err *e)
{
	const kern_ops *ops = isa && *isa ? named(isa, e) : best();
	if (!ops)
		return -1;
	coli_kernels *k = coli_calloc(1, sizeof(*k), e);
	if (!k)
		return -1;
	k->ops = ops;
	k->threads = threads > 0 ? threads : coli_machine_physical_cores();
	if (!(k->pool = kpool_new())) {
		free(k);
		return coli_errf(e, COLI_ENOMEM, "out of memory for the kernels' thread pool");
	}
	*out = k;
	return 0;
}

void coli_kernels_close(coli_kernels *k)
{
	if (!k)
		return;
	kpool_free(k->pool);
	free(k->xbuf);
	free(k);
}

int coli_precision_parse(const char *name, coli_precision *p)
{
	if (strcmp(name, "exact") == 0)
		*p = COLI_PREC_EXACT;
	else if (strcmp(name, "q8") == 0)
		*p = COLI_PREC_Q8;
	else
		return -1;
	return 0;
}

const char *coli_precision_name(coli_precision p)
{
	return p == COLI_PREC_Q8 ? "q8" : "exact";
}

void coli_kernels_set_precision(coli_kernels *k, coli_precision p)
{
	k->q8 = NULL;
	if (p != COLI_PREC_Q8)
		return;
	k->q8 = k->ops->q8;
	if (k->ops == &kern_avx512 && __builtin_cpu_supports("avx512vnni"))
		k->q8 = &kern_q8_avx512vnni;
}

coli_precision coli_kernels_precision(const coli_kernels *k)
{
	return k->q8 ? COLI_PREC_Q8 : COLI_PREC_EXACT;
}

const char *coli_kernels_q8_isa(const coli_kernels *k)
{
	return k->q8 ? k->q8->name : NULL;
}

int coli_mat_takes_q8(const coli_kernels *k, const coli_mat *W)
{
	return k->q8 && !W->exact && kern_q8_enc(W->enc);
}

const char *coli_kernels_isa(const coli_kernels *k)
{
	return k->ops->name;
}

int coli_kernels_threads(const coli_kernels *k)
{
	return k->threads;
}

void coli_kernels_for(coli_kernels *k, int64_t total, int64_t grain, void (*fn)(void *, int64_t, int64_t), void *arg)
{
	kpool_for(k->pool, k->threads, total, grain, 1, fn, arg);
}

/* A buffer of n bytes for prepared activations; NULL when it cannot be had. */
static uint8_t *prep_buffer(coli_kernels *kc, size_t n)
{
	if (n <= kc->xcap)
		return kc->xbuf;
	size_t bytes = (n + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, bytes);
	if (!p)
		return NULL;
	free(kc->xbuf);
	kc->xbuf = p;
	kc->xcap = bytes;
	return kc->xbuf;
}

/* Prepared activations for products over max_cols columns (at most a float32 per column, rounded
 * up to 128 columns): the 64 matrices of coli_mat_vec_batch, the small_n tokens (16 in every
 * variant) of one coli_mat_mul, or a step of 64 tokens of amx's GEMM (6 bytes a column). */
#define RESERVE_ROWS 96

uint64_t coli_kernels_reserve_bytes(uint64_t max_cols)
{
	return (max_cols + 127) / 128 * 128 * RESERVE_ROWS * sizeof(float);
}

int coli_kernels_reserve(coli_kernels *k, int64_t max_cols, coli_err *e)
{
	int rows = k->ops->small_n > RESERVE_ROWS ? k->ops->small_n : RESERVE_ROWS;
	int64_t n = (max_cols + 127) / 128 * 128 * rows * (int64_t)sizeof(float);
	if (!prep_buffer(k, (size_t)n))
		return coli_errf(e, COLI_ENOMEM, "out of memory for %lld bytes of prepared activations", (long long)n);
	return 0;
}

/* x of n tokens prepared for the variant into *px; NULL when no preparation is wanted or there is
 * no memory. */
static const kern_x *prepare(coli_kernels *kc, const coli_mat *W, const float *x, int n, kern_x *px)
{
	const kern_ops *k = kc->ops;
	int q8 = coli_mat_takes_q8(kc, W);
	int64_t per = q8 ? kern_q8_bytes(W->cols) : k->prep_bytes(W);
	if (per == 0)
		return NULL;
	uint8_t *xp = prep_buffer(kc, (size_t)per * (size_t)n);
	if (!xp)
		return NULL;
	for (int t = 0; t < n; t++) {
		if (q8)
			kern_q8_prep(W->cols, x + (int64_t)t * W->cols, xp + (int64_t)t * per);
		else
			k->prep(W, x + (int64_t)t * W->cols, xp + (int64_t)t * per);
	}
	*px = (kern_x){q8 ? KX_Q8 : k->xtype(W), per, xp};
	return px;
}

/* y[r - r0] = W[r] . x for r in [r0, r1): the q8 products when xp is q8, else the variant's. */
static void vec_rows(const kern_ops *k, const kern_q8_ops *q8, const coli_mat *W, const float *x, const kern_x *xp,
		     float *y, int64_t r0, int64_t r1)
{
	if (xp && xp->type == KX_Q8)
		q8->rows(W, xp, 1, y, 0, r0, r1);
	else
		k->vec(W, x, xp, y, r0, r1);
}

/* Threads for `work` multiply-adds and pieces of at most a quarter of each thread's share (the pool
 * shrinks them toward the end). */
static int split(const coli_kernels *kc, int64_t work, int64_t total, int64_t unit, int64_t *grain)
{
	int t = kc->threads;
	if (work < SMALL_WORK || total <= unit)
		t = 1;
	int64_t g = (total + 4 * t - 1) / (4 * t);
	*grain = (g + unit - 1) / unit * unit;
	return t;
}

typedef struct job {
	const kern_ops *k;
	const kern_q8_ops *q8;
	const coli_mat *W;
	const float *x, *a;
	const kern_x *xp;
	float *y;
	int n;
	int64_t r0, nr;
} job;

static void vec_piece(void *arg, int64_t b, int64_t e)
{
	const job *j = arg;
	vec_rows(j->k, j->q8, j->W, j->x, j->xp, j->y + b, j->r0 + b, j->r0 + e);
}

static void mul_piece(void *arg, int64_t b, int64_t e)
{
	const job *j = arg;
	if (j->xp && (j->xp->type == KX_Q8 || j->xp->type == KX_Q8T))
		j->q8->rows(j->W, j->xp, j->n, j->y + b, j->W->rows, b, e);
	else
		j->k->mul(j->W, j->x, j->xp, j->n, j->y, b, e);
}

static void vec_t_piece(void *arg, int64_t b, int64_t e)
{
	const job *j = arg;
	j->k->vec_t(j->W, j->r0, j->nr, j->a, j->y, b, e < j->W->cols ? e : j->W->cols);
}

void coli_mat_vec_range(coli_kernels *kc, const coli_mat *W, int64_t r0, int64_t nr, const float *x, float *y)
{
	job j = {.k = kc->ops, .q8 = kc->q8, .W = W, .x = x, .y = y, .r0 = r0};
	int64_t grain;
	if (nr <= 0)
		return;
	int t = split(kc, nr * W->cols, nr, VEC_UNIT, &grain);
	kern_x px;
	j.xp = prepare(kc, W, x, 1, &px);
	kpool_for(kc->pool, t, nr, grain, VEC_UNIT, vec_piece, &j);
}

/* Several independent products in one pool dispatch: their rows form one index space, so two
 * threads share out small matrices (a decode token's experts) without a sync per matrix. */
typedef struct batch_job {
	const kern_ops *k;
	const kern_q8_ops *q8;
	const coli_mat *const *W;
	const float *const *x;
	const kern_x *const *xp;
	float *const *y;
	const int64_t *first; /* first global row of each item; first[count] = total */
	int count;
} batch_job;

static void batch_piece(void *arg, int64_t b, int64_t e)
{
	const batch_job *j = arg;
	for (int i = 0; i < j->count; i++) {
		int64_t lo = b > j->first[i] ? b : j->first[i], hi = e < j->first[i + 1] ? e : j->first[i + 1];
		if (lo < hi)
			vec_rows(j->k, j->q8, j->W[i], j->x[i], j->xp[i], j->y[i] + (lo - j->first[i]), lo - j->first[i],
				 hi - j->first[i]);
	}
}

/* The earlier item of a batch whose prepared x item i can share (the same x, encoding, width and
 * activation type: a gate and an up projection, or q, k and v), or -1: the preparation depends
 * on nothing else, so sharing it changes no bit and saves one preparation an item (each of a
 * decode token's experts' two input products; under q8, a tenth of a decode token's time). */
static int64_t same_prep(const coli_kernels *kc, const coli_mat *const *W, const float *const *x, const int64_t *per,
			 int64_t i)
{
	for (int64_t j = 0; j < i; j++)
		if (per[j] && x[j] == x[i] && W[j]->enc == W[i]->enc && W[j]->cols == W[i]->cols &&
		    coli_mat_takes_q8(kc, W[j]) == coli_mat_takes_q8(kc, W[i]) && kc->ops->xtype(W[j]) == kc->ops->xtype(W[i]))
			return j;
	return -1;
}

int coli_mat_vec_batch(coli_kernels *kc, const coli_mat *const *W, const float *const *x, float *const *y, int count)
{
	const kern_ops *k = kc->ops;
	int64_t first[65], per[64], total = 0, work = 0, bytes = 0, grain;
	kern_x px[64];
	const kern_x *xp[64];
	if (count <= 0 || count > 64)
		return -1;
	for (int i = 0; i < count; i++) {
		first[i] = total;
		total += W[i]->rows;
		work += W[i]->rows * W[i]->cols;
		bytes += per[i] = coli_mat_takes_q8(kc, W[i]) ? kern_q8_bytes(W[i]->cols) : k->prep_bytes(W[i]);
	}
	first[count] = total;
	uint8_t *buf = bytes ? prep_buffer(kc, (size_t)bytes) : NULL;
	if (bytes && !buf)
		return -1;
	for (int64_t i = 0, at = 0; i < count; at += per[i], i++) {
		xp[i] = NULL;
		int64_t same = same_prep(kc, W, x, per, i);
		if (same >= 0) { /* prepared already: an earlier item of the same x, encoding and width */
			px[i] = px[same];
			xp[i] = &px[i];
			per[i] = 0;
		} else if (per[i] && coli_mat_takes_q8(kc, W[i])) {
			kern_q8_prep(W[i]->cols, x[i], buf + at);
			px[i] = (kern_x){KX_Q8, per[i], buf + at};
			xp[i] = &px[i];
		} else if (per[i]) {
			k->prep(W[i], x[i], buf + at);
			px[i] = (kern_x){k->xtype(W[i]), per[i], buf + at};
			xp[i] = &px[i];
		}
	}
	batch_job j = {k, kc->q8, W, x, xp, y, first, count};
	int t = split(kc, work, total, VEC_UNIT, &grain);
	kpool_for(kc->pool, t, total, grain, VEC_UNIT, batch_piece, &j);
	return 0;
}

void coli_mat_vec(coli_kernels *kc, const coli_mat *W, const float *x, float *y)
{
	coli_mat_vec_range(kc, W, 0, W->rows, x, y);
}

/* Tokens a step of a product over n tokens whose prepared activations fit tokens at a time: all
 * of them, else what fits rounded down to a multiple of unit, at least least (the buffer then
 * grows to it). */
static int step_tokens(int64_t fit, int n, int least, int unit)
{
	return fit >= n ? n : fit >= least ? (int)(fit / unit * unit) : least < n ? least : n;
}

static void tiles_prep_piece(void *arg, int64_t b, int64_t e)
{
	const job *j = arg;
	if (j->xp->type == KX_Q8T)
		j->q8->tiles_prep(j->W->cols, j->x, j->n, b, e, (void *)j->xp->data);
	else
		j->k->gemm_prep(j->W, j->x, j->n, b, e, (void *)j->xp->data);
}

/* A GEMM over a variant's own activation type (amx: KX_BF16X3 exact, KX_Q8T under q8), the tokens
 * in steps of a multiple of 32 whose prepared bytes fit both the buffer coli_kernels_reserve
 * made and GEMM_L2 (each step's are read again for every panel of rows: 64 tokens a step ran
 * 1.3x faster than 256 at 2048 columns, q4, on a Xeon's 2 MiB L2), at least 32 tokens; each
 * step's blocks of 16 prepared over the pool, then its rows split as for any product; 0 when the
 * buffer cannot be had (nothing computed then). */
static int tiles_mul(coli_kernels *kc, const coli_mat *W, const float *X, int n, float *Y, kern_xtype type)
{
	const int64_t per16 = type == KX_Q8T ? kc->q8->tiles_bytes(W->cols) : kc->ops->gemm_bytes(W), l2 = GEMM_L2 / per16 * 16;
	int64_t fit = (int64_t)kc->xcap / per16 * 16;
	int step = step_tokens(fit < l2 ? fit : l2, n, 32, 32);
	for (int t0 = 0; t0 < n; t0 += step) {
		int nt = n - t0 < step ? n - t0 : step;
		int64_t blocks = (nt + 15) / 16, grain;
		uint8_t *xp = prep_buffer(kc, (size_t)(per16 * blocks));
		if (!xp)
			return 0; /* only the first step can fail: the others fit the same buffer */
		kern_x px = {type, per16, xp};
		job j = {.k = kc->ops, .q8 = kc->q8, .W = W, .x = X + (int64_t)t0 * W->cols, .xp = &px, .y = Y + (int64_t)t0 * W->rows, .n = nt};
		kpool_for(kc->pool, blocks > 1 ? kc->threads : 1, blocks, 1, 1, tiles_prep_piece, &j);
		int t = split(kc, W->rows * W->cols * nt, W->rows, MUL_UNIT, &grain);
		kpool_for(kc->pool, t, W->rows, grain, MUL_UNIT, mul_piece, &j);
	}
	return 1;
}

/* q8: the variant's tiles from Q8_TILES_N tokens where it has them (amx), else the tokens in pieces
 * whose prepared bytes fit the buffer coli_kernels_reserve made (or 16 tokens' worth when it is
 * smaller); 0 when the buffer cannot be had (nothing computed then). */
static int q8_mul(coli_kernels *kc, const coli_mat *W, const float *X, int n, float *Y)
{
	if (n >= Q8_TILES_N && kc->q8->tiles_bytes)
		return tiles_mul(kc, W, X, n, Y, KX_Q8T);
	const int64_t per = kern_q8_bytes(W->cols);
	int step = step_tokens((int64_t)kc->xcap / per, n, 16, 1);
	for (int t0 = 0; t0 < n; t0 += step) {
		int nt = n - t0 < step ? n - t0 : step;
		job j = {.k = kc->ops, .q8 = kc->q8, .W = W, .x = X + (int64_t)t0 * W->cols, .y = Y + (int64_t)t0 * W->rows, .n = nt};
		int64_t grain;
		kern_x px;
		if (!(j.xp = prepare(kc, W, j.x, nt, &px)))
			return 0; /* only the first piece can fail: the others fit the same buffer */
		int t = split(kc, W->rows * W->cols * nt, W->rows, MUL_UNIT, &grain);
		kpool_for(kc->pool, t, W->rows, grain, MUL_UNIT, mul_piece, &j);
	}
	return 1;
}

void coli_mat_mul(coli_kernels *kc, const coli_mat *W, const float *X, int n, float *Y)
{
	job j = {.k = kc->ops, .W = W, .x = X, .y = Y, .n = n};
	int64_t grain;
	if (n <= 0)
		return;
	if (coli_mat_takes_q8(kc, W) && q8_mul(kc, W, X, n, Y) != 0)
		return;
	if (n > j.k->small_n && j.k->gemm_bytes && j.k->gemm_bytes(W) > 0 && tiles_mul(kc, W, X, n, Y, KX_BF16X3) != 0)
		return;
	int t = split(kc, W->rows * W->cols * n, W->rows, MUL_UNIT, &grain);
	kern_x px;
	if (n <= j.k->small_n)
		j.xp = prepare(kc, W, X, n, &px);
	kpool_for(kc->pool, t, W->rows, grain, MUL_UNIT, mul_piece, &j);
}

void coli_mat_vec_t_acc(coli_kernels *kc, const coli_mat *W, int64_t r0, int64_t nr, const float *a, float *y)
{
	job j = {.k = kc->ops, .W = W, .a = a, .y = y, .r0 = r0, .nr = nr};
	int64_t grain;
	if (nr <= 0)
		return;
	int t = split(kc, nr * W->cols, W->cols, COL_UNIT, &grain);
	grain = (W->cols + (int64_t)t * COL_UNIT - 1) / ((int64_t)t * COL_UNIT) * COL_UNIT; /* one piece each */
	kpool_for(kc->pool, t, W->cols, grain, grain, vec_t_piece, &j);
}

void coli_mat_row(const coli_kernels *kc, const coli_mat *W, int64_t r, float *out)
{
	kc->ops->row(W, r, out);
}
