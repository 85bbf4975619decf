/* ckpt_map.c: a released checkpoint's layout mapped onto the tensor table's names, as views of
 * the same bytes: qwen3_5_moe's multimodal release (model.language_model.* for the text model,
 * mtp.* for the MTP layer, the vision tower model.visual.* left out, routed experts fused per
 * layer split into one view per expert and projection, the conv taps [C, 1, K] seen as [C, K]).
 * Nothing is copied: a view is a name, a shape and a byte range of the shard. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "model.h"

/* The tensors being rebuilt, and how many of the source's were left out. */
typedef struct mapper {
	const coli_model *m;
	coli_st_tensor *v;
	int n, cap, skipped;
	coli_err *e;
} mapper;

static int push(mapper *p, const coli_st_tensor *t, const char *name)
{
	if (p->n == p->cap) {
		int cap = p->cap ? 2 * p->cap : 64;
		coli_st_tensor *v = realloc(p->v, (size_t)cap * sizeof(*v));
		if (!v)
			return coli_errf(p->e, COLI_ENOMEM, "out of memory mapping the checkpoint's %d tensors", p->n);
		p->v = v, p->cap = cap;
	}
	coli_st_tensor *d = &p->v[p->n];
	*d = *t;
	if (!(d->name = strdup(name)))
		return coli_errf(p->e, COLI_ENOMEM, "out of memory mapping '%s'", name);
	p->n++;
	return 0;
}

/* A view of rows [row, row + rows) of t seen as [rows, cols] (t's last dim is cols). */
static int push_rows(mapper *p, const coli_st_tensor *t, const char *name, int64_t row, int64_t rows)
{
	coli_st_tensor v = *t;
	int64_t cols = t->shape[t->ndim - 1];
	uint64_t esize = t->nbytes / t->nelem;
	v.ndim = 2, v.shape[0] = rows, v.shape[1] = cols;
	v.nelem = (uint64_t)(rows * cols);
	v.nbytes = v.nelem * esize;
	v.offset = t->offset + (uint64_t)(row * cols) * esize;
	return push(p, &v, name);
}

/* mlp.experts.gate_up_proj [E, 2I, H] (gate rows first) and down_proj [E, H, I] as the table's
 * experts.E.{gate,up,down}_proj.weight; a shape that does not fit is left for the check to name. */
static int split_experts(mapper *p, const coli_st_tensor *t, const char *prefix, int down)
{
	char name[512]; /* prefix (< 256) + "experts.E.down_proj.weight" */
	int64_t E = t->shape[0], rows = t->shape[1];
	if (t->ndim != 3 || t->nelem == 0 || (!down && rows % 2))
		return push(p, t, t->name);
	for (int64_t e = 0; e < E; e++) {
		for (int part = 0; part < (down ? 1 : 2); part++) {
			snprintf(name, sizeof(name), "%sexperts.%lld.%s.weight", prefix, (long long)e,
				 down ? "down_proj" : part ? "up_proj" : "gate_proj");
			int64_t n = down ? rows : rows / 2;
			if (push_rows(p, t, name, e * rows + part * n, n) < 0)
				return -1;
		}
	}
	return 0;
}

/* mtp.* onto the DeepSeek-V3 naming of MTP layer n_layers + k. */
static void mtp_name(const coli_model *m, const char *src, char *out, size_t cap)
{
	static const char *const ren[][2] = {{"fc.weight", "eh_proj.weight"},
					     {"pre_fc_norm_embedding.weight", "enorm.weight"},
					     {"pre_fc_norm_hidden.weight", "hnorm.weight"},
					     {"norm.weight", "shared_head.norm.weight"}};
	int k, at = 0;
	const char *rest = src + 4; /* after "mtp." */
	if (sscanf(rest, "layers.%d.%n", &k, &at) == 1 && at > 0) {
		snprintf(out, cap, "model.layers.%d.%s", m->n_layers + k, rest + at);
		return;
	}
	for (size_t i = 0; i < sizeof(ren) / sizeof(ren[0]); i++)
		if (!strcmp(rest, ren[i][0])) {
			snprintf(out, cap, "model.layers.%d.%s", m->n_layers, ren[i][1]);
			return;
		}
	snprintf(out, cap, "%s", src); /* unknown: left for the check to name */
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && !strcmp(s + n - t, tail);
}

/* One source tensor of the qwen3_5_moe release. */
static int map_qwen3_5(mapper *p, const coli_st_tensor *t)
{
	char name[256];
	const char *lm = "model.language_model.";
	if (!strncmp(t->name, "model.visual.", 13)) {
		p->skipped++;
		return 0;
	}
	if (!strncmp(t->name, lm, strlen(lm)))
		snprintf(name, sizeof(name), "model.%s", t->name + strlen(lm));
	else if (!strncmp(t->name, "mtp.", 4))
		mtp_name(p->m, t->name, name, sizeof(name));
	else
		snprintf(name, sizeof(name), "%s", t->name);
	size_t n = strlen(name);
	if (ends_with(name, "experts.gate_up_proj") || ends_with(name, "experts.down_proj")) {
		name[n - strlen(ends_with(name, "gate_up_proj") ? "experts.gate_up_proj" : "experts.down_proj")] = 0;
		return split_experts(p, t, name, ends_with(t->name, "down_proj"));
	}
	if (ends_with(name, "linear_attn.conv1d.weight") && t->ndim == 3 && t->shape[1] == 1) {
		coli_st_tensor v = *t;
		v.ndim = 2, v.shape[1] = t->shape[2];
		return push(p, &v, name);
	}
	return push(p, t, name);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const coli_st_tensor *)a)->name, ((const coli_st_tensor *)b)->name);
}

int coli_model_map_ckpt(const coli_model *m, coli_ckpt *c, int *skipped, coli_err *e)
{
	mapper p = {.m = m, .e = e};
	*skipped = 0;
	if (m->family != COLI_FAM_QWEN3_5_MOE)
		return 0;
	for (int i = 0; i < c->n_tensors; i++)
		if (map_qwen3_5(&p, &c->tensors[i]) < 0) {
			for (int j = 0; j < p.n; j++)
				free(p.v[j].name);
			free(p.v);
			return -1;
		}
	for (int i = 0; i < c->n_tensors; i++)
		free(c->tensors[i].name);
	free(c->tensors);
	qsort(p.v, (size_t)p.n, sizeof(*p.v), cmp_name);
	c->tensors = p.v, c->n_tensors = p.n;
	*skipped = p.skipped;
	return 0;
}
