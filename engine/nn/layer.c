/* layer.c: one decoder layer over a batch, the step the decoder stack (forward.c) and the MTP
 * layer (mtp.c) both take: norm, attention (GQA, MLA, Gated DeltaNet), residual, norm, MLP or
 * MoE, residual. */
#include "nn/layer.h"

#include "nn/attention.h"
#include "nn/blocks.h"
#include "nn/gdn.h"
#include "nn/moe.h"
#include "nn/weights.h"
#include "nn/ws.h"

/* One decoder layer over the batch: x += attn(norm(x)); x += mlp(norm(x)). */
int fwd_layer(coli_engine *m, coli_kv *kv, int l, int n, int32_t *ids, float *wts, coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[l];
	fwd_ws *w = m->ws;
	int d = c->hidden_size;
	float eps = (float)c->rms_norm_eps;
	for (int i = 0; i < n; i++)
		rmsnorm(w->N + (int64_t)i * d, w->X + (int64_t)i * d, L->attn_norm, d, eps);
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, l);
	int rc = c->is_linear[l]	     ? attn_gdn(m, l, kv, w->N, n, w->Y, e)
		 : c->attn == COLI_ATTN_MLA ? attn_mla(m, l, kv, w->N, n, w->Y, e)
					    : attn_gqa(m, l, kv, w->N, n, w->Y, e);
	if (rc < 0)
		return -1;
	coli_tracer_mark(m->tr, c->is_linear[l] ? COLI_SPAN_LINEAR : COLI_SPAN_ATTENTION, l);
	for (int64_t i = 0; i < (int64_t)n * d; i++)
		w->X[i] += w->Y[i];
	if (n == 1) /* the next layer's experts, predicted: their reads overlap this MLP and its attention */
		moe_predict(m, l + 1, w->X);
	for (int i = 0; i < n; i++)
		rmsnorm(w->N + (int64_t)i * d, w->X + (int64_t)i * d, L->mlp_norm, d, eps);
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, l);
	if (mlp_block(m, l, kv->n, w->N, n, w->Y, ids, wts, e) < 0)
		return -1;
	for (int64_t i = 0; i < (int64_t)n * d; i++)
		w->X[i] += w->Y[i];
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, l);
	return 0;
}
