/* gguf.c: writes a GGUF file (layout in gguf.h) of the synthetic weights, quantized for llama.cpp.
 *
 * The values are the checkpoint's own (synth_src_regen: exactly what a reader of the written
 * safetensors gets), so llama.cpp and coli run the same weights, each quantized its own way.
 * The header is built in memory; the data section is cut into jobs of about 1 M values (row
 * ranges of one part of a tensor), which the generator threads fill and pwrite at their offsets
 * in "<file>.tmp", renamed into place once complete and fsync'd.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"

#define GG_JOB_VALUES (1 << 20)

/* ---- buffer and key-values ------------------------------------------------------------------ */

void gg_put(gg_buf *b, const void *data, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 1 << 16;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
}

void gg_u32(gg_buf *b, uint32_t v)
{
	gg_put(b, &v, 4); /* x86-64 and every target of coli: little-endian */
}

void gg_u64(gg_buf *b, uint64_t v)
{
	gg_put(b, &v, 8);
}

void gg_str(gg_buf *b, const char *s)
{
	size_t n = strlen(s);
	gg_u64(b, n);
	gg_put(b, s, n);
}

static void kv_head(gg_buf *b, const char *key, uint32_t type)
{
	gg_str(b, key);
	gg_u32(b, type);
	b->n_kv++;
}

void gg_kv_u32(gg_buf *b, const char *key, uint32_t v)
{
	kv_head(b, key, GV_U32);
	gg_u32(b, v);
}

void gg_kv_f32(gg_buf *b, const char *key, float v)
{
	kv_head(b, key, GV_F32);
	gg_put(b, &v, 4);
}

void gg_kv_bool(gg_buf *b, const char *key, int v)
{
	uint8_t c = v != 0;
	kv_head(b, key, GV_BOOL);
	gg_put(b, &c, 1);
}

void gg_kv_str(gg_buf *b, const char *key, const char *v)
{
	kv_head(b, key, GV_STR);
	gg_str(b, v);
}

void gg_kv_arr(gg_buf *b, const char *key, uint32_t elem_type, uint64_t count)
{
	kv_head(b, key, GV_ARR);
	gg_u32(b, elem_type);
	gg_u64(b, count);
}

/* ---- values ----------------------------------------------------------------------------------- */

/* IEEE half of f, rounded to nearest even (overflow to infinity, subnormals kept). */
uint16_t gg_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000, a = x & 0x7fffffff;
	if (a >= 0x7f800000) /* inf, nan */
		return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000 ? 0x200 : 0));
	if (a >= 0x477ff000) /* rounds to >= 65520: infinity */
		return (uint16_t)(sign | 0x7c00);
	if (a < 0x38800000) { /* below 2^-14: subnormal half, units of 2^-24 */
		float v;
		memcpy(&v, &a, 4);
		return (uint16_t)(sign | (uint32_t)lrintf(v * 16777216.0f));
	}
	uint32_t r = a + 0xfff + ((a >> 13) & 1); /* round the 13 dropped bits to nearest even */
	return (uint16_t)(sign | ((r - 0x38000000) >> 13));
}

/* 32 values: scale d = the value of largest magnitude / -8, codes min(15, trunc(x/d + 8.5)). */
static void q4_0_block(const float *x, uint8_t *out)
{
	float amax = 0, max = 0;
	for (int j = 0; j < 32; j++)
		if (fabsf(x[j]) > amax) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	float d = max / -8, id = d != 0 ? 1.0f / d : 0;
	uint16_t h = gg_f16(d);
	memcpy(out, &h, 2);
	for (int j = 0; j < 16; j++) {
		int lo = (int)(x[j] * id + 8.5f), hi = (int)(x[j + 16] * id + 8.5f);
		out[2 + j] = (uint8_t)((lo > 15 ? 15 : lo) | (hi > 15 ? 15 : hi) << 4);
	}
}

/* 32 values: d = (max - min) / 15, m = min, codes min(15, trunc((x - m)/d + 0.5)). */
static void q4_1_block(const float *x, uint8_t *out)
{
	float mn = x[0], mx = x[0];
	for (int j = 1; j < 32; j++) {
		mn = x[j] < mn ? x[j] : mn;
		mx = x[j] > mx ? x[j] : mx;
	}
	float d = (mx - mn) / 15, id = d != 0 ? 1.0f / d : 0;
	uint16_t hd = gg_f16(d), hm = gg_f16(mn);
	memcpy(out, &hd, 2);
	memcpy(out + 2, &hm, 2);
	for (int j = 0; j < 16; j++) {
		int lo = (int)((x[j] - mn) * id + 0.5f), hi = (int)((x[j + 16] - mn) * id + 0.5f);
		out[4 + j] = (uint8_t)((lo > 15 ? 15 : lo) | (hi > 15 ? 15 : hi) << 4);
	}
}

static const char *gg_type_name(int type)
{
	return type == GG_Q4_0 ? "Q4_0" : type == GG_Q4_1 ? "Q4_1" : "F32";
}

uint64_t gg_row_bytes(int type, int64_t cols)
{
	return type == GG_Q4_0 ? (uint64_t)cols / 32 * 18 : type == GG_Q4_1 ? (uint64_t)cols / 32 * 20
									  : (uint64_t)cols * 4;
}

void gg_encode_row(int type, const float *x, int64_t cols, uint8_t *out)
{
	if (type == GG_F32) {
		memcpy(out, x, (size_t)cols * 4);
		return;
	}
	for (int64_t b = 0; b < cols / 32; b++)
		(type == GG_Q4_0 ? q4_0_block : q4_1_block)(x + 32 * b, out + gg_row_bytes(type, 32) * b);
}

/* ---- tensors ------------------------------------------------------------------------------- */

int gg_add(gg_model *g, const char *name, int type, int n_dims, const int64_t *ne,
	   const char *hf, int parts, const char *hf_tail, coli_err *e)
{
	if (g->n == g->cap) {
		int cap = g->cap ? 2 * g->cap : 64;
		gg_tensor *t = realloc(g->t, (size_t)cap * sizeof(*t));
		if (!t)
			return coli_errf(e, COLI_ENOMEM, "out of memory listing %d GGUF tensors", cap);
		g->t = t;
		g->cap = cap;
	}
	gg_tensor *t = &g->t[g->n++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->type = ne[0] % 32 ? GG_F32 : type;
	t->n_dims = n_dims;
	for (int i = 0; i < 3; i++)
		t->ne[i] = i < n_dims ? ne[i] : 1;
	t->parts = parts;
	snprintf(t->hf, sizeof(t->hf), "%s", hf);
	snprintf(t->hf_tail, sizeof(t->hf_tail), "%s", hf_tail ? hf_tail : "");
	t->nbytes = gg_row_bytes(t->type, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2]);
	return 0;
}

gg_tensor *gg_last(gg_model *g)
{
	return &g->t[g->n - 1];
}

int64_t gg_vperm_src(const gg_vperm *p, int64_t i)
{
	int64_t k = i - p->start;
	if (p->axis == GG_AXIS_NONE || k < 0 || k >= (int64_t)p->nk * p->r * p->dim)
		return i;
	int64_t head = k / p->dim; /* tiled: head j nk + g holds the grouped head g r + j */
	return p->start + (head % p->nk * p->r + head / p->nk) * p->dim + k % p->dim;
}

void gg_part_name(const gg_tensor *t, int i, char *buf, size_t cap)
{
	if (t->parts > 1)
		snprintf(buf, cap, "%s%d%s", t->hf, i, t->hf_tail);
	else
		snprintf(buf, cap, "%s", t->hf);
}

/* Offsets inside the data section; its total size. */
static uint64_t layout(gg_model *g)
{
	uint64_t off = 0;
	for (int i = 0; i < g->n; i++) {
		g->t[i].offset = off;
		off = (off + g->t[i].nbytes + GG_ALIGN - 1) / GG_ALIGN * GG_ALIGN;
	}
	return off;
}

static void tensor_infos(gg_buf *b, const gg_model *g)
{
	for (int i = 0; i < g->n; i++) {
		const gg_tensor *t = &g->t[i];
		gg_str(b, t->name);
		gg_u32(b, (uint32_t)t->n_dims);
		for (int d = 0; d < t->n_dims; d++)
			gg_u64(b, (uint64_t)t->ne[d]);
		gg_u32(b, (uint32_t)t->type);
		gg_u64(b, t->offset);
	}
}

/* The whole header: magic, counts, key-values, tensor infos, padding to the alignment. */
static int header(gg_buf *h, const gg_buf *kv, const gg_model *g, coli_err *e)
{
	static const uint8_t zero[GG_ALIGN];
	gg_put(h, "GGUF", 4);
	gg_u32(h, 3);
	gg_u64(h, (uint64_t)g->n);
	gg_u64(h, kv->n_kv);
	gg_put(h, kv->p, kv->n);
	tensor_infos(h, g);
	gg_put(h, zero, (GG_ALIGN - h->n % GG_ALIGN) % GG_ALIGN);
	return h->oom ? coli_errf(e, COLI_ENOMEM, "out of memory building the GGUF header") : 0;
}

/* ---- data ----------------------------------------------------------------------------------- */

typedef struct gg_job {
	int t, part;
	int64_t row0, nrows;
} gg_job;

typedef struct gg_writer {
	const gg_model *g;
	synth_src src;
	gg_job *jobs;
	int n_jobs;
	int fd;
	const char *path;
	uint64_t data_off;
} gg_writer;

/* Rows of one part per job: about GG_JOB_VALUES values, at least one row. */
static int make_jobs(gg_writer *w, coli_err *e)
{
	int cap = 0;
	for (int i = 0; i < w->g->n; i++) {
		const gg_tensor *t = &w->g->t[i];
		int64_t rows = t->ne[1] * t->ne[2] / t->parts, per = GG_JOB_VALUES / t->ne[0];
		per = per < 1 ? 1 : per;
		for (int p = 0; p < t->parts; p++)
			for (int64_t r = 0; r < rows; r += per) {
				if (w->n_jobs == cap) {
					cap = cap ? 2 * cap : 1024;
					gg_job *j = realloc(w->jobs, (size_t)cap * sizeof(*j));
					if (!j)
						return coli_errf(e, COLI_ENOMEM, "out of memory listing %d jobs", cap);
					w->jobs = j;
				}
				w->jobs[w->n_jobs++] = (gg_job){i, p, r, rows - r < per ? rows - r : per};
			}
	}
	return 0;
}

static int pwrite_all(const gg_writer *w, const uint8_t *p, uint64_t n, uint64_t off, coli_err *e)
{
	while (n) {
		ssize_t k = pwrite(w->fd, p, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return coli_errf(e, COLI_EIO, "%s: write of %llu bytes at %llu: %s", w->path,
					 (unsigned long long)n, (unsigned long long)off,
					 k < 0 ? strerror(errno) : "no progress");
		p += k;
		n -= (uint64_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

/* Rows [row0, row0 + n) of part name of t as the conversion makes them: rows or columns
 * reordered (t->perm), values transformed (t->xform). tmp: scratch of cols floats. */
static int job_rows(const gg_writer *w, const gg_tensor *t, const char *name, int64_t row0,
		    int64_t n, float *x, float *tmp, coli_err *e)
{
	int64_t cols = t->ne[0];
	if (t->perm.axis == GG_AXIS_ROWS) {
		for (int64_t r = 0; r < n; r++)
			if (w->src.rows(&w->src, name, gg_vperm_src(&t->perm, row0 + r), 1, x + r * cols, e))
				return -1;
	} else if (w->src.rows(&w->src, name, row0, n, x, e)) {
		return -1;
	}
	for (int64_t r = 0; t->perm.axis == GG_AXIS_COLS && r < n; r++) {
		float *row = x + r * cols;
		memcpy(tmp, row, (size_t)cols * sizeof(float));
		for (int64_t c = 0; c < cols; c++)
			row[c] = tmp[gg_vperm_src(&t->perm, c)];
	}
	for (int64_t k = 0; t->xform != GG_X_NONE && k < n * cols; k++)
		x[k] = t->xform == GG_X_PLUS1 ? x[k] + 1 : -expf(x[k]);
	return 0;
}

static int run_job(void *ctx, int i, coli_err *e)
{
	const gg_writer *w = ctx;
	const gg_job *j = &w->jobs[i];
	const gg_tensor *t = &w->g->t[j->t];
	int64_t cols = t->ne[0], rows_per_part = t->ne[1] * t->ne[2] / t->parts;
	uint64_t rb = gg_row_bytes(t->type, cols);
	char name[256];
	if (synth_interrupted)
		return coli_errf(e, COLI_EIO, "interrupted");
	gg_part_name(t, j->part, name, sizeof(name));
	float *x = coli_malloc((size_t)((j->nrows + 1) * cols) * sizeof(float), e);
	uint8_t *q = x ? coli_malloc((size_t)(rb * (uint64_t)j->nrows), e) : NULL;
	int rc = q ? job_rows(w, t, name, j->row0, j->nrows, x, x + j->nrows * cols, e) : -1;
	for (int64_t r = 0; rc == 0 && r < j->nrows; r++)
		gg_encode_row(t->type, x + r * cols, cols, q + rb * (uint64_t)r);
	uint64_t off = w->data_off + t->offset + rb * (uint64_t)(j->part * rows_per_part + j->row0);
	if (rc == 0)
		rc = pwrite_all(w, q, rb * (uint64_t)j->nrows, off, e);
	free(x);
	free(q);
	return rc;
}

/* Checks every part exists with the shape the GGUF tensor expects. */
static int check_parts(const gg_model *g, const synth_src *src, coli_err *e)
{
	for (int i = 0; i < g->n; i++) {
		const gg_tensor *t = &g->t[i];
		for (int p = 0; p < t->parts; p++) {
			char name[256];
			int64_t rows, cols, want = t->ne[1] * t->ne[2] / t->parts;
			gg_part_name(t, p, name, sizeof(name));
			if (src->shape(src, name, &rows, &cols) || cols != t->ne[0] || rows != want)
				return coli_errf(e, COLI_EDATA, "%s: no tensor %s of %lld x %lld for it",
						 t->name, name, (long long)want, (long long)t->ne[0]);
		}
	}
	return 0;
}

static int write_file(gg_writer *w, const gg_buf *h, uint64_t data_bytes, int threads,
		      coli_err *e)
{
	w->data_off = h->n;
	if (ftruncate(w->fd, (off_t)(h->n + data_bytes)))
		return coli_errf(e, COLI_EIO, "%s: cannot size to %llu bytes: %s", w->path,
				 (unsigned long long)(h->n + data_bytes), strerror(errno));
	if (pwrite_all(w, h->p, h->n, 0, e) || make_jobs(w, e) ||
	    synth_parallel(w->n_jobs, threads, run_job, w, e))
		return -1;
	if (fsync(w->fd))
		return coli_errf(e, COLI_EIO, "%s: fsync: %s", w->path, strerror(errno));
	return 0;
}

static int write_tmp(gg_writer *w, const char *tmp, const gg_buf *h, uint64_t data_bytes,
		     int threads, coli_err *e)
{
	w->path = tmp;
	w->fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0)
		return coli_errf(e, COLI_EIO, "%s: %s", tmp, strerror(errno));
	int rc = write_file(w, h, data_bytes, threads, e);
	if (close(w->fd) && rc == 0)
		rc = coli_errf(e, COLI_EIO, "%s: close: %s", tmp, strerror(errno));
	return rc;
}

static int write_gguf(const char *path, gg_model *g, const gg_buf *kv, const synth_src *src,
		      int threads, uint64_t *bytes, coli_err *e)
{
	gg_buf h = {0};
	gg_writer w = {.g = g, .src = *src};
	char tmp[4200];
	uint64_t data_bytes = layout(g);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int rc = check_parts(g, src, e) || header(&h, kv, g, e) ||
		 write_tmp(&w, tmp, &h, data_bytes, threads, e) ? -1 : 0;
	if (rc == 0 && rename(tmp, path))
		rc = coli_errf(e, COLI_EIO, "%s: rename to %s: %s", tmp, path, strerror(errno));
	if (rc)
		unlink(tmp);
	*bytes = h.n + data_bytes;
	free(h.p);
	free(w.jobs);
	return rc;
}

int synth_gguf_write(const char *path, const synth_plan *p, const synth_table *tb,
		     const synth_tok *tok, const synth_shape *s, const synth_opts *o, coli_err *e)
{
	gg_model g = {0};
	gg_buf kv = {0};
	synth_src src;
	uint64_t bytes = 0;
	double t0 = coli_now();
	synth_src_regen(&src, p, tb);
	int q35 = p->m->family == COLI_FAM_QWEN3_5_MOE;
	int rc = (q35 ? gg_qwen35_tensors(&g, p->m, o->gguf_dense, o->gguf_experts, e)
		      : gg_qwen_tensors(&g, p->m, o->gguf_dense, o->gguf_experts, e)) ||
		 (q35 ? gg_qwen35_metadata(&kv, o, p->m, tok, s, e) : gg_qwen_metadata(&kv, o, p->m, tok, s, e)) ||
		 write_gguf(path, &g, &kv, &src, o->threads, &bytes, e) ? -1 : 0;
	if (rc == 0) {
		double dt = coli_now() - t0;
		fprintf(stderr, SYNTH_TOOL ": wrote %.2f GB (GGUF, %d tensors, experts %s, dense %s) to %s "
			"in %.2f s\n", bytes / 1e9, g.n, gg_type_name(o->gguf_experts),
			gg_type_name(o->gguf_dense), path, dt);
	}
	free(g.t);
	free(kv.p);
	return rc;
}
