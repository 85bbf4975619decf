/* model_state.c: the per-sequence state each layer of a model declares (state.h). */
#include "state.h"

/* Appends one part (out NULL: counts). */
static int part(coli_state_part *out, int n, int layer, coli_state_kind kind, int width, int fixed)
{
	if (out)
		out[n] = (coli_state_part){layer, (int)kind, width, fixed};
	return n + 1;
}

int coli_model_state_range(const coli_model *m, int first, int last, coli_state_part *out)
{
	int n = 0;
	for (int l = first; l < last; l++) {
		if (m->attn == COLI_ATTN_V4) {
			int r = m->compress[l], hd = m->head_dim, ihd = m->index_head_dim, csa = m->index_full[l];
			n = part(out, n, l, COLI_STATE_WINDOW, 0, m->sliding_window * hd);
			if (r)
				n = part(out, n, l, COLI_STATE_COMP_ROW, hd / r, 0);
			if (r)
				n = part(out, n, l, COLI_STATE_COMP_WINDOW, 0, 2 * 2 * r * (csa ? 2 * hd : hd));
			if (r && csa)
				n = part(out, n, l, COLI_STATE_INDEX_ROW, ihd / r, 0);
			if (r && csa)
				n = part(out, n, l, COLI_STATE_INDEX_WINDOW, 0, 2 * 2 * r * 2 * ihd);
			continue;
		}
		if (m->is_linear[l]) {
			int conv_dim = 2 * m->lin_k_heads * m->lin_k_dim + m->lin_v_heads * m->lin_v_dim;
			n = part(out, n, l, COLI_STATE_CONV, 0, (m->lin_conv - 1) * conv_dim);
			n = part(out, n, l, COLI_STATE_RECURRENT, 0, m->lin_v_heads * m->lin_k_dim * m->lin_v_dim);
		} else if (m->attn == COLI_ATTN_MLA) {
			n = part(out, n, l, COLI_STATE_LATENT, m->kv_lora_rank, 0);
			n = part(out, n, l, COLI_STATE_ROPE_KEY, m->qk_rope_head_dim, 0);
		} else {
			n = part(out, n, l, COLI_STATE_KEY, m->n_kv_heads * m->head_dim, 0);
			n = part(out, n, l, COLI_STATE_VALUE, m->n_kv_heads * m->head_dim, 0);
		}
		if (m->index_topk && m->index_full[l])
			n = part(out, n, l, COLI_STATE_INDEX_KEY, m->index_head_dim, 0);
	}
	return n;
}

int coli_model_state(const coli_model *m, coli_state_part *out)
{
	return coli_model_state_range(m, 0, m->n_layers, out);
}

/* Layer l's widths (fixed 0) or fixed sizes (fixed 1), in bytes. */
static uint64_t layer_bytes(const coli_model *m, int l, int fixed)
{
	coli_state_part p[COLI_STATE_LAYER_MAX];
	uint64_t b = 0;
	int n = coli_model_state_range(m, l, l + 1, p);
	for (int i = 0; i < n; i++)
		b += (uint64_t)(fixed ? p[i].fixed : p[i].width) * sizeof(float);
	return b;
}

uint64_t coli_model_layer_token_bytes(const coli_model *m, int l)
{
	return layer_bytes(m, l, 0);
}

uint64_t coli_model_layer_fixed_bytes(const coli_model *m, int l)
{
	return layer_bytes(m, l, 1);
}

/* The main layers' layer_bytes. */
static uint64_t state_bytes(const coli_model *m, int fixed)
{
	uint64_t b = 0;
	for (int l = 0; l < m->n_layers; l++)
		b += layer_bytes(m, l, fixed);
	return b;
}

uint64_t coli_model_state_token_bytes(const coli_model *m)
{
	return state_bytes(m, 0);
}

uint64_t coli_model_state_fixed_bytes(const coli_model *m)
{
	return state_bytes(m, 1);
}

const char *coli_state_kind_name(int kind)
{
	static const char *const names[] = {"?",	 "key",	      "value",	   "latent",	     "rope_key",
					    "index_key", "conv",      "recurrent", "window",	     "comp_row",
					    "comp_window", "index_row", "index_window"};
	return kind >= 1 && kind <= COLI_STATE_KIND_MAX ? names[kind] : "?";
}
