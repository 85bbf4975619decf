/* layout.c: the layout a family is released in where it is not libcoli's table: qwen3_5_moe's
 * multimodal release (the inverse of libcoli's ckpt_map.c).
 *
 * The text model under model.language_model.*, lm_head.weight at the root, the MTP layer under
 * mtp.* (its fc, pre_fc_norm_embedding, pre_fc_norm_hidden, norm and layers.0.*), each layer's
 * routed experts fused into mlp.experts.gate_up_proj [E, 2I, H] (gate rows first) and
 * mlp.experts.down_proj [E, H, I] (or one tensor per expert and projection with
 * --unfused-experts), the conv taps stored [C, 1, K], and a small vision tower model.visual.*
 * that the converter leaves out.
 */
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_hybrid(const coli_model *m)
{
	return m->family == COLI_FAM_QWEN3_5_MOE;
}

int synth_layout_fused(const coli_model *m, const synth_opts *o)
{
	return is_hybrid(m) && !o->unfused;
}

/* The MTP layer's own tensors (DeepSeek-V3 names in the table) as mtp.* names them; NULL for
 * the decoder layer's. */
static const char *mtp_own(const char *rest)
{
	static const char *const ren[][2] = {{"eh_proj.weight", "fc.weight"},
					     {"enorm.weight", "pre_fc_norm_embedding.weight"},
					     {"hnorm.weight", "pre_fc_norm_hidden.weight"},
					     {"shared_head.norm.weight", "norm.weight"}};
	for (size_t i = 0; i < sizeof(ren) / sizeof(ren[0]); i++)
		if (!strcmp(rest, ren[i][0]))
			return ren[i][1];
	return NULL;
}

/* The release's name of table tensor s. */
static void stored_name(const coli_tensor_spec *s, const coli_model *m, int fused, char *out, size_t cap)
{
	char prefix[64];
	int at = 0;
	if (strncmp(s->name, "model.", 6)) { /* lm_head.weight */
		snprintf(out, cap, "%s", s->name);
		return;
	}
	if (s->layer >= 0)
		sscanf(s->name, "model.layers.%*d.%n", &at);
	if (at == 0) {
		snprintf(out, cap, "model.language_model.%s", s->name + 6);
		return;
	}
	const char *rest = s->name + at, *own = s->mtp ? mtp_own(rest) : NULL;
	if (own) {
		snprintf(out, cap, "mtp.%s", own);
		return;
	}
	if (s->mtp)
		snprintf(prefix, sizeof(prefix), "mtp.layers.%d.", s->layer - m->n_layers);
	else
		snprintf(prefix, sizeof(prefix), "model.language_model.layers.%d.", s->layer);
	if (fused && s->cls == COLI_TC_EXPERT)
		snprintf(out, cap, "%smlp.experts.%s", prefix, s->proj == COLI_PROJ_DOWN ? "down_proj" : "gate_up_proj");
	else
		snprintf(out, cap, "%s%s", prefix, rest);
}

/* A fused member's stored shape: [E, 2I, H] for gate and up, [E, H, I] for down. */
static void fused_shape(synth_tensor *t, const coli_tensor_spec *s, const coli_model *m)
{
	t->sndim = 3;
	t->sshape[0] = m->n_experts;
	t->sshape[1] = s->proj == COLI_PROJ_DOWN ? s->shape[0] : 2 * s->shape[0];
	t->sshape[2] = s->shape[1];
}

int synth_layout_name(synth_tensor *t, const coli_tensor_spec *s, const coli_model *m,
		      const synth_opts *o, coli_err *e)
{
	char name[sizeof(t->name)];
	if (!is_hybrid(m))
		return 0;
	stored_name(s, m, synth_layout_fused(m, o), name, sizeof(name));
	if (strcmp(name, t->name) && !(t->stored = strdup(name)))
		return coli_errf(e, COLI_ENOMEM, "out of memory naming '%s'", t->name);
	if (synth_layout_fused(m, o) && s->cls == COLI_TC_EXPERT)
		fused_shape(t, s, m);
	if (s->role == COLI_R_LIN_CONV) { /* nn.Conv1d's weight [C, 1, K] */
		t->sndim = 3;
		t->sshape[0] = s->shape[0];
		t->sshape[1] = 1;
		t->sshape[2] = s->shape[1];
	}
	return 0;
}

/* ---- the vision tower ------------------------------------------------------------------------ */

typedef struct vis_tensor {
	const char *name;  /* after "model.visual." (a block's: after "model.visual.blocks.N.") */
	int64_t rows, cols; /* 1-D: rows 1 */
} vis_tensor;

enum { VIS_PER_BLOCK = 12, VIS_OTHER = 9 };

/* The tensors of one block, then the merger's, the patch embedding's and the positions'. */
static void vis_list(vis_tensor *v, int64_t H)
{
	const int64_t h = SYNTH_VIS_HIDDEN, f = SYNTH_VIS_FFN, mh = h * SYNTH_VIS_MERGE * SYNTH_VIS_MERGE;
	const int64_t patch = (int64_t)SYNTH_VIS_CHANNELS * SYNTH_VIS_TEMPORAL * SYNTH_VIS_PATCH * SYNTH_VIS_PATCH;
	const vis_tensor all[VIS_PER_BLOCK + VIS_OTHER] = {
		{"attn.proj.bias", 1, h},        {"attn.proj.weight", h, h},
		{"attn.qkv.bias", 1, 3 * h},     {"attn.qkv.weight", 3 * h, h},
		{"mlp.linear_fc1.bias", 1, f},   {"mlp.linear_fc1.weight", f, h},
		{"mlp.linear_fc2.bias", 1, h},   {"mlp.linear_fc2.weight", h, f},
		{"norm1.bias", 1, h},            {"norm1.weight", 1, h},
		{"norm2.bias", 1, h},            {"norm2.weight", 1, h},
		{"merger.linear_fc1.bias", 1, mh},         {"merger.linear_fc1.weight", mh, mh},
		{"merger.linear_fc2.bias", 1, H},          {"merger.linear_fc2.weight", H, mh},
		{"merger.norm.bias", 1, h},                {"merger.norm.weight", 1, h},
		{"patch_embed.proj.bias", 1, h},           {"patch_embed.proj.weight", h, patch},
		{"pos_embed.weight", SYNTH_VIS_POSITIONS, h},
	};
	memcpy(v, all, sizeof(all));
}

int synth_layout_vision_count(const coli_model *m, const synth_opts *o)
{
	return is_hybrid(m) && !o->no_vision ? SYNTH_VIS_DEPTH * VIS_PER_BLOCK + VIS_OTHER : 0;
}

/* One tensor of the tower: LayerNorm weights near 1, biases small, matrices N(0, 1/in). */
static void vis_add(synth_table *tb, const synth_plan *p, const vis_tensor *v, int block)
{
	synth_tensor *t = &tb->t[tb->n++];
	char rest[64];
	memset(t, 0, sizeof(*t));
	if (block >= 0)
		snprintf(rest, sizeof(rest), "blocks.%d.%s", block, v->name);
	else
		snprintf(rest, sizeof(rest), "%s", v->name);
	snprintf(t->name, sizeof(t->name), "model.visual.%s", rest);
	t->ndim = v->rows > 1 ? 2 : 1;
	t->rows = v->rows;
	t->cols = v->cols;
	t->kind = t->ndim == 2 ? SK_LINEAR : strstr(rest, "norm") && strstr(rest, ".weight") ? SK_NORM : SK_BIAS;
	t->std = t->kind == SK_LINEAR ? 1.0f / sqrtf((float)t->cols) : t->kind == SK_NORM ? 0.1f : 0.02f;
	t->dtype = COLI_DT_BF16;
	t->layer = t->expert = t->scale_of = t->lead = -1;
	t->key = synth_key(p->seed, t->name);
	t->nbytes = (uint64_t)t->rows * synth_row_bytes(t);
	if (!strcmp(rest, "patch_embed.proj.weight")) { /* nn.Conv3d's [out, C, T, P, P] */
		const int64_t s[5] = {SYNTH_VIS_HIDDEN, SYNTH_VIS_CHANNELS, SYNTH_VIS_TEMPORAL, SYNTH_VIS_PATCH,
				      SYNTH_VIS_PATCH};
		t->sndim = 5;
		memcpy(t->sshape, s, sizeof(s));
	}
}

void synth_layout_vision(synth_table *tb, const synth_plan *p, const synth_opts *o)
{
	vis_tensor v[VIS_PER_BLOCK + VIS_OTHER];
	if (!synth_layout_vision_count(p->m, o))
		return;
	vis_list(v, p->m->hidden_size);
	for (int b = 0; b < SYNTH_VIS_DEPTH; b++)
		for (int i = 0; i < VIS_PER_BLOCK; i++)
			vis_add(tb, p, &v[i], b);
	for (int i = VIS_PER_BLOCK; i < VIS_PER_BLOCK + VIS_OTHER; i++)
		vis_add(tb, p, &v[i], -1);
}
