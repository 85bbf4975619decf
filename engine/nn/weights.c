/* weights.c: loads dense.bin and mtp.bin into RAM, checks each tensor's CRC, and resolves the
 * HF tensor names of each family into layer roles. */
#include "crc32.h"
#include "nn/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

static int read_section(weights *w, const coli_container *c, coli_section s, coli_err *e)
{
	void *p = NULL;
	uint64_t n = c->layout.section_size[s];
	if (posix_memalign(&p, 4096, n ? n : 4096) != 0)
		return coli_errf(e, COLI_ENOMEM, "out of memory allocating %llu bytes for %s", (unsigned long long)n,
				 coli_section_file(s));
	w->data[s] = p;
	char *path = coli_path_join(c->dir, coli_section_file(s));
	int rc = path ? coli_pread_full(c->fd[s], p, n, 0, path, e) : coli_errf(e, COLI_ENOMEM, "out of memory");
	free(path);
	return rc;
}

/* Every tensor's CRC before use: a flipped bit in RAM-resident weights is never silent. */
static int check_crcs(const weights *w, const coli_container *c, coli_err *e)
{
	for (int i = 0; i < c->layout.n_tensors; i++) {
		const coli_ltensor *t = &c->layout.tensors[i];
		uint32_t crc = coli_crc32(0, w->data[t->section] + t->offset, t->blob.nbytes);
		if (crc != t->crc)
			return coli_errf(e, COLI_EDATA, "%s/%s: tensor '%s' at offset %llu: crc32 0x%08x, expected 0x%08x",
					 c->dir, coli_section_file(t->section), t->name, (unsigned long long)t->offset,
					 crc, t->crc);
	}
	return 0;
}

typedef struct resolver {
	const weights *w;
	const coli_container *c;
	char prefix[64];
} resolver;

static const coli_ltensor *find(const resolver *r, const char *suffix)
{
	char name[256];
	snprintf(name, sizeof(name), "%s%s", r->prefix, suffix);
	return coli_container_tensor(r->c, name);
}

static coli_mat mat(const resolver *r, const char *suffix)
{
	const coli_ltensor *t = find(r, suffix);
	coli_mat m;
	memset(&m, 0, sizeof(m));
	return t ? coli_mat_of(&t->blob, r->w->data[t->section] + t->offset) : m;
}

static const float *vec(const resolver *r, const char *suffix)
{
	const coli_ltensor *t = find(r, suffix);
	return t ? (const float *)(const void *)(r->w->data[t->section] + t->offset) : NULL;
}

static void resolve_attention(const resolver *r, layer_w *L)
{
	L->q = mat(r, "self_attn.q_proj.weight");
	L->k = mat(r, "self_attn.k_proj.weight");
	L->v = mat(r, "self_attn.v_proj.weight");
	L->o = mat(r, "self_attn.o_proj.weight");
	L->q_bias = vec(r, "self_attn.q_proj.bias");
	L->k_bias = vec(r, "self_attn.k_proj.bias");
	L->v_bias = vec(r, "self_attn.v_proj.bias");
	L->o_bias = vec(r, "self_attn.o_proj.bias");
	L->q_norm = vec(r, "self_attn.q_norm.weight");
	L->k_norm = vec(r, "self_attn.k_norm.weight");
	L->q_a = mat(r, "self_attn.q_a_proj.weight");
	L->q_b = L->q_a.rows ? mat(r, "self_attn.q_b_proj.weight") : L->q;
	L->q_a_norm = vec(r, "self_attn.q_a_layernorm.weight");
	L->q_a_bias = vec(r, "self_attn.q_a_proj.bias");
	L->kv_a = mat(r, "self_attn.kv_a_proj_with_mqa.weight");
	L->kv_a_bias = vec(r, "self_attn.kv_a_proj_with_mqa.bias");
	L->kv_b = mat(r, "self_attn.kv_b_proj.weight");
	L->kv_a_norm = vec(r, "self_attn.kv_a_layernorm.weight");
}

static void resolve_mlp(const resolver *r, layer_w *L, int mixtral)
{
	L->gate = mat(r, "mlp.gate_proj.weight");
	L->up = mat(r, "mlp.up_proj.weight");
	L->down = mat(r, "mlp.down_proj.weight");
	L->router = mat(r, mixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight");
	L->corr_bias = vec(r, "mlp.gate.e_score_correction_bias");
	L->sh_gate = mat(r, "mlp.shared_experts.gate_proj.weight");
	L->sh_up = mat(r, "mlp.shared_experts.up_proj.weight");
	L->sh_down = mat(r, "mlp.shared_experts.down_proj.weight");
}

static void resolve_layer(const resolver *r, layer_w *L, int mixtral)
{
	L->attn_norm = vec(r, "input_layernorm.weight");
	L->mlp_norm = vec(r, "post_attention_layernorm.weight");
	resolve_attention(r, L);
	resolve_mlp(r, L, mixtral);
	L->enorm = vec(r, "enorm.weight");
	L->hnorm = vec(r, "hnorm.weight");
	L->eh_proj = mat(r, "eh_proj.weight");
	L->head_norm = vec(r, "shared_head.norm.weight");
	L->head = mat(r, "shared_head.head.weight");
}

int weights_load(weights *w, const coli_container *c, coli_err *e)
{
	memset(w, 0, sizeof(*w));
	const coli_model *m = &c->model;
	if (read_section(w, c, COLI_SEC_DENSE, e) < 0 || read_section(w, c, COLI_SEC_MTP, e) < 0 ||
	    check_crcs(w, c, e) < 0)
		return -1;
	resolver r = {w, c, ""};
	w->embed = mat(&r, "model.embed_tokens.weight");
	w->final_norm = vec(&r, "model.norm.weight");
	w->lm_head = m->tie_word_embeddings ? w->embed : mat(&r, "lm_head.weight");
	w->n_layers = m->n_layers + m->n_mtp_layers;
	if (!(w->layers = coli_calloc((size_t)w->n_layers, sizeof(*w->layers), e)))
		return -1;
	for (int l = 0; l < w->n_layers; l++) {
		snprintf(r.prefix, sizeof(r.prefix), "model.layers.%d.", l);
		resolve_layer(&r, &w->layers[l], m->family == COLI_FAM_MIXTRAL);
	}
	return 0;
}

void weights_release(weights *w)
{
	if (!w)
		return;
	free(w->data[0]);
	free(w->data[1]);
	free(w->layers);
	memset(w, 0, sizeof(*w));
}
