/* describe.c: the container coli-convert writes from a checkpoint, described without writing
 * it: the model, the canonical config, the bits of each class, the layout and the identity.
 * coli-convert plans its conversion with it, coli-plan plans a run of the container from it
 * before it exists: one decision, so the two cannot disagree. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "fileio.h"
#include "sha256.h"

/* config.json as stored in the manifest and hashed into the identity (sorted keys, compact),
 * and the model it describes. */
static int read_config(coli_container *ct, const char *src_dir, coli_err *e)
{
	char *path = coli_path_join(src_dir, "config.json"), *text = NULL;
	json_error_t je;
	int rc = path ? coli_read_file(path, &text, NULL, e) : coli_errf(e, COLI_ENOMEM, "out of memory");
	json_t *j = rc == 0 ? json_loads(text, 0, &je) : NULL;
	if (rc == 0 && !j)
		rc = coli_errf(e, COLI_EDATA, "%s: %s at line %d column %d", path, je.text, je.line, je.column);
	if (rc == 0 && !(ct->config_json = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS)))
		rc = coli_errf(e, COLI_ENOMEM, "out of memory");
	if (rc == 0 && coli_model_parse(&ct->model, text, path, e) < 0)
		rc = -1;
	json_decref(j);
	free(text);
	free(path);
	return rc;
}

/* The bits of each class: as given, else the defaults (4, 4, 8). deepseek_v4's FP4 experts are
 * never requantized: without --expert-bits (--mtp-bits for the MTP layer's) their codes and
 * scales are kept (fp4, layout.c), at 16 their values widened exactly to bf16; an explicit 4 or 8
 * asks for gs64 int4 or int8 of them, which would change the model's weights, which coli never
 * does silently: refused. */
static int resolve_bits(coli_container *ct, const char *src_dir, const int given[3], coli_err *e)
{
	static const int dflt[3] = {4, 4, 8};
	static const char *const name[3] = {"expert", "dense", "mtp"};
	const coli_model *m = &ct->model;
	for (int i = 0; i < 3; i++) {
		int b = given[i], fp4 = m->fp4_experts && i != 1 && (i == 0 || m->n_mtp_layers > 0);
		if (fp4 && (b == 4 || b == 8))
			return coli_errf(e, COLI_EUSAGE, "--%s-bits %d: %s holds FP4 experts (config.json: expert_dtype: fp4), "
					 "which gs64 int%d would requantize; without --%s-bits they are kept as shipped (fp4, "
					 "4.25 bits a weight), --%s-bits 16 widens them exactly to bf16",
					 name[i], b, src_dir, b, name[i], name[i]);
		ct->bits[i] = b ? b : dflt[i];
	}
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const coli_st_tensor *)a)->name, ((const coli_st_tensor *)b)->name);
}

/* A checkpoint of no file whose tensors are the table's, each in the dtype the family's release
 * stores it: what the layout reads of a checkpoint (names and dtypes), from config.json alone. */
static int release_ckpt(const coli_model *m, coli_ckpt **out, coli_err *e)
{
	coli_tensor_spec *specs = NULL;
	int n = 0;
	coli_ckpt *c = coli_calloc(1, sizeof(*c), e);
	if (!c || coli_model_tensors(m, &specs, &n, e) < 0) {
		free(c);
		return -1;
	}
	c->tensors = coli_calloc((size_t)n, sizeof(*c->tensors), e);
	int rc = c->tensors ? 0 : -1;
	for (int i = 0; rc == 0 && i < n; i++) {
		coli_st_tensor *t = &c->tensors[c->n_tensors];
		t->dtype = (coli_dtype)coli_model_release_dtype(m, &specs[i], m->family == COLI_FAM_QWEN3_5_MOE);
		t->ndim = specs[i].ndim;
		memcpy(t->shape, specs[i].shape, sizeof(specs[i].shape));
		if (!(t->name = strdup(specs[i].name)))
			rc = coli_errf(e, COLI_ENOMEM, "out of memory");
		else
			c->n_tensors++;
	}
	free(specs);
	if (rc < 0) {
		coli_ckpt_close(c);
		return -1;
	}
	qsort(c->tensors, (size_t)c->n_tensors, sizeof(*c->tensors), cmp_name);
	*out = c;
	return 0;
}

int coli_container_describe(coli_container *ct, const char *src_dir, coli_ckpt *src, const int bits[3], int *skipped,
			    coli_err *e)
{
	coli_ckpt *rel = NULL;
	*skipped = 0;
	if (read_config(ct, src_dir, e) < 0)
		return -1;
	if (src && (coli_model_map_ckpt(&ct->model, src, skipped, e) < 0 || coli_model_check_ckpt(&ct->model, src, e) < 0))
		return -1;
	if (resolve_bits(ct, src_dir, bits, e) < 0 || (!src && release_ckpt(&ct->model, &rel, e) < 0))
		return -1;
	int rc = coli_layout_plan(&ct->layout, &ct->model, src ? src : rel, ct->bits[0], ct->bits[1], ct->bits[2], e);
	coli_ckpt_close(rel);
	if (rc < 0)
		return -1;
	coli_container_identity(&ct->layout, ct->config_json, ct->model.n_mtp_layers, ct->bits, ct->identity);
	coli_hex32(ct->identity, ct->identity_hex);
	return 0;
}
