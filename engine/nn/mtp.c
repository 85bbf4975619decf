/* mtp.c: the MTP head's forward (enorm, hnorm, eh_proj, the MTP layer's decoder block, the
 * shared head) over the decoder stack's own layer (deepseek_v4's: nn/v4.c), and the
 * per-sequence state of drafting. */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "nn/attention.h"
#include "nn/blocks.h"
#include "nn/kv.h"
#include "nn/layer.h"
#include "nn/mtp.h"
#include "nn/v4.h"
#include "nn/weights.h"
#include "nn/ws.h"

/* Floats of a queued row's hidden state: the final norm's output, deepseek_v4's streams. */
static int64_t hid_width(const coli_model *c)
{
	return (int64_t)c->hidden_size * (c->attn == COLI_ATTN_V4 ? c->hc_mult : 1);
}

/* Floats of eh_proj's input per row ([enorm(e); hnorm(h)]; deepseek_v4 has no eh_proj). */
static int64_t in_width(const coli_model *c)
{
	return c->attn == COLI_ATTN_V4 ? 0 : 2 * (int64_t)c->hidden_size;
}

int coli_mtp_init(coli_mtp *s, const coli_engine *m, int cap, int kv_n, coli_err *e)
{
	const coli_model *c = m->cfg;
	int64_t hw = hid_width(c), B = m->ws->max_batch;
	memset(s, 0, sizeof(*s));
	if (c->n_mtp_layers < 1)
		return coli_errf(e, COLI_EUSAGE, "%s: the container has no MTP layers (num_nextn_predict_layers 0, or none "
				 "stored): nothing to draft with", m->ct->dir);
	if (kv_n < 0 || kv_n > cap)
		return coli_errf(e, COLI_EUSAGE, "MTP state: %d cached positions exceed the cache's %d", kv_n, cap);
	s->layer = c->n_layers;
	s->cap = (int)B;
	if (kv_open_layers(&s->kv, m, s->layer, s->layer + 1, cap + COLI_DRAFT_MAX, e) < 0 ||
	    coli_kv_keep(&s->kv, m, e) < 0 || !(s->hid = coli_malloc((size_t)(B * hw) * sizeof(float), e)) ||
	    !(s->tok = coli_malloc((size_t)B * sizeof(int32_t), e)) ||
	    (in_width(c) && !(s->in = coli_malloc((size_t)(B * in_width(c)) * sizeof(float), e))) ||
	    !(s->h = coli_calloc((size_t)hw, sizeof(float), e))) {
		coli_mtp_release(s);
		return -1;
	}
	s->kv.n = s->pos = kv_n;
	return 0;
}

uint64_t mtp_bytes(const coli_model *c, int cap, int batch, int threads)
{
	uint64_t hw = (uint64_t)hid_width(c), B = (uint64_t)batch, L = (uint64_t)c->n_layers;
	if (c->n_mtp_layers < 1)
		return 0;
	return kv_layers_bytes(c, (int)L, (int)L + 1, cap + COLI_DRAFT_MAX, threads) + kv_keep_bytes(c, (int)L, (int)L + 1) +
	       (B * hw + B * (uint64_t)in_width(c) + hw) * sizeof(float) + B * sizeof(int32_t);
}

void coli_mtp_release(coli_mtp *s)
{
	coli_kv_release(&s->kv);
	free(s->hid);
	free(s->tok);
	free(s->in);
	free(s->h);
	memset(s, 0, sizeof(*s));
}

/* The shared head on the last row of the residual: its norm into s->h (the next step's input),
 * its logits (when asked). The model's final norm and lm_head stand in for absent ones. */
static void shared_head(coli_engine *m, coli_mtp *s, const layer_w *L, int n, float *logits)
{
	int d = m->cfg->hidden_size;
	const float *norm = L->head_norm ? L->head_norm : m->w->final_norm;
	rmsnorm(s->h, m->ws->X + (int64_t)(n - 1) * d, norm, d, (float)m->cfg->rms_norm_eps);
	if (logits)
		coli_mat_vec(m->kc, L->head.rows ? &L->head : &m->w->lm_head, s->h, logits);
}

/* The MTP layer over n rows at positions s->kv.n ..: row i from the hidden state hid[i] and
 * the token tok[i] after it; logits of the last row (or NULL). */
static int run_rows(coli_engine *m, coli_mtp *s, const float *hid, const int32_t *tok, int n, float *logits,
		    coli_err *e)
{
	const coli_model *c = m->cfg;
	const layer_w *L = &m->w->layers[s->layer];
	int d = c->hidden_size;
	float eps = (float)c->rms_norm_eps;
	if (s->kv.n + n > s->kv.cap)
		return coli_errf(e, COLI_EUSAGE, "MTP context full: %d cached + %d new positions exceed %d", s->kv.n, n,
				 s->kv.cap);
	if (c->attn == COLI_ATTN_V4)
		return v4_mtp(m, &s->kv, s->layer, hid, tok, n, logits, s->h, e);
	coli_tracer_begin(m->tr);
	for (int i = 0; i < n; i++) {
		float *x = s->in + (int64_t)i * 2 * d; /* [2 x hidden]: enorm(embed(t)), hnorm(h) */
		coli_mat_row(m->kc, L->embed.rows ? &L->embed : &m->w->embed, tok[i], x);
		rmsnorm(x, x, L->enorm, d, eps);
		rmsnorm(x + d, hid + (int64_t)i * d, L->hnorm, d, eps);
	}
	coli_mat_mul(m->kc, &L->eh_proj, s->in, n, m->ws->X); /* the layer's input, [n][hidden] */
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, s->layer);
	int rc = fwd_layer(m, &s->kv, s->layer, n, NULL, NULL, e);
	if (rc == 0) {
		s->kv.n += n;
		shared_head(m, s, L, n, logits);
	}
	coli_tracer_mark(m->tr, COLI_SPAN_OTHER, -1);
	coli_tracer_end(m->tr, (uint64_t)n);
	return rc;
}

/* The queue's first row is the MTP cache's next position. */
static int in_step(const coli_mtp *s, coli_err *e)
{
	if (s->kv.n == s->pos)
		return 0;
	return coli_errf(e, COLI_EUSAGE, "MTP state: queued position %d, but the MTP cache holds %d", s->pos, s->kv.n);
}

/* Every queued row through the MTP layer in one batch (the union of its experts read once). */
static int take_in(coli_engine *m, coli_mtp *s, float *logits, coli_err *e)
{
	int n = s->n_pending;
	if (n == 0)
		return 0;
	if (in_step(s, e) < 0 || run_rows(m, s, s->hid, s->tok, n, logits, e) < 0)
		return -1;
	s->pos += n;
	s->n_pending = 0;
	return 0;
}

int coli_mtp_catch_up(coli_engine *m, coli_mtp *s, coli_err *e)
{
	int n = s->n_pending - 1;
	int64_t hw = hid_width(m->cfg);
	if (n < 1 || s->steps > 0)
		return 0;
	if (in_step(s, e) < 0 || run_rows(m, s, s->hid, s->tok, n, NULL, e) < 0)
		return -1;
	memmove(s->hid, s->hid + n * hw, (size_t)hw * sizeof(float));
	s->tok[0] = s->tok[n];
	s->pos += n;
	s->n_pending = 1;
	return 0;
}

int mtp_make_room(coli_engine *m, coli_mtp *s, int32_t next, int n, coli_err *e)
{
	if (s->n_pending > 0)
		s->tok[s->n_pending - 1] = next;
	if (s->n_pending + n <= s->cap)
		return 0;
	if (s->steps > 0)
		return coli_errf(e, COLI_EUSAGE, "MTP state: a forward of %d tokens after %d draft steps without a "
				 "truncate", n, s->steps);
	return take_in(m, s, NULL, e);
}

float *mtp_slot(const coli_engine *m, coli_mtp *s)
{
	return s->hid + s->n_pending * hid_width(m->cfg);
}

void mtp_take(coli_engine *m, coli_mtp *s, const int32_t *tokens, int n, int p0, const float *rows)
{
	int64_t hw = hid_width(m->cfg);
	if (s->n_pending == 0)
		s->pos = p0;
	if (rows)
		memcpy(s->hid + s->n_pending * hw, rows, (size_t)(n * hw) * sizeof(float));
	for (int i = 0; i < n; i++)
		s->tok[s->n_pending + i] = i + 1 < n ? tokens[i + 1] : -1;
	s->n_pending += n;
}

int coli_mtp_step(coli_engine *m, coli_mtp *s, int32_t token, float *logits, coli_err *e)
{
	int rc;
	if (token < 0 || token >= m->cfg->vocab_size)
		return coli_errf(e, COLI_EUSAGE, "draft: token id %d out of range [0, %d)", token, m->cfg->vocab_size);
	if (s->steps == 0) {
		if (s->n_pending == 0)
			return coli_errf(e, COLI_EUSAGE, "draft: no position queued (a forward comes first)");
		s->tok[s->n_pending - 1] = token;
		rc = take_in(m, s, logits, e);
		s->base = s->kv.n;
		kv_keep_begin(&s->kv, COLI_DRAFT_MAX); /* fixed-size state: the further steps rolled back */
	} else {
		rc = run_rows(m, s, s->h, &token, 1, logits, e);
	}
	s->steps += rc == 0;
	return rc;
}

void coli_mtp_truncate(const coli_engine *m, coli_mtp *s, int n)
{
	int to = s->steps > 0 && s->base < n ? s->base : n;
	s->steps = 0;
	kv_cut(m, &s->kv, to);
	if (s->pos + s->n_pending > n)
		s->n_pending = n > s->pos ? n - s->pos : 0;
}
