/* speculative.h: speculative decoding of one sequence in the engine: k drafts from the MTP layer
 * (or, for benchmarks, an oracle of known ids), their verify in one forward of the main model,
 * acceptance (greedy: the longest agreeing prefix; sampling: speculative sampling's rule), every
 * state rolled back to the accepted tokens (coli_kv_rollback: growing parts cut, fixed-size ones
 * restored and replayed), and auto's decision, from measured costs, whether drafting pays. The
 * output equals plain decoding (docs/coli-run.md, "Speculative decoding"). */
#ifndef COLI_SPECULATIVE_H
#define COLI_SPECULATIVE_H

#include "engine.h"
#include "sampler.h"

#define COLI_SPEC_AUTO (-1)

typedef struct coli_spec_stats {
	int64_t rounds, drafted, accepted; /* verifies, draft tokens verified, of them accepted */
	int64_t plain, tokens;    /* plain decode steps; tokens the decode steps and verifies made */
	double draft_s, verify_s, plain_s;
	uint64_t verify_bytes, plain_bytes; /* expert bytes read (streaming) in verifies, plain steps */
	int switches;             /* auto: decisions that changed on/off */
} coli_spec_stats;

typedef struct coli_spec {
	int want;                 /* COLI_SPEC_AUTO, 0 (off) or K drafts per verify */
	int k;                    /* drafts of the next round (0: a plain step) */
	int on;                   /* auto's decision (fixed K: 1) */
	char why[200];            /* the decision and why */
	int have_mtp;             /* the MTP state is kept (the MTP layer drafts, or auto may use it) */
	coli_mtp mtp;
	const int32_t *oracle;    /* the oracle's ids (benchmarks), or NULL */
	int n_oracle;
	double rate;              /* the oracle's rate */
	uint64_t rng;             /* the oracle's wrong drafts */
	int vocab;
	float *q;                 /* [COLI_DRAFT_MAX][vocab] draft logits, then (sampling) probabilities */
	float *p;                 /* [COLI_DRAFT_MAX + 1][vocab] verify logits */
	float *pp, *resid;        /* [vocab] a verify row's probabilities, the residual */
	int32_t toks[COLI_DRAFT_MAX + 1];
	/* auto's estimates (decayed): acceptance, costs in seconds */
	double acc_a, acc_r;      /* drafts accepted, rounds with a rejection */
	double c_plain, c_step, c_tok; /* a plain step; a draft step; a verify's extra per token */
	int since;                /* steps since the other mode was last measured */
	int probe_every;          /* steps between such measurements (growing) */
	int last_accepted;        /* drafts the last round accepted */
	coli_spec_stats st;
} coli_spec;

/* What a sequence's speculative decoding is asked to do. */
typedef struct coli_spec_opts {
	int want;                 /* COLI_SPEC_AUTO, 0 (off) or K (1 .. COLI_DRAFT_MAX) drafts per verify */
	const int32_t *oracle;    /* benchmarks: the drafts are these ids (a previous run's), not the MTP
				   * layer's; NULL: the MTP layer drafts */
	int n_oracle;
	double rate;              /* with an oracle: each draft its id with probability rate, else another */
	uint64_t seed;            /* the oracle's wrong drafts */
} coli_spec_opts;

/* Sets d up for o (and the engine m, its KV cache of kv->cap tokens holding kv->n): the MTP
 * state, and coli_kv_keep on kv (a model with fixed-size state rolls back its verifies). Without
 * MTP layers (and no oracle), K drafts is an error (EUSAGE) naming the container; auto then stays
 * off. Allocates its buffers here. */
int coli_spec_open(coli_spec *d, coli_engine *m, coli_kv *kv, const coli_spec_opts *o, coli_err *e);
void coli_spec_close(coli_spec *d);
/* Bytes coli_spec_open allocates for drafting (want != 0) on a model of config c with a KV cache
 * of cap tokens, batches of batch tokens and threads compute threads: the MTP state (none with
 * an oracle), coli_kv_keep's, the draft and verify logits; 0 where it would stay off (no MTP
 * layers, no oracle). */
uint64_t coli_spec_bytes(const coli_model *c, int cap, int batch, int threads, int oracle);
/* The forward of the prompt or a chat turn: n tokens (the MTP state takes their hidden states). */
int coli_spec_feed(coli_spec *d, coli_engine *m, coli_kv *kv, const int32_t *tokens, int n, float *last, coli_err *e);
/* One step of generation from t, the chosen token (in the session, not yet run), at index g of
 * the generation (the oracle's): a plain decode step or a round of drafts and their verify.
 * Makes 1 .. max tokens into out[] (*n_out), the logits each was chosen from into rows[]; the
 * last made token is the new chosen one. kv->n ends n0 + *n_out (n0: kv->n before). */
int coli_spec_step(coli_spec *d, coli_engine *m, coli_kv *kv, sampler *smp, int32_t t, int g, int max, int32_t *out,
	       const float **rows, int *n_out, float *logits, coli_err *e);
/* auto's model: the k (1 .. COLI_DRAFT_MAX) of the best expected speedup over plain
 * steps into *gain, with *acc the acceptance estimated from d's decayed counts: a round of k
 * makes 1 + a + .. + a^k tokens and costs a plain step, k draft steps and k verified tokens
 * beyond the plain step (d->c_plain, c_step, c_tok). */
int coli_spec_best_k(const coli_spec *d, double *acc, double *gain);
/* After the caller stops early at out[j]: the caches rolled back to hold t and out[0 .. j). */
int coli_spec_stop(coli_spec *d, coli_engine *m, coli_kv *kv, int n, coli_err *e);

#endif
