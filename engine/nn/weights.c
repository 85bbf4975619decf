/* weights.c: loads dense.bin and mtp.bin into RAM, checks each tensor's CRC, and places each
 * tensor at the slot of its role in the model's tensor table (formats/model_tensors.c). */
#include "crc32.h"
#include "nn/weights.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

static int read_section(weights *w, const coli_container *c, coli_section s, coli_err *e)
{
	void *p = NULL;
	uint64_t n = c->layout.section_size[s];
	if (!(p = coli_weights_alloc((size_t)n)))
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

/* Where a role's tensor goes: its offset in layer_w (or in weights for the globals), and
 * whether it is a matrix (coli_mat) or a vector (const float *). */
typedef struct slot {
	int global;
	size_t off;
	int is_mat;
} slot;

#define LM(f) {0, offsetof(layer_w, f), 1}
#define LV(f) {0, offsetof(layer_w, f), 0}
static const slot slots[COLI_R_COUNT] = {
	[COLI_R_EMBED] = {1, offsetof(weights, embed), 1}, [COLI_R_FINAL_NORM] = {1, offsetof(weights, final_norm), 0},
	[COLI_R_LM_HEAD] = {1, offsetof(weights, lm_head), 1},
	[COLI_R_ATTN_NORM] = LV(attn_norm), [COLI_R_MLP_NORM] = LV(mlp_norm),
	[COLI_R_Q] = LM(q), [COLI_R_K] = LM(k), [COLI_R_V] = LM(v), [COLI_R_O] = LM(o),
	[COLI_R_Q_BIAS] = LV(q_bias), [COLI_R_K_BIAS] = LV(k_bias), [COLI_R_V_BIAS] = LV(v_bias),
	[COLI_R_O_BIAS] = LV(o_bias), [COLI_R_Q_NORM] = LV(q_norm), [COLI_R_K_NORM] = LV(k_norm),
	[COLI_R_Q_A] = LM(q_a), [COLI_R_Q_A_NORM] = LV(q_a_norm), [COLI_R_Q_A_BIAS] = LV(q_a_bias),
	[COLI_R_Q_B] = LM(q_b), [COLI_R_KV_A] = LM(kv_a), [COLI_R_KV_A_NORM] = LV(kv_a_norm),
	[COLI_R_KV_A_BIAS] = LV(kv_a_bias), [COLI_R_KV_B] = LM(kv_b),
	[COLI_R_IDX_WQ_B] = LM(idx_wq_b), [COLI_R_IDX_WK] = LM(idx_wk), [COLI_R_IDX_K_NORM] = LV(idx_k_norm),
	[COLI_R_IDX_K_BIAS] = LV(idx_k_bias), [COLI_R_IDX_WEIGHTS] = LM(idx_weights),
	[COLI_R_LIN_QKV] = LM(lin_qkv), [COLI_R_LIN_Z] = LM(lin_z), [COLI_R_LIN_B] = LM(lin_b), [COLI_R_LIN_A] = LM(lin_a),
	[COLI_R_LIN_CONV] = LM(lin_conv), [COLI_R_LIN_A_LOG] = LV(lin_a_log), [COLI_R_LIN_DT_BIAS] = LV(lin_dt_bias),
	[COLI_R_LIN_NORM] = LV(lin_norm), [COLI_R_LIN_OUT] = LM(lin_out), [COLI_R_SH_EXPERT_GATE] = LM(sh_expert_gate),
	[COLI_R_GATE] = LM(gate), [COLI_R_UP] = LM(up), [COLI_R_DOWN] = LM(down),
	[COLI_R_ROUTER] = LM(router), [COLI_R_CORR_BIAS] = LV(corr_bias),
	[COLI_R_SH_GATE] = LM(sh_gate), [COLI_R_SH_UP] = LM(sh_up), [COLI_R_SH_DOWN] = LM(sh_down),
	[COLI_R_ENORM] = LV(enorm), [COLI_R_HNORM] = LV(hnorm), [COLI_R_EH_PROJ] = LM(eh_proj),
	[COLI_R_MTP_EMBED] = LM(embed), [COLI_R_HEAD_NORM] = LV(head_norm), [COLI_R_HEAD] = LM(head),
	[COLI_R_WKV] = LM(wkv), [COLI_R_KV_NORM] = LV(kv_norm), [COLI_R_WO_A] = LM(wo_a), [COLI_R_WO_B] = LM(wo_b),
	[COLI_R_SINK] = LV(sink), [COLI_R_CMP_WKV] = LM(cmp_wkv), [COLI_R_CMP_WGATE] = LM(cmp_wgate),
	[COLI_R_CMP_APE] = LV(cmp_ape), [COLI_R_CMP_NORM] = LV(cmp_norm), [COLI_R_IDX_CMP_WKV] = LM(icmp_wkv),
	[COLI_R_IDX_CMP_WGATE] = LM(icmp_wgate), [COLI_R_IDX_CMP_APE] = LV(icmp_ape),
	[COLI_R_IDX_CMP_NORM] = LV(icmp_norm), [COLI_R_TID2EID] = LV(tid2eid),
	[COLI_R_HC_ATTN_FN] = LV(hc_fn[0]), [COLI_R_HC_ATTN_BASE] = LV(hc_base[0]), [COLI_R_HC_ATTN_SCALE] = LV(hc_scale[0]),
	[COLI_R_HC_FFN_FN] = LV(hc_fn[1]), [COLI_R_HC_FFN_BASE] = LV(hc_base[1]), [COLI_R_HC_FFN_SCALE] = LV(hc_scale[1]),
	[COLI_R_HC_HEAD_FN] = LV(hc_fn[2]), [COLI_R_HC_HEAD_BASE] = LV(hc_base[2]), [COLI_R_HC_HEAD_SCALE] = LV(hc_scale[2]),
	[COLI_R_E_PROJ] = LM(e_proj), [COLI_R_H_PROJ] = LM(h_proj),
};

/* The RMSNorms a (1 + w) family (norm_offset) scales by 1 + the stored weight; the Gated
 * DeltaNet's gated norm is not one of them. */
static int offset_norm(coli_role r)
{
	return r == COLI_R_ATTN_NORM || r == COLI_R_MLP_NORM || r == COLI_R_FINAL_NORM || r == COLI_R_Q_NORM ||
	       r == COLI_R_K_NORM || r == COLI_R_ENORM || r == COLI_R_HNORM || r == COLI_R_HEAD_NORM;
}

/* The lightning indexers' matrices (DSA, DeepSeek V4): they choose the positions attention reads,
 * so they keep float32 activations under --precision q8, as the attention core does. */
static int indexer_role(coli_role r)
{
	return r == COLI_R_IDX_WQ_B || r == COLI_R_IDX_WK || r == COLI_R_IDX_WEIGHTS || r == COLI_R_IDX_CMP_WKV ||
	       r == COLI_R_IDX_CMP_WGATE;
}

/* Places tensor t (the container's i-th, as the table's spec s) at its role's slot. A (1 + w)
 * norm becomes 1 + w in RAM once its CRC has been checked (what transformers computes in
 * float32), so every family's RMSNorm multiplies by its weight. */
static void place(weights *w, const coli_model *m, const coli_tensor_spec *s, const coli_ltensor *t)
{
	const slot *sl = &slots[s->role];
	uint8_t *base = sl->global ? (uint8_t *)w : s->layer < 0 ? (uint8_t *)&w->top : (uint8_t *)&w->layers[s->layer];
	uint8_t *data = w->data[t->section] + t->offset;
	float *f = (float *)(void *)data;
	if (m->norm_offset && offset_norm(s->role))
		for (int64_t i = 0; i < t->blob.cols * t->blob.rows; i++)
			f[i] = 1.0f + f[i];
	if (sl->is_mat) {
		coli_mat *mat = (coli_mat *)(void *)(base + sl->off);
		*mat = coli_mat_of(&t->blob, data);
		mat->exact = indexer_role(s->role);
	} else
		*(const float **)(void *)(base + sl->off) = (const float *)(const void *)data;
}

/* The table's dense tensors, in the container's order (the manifest check made them the same
 * names in the same order): each placed by role, and every stored tensor claimed. */
static int place_all(weights *w, const coli_container *c, coli_err *e)
{
	coli_tensor_spec *specs;
	int n, ti = 0, rc = 0;
	if (coli_model_tensors(&c->model, &specs, &n, e) < 0)
		return -1;
	for (int i = 0; rc == 0 && i < n; i++) {
		if (specs[i].cls == COLI_TC_EXPERT)
			continue;
		const coli_ltensor *t = ti < c->layout.n_tensors ? &c->layout.tensors[ti] : NULL;
		if (!t || strcmp(t->name, specs[i].name))
			rc = coli_errf(e, COLI_EDATA, "%s: tensors[%d]: '%s', the model's table has '%s'", c->dir, ti,
				       t ? t->name : "(end)", specs[i].name);
		else
			place(w, &c->model, &specs[i], t);
		ti++;
	}
	if (rc == 0 && ti != c->layout.n_tensors)
		rc = coli_errf(e, COLI_EDATA, "%s: %d dense tensors stored, the model's table has %d", c->dir,
			       c->layout.n_tensors, ti);
	free(specs);
	return rc;
}

int weights_load(weights *w, const coli_container *c, coli_err *e)
{
	memset(w, 0, sizeof(*w));
	const coli_model *m = &c->model;
	if (read_section(w, c, COLI_SEC_DENSE, e) < 0 || read_section(w, c, COLI_SEC_MTP, e) < 0 ||
	    check_crcs(w, c, e) < 0)
		return -1;
	w->n_layers = m->n_layers + m->n_mtp_layers;
	if (!(w->layers = coli_calloc((size_t)w->n_layers + 1, sizeof(*w->layers), e)) || place_all(w, c, e) < 0)
		return -1;
	if (m->tie_word_embeddings)
		w->lm_head = w->embed;
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
