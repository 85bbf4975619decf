/* test_golden_convert.c: coli-convert on the reference fixtures, byte for byte: int4 experts
 * against quant_ref_q4, every tensor against its source at 16 bits, int8 experts and padded
 * int4 rows against the gs64 quantizer. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "container.h"
#include "quant.h"
#include "safetensors.h"
#include "t.h"

static char scratch[] = "/tmp/coli-golden-XXXXXX";

static const char *const fams[] = {"olmoe", "qwen3_moe", "mixtral", "deepseek_v3", "glm4_moe",
				   "deepseek_v3-fp8"};

/* One converted container and its source checkpoint, with the tally of a pass over them. */
typedef struct gc {
	const char *fam, *mode;
	coli_container *c;
	coli_ckpt *src;
	int items, bad;
	char why[512]; /* the first mismatch */
} gc;

__attribute__((format(printf, 2, 3))) static int miss(gc *g, const char *fmt, ...)
{
	va_list ap;
	if (g->bad++ == 0) {
		va_start(ap, fmt);
		vsnprintf(g->why, sizeof(g->why), fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Runs bin/coli-convert -q; returns its exit status (-1 if it did not exit). */
static int convert(const char *opts, const char *src, const char *out)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "bin/coli-convert -q %s '%s' '%s'", opts, src, out);
	int st = system(cmd);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int gc_open(gc *g, const char *fam, const char *mode, const char *opts)
{
	char out[512], src[512], name[256];
	coli_err e = {0, ""};
	memset(g, 0, sizeof(*g));
	g->fam = fam;
	g->mode = mode;
	snprintf(out, sizeof(out), "%s/%s-%s.coli", scratch, fam, mode);
	snprintf(src, sizeof(src), "%s/%s-tiny/checkpoint", t_fixtures(), fam);
	int st = convert(opts, src, out);
	int ok = st == 0 && coli_container_open(&g->c, out, &e) == 0 && coli_ckpt_open(&g->src, src, &e) == 0;
	snprintf(name, sizeof(name), "golden: %s %s: coli-convert %s succeeds and the container opens", fam, mode,
		 *opts ? opts : "(default options)");
	T_CHECK(name, ok, "exit status %d; %s", st, e.msg);
	return ok ? 0 : -1;
}

static void gc_close(gc *g)
{
	coli_container_close(g->c);
	coli_ckpt_close(g->src);
}

/* n bytes of section s at off (caller frees); NULL on a short read. */
static uint8_t *read_at(const gc *g, coli_section s, uint64_t off, uint64_t n)
{
	uint8_t *b = malloc(n ? n : 1);
	if (b && pread(g->c->fd[s], b, n, (off_t)off) != (ssize_t)n) {
		free(b);
		b = NULL;
	}
	return b;
}

/* "model.layers.L.<mlp|block_sparse_moe>.experts.X.<proj>.weight" -> layer, expert, proj
 * (gate_proj/w1 gate, up_proj/w3 up, down_proj/w2 down); -1 for any other name. */
static int parse_expert(const char *name, int *layer, int *expert, int *proj)
{
	static const char *const projs[6] = {"gate_proj", "up_proj", "down_proj", "w1", "w3", "w2"};
	char blk[32], pj[32];
	int n = 0;
	if (sscanf(name, "model.layers.%d.%31[^.].experts.%d.%31[^.].weight%n", layer, blk, expert, pj, &n) != 4 ||
	    n == 0 || name[n] != 0)
		return -1;
	for (int i = 0; i < 6; i++)
		if (strcmp(pj, projs[i]) == 0) {
			*proj = i % 3;
			return 0;
		}
	return -1;
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);
	return n >= k && strcmp(s + n - k, tail) == 0;
}

/* ---- encodings of one source tensor ---- */

/* Element i of a bf16/f16/f32 source as float32 bits (bf16 and f32 decoded here, not by quant.c). */
static uint32_t src_bits(const coli_st_tensor *t, const uint8_t *p, uint64_t i)
{
	uint16_t h;
	uint32_t u = 0xffffffffu;
	float f;
	if (t->dtype == COLI_DT_BF16) {
		memcpy(&h, p + 2 * i, 2);
		u = (uint32_t)h << 16;
	} else if (t->dtype == COLI_DT_F32) {
		memcpy(&u, p + 4 * i, 4);
	} else if (t->dtype == COLI_DT_F16) {
		memcpy(&h, p + 2 * i, 2);
		f = coli_f16_to_f32(h);
		memcpy(&u, &f, 4);
	}
	return u;
}

static int same_f32(gc *g, const coli_st_tensor *t, const uint8_t *buf, const coli_blob *b)
{
	const uint8_t *p = coli_ckpt_data(g->src, t);
	if (t->dtype != COLI_DT_BF16 && t->dtype != COLI_DT_F32 && t->dtype != COLI_DT_F16)
		return miss(g, "'%s': f32 blob from a %s source", t->name, coli_dtype_name(t->dtype));
	for (uint64_t i = 0; i < t->nelem; i++) {
		uint32_t got;
		memcpy(&got, buf + 4 * i, 4);
		if (got != src_bits(t, p, i))
			return miss(g, "'%s': f32 element %llu is 0x%08x, source 0x%08x", t->name,
				    (unsigned long long)i, got, src_bits(t, p, i));
	}
	return b->nbytes == 4 * t->nelem ? 0 : miss(g, "'%s': f32 blob of %llu bytes", t->name,
						     (unsigned long long)b->nbytes);
}

/* The fp8 scale grid of a source weight; NULL for other dtypes. */
static const coli_st_tensor *scale_of(const gc *g, const coli_st_tensor *t)
{
	char n[320];
	if (t->dtype != COLI_DT_F8_E4M3)
		return NULL;
	snprintf(n, sizeof(n), "%s_scale_inv", t->name);
	return coli_ckpt_find(g->src, n);
}

/* Bytes between the codes and the scales are zero. */
static int zero_gap(gc *g, const coli_st_tensor *t, const uint8_t *buf, const coli_blob *b)
{
	for (uint64_t i = b->codes_bytes; b->scales_bytes && i < b->scales_off; i++)
		if (buf[i])
			return miss(g, "'%s': padding byte %llu of the blob is 0x%02x", t->name, (unsigned long long)i, buf[i]);
	return 0;
}

/* Kept encodings: codes identical to the source bytes, fp8 scales identical to scale_inv. */
static int same_bytes(gc *g, const coli_st_tensor *t, const uint8_t *buf, const coli_blob *b)
{
	const coli_st_tensor *s = scale_of(g, t);
	if (b->codes_bytes != t->nbytes || memcmp(buf, coli_ckpt_data(g->src, t), t->nbytes) != 0)
		return miss(g, "'%s': %s codes differ from the source bytes", t->name, coli_enc_name(b->enc));
	if (b->enc != COLI_ENC_FP8)
		return b->scales_bytes == 0 ? 0 : miss(g, "'%s': scales in a %s blob", t->name, coli_enc_name(b->enc));
	if (!s || s->nbytes != b->scales_bytes ||
	    memcmp(buf + b->scales_off, coli_ckpt_data(g->src, s), s->nbytes) != 0)
		return miss(g, "'%s': fp8 scales differ from %s_scale_inv", t->name, t->name);
	return zero_gap(g, t, buf, b);
}

/* Row r of the source as float32, zero-padded to whole groups of 64. */
static void source_row(const gc *g, const coli_st_tensor *t, const coli_blob *b, int64_t r, float *w)
{
	const coli_st_tensor *s = scale_of(g, t);
	int64_t padded = (b->cols + 63) / 64 * 64;
	coli_source_row_f32((int)t->dtype, coli_ckpt_data(g->src, t), (size_t)b->rows, (size_t)b->cols,
			    (size_t)r, s ? coli_ckpt_data(g->src, s) : NULL, (size_t)g->c->model.fp8_block[0],
			    (size_t)g->c->model.fp8_block[1], w);
	memset(w + b->cols, 0, (size_t)(padded - b->cols) * sizeof(float));
}

/* Quantized encodings: every row's codes and scales are what the gs64 quantizer makes of the
 * source row zero-padded to 64. */
static int same_quant(gc *g, const coli_st_tensor *t, const uint8_t *buf, const coli_blob *b)
{
	size_t groups = (size_t)(b->cols + 63) / 64;
	float *w = calloc(groups * 64, sizeof(float));
	uint8_t *codes = calloc(groups * 64, 1);
	uint16_t *sc = calloc(groups, sizeof(uint16_t));
	int rc = w && codes && sc ? 0 : miss(g, "out of memory");
	for (int64_t r = 0; rc == 0 && r < b->rows; r++) {
		source_row(g, t, b, r, w);
		if (b->enc == COLI_ENC_Q4)
			coli_q4_quantize_row(w, groups * 64, codes, sc);
		else
			coli_q8_quantize_row(w, groups * 64, (int8_t *)codes, sc);
		if (memcmp(buf + (uint64_t)r * b->row_bytes, codes, b->row_bytes) != 0 ||
		    memcmp(buf + b->scales_off + (uint64_t)r * groups * 2, sc, groups * 2) != 0)
			rc = miss(g, "'%s': %s row %lld differs from the quantizer", t->name, coli_enc_name(b->enc),
				  (long long)r);
	}
	free(w);
	free(codes);
	free(sc);
	return rc == 0 ? zero_gap(g, t, buf, b) : rc;
}

/* What a tensor of class `small` (or not) must be stored as at `bits`. */
static coli_enc want_enc(const coli_st_tensor *t, int small, int bits)
{
	if (small)
		return COLI_ENC_F32;
	if (bits == 4 || bits == 8)
		return bits == 4 ? COLI_ENC_Q4 : COLI_ENC_Q8;
	return t->dtype == COLI_DT_BF16 ? COLI_ENC_BF16 : t->dtype == COLI_DT_F16 ? COLI_ENC_F16
	     : t->dtype == COLI_DT_F8_E4M3 ? COLI_ENC_FP8 : COLI_ENC_F32;
}

/* Compares the blob stored at (s, off) with the encoding `want` of source tensor t. */
static int check_blob(gc *g, const coli_blob *b, coli_section s, uint64_t off, const coli_st_tensor *t,
		      coli_enc want)
{
	int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->shape[t->ndim - 1];
	g->items++;
	if (b->enc != want || b->rows != rows || b->cols != cols)
		return miss(g, "'%s': stored %s [%lld, %lld], expected %s [%lld, %lld]", t->name,
			    coli_enc_name(b->enc), (long long)b->rows, (long long)b->cols, coli_enc_name(want),
			    (long long)rows, (long long)cols);
	uint8_t *buf = read_at(g, s, off, b->nbytes);
	if (!buf)
		return miss(g, "'%s': cannot read %llu bytes at offset %llu of %s", t->name,
			    (unsigned long long)b->nbytes, (unsigned long long)off, coli_section_file(s));
	int rc = b->enc == COLI_ENC_F32 ? same_f32(g, t, buf, b)
	       : b->enc == COLI_ENC_Q4 || b->enc == COLI_ENC_Q8 ? same_quant(g, t, buf, b)
								: same_bytes(g, t, buf, b);
	free(buf);
	return rc;
}

/* ---- passes over a whole container ---- */

/* Small tensors, decided from the name and not from the library: vectors and routers. */
static int is_small(const coli_st_tensor *t)
{
	return t->ndim == 1 || ends_with(t->name, "mlp.gate.weight") || ends_with(t->name, "block_sparse_moe.gate.weight");
}

static int layer_of(const char *name)
{
	int l = -1;
	return sscanf(name, "model.layers.%d.", &l) == 1 ? l : -1;
}

static int check_part(gc *g, const coli_st_tensor *t, int layer, int x, int p, const int bits[3])
{
	const coli_lexperts *le = coli_container_experts(g->c, layer);
	int mtp = layer >= g->c->model.n_layers;
	if (!le || x >= le->n_experts || le->mtp != mtp)
		return miss(g, "'%s': no record for layer %d expert %d (mtp %d)", t->name, layer, x, mtp);
	return check_blob(g, &le->part[p], COLI_SEC_EXPERTS, coli_record_offset(le, x) + le->part_off[p], t,
			  want_enc(t, 0, mtp ? bits[2] : bits[0]));
}

static int check_dense(gc *g, const coli_st_tensor *t, const int bits[3])
{
	const coli_ltensor *lt = coli_container_tensor(g->c, t->name);
	int mtp = layer_of(t->name) >= g->c->model.n_layers;
	if (!lt || lt->section != (mtp ? COLI_SEC_MTP : COLI_SEC_DENSE))
		return miss(g, "'%s': not in %s", t->name, mtp ? "mtp.bin" : "dense.bin");
	return check_blob(g, &lt->blob, lt->section, lt->offset, t, want_enc(t, is_small(t), mtp ? bits[2] : bits[1]));
}

/* Every source tensor against its place in the container, and nothing stored without a source. */
static void check_all(gc *g, const int bits[3], const char *what)
{
	char name[512];
	int l, x, p, records = 0;
	for (int i = 0; i < g->src->n_tensors; i++) {
		const coli_st_tensor *t = &g->src->tensors[i];
		if (ends_with(t->name, "_scale_inv"))
			continue;
		if (parse_expert(t->name, &l, &x, &p) == 0)
			check_part(g, t, l, x, p, bits);
		else
			check_dense(g, t, bits);
	}
	for (int i = 0; i < g->c->layout.n_elayers; i++)
		records += g->c->layout.elayers[i].n_experts;
	int want = g->c->layout.n_tensors + 3 * records;
	snprintf(name, sizeof(name), "golden: %s %s: %s (%d tensors and %d expert parts)", g->fam, g->mode, what,
		 g->c->layout.n_tensors, 3 * records);
	T_CHECK(name, g->bad == 0 && g->items == want && want > 0, "%d of %d wrong, %d checked of %d stored: %s",
		g->bad, g->items, g->items, want, g->why);
}

static void check_verify(gc *g)
{
	char name[256];
	coli_err e = {0, ""};
	int rc = coli_container_verify(g->c, NULL, NULL, &e);
	snprintf(name, sizeof(name), "golden: %s %s: the container verifies", g->fam, g->mode);
	T_CHECK(name, rc == 0, "%s", e.msg);
}

/* ---- int4 experts against quant_ref_q4 ---- */

/* One '<tensor>.q4' of the reference: the record part's codes and scales, bit for bit. */
static int golden_one(gc *g, const coli_ckpt *ref, const coli_st_tensor *q)
{
	char base[256], sname[300];
	int l, x, p;
	snprintf(base, sizeof(base), "%.*s", (int)strlen(q->name) - 3, q->name);
	snprintf(sname, sizeof(sname), "%s_scales", q->name);
	const coli_st_tensor *s = coli_ckpt_find(ref, sname);
	g->items++;
	if (parse_expert(base, &l, &x, &p) < 0 || !s)
		return miss(g, "'%s': not an expert weight, or no %s", q->name, sname);
	const coli_lexperts *le = coli_container_experts(g->c, l);
	if (!le || le->mtp || x >= le->n_experts)
		return miss(g, "'%s': no main-layer record for layer %d expert %d", base, l, x);
	const coli_blob *b = &le->part[p];
	int64_t groups = (b->cols + 63) / 64;
	if (b->enc != COLI_ENC_Q4 || q->dtype != COLI_DT_I8 || s->dtype != COLI_DT_F16 || q->ndim != 2 ||
	    s->ndim != 2 || q->shape[0] != b->rows || q->shape[1] != b->cols || s->shape[0] != b->rows ||
	    s->shape[1] != groups)
		return miss(g, "'%s': stored %s [%lld, %lld] does not match the reference's shapes", base,
			    coli_enc_name(b->enc), (long long)b->rows, (long long)b->cols);
	uint8_t *buf = read_at(g, COLI_SEC_EXPERTS, coli_record_offset(le, x) + le->part_off[p], b->nbytes);
	const int8_t *rq = coli_ckpt_data(ref, q);
	const uint8_t *rs = coli_ckpt_data(ref, s);
	int rc = buf ? 0 : miss(g, "'%s': short read", base);
	for (int64_t r = 0; rc == 0 && r < b->rows; r++) {
		for (int64_t i = 0; rc == 0 && i < b->cols; i++)
			if (coli_q4_code(buf + (uint64_t)r * b->row_bytes, (size_t)i) != rq[r * b->cols + i])
				rc = miss(g, "'%s': code [%lld][%lld] is %d, reference %d", base, (long long)r,
					  (long long)i, coli_q4_code(buf + (uint64_t)r * b->row_bytes, (size_t)i),
					  rq[r * b->cols + i]);
		if (rc == 0 && memcmp(buf + b->scales_off + (uint64_t)(r * groups * 2), rs + r * groups * 2,
				      (size_t)groups * 2) != 0)
			rc = miss(g, "'%s': scales of row %lld differ from the reference", base, (long long)r);
	}
	free(buf);
	return rc;
}

static void check_golden(gc *g)
{
	char path[512], name[256];
	coli_ckpt *ref = NULL;
	coli_err e = {0, ""};
	int records = 0;
	snprintf(path, sizeof(path), "%s/%s-tiny/quant_ref_q4.safetensors", t_fixtures(), g->fam);
	if (coli_ckpt_open_file(&ref, path, &e) < 0)
		miss(g, "%s", e.msg);
	for (int i = 0; ref && i < ref->n_tensors; i++)
		if (ends_with(ref->tensors[i].name, ".q4"))
			golden_one(g, ref, &ref->tensors[i]);
	for (int i = 0; i < g->c->layout.n_elayers; i++)
		records += g->c->layout.elayers[i].mtp ? 0 : g->c->layout.elayers[i].n_experts;
	snprintf(name, sizeof(name), "golden: %s int4 expert codes and scales match quant_ref_q4 (%d tensors)",
		 g->fam, g->items);
	T_CHECK(name, g->bad == 0 && g->items == 3 * records && records > 0,
		"%d of %d wrong, %d main-layer expert parts stored: %s", g->bad, g->items, 3 * records, g->why);
	coli_ckpt_close(ref);
	g->items = g->bad = 0;
}

/* A dense q4 matrix whose width is not a multiple of 64: rows quantized as if zero-padded, and
 * the padding columns hold code 0. */
static void check_padded(gc *g)
{
	char name[512];
	const coli_ltensor *lt = NULL;
	for (int i = 0; !lt && i < g->c->layout.n_tensors; i++)
		if (g->c->layout.tensors[i].blob.enc == COLI_ENC_Q4 && g->c->layout.tensors[i].blob.cols % 64)
			lt = &g->c->layout.tensors[i];
	if (!lt)
		return;
	const coli_blob *b = &lt->blob;
	const coli_st_tensor *t = coli_ckpt_find(g->src, lt->name);
	uint8_t *buf = t ? read_at(g, lt->section, lt->offset, b->nbytes) : NULL;
	int rc = buf ? same_quant(g, t, buf, b) : miss(g, "'%s': not readable", lt->name);
	int64_t padded = (b->cols + 63) / 64 * 64;
	for (int64_t r = 0; rc == 0 && r < b->rows; r++)
		for (int64_t i = b->cols; rc == 0 && i < padded; i++)
			if (coli_q4_code(buf + (uint64_t)r * b->row_bytes, (size_t)i) != 0)
				rc = miss(g, "'%s': padding column %lld of row %lld has code %d", lt->name, (long long)i,
					  (long long)r, coli_q4_code(buf + (uint64_t)r * b->row_bytes, (size_t)i));
	snprintf(name, sizeof(name), "golden: %s dense q4 '%s' [%lld, %lld] is quantized as rows zero-padded to %lld",
		 g->fam, lt->name, (long long)b->rows, (long long)b->cols, (long long)padded);
	T_CHECK(name, rc == 0, "%s", g->why);
	free(buf);
	g->items = g->bad = 0;
}

/* One worker thread gives the same bytes, manifest included, as every core. */
static void check_threads(const char *fam)
{
	char a[512], b[512], src[512], cmd[1200], name[256];
	snprintf(a, sizeof(a), "%s/%s-default.coli", scratch, fam);
	snprintf(b, sizeof(b), "%s/%s-threads1.coli", scratch, fam);
	snprintf(src, sizeof(src), "%s/%s-tiny/checkpoint", t_fixtures(), fam);
	int st = convert("--threads 1", src, b);
	snprintf(cmd, sizeof(cmd), "diff -r '%s' '%s' >/dev/null", a, b);
	int same = st == 0 ? system(cmd) : -1;
	snprintf(name, sizeof(name), "golden: %s: --threads 1 writes the same container, byte for byte", fam);
	T_CHECK(name, st == 0 && same == 0, "exit status %d, diff %d", st, same);
}

static void test_family(const char *fam)
{
	static const int def[3] = {4, 4, 8}, b16[3] = {16, 16, 16}, e8[3] = {8, 4, 8};
	gc g;
	if (gc_open(&g, fam, "default", "") == 0) {
		check_golden(&g);
		check_padded(&g);
		check_all(&g, def, "every tensor matches its encoding (experts q4, dense q4, mtp q8, small f32)");
		check_verify(&g);
		check_threads(fam);
	}
	gc_close(&g);
	if (gc_open(&g, fam, "16-bit", "--expert-bits 16 --dense-bits 16 --mtp-bits 16") == 0) {
		check_all(&g, b16, "every matrix and expert part identical to the source bytes, small tensors exact f32");
		check_verify(&g);
	}
	gc_close(&g);
	if (gc_open(&g, fam, "expert-8", "--expert-bits 8") == 0) {
		check_all(&g, e8, "int8 expert codes and scales equal coli_q8_quantize_row of the source rows");
		check_verify(&g);
	}
	gc_close(&g);
}

int main(void)
{
	char cmd[128];
	if (!mkdtemp(scratch)) {
		T_CHECK("golden: scratch folder", 0, "mkdtemp failed");
		T_EXIT();
	}
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++)
		test_family(fams[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
	if (system(cmd) != 0)
		fprintf(stderr, "test_golden_convert: cannot remove %s\n", scratch);
	T_EXIT();
}
