/* safetensors.c: mmap-backed safetensors reader; every header rule is checked at open. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define DTYPE_LIST "BF16, F16, F32, F8_E4M3, I8, U8, I32, I64, F8_E8M0"

static const struct {
	const char *name;
	size_t size;
} dtypes[COLI_DT_COUNT] = {
	[COLI_DT_BF16] = {"BF16", 2},   [COLI_DT_F16] = {"F16", 2}, [COLI_DT_F32] = {"F32", 4},
	[COLI_DT_F8_E4M3] = {"F8_E4M3", 1}, [COLI_DT_I8] = {"I8", 1}, [COLI_DT_U8] = {"U8", 1},
	[COLI_DT_I32] = {"I32", 4}, [COLI_DT_I64] = {"I64", 8}, [COLI_DT_F8_E8M0] = {"F8_E8M0", 1},
};

int coli_dtype_parse(const char *s)
{
	for (int i = 0; i < COLI_DT_COUNT; i++)
		if (!strcmp(s, dtypes[i].name))
			return i;
	return -1;
}

const char *coli_dtype_name(coli_dtype t)
{
	return (unsigned)t < COLI_DT_COUNT ? dtypes[t].name : "?";
}

size_t coli_dtype_size(coli_dtype t)
{
	return (unsigned)t < COLI_DT_COUNT ? dtypes[t].size : 0;
}

/* ---- small helpers ---------------------------------------------------------------------- */

/* calloc that reports the size it could not get. */
static void *st_calloc(size_t n, size_t size, const char *what, coli_err *e)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		coli_errf(e, COLI_ENOMEM, "%s: out of memory allocating %zu x %zu bytes", what, n,
			  size);
	return p;
}

static char *st_strdup(const char *s, coli_err *e)
{
	size_t n = strlen(s) + 1;
	char *p = st_calloc(n, 1, s, e);
	if (p)
		memcpy(p, s, n);
	return p;
}

/* "dir/name", caller frees. */
static char *st_join(const char *dir, const char *name, coli_err *e)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = st_calloc(n, 1, name, e);
	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

/* The directory part of a path ("." when it has none), for coli_ckpt.dir. */
static char *st_dirname(const char *path, coli_err *e)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return st_strdup(".", e);
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	char *p = st_calloc(n + 1, 1, path, e);
	if (p)
		memcpy(p, path, n);
	return p;
}

/* "[4, 4]" into buf, for error messages. */
static const char *st_shape_str(const coli_st_tensor *t, char *buf, size_t cap)
{
	size_t o = (size_t)snprintf(buf, cap, "[");
	for (int i = 0; i < t->ndim && o < cap; i++)
		o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, i ? ", " : "", t->shape[i]);
	if (o < cap)
		snprintf(buf + o, cap - o, "]");
	return buf;
}

/* Compact JSON text of v into buf (truncated to fit), so messages can quote a bad value. */
static const char *st_json_str(const json_t *v, char *buf, size_t cap)
{
	size_t n = json_dumpb(v, buf, cap - 1, JSON_COMPACT | JSON_ENCODE_ANY);
	buf[n < cap - 1 ? n : cap - 1] = 0;
	return buf;
}

static void st_tensors_free(coli_st_tensor *ts, int n)
{
	for (int i = 0; i < n; i++)
		free(ts[i].name);
	free(ts);
}

static int st_cmp_name(const void *a, const void *b)
{
	return strcmp(((const coli_st_tensor *)a)->name, ((const coli_st_tensor *)b)->name);
}

/* Orders by start, so overlapping spans end up neighbours (ignoring empty ones). */
static int st_cmp_offset(const void *a, const void *b)
{
	const coli_st_tensor *x = a, *y = b;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* ---- one file: map, header length, JSON -------------------------------------------------- */

/* Opens and maps the whole file; a file shorter than the length prefix is bad data. */
static int st_map(coli_st_file *f, const char *path, coli_err *e)
{
	const char *slash = strrchr(path, '/');
	if (!(f->path = st_strdup(path, e)) || !(f->name = st_strdup(slash ? slash + 1 : path, e)))
		return -1;
	if ((f->fd = coli_open_regular(path, O_RDONLY, &f->size, e)) < 0)
		return -1;
	if (f->size < 8)
		return coli_errf(e, COLI_EDATA, "%s: file size %" PRIu64
			       " is smaller than the 8-byte header length", path, f->size);
	void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED, f->fd, 0);
	if (m == MAP_FAILED)
		return coli_errf(e, COLI_EIO, "%s: mmap %" PRIu64 " bytes: %s", path, f->size,
				 strerror(errno));
	f->map = m;
	return 0;
}

static void st_unmap(coli_st_file *f)
{
	if (f->map)
		munmap((void *)f->map, (size_t)f->size);
	if (f->fd >= 0)
		close(f->fd);
	free(f->path);
	free(f->name);
}

/* Reads the u64 LE prefix and checks it against the bound and the file before parsing. */
static int st_header_len(coli_st_file *f, coli_err *e)
{
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | f->map[i];
	if (n == 0)
		return coli_errf(e, COLI_EDATA, "%s: header length 0: the header must not be empty",
				 f->path);
	if (n > COLI_ST_MAX_HEADER)
		return coli_errf(e, COLI_EDATA, "%s: header length %" PRIu64 " exceeds bound %u",
				 f->path, n, COLI_ST_MAX_HEADER);
	if (n > f->size - 8)
		return coli_errf(e, COLI_EDATA, "%s: header length %" PRIu64 " exceeds the %" PRIu64
			       " bytes after the 8-byte length prefix (file size %" PRIu64 ")", f->path, n,
			       f->size - 8, f->size);
	f->data_start = 8 + n;
	return 0;
}

/* Parses the header; jansson would keep the last of two equal keys, so duplicates are
 * rejected at parse time. NULL on error. */
static json_t *st_load_json(const coli_st_file *f, coli_err *e)
{
	json_error_t je;
	json_t *root = json_loadb((const char *)f->map + 8, (size_t)(f->data_start - 8),
				  JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!root && json_error_code(&je) == json_error_duplicate_key)
		coli_errf(e, COLI_EDATA, "%s: header: duplicate tensor name or field at line %d "
			  "column %d (%s)", f->path, je.line, je.column, je.text);
	else if (!root)
		coli_errf(e, COLI_EDATA, "%s: header: invalid JSON at line %d column %d: %s",
			  f->path, je.line, je.column, je.text);
	else if (!json_is_object(root)) {
		coli_errf(e, COLI_EDATA, "%s: header: JSON is not an object", f->path);
		json_decref(root);
		root = NULL;
	}
	return root;
}

/* __metadata__ is free-form but must be an object of strings, as the reference requires. */
static int st_check_metadata(const coli_st_file *f, json_t *v, coli_err *e)
{
	const char *k;
	json_t *s;
	if (!json_is_object(v))
		return coli_errf(e, COLI_EDATA, "%s: __metadata__: not an object", f->path);
	json_object_foreach(v, k, s)
		if (!json_is_string(s))
			return coli_errf(e, COLI_EDATA, "%s: __metadata__: value of '%s' is not a "
					 "string", f->path, k);
	return 0;
}

/* ---- one tensor entry -------------------------------------------------------------------- */

/* Exactly dtype, shape and data_offsets: an unknown field may change the meaning of the bytes. */
static int st_check_fields(const coli_st_file *f, const char *name, json_t *v, coli_err *e)
{
	static const char *const need[] = {"dtype", "shape", "data_offsets"};
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x)
		if (strcmp(k, need[0]) && strcmp(k, need[1]) && strcmp(k, need[2]))
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s': unexpected field '%s'",
					 f->path, name, k);
	for (int i = 0; i < 3; i++)
		if (!json_object_get(v, need[i]))
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s': %s: missing", f->path,
					 name, need[i]);
	return 0;
}

static int st_parse_dtype(const coli_st_file *f, const char *name, json_t *v, coli_st_tensor *t,
			  coli_err *e)
{
	json_t *d = json_object_get(v, "dtype");
	char jb[128];
	if (!json_is_string(d))
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': dtype: %s is not a string",
				 f->path, name, st_json_str(d, jb, sizeof(jb)));
	int dt = coli_dtype_parse(json_string_value(d));
	if (dt < 0)
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': dtype '%s' unknown (" DTYPE_LIST
				 ")", f->path, name, json_string_value(d));
	t->dtype = (coli_dtype)dt;
	return 0;
}

static int st_parse_shape(const coli_st_file *f, const char *name, json_t *v, coli_st_tensor *t,
			  coli_err *e)
{
	json_t *s = json_object_get(v, "shape"), *x;
	char jb[128];
	size_t i;
	if (!json_is_array(s))
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': shape: %s is not an array",
				 f->path, name, st_json_str(s, jb, sizeof(jb)));
	if (json_array_size(s) > COLI_ST_MAX_DIMS)
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': shape: %zu dims exceeds bound %d",
				 f->path, name, json_array_size(s), COLI_ST_MAX_DIMS);
	json_array_foreach(s, i, x) {
		if (!json_is_integer(x))
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s': shape[%zu]: %s is not an "
					 "integer", f->path, name, i, st_json_str(x, jb, sizeof(jb)));
		if (json_integer_value(x) < 0)
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s': shape[%zu]: %" JSON_INTEGER_FORMAT
					 " is negative", f->path, name, i, json_integer_value(x));
		t->shape[i] = json_integer_value(x);
	}
	t->ndim = (int)json_array_size(s);
	return 0;
}

/* [begin, end] relative to the data section; stored absolute once both are in bounds. */
static int st_parse_offsets(const coli_st_file *f, const char *name, json_t *v, coli_st_tensor *t,
			    coli_err *e)
{
	json_t *o = json_object_get(v, "data_offsets");
	json_t *b = json_array_get(o, 0), *en = json_array_get(o, 1);
	char jb[128];
	if (!json_is_array(o) || json_array_size(o) != 2 || !json_is_integer(b) ||
	    !json_is_integer(en) || json_integer_value(b) < 0 || json_integer_value(en) < 0)
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': data_offsets: %s is not two "
				 "non-negative integers", f->path, name, st_json_str(o, jb, sizeof(jb)));
	uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(en);
	uint64_t data_size = f->size - f->data_start;
	if (begin > end)
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': data_offsets: begin %" PRIu64
				 " > end %" PRIu64, f->path, name, begin, end);
	if (end > data_size)
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': data_offsets: end %" PRIu64
				 " exceeds data size %" PRIu64, f->path, name, end, data_size);
	t->offset = f->data_start + begin;
	t->nbytes = end - begin;
	return 0;
}

/* product(shape) x dtype size, each step checked for overflow, must be the span's length. */
static int st_check_size(const coli_st_file *f, const char *name, coli_st_tensor *t, coli_err *e)
{
	char sb[256];
	uint64_t n = 1, sz = coli_dtype_size(t->dtype);
	int over = 0, zero = 0;
	for (int i = 0; i < t->ndim; i++) {
		uint64_t d = (uint64_t)t->shape[i];
		over |= d && n > UINT64_MAX / d;
		zero |= !d;
		n *= d;
	}
	over |= n > UINT64_MAX / sz;
	if (over && !zero) /* a zero dimension makes the true product 0 whatever overflowed */
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': shape %s x %s: byte count "
				 "overflows 64 bits", f->path, name, st_shape_str(t, sb, sizeof(sb)),
				 coli_dtype_name(t->dtype));
	if (n * sz != t->nbytes)
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': shape %s x %s is %" PRIu64
				 " bytes but data_offsets span %" PRIu64, f->path, name,
				 st_shape_str(t, sb, sizeof(sb)), coli_dtype_name(t->dtype), n * sz,
				 t->nbytes);
	t->nelem = n;
	return 0;
}

/* Fills t from one header entry; the name is copied last so a failure leaves nothing owned. */
static int st_parse_tensor(const coli_st_file *f, const char *name, json_t *v, coli_st_tensor *t,
			   coli_err *e)
{
	if (!json_is_object(v))
		return coli_errf(e, COLI_EDATA, "%s: tensor '%s': not an object", f->path, name);
	if (st_check_fields(f, name, v, e) || st_parse_dtype(f, name, v, t, e) ||
	    st_parse_shape(f, name, v, t, e) || st_parse_offsets(f, name, v, t, e) ||
	    st_check_size(f, name, t, e))
		return -1;
	t->name = st_strdup(name, e);
	return t->name ? 0 : -1;
}

/* Two non-empty spans sharing a byte would make two tensors read the same bytes. */
static int st_check_overlap(const coli_st_file *f, coli_st_tensor *ts, int n, coli_err *e)
{
	const coli_st_tensor *prev = NULL;
	qsort(ts, (size_t)n, sizeof(*ts), st_cmp_offset);
	for (int i = 0; i < n; i++) {
		const coli_st_tensor *t = &ts[i];
		if (!t->nbytes)
			continue;
		if (prev && t->offset < prev->offset + prev->nbytes)
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s': data_offsets [%" PRIu64
					 ", %" PRIu64 "] overlap tensor '%s' [%" PRIu64 ", %" PRIu64
					 "]", f->path, t->name, t->offset - f->data_start,
					 t->offset + t->nbytes - f->data_start, prev->name,
					 prev->offset - f->data_start,
					 prev->offset + prev->nbytes - f->data_start);
		prev = t;
	}
	return 0;
}

/* Parses every entry of the header into a fresh array (caller frees) tagged with `file`. */
static int st_parse_header(const coli_st_file *f, int file, coli_st_tensor **out, int *n_out,
			   coli_err *e)
{
	json_t *root = st_load_json(f, e), *v;
	if (!root)
		return -1;
	const char *k;
	int n = 0, rc = 0;
	coli_st_tensor *ts = st_calloc(json_object_size(root), sizeof(*ts), f->path, e);
	if (!ts)
		rc = -1;
	json_object_foreach(root, k, v) {
		if (rc)
			break;
		if (!strcmp(k, "__metadata__"))
			rc = st_check_metadata(f, v, e);
		else if (!(rc = st_parse_tensor(f, k, v, &ts[n], e)))
			ts[n++].file = file;
	}
	json_decref(root);
	if (!rc)
		rc = st_check_overlap(f, ts, n, e);
	if (rc) {
		st_tensors_free(ts, n);
		return -1;
	}
	*out = ts;
	*n_out = n;
	return 0;
}

/* ---- checkpoint assembly ----------------------------------------------------------------- */

static coli_ckpt *st_ckpt_new(const char *dir, int n_files, coli_err *e)
{
	coli_ckpt *c = st_calloc(1, sizeof(*c), "checkpoint", e);
	if (!c)
		return NULL;
	c->files = st_calloc((size_t)n_files, sizeof(*c->files), "checkpoint files", e);
	c->dir = c->files ? st_strdup(dir, e) : NULL;
	if (!c->dir) {
		free(c->files);
		free(c);
		return NULL;
	}
	c->n_files = n_files;
	for (int i = 0; i < n_files; i++)
		c->files[i].fd = -1;
	return c;
}

/* Maps file i, validates its header and appends its tensors to c->tensors. */
static int st_ckpt_load(coli_ckpt *c, int i, const char *path, coli_err *e)
{
	coli_st_file *f = &c->files[i];
	coli_st_tensor *ts;
	int n;
	if (st_map(f, path, e) || st_header_len(f, e) || st_parse_header(f, i, &ts, &n, e))
		return -1;
	size_t total = (size_t)c->n_tensors + (size_t)n;
	coli_st_tensor *all = realloc(c->tensors, (total ? total : 1) * sizeof(*all));
	if (!all) {
		st_tensors_free(ts, n);
		return coli_errf(e, COLI_ENOMEM, "%s: out of memory allocating %zu tensor entries",
				 path, total);
	}
	memcpy(all + c->n_tensors, ts, (size_t)n * sizeof(*ts));
	free(ts);
	c->tensors = all;
	c->n_tensors = (int)total;
	return 0;
}

/* Sorts the merged table by name; equal neighbours are one name in two shards. */
static int st_ckpt_sort(coli_ckpt *c, coli_err *e)
{
	qsort(c->tensors, (size_t)c->n_tensors, sizeof(*c->tensors), st_cmp_name);
	for (int i = 1; i < c->n_tensors; i++) {
		const coli_st_tensor *a = &c->tensors[i - 1], *b = &c->tensors[i];
		if (!strcmp(a->name, b->name))
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s' is in both shard '%s' and "
					 "shard '%s'", c->dir, a->name, c->files[a->file].name,
					 c->files[b->file].name);
	}
	return 0;
}

int coli_ckpt_open_file(coli_ckpt **out, const char *path, coli_err *e)
{
	*out = NULL;
	char *dir = st_dirname(path, e);
	coli_ckpt *c = dir ? st_ckpt_new(dir, 1, e) : NULL;
	free(dir);
	if (!c)
		return -1;
	if (st_ckpt_load(c, 0, path, e) || st_ckpt_sort(c, e)) {
		coli_ckpt_close(c);
		return -1;
	}
	*out = c;
	return 0;
}

/* ---- sharded checkpoints ----------------------------------------------------------------- */

static int st_cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A shard name from the index is joined to dir, so it must not climb out of it. */
static int st_check_shard_name(const char *index, const char *tensor, json_t *v, coli_err *e)
{
	const char *s = json_string_value(v);
	if (!s)
		return coli_errf(e, COLI_EDATA, "%s: weight_map['%s']: shard is not a string",
				 index, tensor);
	if (!*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, ".."))
		return coli_errf(e, COLI_EDATA, "%s: weight_map['%s']: shard '%s' is not a plain "
				 "file name", index, tensor, s);
	return 0;
}

/* The distinct shard names of weight_map, sorted so files[] is deterministic. Borrowed
 * pointers into wm; caller frees the array. */
static const char **st_shard_names(const char *index, json_t *wm, int *n_out, coli_err *e)
{
	const char **names = st_calloc(json_object_size(wm), sizeof(*names), index, e);
	const char *k;
	json_t *v;
	int n = 0;
	if (!names)
		return NULL;
	json_object_foreach(wm, k, v) {
		if (st_check_shard_name(index, k, v, e)) {
			free(names);
			return NULL;
		}
		names[n++] = json_string_value(v);
	}
	qsort(names, (size_t)n, sizeof(*names), st_cmp_str);
	int u = 0;
	for (int i = 0; i < n; i++)
		if (!u || strcmp(names[u - 1], names[i]))
			names[u++] = names[i];
	*n_out = u;
	return names;
}

/* Index and shards must agree both ways: each indexed tensor sits in its shard, and each
 * shard tensor is indexed (a tensor in the wrong shard fails the first loop). */
static int st_index_check(const coli_ckpt *c, const char *index, json_t *wm, coli_err *e)
{
	const char *k;
	json_t *v;
	json_object_foreach(wm, k, v) {
		const coli_st_tensor *t = coli_ckpt_find(c, k);
		if (!t || strcmp(c->files[t->file].name, json_string_value(v)))
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s' not found in shard '%s'%s%s%s",
					 index, k, json_string_value(v), t ? " (it is in '" : "",
					 t ? c->files[t->file].name : "", t ? "')" : "");
	}
	for (int i = 0; i < c->n_tensors; i++)
		if (!json_object_get(wm, c->tensors[i].name))
			return coli_errf(e, COLI_EDATA, "%s: tensor '%s' of shard '%s' is not in "
					 "weight_map", index, c->tensors[i].name,
					 c->files[c->tensors[i].file].name);
	return 0;
}

/* Opens every distinct shard of wm once, in sorted name order, then merges and cross-checks. */
static int st_open_shards(coli_ckpt **out, const char *dir, const char *index, json_t *wm,
			  coli_err *e)
{
	int n = 0, rc = 0;
	const char **names = st_shard_names(index, wm, &n, e);
	if (!names)
		return -1;
	if (!n) {
		free(names);
		return coli_errf(e, COLI_EDATA, "%s: weight_map: empty", index);
	}
	coli_ckpt *c = st_ckpt_new(dir, n, e);
	for (int i = 0; c && !rc && i < n; i++) {
		char *path = st_join(dir, names[i], e);
		rc = path ? st_ckpt_load(c, i, path, e) : -1;
		free(path);
	}
	free(names);
	if (!c || rc || st_ckpt_sort(c, e) || st_index_check(c, index, wm, e)) {
		coli_ckpt_close(c);
		return -1;
	}
	*out = c;
	return 0;
}

/* Parses the index file; every later check borrows from its weight_map. */
static int st_open_index(coli_ckpt **out, const char *dir, const char *index, coli_err *e)
{
	json_error_t je;
	json_t *root = json_load_file(index, JSON_REJECT_DUPLICATES, &je), *wm;
	if (!root)
		return coli_errf(e, json_error_code(&je) == json_error_cannot_open_file ? COLI_EIO
				 : COLI_EDATA, "%s: line %d column %d: %s", index, je.line,
				 je.column, je.text);
	wm = json_object_get(root, "weight_map");
	int rc = json_is_object(wm) ? st_open_shards(out, dir, index, wm, e)
				    : coli_errf(e, COLI_EDATA, "%s: weight_map: missing or not an "
						"object", index);
	json_decref(root);
	return rc;
}

int coli_ckpt_open(coli_ckpt **out, const char *dir, coli_err *e)
{
	*out = NULL;
	char *index = st_join(dir, INDEX_NAME, e);
	char *single = index ? st_join(dir, SINGLE_NAME, e) : NULL;
	int rc = -1; /* a failed st_join has filled e */
	if (!single)
		rc = -1;
	else if (access(index, F_OK) == 0)
		rc = st_open_index(out, dir, index, e);
	else if (access(single, F_OK) == 0)
		rc = coli_ckpt_open_file(out, single, e);
	else
		rc = coli_errf(e, COLI_EIO, "%s: no " INDEX_NAME " or " SINGLE_NAME " found", dir);
	free(index);
	free(single);
	return rc;
}

/* ---- lookup and lifetime ----------------------------------------------------------------- */

const coli_st_tensor *coli_ckpt_find(const coli_ckpt *c, const char *name)
{
	coli_st_tensor key = {.name = (char *)name};
	if (!c->n_tensors)
		return NULL;
	return bsearch(&key, c->tensors, (size_t)c->n_tensors, sizeof(key), st_cmp_name);
}

const void *coli_ckpt_data(const coli_ckpt *c, const coli_st_tensor *t)
{
	return c->files[t->file].map + t->offset;
}

/* A hint only: a failed madvise leaves pages cached, which is slower but still correct. */
void coli_ckpt_release(const coli_ckpt *c, const coli_st_tensor *t)
{
	if (!t->nbytes)
		return;
	long ps = sysconf(_SC_PAGESIZE);
	uintptr_t mask = (uintptr_t)(ps > 0 ? ps : 4096) - 1;
	uintptr_t lo = (uintptr_t)coli_ckpt_data(c, t) & ~mask;
	uintptr_t hi = (uintptr_t)coli_ckpt_data(c, t) + (uintptr_t)t->nbytes;
	(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void coli_ckpt_close(coli_ckpt *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n_files; i++)
		st_unmap(&c->files[i]);
	st_tensors_free(c->tensors, c->n_tensors);
	free(c->files);
	free(c->dir);
	free(c);
}
