/* manifest.c: manifest JSON <-> container description, validated field by field. */
#include "crc32.h"
#include "manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "sha256.h"

static const char *const class_names[] = {"small", "matrix", "expert"};
static const char *const proj_names[] = {"gate", "up", "down"};

/* ---- writing ---- */

static json_t *blob_json(const coli_blob *b)
{
	json_t *o = json_pack("{s:s, s:[I,I]}", "enc", coli_enc_name(b->enc), "shape",
			      (json_int_t)b->rows, (json_int_t)b->cols);
	if (b->enc == COLI_ENC_FP8)
		json_object_set_new(o, "block", json_pack("[I,I]", (json_int_t)b->block[0], (json_int_t)b->block[1]));
	json_object_set_new(o, "nbytes", json_integer((json_int_t)b->nbytes));
	return o;
}

static json_t *tensors_json(const coli_layout *L)
{
	json_t *a = json_array();
	for (int i = 0; i < L->n_tensors; i++) {
		const coli_ltensor *t = &L->tensors[i];
		json_t *o = blob_json(&t->blob);
		json_object_set_new(o, "name", json_string(t->name));
		json_object_set_new(o, "section", json_string(coli_section_file(t->section)));
		json_object_set_new(o, "layer", json_integer(t->layer));
		json_object_set_new(o, "class", json_string(class_names[t->cls]));
		json_object_set_new(o, "ndim", json_integer(t->ndim));
		json_object_set_new(o, "offset", json_integer((json_int_t)t->offset));
		json_object_set_new(o, "crc32", json_integer(t->crc));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *experts_json(const coli_layout *L)
{
	json_t *a = json_array();
	for (int i = 0; i < L->n_elayers; i++) {
		const coli_lexperts *x = &L->elayers[i];
		json_t *parts = json_array(), *crcs = json_array();
		for (int p = 0; p < 3; p++) {
			json_t *o = blob_json(&x->part[p]);
			json_object_set_new(o, "proj", json_string(proj_names[p]));
			json_object_set_new(o, "offset", json_integer((json_int_t)x->part_off[p]));
			json_array_append_new(parts, o);
		}
		for (int k = 0; k < x->n_experts; k++)
			json_array_append_new(crcs, json_integer(x->crc[k]));
		json_array_append_new(a, json_pack("{s:i, s:b, s:i, s:I, s:I, s:o, s:o}", "layer", x->layer,
						   "mtp", x->mtp, "count", x->n_experts, "offset",
						   (json_int_t)x->offset, "record_size", (json_int_t)x->record_size,
						   "parts", parts, "crc32", crcs));
	}
	return a;
}

static json_t *manifest_json(const coli_container *c, coli_err *e)
{
	json_error_t je;
	json_t *config = json_loads(c->config_json, 0, &je);
	json_t *prov = json_loads(c->provenance_json, 0, &je);
	json_t *sections = json_array(), *carried = json_array();
	for (int s = 0; s < COLI_SEC_COUNT; s++)
		json_array_append_new(sections, json_pack("{s:s, s:I}", "file", coli_section_file((coli_section)s),
							  "size", (json_int_t)c->layout.section_size[s]));
	for (int i = 0; i < c->n_carried; i++)
		json_array_append_new(carried, json_pack("{s:s, s:I, s:I}", "file", c->carried[i].file, "size",
							 (json_int_t)c->carried[i].size, "crc32",
							 (json_int_t)c->carried[i].crc));
	json_t *m = json_pack("{s:s, s:i, s:s, s:s, s:o*, s:i, s:{s:i, s:i, s:i}, s:i, s:o, s:o, s:o, s:o, s:o*}",
			      "format", "coli-container", "version", COLI_CONTAINER_VERSION, "identity",
			      c->identity_hex, "family", coli_family_name(c->model.family), "config", config,
			      "mtp_layers", c->model.n_mtp_layers, "bits", "expert", c->bits[0], "dense",
			      c->bits[1], "mtp", c->bits[2], "group_size", 64, "sections", sections,
			      "tensors", tensors_json(&c->layout), "experts", experts_json(&c->layout),
			      "carried", carried, "provenance", prov);
	if (!m || !config || !prov)
		coli_errf(e, COLI_ENOMEM, "cannot build the manifest JSON");
	return m;
}

int coli_manifest_write(const coli_container *c, coli_err *e)
{
	json_t *m = manifest_json(c, e);
	char *text = m ? json_dumps(m, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(m);
	if (!text)
		return m ? coli_errf(e, COLI_ENOMEM, "cannot serialise the manifest") : -1;
	size_t len = strlen(text);
	uint8_t *buf = coli_malloc(COLI_MANIFEST_HEADER + len, e);
	char *path = coli_path_join(c->dir, COLI_MANIFEST_FILE);
	int rc = -1;
	if (buf && path) {
		coli_manifest_header(buf, text, len);
		memcpy(buf + COLI_MANIFEST_HEADER, text, len);
		rc = coli_write_atomic(path, buf, COLI_MANIFEST_HEADER + len, e);
	} else if (!path) {
		coli_errf(e, COLI_ENOMEM, "out of memory");
	}
	free(text);
	free(buf);
	free(path);
	return rc;
}

/* ---- reading ---- */

typedef struct rd {
	const char *file; /* for messages */
	coli_err *e;
} rd;

static int bad(rd *r, const char *field, const char *why)
{
	return coli_errf(r->e, COLI_EDATA, "%s: %s: %s", r->file, field, why);
}

static int get_int(rd *r, json_t *o, const char *key, const char *where, long long lo, long long hi,
		   long long *out)
{
	char field[256];
	snprintf(field, sizeof(field), "%s%s", where, key);
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v))
		return bad(r, field, v ? "not an integer" : "missing");
	*out = json_integer_value(v);
	if (*out < lo || *out > hi)
		return coli_errf(r->e, COLI_EDATA, "%s: %s: %lld out of range [%lld, %lld]", r->file, field,
				 *out, lo, hi);
	return 0;
}

static int get_str(rd *r, json_t *o, const char *key, const char *where, const char **out)
{
	char field[256];
	snprintf(field, sizeof(field), "%s%s", where, key);
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		return bad(r, field, v ? "not a string" : "missing");
	*out = json_string_value(v);
	return 0;
}

static int parse_blob(rd *r, json_t *o, const char *where, coli_blob *b)
{
	const char *enc;
	long long rows, cols, nbytes, blk[2] = {0, 0};
	char field[256];
	json_t *shape = json_object_get(o, "shape"), *block = json_object_get(o, "block");
	if (get_str(r, o, "enc", where, &enc) < 0)
		return -1;
	snprintf(field, sizeof(field), "%sshape", where);
	if (!json_is_array(shape) || json_array_size(shape) != 2 ||
	    !json_is_integer(json_array_get(shape, 0)) || !json_is_integer(json_array_get(shape, 1)))
		return bad(r, field, "not [rows, cols]");
	rows = json_integer_value(json_array_get(shape, 0));
	cols = json_integer_value(json_array_get(shape, 1));
	snprintf(field, sizeof(field), "%sblock", where);
	if (block && json_unpack(block, "[I,I]", &blk[0], &blk[1]) < 0)
		return bad(r, field, "not [b0, b1]");
	int ienc = coli_enc_parse(enc);
	snprintf(field, sizeof(field), "%senc", where);
	if (ienc < 0)
		return coli_errf(r->e, COLI_EDATA, "%s: %s: '%s' unknown", r->file, field, enc);
	int64_t b2[2] = {blk[0], blk[1]};
	if (coli_blob_init(b, (coli_enc)ienc, rows, cols, b2, r->e) < 0) {
		coli_err_prefix(r->e, where);
		coli_err_prefix(r->e, r->file);
		return -1;
	}
	if (get_int(r, o, "nbytes", where, 0, 1ll << 62, &nbytes) < 0)
		return -1;
	if ((uint64_t)nbytes != b->nbytes)
		return coli_errf(r->e, COLI_EDATA, "%s: %snbytes: %lld, but %s [%lld, %lld] takes %llu", r->file,
				 where, nbytes, enc, rows, cols, (unsigned long long)b->nbytes);
	return 0;
}

static int parse_tensor(rd *r, json_t *o, int i, coli_ltensor *t)
{
	char where[300];
	const char *name, *sec, *cls;
	long long layer, ndim, off, crc;
	snprintf(where, sizeof(where), "tensors[%d].", i);
	if (!json_is_object(o))
		return coli_errf(r->e, COLI_EDATA, "%s: tensors[%d]: not an object", r->file, i);
	if (get_str(r, o, "name", where, &name) < 0 || get_str(r, o, "section", where, &sec) < 0 ||
	    get_str(r, o, "class", where, &cls) < 0)
		return -1;
	snprintf(where, sizeof(where), "tensor '%s': ", name);
	if (!(t->name = strdup(name)))
		return coli_errf(r->e, COLI_ENOMEM, "out of memory");
	if (strcmp(sec, "dense.bin") != 0 && strcmp(sec, "mtp.bin") != 0)
		return coli_errf(r->e, COLI_EDATA, "%s: %ssection: '%s' is not dense.bin or mtp.bin", r->file, where, sec);
	t->section = strcmp(sec, "mtp.bin") == 0 ? COLI_SEC_MTP : COLI_SEC_DENSE;
	t->cls = strcmp(cls, "small") == 0 ? COLI_TC_SMALL : strcmp(cls, "matrix") == 0 ? COLI_TC_MATRIX : 99;
	if (t->cls == 99)
		return coli_errf(r->e, COLI_EDATA, "%s: %sclass: '%s' unknown", r->file, where, cls);
	if (get_int(r, o, "layer", where, -1, COLI_MAX_LAYERS, &layer) < 0 ||
	    get_int(r, o, "ndim", where, 1, 2, &ndim) < 0 ||
	    get_int(r, o, "offset", where, 0, 1ll << 62, &off) < 0 ||
	    get_int(r, o, "crc32", where, 0, 0xffffffffll, &crc) < 0)
		return -1;
	t->layer = (int)layer;
	t->ndim = (int)ndim;
	t->offset = (uint64_t)off;
	t->crc = (uint32_t)crc;
	return parse_blob(r, o, where, &t->blob);
}

static int parse_elayer(rd *r, json_t *o, int i, coli_lexperts *x)
{
	char where[300];
	long long layer, count, off, rs, poff, crc;
	snprintf(where, sizeof(where), "experts[%d].", i);
	json_t *parts = json_object_get(o, "parts"), *crcs = json_object_get(o, "crc32");
	if (!json_is_object(o))
		return coli_errf(r->e, COLI_EDATA, "%s: experts[%d]: not an object", r->file, i);
	if (get_int(r, o, "layer", where, 0, COLI_MAX_LAYERS, &layer) < 0 ||
	    get_int(r, o, "count", where, 1, 1 << 20, &count) < 0 ||
	    get_int(r, o, "offset", where, 0, 1ll << 62, &off) < 0 ||
	    get_int(r, o, "record_size", where, 0, 1ll << 40, &rs) < 0)
		return -1;
	x->layer = (int)layer;
	x->mtp = json_is_true(json_object_get(o, "mtp"));
	x->n_experts = (int)count;
	x->offset = (uint64_t)off;
	x->record_size = (uint64_t)rs;
	if (!json_is_array(parts) || json_array_size(parts) != 3)
		return coli_errf(r->e, COLI_EDATA, "%s: %sparts: not an array of 3 (gate, up, down)", r->file, where);
	for (int p = 0; p < 3; p++) {
		char pw[320];
		snprintf(pw, sizeof(pw), "%sparts[%d].", where, p);
		const char *proj;
		if (parse_blob(r, json_array_get(parts, (size_t)p), pw, &x->part[p]) < 0 ||
		    get_int(r, json_array_get(parts, (size_t)p), "offset", pw, 0, 1ll << 40, &poff) < 0 ||
		    get_str(r, json_array_get(parts, (size_t)p), "proj", pw, &proj) < 0)
			return -1;
		if (strcmp(proj, proj_names[p]) != 0)
			return coli_errf(r->e, COLI_EDATA, "%s: %sproj: '%s', expected '%s'", r->file, pw, proj,
					 proj_names[p]);
		x->part_off[p] = (uint64_t)poff;
	}
	if (!json_is_array(crcs) || json_array_size(crcs) != (size_t)count)
		return coli_errf(r->e, COLI_EDATA, "%s: %scrc32: not an array of %lld", r->file, where, count);
	if (!(x->crc = coli_calloc((size_t)count, sizeof(uint32_t), r->e)))
		return -1;
	for (int k = 0; k < count; k++) {
		json_t *v = json_array_get(crcs, (size_t)k);
		crc = json_integer_value(v);
		if (!json_is_integer(v) || crc < 0 || crc > 0xffffffffll)
			return coli_errf(r->e, COLI_EDATA, "%s: %scrc32[%d]: not a 32-bit value", r->file, where, k);
		x->crc[k] = (uint32_t)crc;
	}
	return 0;
}

/* Offsets and sizes must be exactly the canonical placement of the blobs. */
static int check_placement(rd *r, coli_layout *L)
{
	coli_layout canon = *L;
	canon.tensors = malloc(sizeof(*L->tensors) * (size_t)(L->n_tensors ? L->n_tensors : 1));
	canon.elayers = malloc(sizeof(*L->elayers) * (size_t)(L->n_elayers ? L->n_elayers : 1));
	if (!canon.tensors || !canon.elayers) {
		free(canon.tensors);
		free(canon.elayers);
		return coli_errf(r->e, COLI_ENOMEM, "out of memory");
	}
	memcpy(canon.tensors, L->tensors, sizeof(*L->tensors) * (size_t)L->n_tensors);
	memcpy(canon.elayers, L->elayers, sizeof(*L->elayers) * (size_t)L->n_elayers);
	int rc = coli_layout_place(&canon, r->e);
	for (int i = 0; rc == 0 && i < L->n_tensors; i++)
		if (canon.tensors[i].offset != L->tensors[i].offset)
			rc = coli_errf(r->e, COLI_EDATA, "%s: tensor '%s': offset %llu, expected %llu", r->file,
				       L->tensors[i].name, (unsigned long long)L->tensors[i].offset,
				       (unsigned long long)canon.tensors[i].offset);
	for (int i = 0; rc == 0 && i < L->n_elayers; i++)
		for (int p = 0; rc == 0 && p < 3; p++)
			if (canon.elayers[i].part_off[p] != L->elayers[i].part_off[p] ||
			    canon.elayers[i].offset != L->elayers[i].offset ||
			    canon.elayers[i].record_size != L->elayers[i].record_size)
				rc = coli_errf(r->e, COLI_EDATA,
					       "%s: experts[%d] (layer %d): offset %llu record_size %llu, expected %llu and %llu",
					       r->file, i, L->elayers[i].layer, (unsigned long long)L->elayers[i].offset,
					       (unsigned long long)L->elayers[i].record_size,
					       (unsigned long long)canon.elayers[i].offset,
					       (unsigned long long)canon.elayers[i].record_size);
	for (int s = 0; rc == 0 && s < COLI_SEC_COUNT; s++)
		if (canon.section_size[s] != L->section_size[s])
			rc = coli_errf(r->e, COLI_EDATA, "%s: sections[%d].size: %llu, expected %llu", r->file, s,
				       (unsigned long long)L->section_size[s],
				       (unsigned long long)canon.section_size[s]);
	free(canon.tensors);
	free(canon.elayers);
	return rc;
}

/* The encoding a tensor of class cls may have at `bits` (16: the source's own). FP4 experts
 * (expert_dtype fp4) are fp4 below 16 bits, bf16 at 16. */
static int enc_allowed(const coli_model *m, coli_tclass cls, int bits, const coli_blob *b)
{
	if (cls == COLI_TC_SMALL)
		return b->enc == COLI_ENC_F32;
	if (cls == COLI_TC_EXPERT && m->fp4_experts)
		return b->enc == (bits == 16 ? COLI_ENC_BF16 : COLI_ENC_FP4);
	if (bits != 16)
		return b->enc == (bits == 4 ? COLI_ENC_Q4 : COLI_ENC_Q8);
	if (b->enc == COLI_ENC_FP8)
		return m->fp8 && b->block[0] == m->fp8_block[0] && b->block[1] == m->fp8_block[1];
	return b->enc == COLI_ENC_BF16 || b->enc == COLI_ENC_F16 || b->enc == COLI_ENC_F32;
}

static int check_blob(rd *r, const coli_container *c, const coli_tensor_spec *s, const coli_blob *b,
		      const char *what)
{
	int64_t rows = s->ndim == 2 ? s->shape[0] : 1, cols = s->ndim == 2 ? s->shape[1] : s->shape[0];
	int bits = c->bits[s->mtp ? 2 : s->cls == COLI_TC_EXPERT ? 0 : 1];
	if (b->rows != rows || b->cols != cols)
		return coli_errf(r->e, COLI_EDATA, "%s: %s: shape [%lld, %lld], config implies [%lld, %lld]", r->file,
				 what, (long long)b->rows, (long long)b->cols, (long long)rows, (long long)cols);
	if (!enc_allowed(&c->model, s->cls, bits, b) && s->cls == COLI_TC_SMALL)
		return coli_errf(r->e, COLI_EDATA, "%s: %s: enc '%s', small tensors are 'f32'", r->file, what,
				 coli_enc_name(b->enc));
	if (!enc_allowed(&c->model, s->cls, bits, b))
		return coli_errf(r->e, COLI_EDATA, "%s: %s: enc '%s' does not fit %d bits", r->file, what,
				 coli_enc_name(b->enc), bits);
	return 0;
}

/* Expert spec s (expert 0 of a layer opens a new expert layer) against the manifest's. */
static int check_expert_spec(rd *r, const coli_container *c, const coli_tensor_spec *s, int *ei)
{
	char what[256];
	if (s->expert == 0 && s->proj == 0)
		(*ei)++;
	const coli_lexperts *x = *ei <= c->layout.n_elayers ? &c->layout.elayers[*ei - 1] : NULL;
	if (!x || x->layer != s->layer)
		return coli_errf(r->e, COLI_EDATA, "%s: experts: no record layout for '%s'", r->file, s->name);
	if (s->expert != 0)
		return 0;
	snprintf(what, sizeof(what), "experts[%d].parts[%d]", *ei - 1, s->proj);
	if (x->mtp != s->mtp)
		return coli_errf(r->e, COLI_EDATA, "%s: experts[%d].mtp: %s, config implies %s", r->file, *ei - 1,
				 x->mtp ? "true" : "false", s->mtp ? "true" : "false");
	if (x->n_experts != c->model.n_experts)
		return coli_errf(r->e, COLI_EDATA, "%s: experts[%d].count: %d, config implies %d", r->file, *ei - 1,
				 x->n_experts, c->model.n_experts);
	return check_blob(r, c, s, &x->part[s->proj], what);
}

static int check_tensor_spec(rd *r, const coli_container *c, const coli_tensor_spec *s, int ti)
{
	const coli_ltensor *t = ti < c->layout.n_tensors ? &c->layout.tensors[ti] : NULL;
	char what[256];
	if (!t || strcmp(t->name, s->name) != 0)
		return coli_errf(r->e, COLI_EDATA, "%s: tensors[%d]: '%s', config implies '%s'", r->file, ti,
				 t ? t->name : "(end)", s->name);
	snprintf(what, sizeof(what), "tensor '%s'", s->name);
	if (t->ndim != s->ndim)
		return coli_errf(r->e, COLI_EDATA, "%s: %s: ndim %d, config implies %d", r->file, what, t->ndim, s->ndim);
	if (t->cls != s->cls)
		return coli_errf(r->e, COLI_EDATA, "%s: %s: class '%s', config implies '%s'", r->file, what,
				 class_names[t->cls], class_names[s->cls]);
	if (t->layer != s->layer)
		return coli_errf(r->e, COLI_EDATA, "%s: %s: layer %d, config implies %d", r->file, what, t->layer, s->layer);
	if ((t->section == COLI_SEC_MTP) != s->mtp)
		return coli_errf(r->e, COLI_EDATA, "%s: %s: section '%s', config implies '%s'", r->file, what,
				 coli_section_file(t->section), s->mtp ? "mtp.bin" : "dense.bin");
	return check_blob(r, c, s, &t->blob, what);
}

/* The tensor set must be the one the config implies: names, classes, shapes, and encodings
 * that fit the stored bits. */
static int check_tensor_set(rd *r, const coli_container *c)
{
	coli_tensor_spec *specs = NULL;
	int n = 0, ti = 0, ei = 0, rc = 0;
	for (int i = 0; i < 3; i++)
		if (c->bits[i] != 4 && c->bits[i] != 8 && c->bits[i] != 16)
			return coli_errf(r->e, COLI_EDATA, "%s: bits.%s: %d is not 4, 8 or 16", r->file,
					 i == 0 ? "expert" : i == 1 ? "dense" : "mtp", c->bits[i]);
	if (coli_model_tensors(&c->model, &specs, &n, r->e) < 0)
		return -1;
	for (int i = 0; rc == 0 && i < n; i++)
		rc = specs[i].cls == COLI_TC_EXPERT ? check_expert_spec(r, c, &specs[i], &ei)
						    : check_tensor_spec(r, c, &specs[i], ti++);
	if (rc == 0 && (ti != c->layout.n_tensors || ei != c->layout.n_elayers))
		rc = coli_errf(r->e, COLI_EDATA, "%s: %d tensors and %d expert layers, config implies %d and %d",
			       r->file, c->layout.n_tensors, c->layout.n_elayers, ti, ei);
	free(specs);
	return rc;
}

static int parse_array(rd *r, json_t *m, const char *key, json_t **out)
{
	*out = json_object_get(m, key);
	return json_is_array(*out) ? 0 : bad(r, key, *out ? "not an array" : "missing");
}

static int parse_layout(rd *r, json_t *m, coli_container *c)
{
	json_t *ts, *xs, *secs;
	coli_layout *L = &c->layout;
	if (parse_array(r, m, "tensors", &ts) < 0 || parse_array(r, m, "experts", &xs) < 0 ||
	    parse_array(r, m, "sections", &secs) < 0)
		return -1;
	L->tensors = coli_calloc(json_array_size(ts), sizeof(*L->tensors), r->e);
	L->elayers = coli_calloc(json_array_size(xs), sizeof(*L->elayers), r->e);
	if (!L->tensors || !L->elayers)
		return -1;
	/* Counted before parsing, so that coli_layout_release frees a half-parsed entry too. */
	for (size_t i = 0; i < json_array_size(ts); i++)
		if ((L->n_tensors = (int)i + 1, parse_tensor(r, json_array_get(ts, i), (int)i, &L->tensors[i])) < 0)
			return -1;
	for (size_t i = 0; i < json_array_size(xs); i++)
		if ((L->n_elayers = (int)i + 1, parse_elayer(r, json_array_get(xs, i), (int)i, &L->elayers[i])) < 0)
			return -1;
	if (json_array_size(secs) != COLI_SEC_COUNT)
		return bad(r, "sections", "not an array of 3 (dense.bin, mtp.bin, experts.bin)");
	for (int s = 0; s < COLI_SEC_COUNT; s++) {
		long long size;
		const char *file;
		char where[64];
		snprintf(where, sizeof(where), "sections[%d].", s);
		json_t *o = json_array_get(secs, (size_t)s);
		if (get_str(r, o, "file", where, &file) < 0 || get_int(r, o, "size", where, 0, 1ll << 62, &size) < 0)
			return -1;
		if (strcmp(file, coli_section_file((coli_section)s)) != 0)
			return coli_errf(r->e, COLI_EDATA, "%s: %sfile: '%s', expected '%s'", r->file, where, file,
					 coli_section_file((coli_section)s));
		L->section_size[s] = (uint64_t)size;
	}
	return check_placement(r, L);
}

static int parse_carried(rd *r, json_t *m, coli_container *c)
{
	json_t *a;
	if (parse_array(r, m, "carried", &a) < 0)
		return -1;
	if (!(c->carried = coli_calloc(json_array_size(a), sizeof(*c->carried), r->e)))
		return -1;
	for (size_t i = 0; i < json_array_size(a); i++, c->n_carried++) {
		char where[64];
		const char *file;
		long long size, crc;
		snprintf(where, sizeof(where), "carried[%zu].", i);
		json_t *o = json_array_get(a, i);
		if (get_str(r, o, "file", where, &file) < 0 || get_int(r, o, "size", where, 0, 1ll << 40, &size) < 0 ||
		    get_int(r, o, "crc32", where, 0, 0xffffffffll, &crc) < 0)
			return -1;
		if (strchr(file, '/') || file[0] == '.' || strstr(file, ".bin") || strcmp(file, COLI_MANIFEST_FILE) == 0)
			return coli_errf(r->e, COLI_EDATA, "%s: %sfile: '%s' is not a plain carried file name", r->file,
					 where, file);
		c->carried[i] = (coli_carried){strdup(file), (uint64_t)size, (uint32_t)crc};
		if (!c->carried[i].file)
			return coli_errf(r->e, COLI_ENOMEM, "out of memory");
	}
	return 0;
}

static int parse_head(rd *r, json_t *m, coli_container *c)
{
	const char *fmt, *id;
	long long ver, eb, db, mb, gs, mtp;
	json_t *bits = json_object_get(m, "bits"), *config = json_object_get(m, "config");
	if (!json_is_object(m))
		return bad(r, "manifest", "not a JSON object");
	if (get_str(r, m, "format", "", &fmt) < 0 || get_int(r, m, "version", "", 1, 1 << 30, &ver) < 0)
		return -1;
	if (strcmp(fmt, "coli-container") != 0)
		return coli_errf(r->e, COLI_EDATA, "%s: format: '%s', expected 'coli-container'", r->file, fmt);
	if (ver != COLI_CONTAINER_VERSION)
		return coli_errf(r->e, COLI_EDATA, "%s: version: %lld unsupported (this reader knows %u)", r->file,
				 ver, COLI_CONTAINER_VERSION);
	if (get_str(r, m, "identity", "", &id) < 0 || get_int(r, m, "group_size", "", 64, 64, &gs) < 0 ||
	    get_int(r, bits, "expert", "bits.", 4, 16, &eb) < 0 || get_int(r, bits, "dense", "bits.", 4, 16, &db) < 0 ||
	    get_int(r, bits, "mtp", "bits.", 4, 16, &mb) < 0)
		return -1;
	if (strlen(id) != 64)
		return bad(r, "identity", "not 64 hex digits");
	memcpy(c->identity_hex, id, 65);
	c->bits[0] = (int)eb, c->bits[1] = (int)db, c->bits[2] = (int)mb;
	if (!json_is_object(config))
		return bad(r, "config", config ? "not an object" : "missing");
	c->config_json = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS);
	c->provenance_json = json_dumps(json_object_get(m, "provenance"), JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!c->config_json || !c->provenance_json)
		return bad(r, "provenance", "missing or not JSON");
	if (coli_model_parse(&c->model, c->config_json, "manifest config", r->e) < 0)
		return -1;
	const char *family;
	if (get_str(r, m, "family", "", &family) < 0 || get_int(r, m, "mtp_layers", "", 0, c->model.n_mtp_layers, &mtp) < 0)
		return -1;
	if (strcmp(family, coli_family_name(c->model.family)) != 0)
		return coli_errf(r->e, COLI_EDATA, "%s: family: '%s', but config.model_type is '%s'", r->file, family,
				 coli_family_name(c->model.family));
	c->model.n_mtp_layers = (int)mtp;
	return 0;
}

static int check_identity(rd *r, coli_container *c)
{
	char hex[65];
	coli_container_identity(&c->layout, c->config_json, c->model.n_mtp_layers, c->bits, c->identity);
	coli_hex32(c->identity, hex);
	if (strcmp(hex, c->identity_hex) != 0)
		return coli_errf(r->e, COLI_EDATA, "%s: identity: %s, but the manifest's config and tensors hash to %s",
				 r->file, c->identity_hex, hex);
	return 0;
}

static int parse_manifest(rd *r, const char *text, size_t len, coli_container *c)
{
	json_error_t je;
	json_t *m = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!m)
		return coli_errf(r->e, COLI_EDATA, "%s: manifest JSON: %s at line %d column %d", r->file, je.text,
				 je.line, je.column);
	int rc = parse_head(r, m, c);
	if (rc == 0)
		rc = parse_layout(r, m, c);
	if (rc == 0)
		rc = check_tensor_set(r, c);
	if (rc == 0)
		rc = parse_carried(r, m, c);
	if (rc == 0)
		rc = check_identity(r, c);
	json_decref(m);
	return rc;
}

int coli_manifest_read(coli_container *c, coli_err *e)
{
	char *path = coli_path_join(c->dir, COLI_MANIFEST_FILE), *buf = NULL;
	size_t len = 0;
	uint64_t json_len = 0;
	rd r = {path, e};
	if (!path)
		return coli_errf(e, COLI_ENOMEM, "out of memory");
	int rc = coli_read_file(path, &buf, &len, e);
	if (rc == 0 && len < COLI_MANIFEST_HEADER)
		rc = coli_errf(e, COLI_EDATA, "%s: %zu bytes, shorter than the %u-byte header", path, len,
			       COLI_MANIFEST_HEADER);
	if (rc == 0)
		rc = coli_manifest_header_check((uint8_t *)buf, len, path, &json_len, e);
	uint32_t got = rc == 0 ? coli_crc32(0, buf + COLI_MANIFEST_HEADER, json_len) : 0;
	if (rc == 0 && got != coli_manifest_header_crc((uint8_t *)buf))
		rc = coli_errf(e, COLI_EDATA, "%s: manifest crc32 0x%08x, stored 0x%08x", path, got,
			       coli_manifest_header_crc((uint8_t *)buf));
	if (rc == 0)
		rc = parse_manifest(&r, buf + COLI_MANIFEST_HEADER, json_len, c);
	free(buf);
	free(path);
	return rc;
}
