/* spec.c: speculative decoding: k drafts from the MTP layer (or an oracle of known ids), their
 * verify in one forward of the main model, acceptance, every state rolled back, and auto's
 * decision (speculative.h; docs/coli-run.md, "Speculative decoding"). */
#include "speculative.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fileio.h"
#include "nn/kv.h"
#include "nn/mtp.h"
#include "store.h"

#define AUTO_PROBE 32   /* auto: steps in one mode, then one in the other to measure it again */
#define AUTO_PROBE_MIN 4 /* auto: the first such interval; it doubles at each probe up to AUTO_PROBE */
#define AUTO_DECAY 0.95 /* auto: weight of the past acceptance counts at each round */
#define AUTO_NEW 0.3    /* auto: weight of a new cost measurement */
#define AUTO_PLAIN 2    /* auto: plain steps before the first round (their cost) */
#define AUTO_FIRST 1    /* auto: the k of the first round (a failed one costs the least) */

int coli_spec_open(coli_spec *d, coli_engine *m, coli_kv *kv, const coli_spec_opts *o, coli_err *e)
{
	int V = m->cfg->vocab_size;
	const int32_t *oracle = o->oracle;
	memset(d, 0, sizeof(*d));
	d->want = o->want, d->vocab = V, d->rate = o->rate;
	d->oracle = oracle, d->n_oracle = o->n_oracle, d->rng = o->seed ^ 0x6f7261636c65ull;
	snprintf(d->why, sizeof(d->why), "off: no drafts");
	if (d->want == 0)
		return 0;
	if (!oracle && m->cfg->n_mtp_layers < 1) {
		if (d->want > 0)
			return coli_errf(e, COLI_EUSAGE, "%d drafts per verify: %s has no MTP layers to draft with "
					 "(num_nextn_predict_layers 0, or none stored)", d->want, m->ct->dir);
		snprintf(d->why, sizeof(d->why), "off: auto, and %s has no MTP layers", m->ct->dir);
		d->want = 0;
		return 0;
	}
	if ((!oracle && coli_mtp_init(&d->mtp, m, kv->cap, kv->n, e) < 0) || coli_kv_keep(kv, m, e) < 0)
		return -1;
	d->have_mtp = !oracle;
	d->q = coli_malloc((size_t)COLI_DRAFT_MAX * V * sizeof(float), e);
	d->p = coli_malloc((size_t)(COLI_DRAFT_MAX + 1) * V * sizeof(float), e);
	d->pp = coli_malloc((size_t)V * sizeof(float), e);
	d->resid = coli_malloc((size_t)V * sizeof(float), e);
	if (!d->q || !d->p || !d->pp || !d->resid)
		return -1;
	d->on = d->want > 0;
	d->probe_every = AUTO_PROBE_MIN;
	if (d->on)
		snprintf(d->why, sizeof(d->why), "on: %d drafts per verify", d->want);
	else
		snprintf(d->why, sizeof(d->why), "auto: too few steps to decide");
	return 0;
}

uint64_t coli_spec_bytes(const coli_model *c, int cap, int batch, int threads, int oracle)
{
	if (!oracle && c->n_mtp_layers < 1)
		return 0;
	return (oracle ? 0 : mtp_bytes(c, cap, batch, threads)) + kv_keep_bytes(c, 0, c->n_layers) +
	       (uint64_t)(2 * COLI_DRAFT_MAX + 3) * (uint64_t)c->vocab_size * sizeof(float);
}

void coli_spec_close(coli_spec *d)
{
	if (d->have_mtp)
		coli_mtp_release(&d->mtp);
	free(d->q), free(d->p), free(d->pp), free(d->resid);
	memset(d, 0, sizeof(*d));
}

static coli_mtp *mtp_of(coli_spec *d)
{
	return d->have_mtp ? &d->mtp : NULL;
}

int coli_spec_feed(coli_spec *d, coli_engine *m, coli_kv *kv, const int32_t *tokens, int n, float *last, coli_err *e)
{
	if (coli_forward_mtp(m, kv, mtp_of(d), tokens, n, NULL, last, e) < 0)
		return -1;
	return d->have_mtp ? coli_mtp_catch_up(m, &d->mtp, e) : 0;
}

/* The oracle's generator (splitmix64): a uniform double in [0, 1). */
static double oracle_uniform(coli_spec *d)
{
	uint64_t z = (d->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (double)((z ^ (z >> 31)) >> 11) / (double)(1ull << 53);
}

/* Draft i of the oracle: its id, or with probability 1 - rate another one. */
static int32_t oracle_draft(coli_spec *d, int i)
{
	int32_t right = d->oracle[i];
	if (d->rate >= 1 || oracle_uniform(d) < d->rate || d->vocab < 2)
		return right;
	return (int32_t)((right + 1 + (int64_t)(oracle_uniform(d) * (d->vocab - 1))) % d->vocab);
}

/* Tokens a round of k drafts yields on average when each is accepted with probability a. */
static double expected_tokens(double a, int k)
{
	double s = 0, p = 1;
	for (int i = 0; i <= k; i++, p *= a)
		s += p;
	return s;
}

int coli_spec_best_k(const coli_spec *d, double *acc, double *gain)
{
	int best = 1;
	*acc = (d->acc_a + 1) / (d->acc_a + d->acc_r + 1); /* optimistic until rejections say otherwise */
	*gain = 0;
	for (int k = 1; k <= COLI_DRAFT_MAX; k++) {
		double g = expected_tokens(*acc, k) * d->c_plain / (d->c_plain + k * (d->c_step + d->c_tok));
		if (g > *gain)
			*gain = g, best = k;
	}
	return best;
}

/* --draft auto: plain steps first (their cost), a first round of one draft, then on while the
 * model says a round gains, k growing by one at most past the last round's accepted drafts (a
 * run of right drafts earns longer rounds), each mode measured again after an interval of steps
 * in the other: AUTO_PROBE_MIN, doubling up to AUTO_PROBE (a decision made on few rounds is
 * checked again soon). */
static int auto_k(coli_spec *d)
{
	double acc, gain;
	if (d->st.plain < AUTO_PLAIN)
		return 0;
	if (d->st.rounds == 0)
		return AUTO_FIRST;
	int k = coli_spec_best_k(d, &acc, &gain), on = gain > 1.0;
	k = k > d->last_accepted + 1 ? d->last_accepted + 1 : k;
	d->st.switches += on != d->on;
	d->on = on;
	snprintf(d->why, sizeof(d->why), "auto: %s: %.2fx expected at k %d (acceptance %.2f; a draft step %.2f, a verified "
		 "token %.2f plain steps)", on ? "on" : "off", gain, k, acc, d->c_step / d->c_plain, d->c_tok / d->c_plain);
	if (++d->since >= d->probe_every) {
		d->since = 0;
		d->probe_every = d->probe_every * 2 < AUTO_PROBE ? d->probe_every * 2 : AUTO_PROBE;
		return on ? 0 : k;
	}
	return on ? k : 0;
}

/* The drafts of the next step, within what is left to make, the oracle and the KV cache. */
static int choose_k(coli_spec *d, int g, int max, const coli_kv *kv)
{
	int k = d->want > 0 ? d->want : d->want == COLI_SPEC_AUTO ? auto_k(d) : 0;
	if (k > max - 1)
		k = max - 1;
	if (d->oracle && k > d->n_oracle - 1 - g)
		k = d->n_oracle - 1 - g;
	if (k > kv->cap - kv->n - 1)
		k = kv->cap - kv->n - 1;
	return k > 0 ? k : 0;
}

static uint64_t bytes_read(const coli_engine *m)
{
	coli_store_stats st;
	return coli_store_get_stats(m->store, &st) == 0 ? st.bytes_read : 0;
}

static double blend(double old, double x)
{
	return old > 0 ? (1 - AUTO_NEW) * old + AUTO_NEW * x : x;
}

/* A plain decode step: t through the model, the next token from its logits. */
static int plain_step(coli_spec *d, coli_engine *m, coli_kv *kv, sampler *smp, int32_t t, int32_t *out,
		      const float **rows, float *logits, coli_err *e)
{
	double t0 = coli_now();
	uint64_t b0 = bytes_read(m);
	if (coli_forward_mtp(m, kv, mtp_of(d), &t, 1, NULL, logits, e) < 0)
		return -1;
	out[0] = coli_sampler_pick(smp, logits);
	rows[0] = logits;
	double dt = coli_now() - t0;
	if (d->st.plain++ > 0) /* the first pays the warm-up */
		d->c_plain = blend(d->c_plain, dt);
	d->st.plain_s += dt;
	d->st.plain_bytes += bytes_read(m) - b0;
	return 0;
}

/* k drafts after t into d->toks[1 .. k]: the oracle's, or the MTP layer's (greedy, or drawn
 * from its distribution, kept in d->q for the acceptance rule). */
static int drafts(coli_spec *d, coli_engine *m, sampler *smp, int32_t t, int g, int k, coli_err *e)
{
	int V = d->vocab;
	d->toks[0] = t;
	for (int s = 0; s < k; s++) {
		float *q = d->q + (int64_t)s * V;
		if (d->oracle) {
			d->toks[s + 1] = oracle_draft(d, g + 1 + s);
			continue;
		}
		if (coli_mtp_step(m, &d->mtp, d->toks[s], q, e) < 0)
			return -1;
		if (smp->temperature <= 0) {
			d->toks[s + 1] = coli_sampler_pick(smp, q);
			continue;
		}
		coli_sampler_probs(smp, q, d->pp);
		memcpy(q, d->pp, (size_t)V * sizeof(float));
		d->toks[s + 1] = coli_sampler_draw(smp, q);
	}
	return 0;
}

/* The verified rows: the longest prefix of drafts the main model agrees with (greedy: its own
 * choice; sampling: speculative sampling's rule), then its token after them. Returns the count. */
static int accept(coli_spec *d, sampler *smp, int k, int32_t *out, const float **rows)
{
	int V = d->vocab, a = 0, ok = 1;
	int32_t x = -1;
	for (; a < k && ok; a++) {
		const float *row = d->p + (int64_t)a * V;
		if (smp->temperature <= 0) {
			x = coli_sampler_pick(smp, row);
			ok = x == d->toks[a + 1];
		} else {
			coli_sampler_probs(smp, row, d->pp);
			x = coli_sampler_verify(smp, d->pp, d->q + (int64_t)a * V, d->toks[a + 1], d->resid, &ok);
		}
		out[a] = x, rows[a] = row;
	}
	if (ok) { /* every draft accepted: the token after the last */
		rows[k] = d->p + (int64_t)k * V;
		out[k] = coli_sampler_pick(smp, rows[k]);
		return k + 1;
	}
	return a;
}

/* One round: k drafts, the verify of t and them in one forward, acceptance, rollback. */
static int round_k(coli_spec *d, coli_engine *m, coli_kv *kv, sampler *smp, int32_t t, int g, int k, int32_t *out,
		   const float **rows, int *n_out, coli_err *e)
{
	int n0 = kv->n;
	double t0 = coli_now();
	if (drafts(d, m, smp, t, g, k, e) < 0)
		return -1;
	double t1 = coli_now();
	uint64_t b0 = bytes_read(m);
	if (coli_forward_mtp(m, kv, mtp_of(d), d->toks, k + 1, d->p, NULL, e) < 0)
		return -1;
	double t2 = coli_now();
	d->st.verify_bytes += bytes_read(m) - b0;
	int n = *n_out = accept(d, smp, k, out, rows);
	if (coli_kv_rollback(m, kv, n0 + n, e) < 0) /* fixed-size state: restored and replayed */
		return -1;
	if (d->have_mtp)
		coli_mtp_truncate(m, &d->mtp, kv->n);
	d->st.rounds++, d->st.drafted += k, d->st.accepted += n - 1;
	d->last_accepted = n - 1;
	d->st.draft_s += t1 - t0, d->st.verify_s += t2 - t1;
	d->acc_a = AUTO_DECAY * d->acc_a + (n - 1);
	d->acc_r = AUTO_DECAY * d->acc_r + (n - 1 < k);
	d->c_step = blend(d->c_step, (t1 - t0) / k);
	double extra = (t2 - t1 - d->c_plain) / k;
	d->c_tok = blend(d->c_tok, extra > 0 ? extra : 0);
	return 0;
}

int coli_spec_step(coli_spec *d, coli_engine *m, coli_kv *kv, sampler *smp, int32_t t, int g, int max, int32_t *out,
	       const float **rows, int *n_out, float *logits, coli_err *e)
{
	int k = choose_k(d, g, max, kv), rc;
	*n_out = 1;
	rc = k == 0 ? plain_step(d, m, kv, smp, t, out, rows, logits, e) : round_k(d, m, kv, smp, t, g, k, out, rows, n_out, e);
	d->st.tokens += rc == 0 ? *n_out : 0;
	return rc;
}

int coli_spec_stop(coli_spec *d, coli_engine *m, coli_kv *kv, int n, coli_err *e)
{
	d->st.tokens -= kv->n - n;
	if (coli_kv_rollback(m, kv, n, e) < 0)
		return -1;
	if (d->have_mtp)
		coli_mtp_truncate(m, &d->mtp, n);
	return 0;
}
