/* test_safetensors.c: the safetensors reader on hand-made good and corrupt files and on the
 * reference fixture checkpoints. */
#include "safetensors.h"
#include "t.h"

#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char scratch[] = "/tmp/coli-test-safetensors-XXXXXX";

/* scratch/rel, in a static buffer (one at a time is enough here). */
static const char *sp(const char *rel)
{
	static char buf[2][512];
	static int k;
	k ^= 1;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", scratch, rel);
	return buf[k];
}

/* The data byte at offset i of every file written here, so data reads can be checked. */
static uint8_t pat(size_t i)
{
	return (uint8_t)(i * 7 + 1);
}

/* Writes a u64 LE length n (which need not match), the header text and data_len pattern bytes. */
static void write_raw(const char *path, uint64_t n, const char *hdr, size_t data_len)
{
	FILE *f = fopen(path, "wb");
	if (!f) {
		printf("FAIL safetensors: cannot create %s\n", path);
		exit(1);
	}
	for (int i = 0; i < 8; i++)
		fputc((int)(n >> (8 * i) & 0xff), f);
	fputs(hdr, f);
	for (size_t i = 0; i < data_len; i++)
		fputc(pat(i), f);
	fclose(f);
}

static void write_st(const char *path, const char *hdr, size_t data_len)
{
	write_raw(path, strlen(hdr), hdr, data_len);
}

/* Opening a corrupt file must fail cleanly, with EDATA and a message naming the field. */
static void expect_fail(const char *check, const char *hdr, size_t data_len, const char *want)
{
	coli_ckpt *c = (coli_ckpt *)1;
	coli_err e = {0};
	write_st(sp("bad.safetensors"), hdr, data_len);
	int rc = coli_ckpt_open_file(&c, sp("bad.safetensors"), &e);
	if (getenv("T_VERBOSE"))
		printf("  %s\n", e.msg);
	T_CHECK(check, rc == -1 && !c && e.code == COLI_EDATA && strstr(e.msg, want) &&
		strstr(e.msg, "bad.safetensors"), "rc %d code %d msg '%s', want '%s'", rc, e.code,
		e.msg, want);
	coli_ckpt_close(rc ? NULL : c);
}

/* Same, for a file whose length prefix is given explicitly. */
static void expect_fail_raw(const char *check, uint64_t n, const char *hdr, const char *want)
{
	coli_ckpt *c = NULL;
	coli_err e = {0};
	write_raw(sp("raw.safetensors"), n, hdr, 0);
	int rc = coli_ckpt_open_file(&c, sp("raw.safetensors"), &e);
	T_CHECK(check, rc == -1 && !c && e.code == COLI_EDATA && strstr(e.msg, want),
		"rc %d code %d msg '%s', want '%s'", rc, e.code, e.msg, want);
	coli_ckpt_close(c);
}

static int data_matches(const coli_ckpt *c, const coli_st_tensor *t, size_t rel_begin)
{
	const uint8_t *p = coli_ckpt_data(c, t);
	for (size_t i = 0; i < t->nbytes; i++)
		if (p[i] != pat(rel_begin + i))
			return 0;
	return 1;
}

static void test_dtypes(void)
{
	int ok = 1;
	for (int i = 0; i < COLI_DT_COUNT; i++)
		ok &= coli_dtype_parse(coli_dtype_name((coli_dtype)i)) == i;
	T_CHECK("safetensors: dtype names round-trip", ok, "a name did not parse back");
	T_CHECK("safetensors: dtype sizes", coli_dtype_size(COLI_DT_BF16) == 2 &&
		coli_dtype_size(COLI_DT_F32) == 4 && coli_dtype_size(COLI_DT_F8_E4M3) == 1 &&
		coli_dtype_size(COLI_DT_I32) == 4 && coli_dtype_size(COLI_DT_U8) == 1,
		"wrong size");
	T_CHECK("safetensors: unknown dtype parses to -1", coli_dtype_parse("Q7") == -1 &&
		coli_dtype_parse("bf16") == -1, "accepted");
}

#define GOOD_HDR                                                                           \
	"{\"__metadata__\":{\"format\":\"pt\"},"                                          \
	"\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"              \
	"\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]},"                \
	"\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[32,32]},"                \
	"\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[32,36]}}    "

static void test_good_file(void)
{
	coli_ckpt *c = NULL;
	coli_err e = {0};
	write_st(sp("good.safetensors"), GOOD_HDR, 36);
	int rc = coli_ckpt_open_file(&c, sp("good.safetensors"), &e);
	T_CHECK("safetensors: valid file opens", rc == 0 && c, "%s", e.msg);
	if (rc)
		return;
	uint64_t ds = 8 + strlen(GOOD_HDR);
	const coli_st_tensor *b = coli_ckpt_find(c, "b"), *s = coli_ckpt_find(c, "s");
	T_CHECK("safetensors: tensors sorted by name", c->n_tensors == 4 &&
		!strcmp(c->tensors[0].name, "a") && !strcmp(c->tensors[3].name, "s"),
		"n %d", c->n_tensors);
	T_CHECK("safetensors: find returns dtype and shape", b && b->dtype == COLI_DT_F32 &&
		b->ndim == 2 && b->shape[0] == 2 && b->shape[1] == 3 && b->nelem == 6 &&
		b->nbytes == 24, "b wrong");
	T_CHECK("safetensors: offsets are absolute", b && b->offset == ds + 8 && b->file == 0,
		"offset %llu", b ? (unsigned long long)b->offset : 0ULL);
	T_CHECK("safetensors: data points at the tensor bytes", b && data_matches(c, b, 8),
		"bytes differ");
	T_CHECK("safetensors: scalar has ndim 0 and one element", s && s->ndim == 0 &&
		s->nelem == 1 && s->nbytes == 4, "s wrong");
	T_CHECK("safetensors: find of absent name is NULL", !coli_ckpt_find(c, "zz") &&
		!coli_ckpt_find(c, "__metadata__"), "found");
	T_CHECK("safetensors: file name and size", c->n_files == 1 &&
		!strcmp(c->files[0].name, "good.safetensors") && c->files[0].size == ds + 36 &&
		c->files[0].data_start == ds, "name '%s'", c->files[0].name);
	coli_ckpt_release(c, b);
	coli_ckpt_release(c, coli_ckpt_find(c, "e"));
	T_CHECK("safetensors: data readable after release", data_matches(c, b, 8), "differ");
	coli_ckpt_close(c);
	coli_ckpt_close(NULL);
}

#define T1(dt, shape, offs) "{\"w\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" offs "}"

static void test_corrupt_tensors(void)
{
	expect_fail("safetensors: rejects data past end of file", T1("BF16", "[4,8]", "[0,64]") "}",
		    32, "data_offsets: end 64 exceeds data size 32");
	expect_fail("safetensors: rejects unknown dtype", T1("Q7", "[4]", "[0,4]") "}", 4,
		    "dtype 'Q7' unknown (BF16, F16");
	expect_fail("safetensors: rejects non-string dtype",
		    "{\"w\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
		    "tensor 'w': dtype: 3 is not a string");
	expect_fail("safetensors: rejects unexpected field", 
		    "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1, "tensor 'w': unexpected field 'x'");
	expect_fail("safetensors: rejects negative shape", T1("U8", "[2,-3]", "[0,6]") "}", 6,
		    "shape[1]: -3 is negative");
	expect_fail("safetensors: rejects non-integer shape", T1("U8", "[2.0]", "[0,2]") "}", 2,
		    "shape[0]: 2.0 is not an integer");
	expect_fail("safetensors: rejects too many dims", T1("U8", "[1,1,1,1,1,1,1,1,1]", "[0,1]")
		    "}", 1, "shape: 9 dims exceeds bound 8");
	expect_fail("safetensors: rejects shape/offset size mismatch", T1("BF16", "[4,4]",
		    "[0,30]") "}", 32, "shape [4, 4] x BF16 is 32 bytes but data_offsets span 30");
	expect_fail("safetensors: rejects shape product overflow", T1("F32",
		    "[4294967296,4294967296]", "[0,4]") "}", 4, "overflows");
	expect_fail("safetensors: rejects begin > end", T1("U8", "[0]", "[8,4]") "}", 8,
		    "data_offsets: begin 8 > end 4");
	expect_fail("safetensors: rejects negative offset", T1("U8", "[4]", "[-4,0]") "}", 8,
		    "data_offsets: [-4,0] is not two non-negative integers");
	expect_fail("safetensors: rejects three offsets", T1("U8", "[4]", "[0,4,8]") "}", 8,
		    "data_offsets");
	expect_fail("safetensors: rejects missing data_offsets",
		    "{\"w\":{\"dtype\":\"U8\",\"shape\":[4]}}", 4, "tensor 'w': data_offsets: missing");
	expect_fail("safetensors: rejects missing shape",
		    "{\"w\":{\"dtype\":\"U8\",\"data_offsets\":[0,4]}}", 4, "shape: missing");
	expect_fail("safetensors: rejects tensor that is not an object", "{\"w\":[1]}", 0,
		    "tensor 'w': not an object");
	expect_fail("safetensors: rejects overlapping spans", T1("U8", "[8]", "[0,8]")
		    ",\"v\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}", 12,
		    "tensor 'v': data_offsets [4, 12] overlap tensor 'w' [0, 8]");
	expect_fail("safetensors: rejects duplicate names", T1("U8", "[4]", "[0,4]")
		    ",\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8,
		    "duplicate tensor name");
	expect_fail("safetensors: rejects non-string metadata",
		    "{\"__metadata__\":{\"n\":1}}", 0, "__metadata__: value of 'n'");
}

static void test_empty_spans(void)
{
	coli_ckpt *c = NULL;
	coli_err e = {0};
	write_st(sp("empty.safetensors"), T1("U8", "[0]", "[4,4]")
		 ",\"v\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8);
	int rc = coli_ckpt_open_file(&c, sp("empty.safetensors"), &e);
	T_CHECK("safetensors: empty span inside another is not an overlap", rc == 0, "%s", e.msg);
	coli_ckpt_close(c);
}

static void test_corrupt_header(void)
{
	expect_fail_raw("safetensors: rejects header length past end of file", 999999, "{}",
			"header length 999999 exceeds the 2 bytes after the 8-byte length prefix (file size 10)");
	expect_fail_raw("safetensors: header length equal to the file size names the bytes after the prefix", 10,
			"{}", "header length 10 exceeds the 2 bytes after the 8-byte length prefix (file size 10)");
	expect_fail_raw("safetensors: rejects header length 0", 0, "{}", "header length 0");
	expect_fail_raw("safetensors: rejects header length over bound", 200u << 20, "{}",
			"header length 209715200 exceeds bound 104857600");
	expect_fail("safetensors: rejects malformed JSON", "{\"w\": {", 0,
		    "header: invalid JSON at line 1");
	expect_fail("safetensors: rejects trailing garbage after JSON", "{} x", 0, "invalid JSON");
	expect_fail("safetensors: rejects JSON that is not an object", "[1, 2]", 0,
		    "header: JSON is not an object");
	expect_fail("safetensors: rejects JSON string header", "\"abc\"", 0, "not an object");

	coli_ckpt *c = NULL;
	coli_err e = {0};
	FILE *f = fopen(sp("short.safetensors"), "wb");
	fputs("abc", f);
	fclose(f);
	int rc = coli_ckpt_open_file(&c, sp("short.safetensors"), &e);
	T_CHECK("safetensors: rejects 3-byte file", rc == -1 && strstr(e.msg, "file size 3"), "%s",
		e.msg);
	rc = coli_ckpt_open_file(&c, sp("absent.safetensors"), &e);
	T_CHECK("safetensors: missing file is an I/O error", rc == -1 && e.code == COLI_EIO &&
		strstr(e.msg, "absent.safetensors: No such file or directory"), "%s", e.msg);
}

/* ---- directories ---------------------------------------------------------------------------- */

#define SH_A "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}"
#define SH_C ",\"c\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}"
#define SH_B "{\"b\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}"

/* Makes scratch/dir with an index (weight_map body) and shards s1 (a, c) and s2 (b + extra). */
static const char *make_sharded(const char *dir, const char *wm, const char *s2_extra)
{
	char index[1024], s2[512];
	mkdir(sp(dir), 0700);
	snprintf(index, sizeof(index), "%s/model.safetensors.index.json", dir);
	FILE *f = fopen(sp(index), "w");
	fprintf(f, "{\"metadata\": {\"total_size\": 9}, \"weight_map\": {%s}}\n", wm);
	fclose(f);
	snprintf(index, sizeof(index), "%s/s1.safetensors", dir);
	write_st(sp(index), SH_A SH_C "}", 6);
	snprintf(index, sizeof(index), "%s/s2.safetensors", dir);
	snprintf(s2, sizeof(s2), SH_B "%s}", s2_extra);
	write_st(sp(index), s2, 8);
	return sp(dir);
}

#define WM_OK "\"c\": \"s1.safetensors\", \"b\": \"s2.safetensors\", \"a\": \"s1.safetensors\""

static void expect_dir_fail(const char *check, const char *dir, const char *want)
{
	coli_ckpt *c = (coli_ckpt *)1;
	coli_err e = {0};
	int rc = coli_ckpt_open(&c, dir, &e);
	T_CHECK(check, rc == -1 && !c && strstr(e.msg, want), "rc %d msg '%s', want '%s'", rc,
		e.msg, want);
}

static void test_sharded_ok(void)
{
	coli_ckpt *c = NULL;
	coli_err e = {0};
	int rc = coli_ckpt_open(&c, make_sharded("ok", WM_OK, ""), &e);
	T_CHECK("safetensors: sharded checkpoint opens", rc == 0 && c, "%s", e.msg);
	if (rc)
		return;
	const coli_st_tensor *b = coli_ckpt_find(c, "b"), *cc = coli_ckpt_find(c, "c");
	T_CHECK("safetensors: shards in sorted name order", c->n_files == 2 &&
		!strcmp(c->files[0].name, "s1.safetensors") &&
		!strcmp(c->files[1].name, "s2.safetensors"), "files %d", c->n_files);
	T_CHECK("safetensors: tensors merged and sorted", c->n_tensors == 3 &&
		!strcmp(c->tensors[0].name, "a") && !strcmp(c->tensors[2].name, "c"),
		"n %d", c->n_tensors);
	T_CHECK("safetensors: tensor knows its shard", b && b->file == 1 && cc && cc->file == 0 &&
		b->dtype == COLI_DT_I8, "wrong file");
	T_CHECK("safetensors: sharded data correct", b && cc && data_matches(c, b, 0) &&
		data_matches(c, cc, 4), "bytes differ");
	coli_ckpt_close(c);
}

static void test_sharded_bad(void)
{
	expect_dir_fail("safetensors: rejects index tensor absent from its shard",
			make_sharded("absent", WM_OK ", \"d\": \"s1.safetensors\"", ""),
			"model.safetensors.index.json: tensor 'd' not found in shard 's1.safetensors'");
	expect_dir_fail("safetensors: rejects index naming the wrong shard",
			make_sharded("wrong", "\"c\": \"s1.safetensors\", \"b\": \"s1.safetensors\", "
				     "\"a\": \"s2.safetensors\"", ""),
			"tensor 'b' not found in shard 's1.safetensors' (it is in 's2.safetensors')");
	expect_dir_fail("safetensors: rejects shard tensor missing from index",
			make_sharded("extra", WM_OK,
				     ",\"x\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[3,8]}"),
			"tensor 'x' of shard 's2.safetensors' is not in weight_map");
	expect_dir_fail("safetensors: rejects tensor in two shards",
			make_sharded("twice", WM_OK,
				     ",\"a\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[3,8]}"),
			"tensor 'a' is in both shard 's1.safetensors' and shard 's2.safetensors'");
	expect_dir_fail("safetensors: rejects index naming a missing shard file",
			make_sharded("missing", WM_OK ", \"z\": \"s9.safetensors\"", ""),
			"missing/s9.safetensors: No such file or directory");
	expect_dir_fail("safetensors: rejects shard path outside dir",
			make_sharded("escape", WM_OK ", \"z\": \"../s1.safetensors\"", ""),
			"weight_map['z']: shard '../s1.safetensors' is not a plain file name");
	expect_dir_fail("safetensors: rejects shard name '..'",
			make_sharded("dotdot", WM_OK ", \"z\": \"..\"", ""), "not a plain file name");
	expect_dir_fail("safetensors: rejects non-string shard",
			make_sharded("nonstr", WM_OK ", \"z\": 3", ""), "shard is not a string");
	expect_dir_fail("safetensors: rejects duplicate index keys",
			make_sharded("dupkey", WM_OK ", \"a\": \"s1.safetensors\"", ""),
			"duplicate");
	expect_dir_fail("safetensors: rejects empty weight_map", make_sharded("emptywm", "", ""),
			"weight_map: empty");
	const char *dir = make_sharded("corrupt", WM_OK ", \"q\": \"s3.safetensors\"", "");
	write_st(sp("corrupt/s3.safetensors"), T1("Q7", "[1]", "[0,1]") "}", 1);
	expect_dir_fail("safetensors: rejects corrupt shard", dir,
			"corrupt/s3.safetensors: tensor 'w': dtype 'Q7' unknown");
}

static void test_single_dir(void)
{
	coli_ckpt *c = NULL;
	coli_err e = {0};
	mkdir(sp("single"), 0700);
	write_st(sp("single/model.safetensors"), GOOD_HDR, 36);
	int rc = coli_ckpt_open(&c, sp("single"), &e);
	T_CHECK("safetensors: directory with model.safetensors opens", rc == 0 && c &&
		c->n_tensors == 4 && !strcmp(c->dir, sp("single")), "%s", e.msg);
	coli_ckpt_close(c);
	mkdir(sp("nothing"), 0700);
	expect_dir_fail("safetensors: empty directory names dir", sp("nothing"),
			"nothing: no model.safetensors.index.json or model.safetensors");
}

/* ---- the reference fixtures ------------------------------------------------------------------ */

static int is_tiny(const char *name)
{
	size_t n = strlen(name);
	return n > 5 && !strcmp(name + n - 5, "-tiny");
}

static void test_fixtures(void)
{
	DIR *d = opendir(t_fixtures());
	struct dirent *de;
	int n = 0;
	T_CHECK("safetensors: fixtures directory exists", d, "%s", t_fixtures());
	while (d && (de = readdir(d))) {
		char path[1024], check[512];
		coli_ckpt *c = NULL;
		coli_err e = {0};
		if (!is_tiny(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s/checkpoint", t_fixtures(), de->d_name);
		snprintf(check, sizeof(check), "safetensors: fixture %s opens", de->d_name);
		int rc = coli_ckpt_open(&c, path, &e);
		T_CHECK(check, rc == 0 && c->n_tensors > 0 && c->n_files == 2, "%s", e.msg);
		coli_ckpt_close(c);
		n++;
	}
	if (d)
		closedir(d);
	T_CHECK("safetensors: all ten fixtures found", n == 10, "found %d", n);
}

static void test_fixture_qwen(void)
{
	char path[1024];
	coli_ckpt *c = NULL;
	coli_err e = {0};
	snprintf(path, sizeof(path), "%s/qwen3_moe-tiny/checkpoint", t_fixtures());
	if (coli_ckpt_open(&c, path, &e)) {
		T_CHECK("safetensors: qwen3_moe-tiny embed_tokens", 0, "%s", e.msg);
		return;
	}
	const coli_st_tensor *t = coli_ckpt_find(c, "model.embed_tokens.weight");
	T_CHECK("safetensors: qwen3_moe-tiny embed_tokens is BF16 [512, 64]", t &&
		t->dtype == COLI_DT_BF16 && t->ndim == 2 && t->shape[0] == 512 && t->shape[1] == 64 &&
		t->nbytes == 512 * 64 * 2, "wrong");
	coli_ckpt_close(c);
}

/* An fp8 weight must come with its F32 block-scale companion, as convert expects. */
static void test_fixture_fp8(void)
{
	char path[1024], scale[512];
	coli_ckpt *c = NULL;
	coli_err e = {0};
	int fp8 = 0, paired = 0;
	snprintf(path, sizeof(path), "%s/deepseek_v3-fp8-tiny/checkpoint", t_fixtures());
	if (coli_ckpt_open(&c, path, &e)) {
		T_CHECK("safetensors: deepseek_v3-fp8-tiny fp8 tensors", 0, "%s", e.msg);
		return;
	}
	for (int i = 0; i < c->n_tensors; i++) {
		const coli_st_tensor *t = &c->tensors[i], *s;
		if (t->dtype != COLI_DT_F8_E4M3)
			continue;
		fp8++;
		snprintf(scale, sizeof(scale), "%s_scale_inv", t->name);
		s = coli_ckpt_find(c, scale);
		paired += s && s->dtype == COLI_DT_F32 && s->ndim == 2 &&
			  s->shape[0] == (t->shape[0] + 127) / 128 &&
			  s->shape[1] == (t->shape[1] + 127) / 128;
	}
	T_CHECK("safetensors: deepseek_v3-fp8-tiny has F8_E4M3 tensors with F32 _scale_inv",
		fp8 > 0 && paired == fp8, "%d fp8, %d paired", fp8, paired);
	coli_ckpt_close(c);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(void)
{
	if (!mkdtemp(scratch)) {
		printf("FAIL safetensors: mkdtemp\n");
		return 1;
	}
	test_dtypes();
	test_good_file();
	test_corrupt_tensors();
	test_empty_spans();
	test_corrupt_header();
	test_sharded_ok();
	test_sharded_bad();
	test_single_dir();
	test_fixtures();
	test_fixture_qwen();
	test_fixture_fp8();
	T_CHECK("safetensors: scratch dir removed",
		nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0, "%s", scratch);
	T_EXIT();
}
