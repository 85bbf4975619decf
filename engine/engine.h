/* engine.h: libcoli-engine's entry point: a container opened for running (dense part in RAM,
 * an expert store behind it), its KV cache, and the forward pass of every family, built from
 * shared blocks (norms, RoPE, GQA or MLA attention, routers, SwiGLU experts, shared experts,
 * dense MLPs).
 *
 * One forward call runs n tokens (a prefill batch, or n = 1 for decode) at positions kv->n ..
 * kv->n + n - 1, appends them to the cache, and returns each token's logits. */
#ifndef COLI_ENGINE_H
#define COLI_ENGINE_H

#include <stdint.h>

#include "container.h"
#include "route.h"
#include "state.h"
#include "store.h"
#include "tracer.h"

#define COLI_DRAFT_MAX 4           /* draft tokens per verify, at most */

/* The state of one sequence (its "KV cache"): the parts every layer declares (formats/state.h),
 * each growing by one row per token: GQA keys and values [ctx][kv_heads * head_dim], or MLA's
 * normalised latent [ctx][kv_lora] and rotated rope key [ctx][rope]; on a DSA "full" layer also
 * the indexer's keys [ctx][index_head_dim]; a Gated DeltaNet layer keeps fixed-size parts instead
 * (its conv's last inputs, its recurrent state), which only go forward. Rolling back the growing
 * parts is setting n. */
typedef struct coli_kv {
	int n, cap;                /* tokens cached, capacity */
	int n_layers;              /* slots of k, v, ix: the main layers and the MTP layers */
	int n_parts;               /* the parts allocated (coli_model_state_range of the layers kept) */
	coli_state_part *parts;
	float **part;              /* [part] -> [cap][width] (a growing part) or [fixed] floats */
	int k_width, v_width;      /* floats per token and layer: GQA k/v, MLA latent/rope key */
	int ix_width;              /* DSA: index_head_dim (0 without an indexer) */
	float **k, **v, **ix;      /* [layer] -> views of part: NULL where the layer keeps no such part */
	float **conv, **rec;       /* [layer] -> Gated DeltaNet's fixed parts (NULL on other layers) */
	float *att;                /* [threads][attn_score_rows][cap] attention scores, rows per compute thread */
	float *iscore;             /* DSA: [2][cap] one query's indexer scores and the selection's copy (else NULL) */
	struct kv_keep *keep;      /* NULL, or what coli_kv_rollback needs of the last short forward call
				    * (coli_kv_keep; internal: nn/kv.h) */
	struct v4_kv *v4;          /* deepseek_v4: its window, compressed rows and scratch (internal: nn/v4.h) */
} coli_kv;

typedef struct coli_engine {
	coli_container *ct;
	const coli_model *cfg;
	struct weights *w;         /* the dense part in RAM (internal: nn/weights.h) */
	coli_store *store;
	struct rope *rope;         /* RoPE frequencies (internal: nn/rope.h) */
	struct fwd_ws *ws;         /* working memory of the forward pass (internal: nn/ws.h) */
	coli_kernels *kc;          /* the kernels' variant, threads and pool, for this model */
	coli_tracer *tr;           /* NULL, or where spans, reads and outcomes go (the opts') */
	double attn_scale;         /* softmax scale */
	double *usage;             /* NULL, or routing counts [n_layers + n_mtp_layers][n_experts]
				    * the MoE blocks add 1 to for each expert each token chooses (the opts') */
	const coli_route *route;   /* NULL, or the routing replayed in place of the routers' (opts') */
	int dsa_dense;             /* DSA: attention over every position (the opts') */
} coli_engine;

/* Routing of the last forward call, when asked for: [moe layer][token][top_k], experts
 * sorted by weight descending, ties by lower id. */
typedef struct coli_routing_log {
	int32_t *ids;              /* caller-sized: n_moe_layers x n x top_k */
	float *weights;            /* same shape, or NULL */
} coli_routing_log;

/* How the model is opened: which expert store stands behind the forward pass, and the kernels. */
typedef struct coli_engine_opts {
	int stream;               /* 1: experts streamed from disk (store_stream), 0: all in RAM */
	int mmap;                 /* 1: experts used in place from an mmap (store_mmap) */
	store_stream_opts so;     /* with stream: slots, pins, usage (layers as in the container,
				   * MTP included), I/O backend, mirrors, CRC policy, events */
	const char *isa;          /* kernels: "scalar", "avx2", "avx512"; NULL: the best the CPU has */
	int threads;              /* compute threads; 0: physical cores */
	coli_precision precision; /* kernels.h: COLI_PREC_EXACT (0, the default) or COLI_PREC_Q8: 8-bit
				   * activations for the products over int4/int8 codes (experts, and
				   * the dense matrices stored so); routers (f32), norms and the
				   * attention core stay float32 */
	coli_tracer *tracer;      /* NULL: no trace; else the caller's, for the model's lifetime */
	int max_batch;            /* tokens per batch of the forward pass (its working memory is sized
				   * for it at open; longer calls run in batches); 0: COLI_MAX_BATCH */
	const coli_route *route_from; /* NULL: the routers choose. Else (benchmarks: a real model's
				   * routing on a synthetic model) at token position p of the KV cache
				   * and the model's j-th MoE layer, the route's entry (p, j) replaces
				   * the router's experts and weights, and the union, the store, the
				   * usage counts, the trace and the routing log see them as the
				   * router's; an absent entry leaves the router's choice; MTP layers
				   * and the next-layer prediction keep the model's routers. Open
				   * refuses (EUSAGE) a route whose n_experts or top_k differ from the
				   * model's, or with fewer layers than its MoE layers; coli_forward
				   * refuses positions beyond the route's. The caller's, for the model's
				   * lifetime. */
	int dsa_dense;            /* DSA models: the indexer's keys kept, but attention looks at every
				   * earlier position (what index_topk >= the context would do; for
				   * measuring what the sparse selection saves) */
	double *usage;            /* NULL, or this run's routing counts [n_layers + n_mtp_layers]
				   * [n_experts], the caller's, which the MoE blocks add 1 to for each
				   * expert each token chooses (coli-run folds them into .coli_usage) */
} coli_engine_opts;

#define COLI_MAX_BATCH 512

/* o may be NULL (all in RAM, the best kernels, default threads). An unknown or unavailable
 * o->isa is an error (EUSAGE) naming it. */
int coli_engine_open(coli_engine *m, const char *path, const coli_engine_opts *o, coli_err *e);
/* The same on a container the caller opened (to size the run first: policy.h's coli_run_sizing):
 * the engine takes ct over, closing it with the engine, or at once when opening fails. */
int coli_engine_open_container(coli_engine *m, coli_container *ct, const coli_engine_opts *o, coli_err *e);
void coli_engine_close(coli_engine *m);

int coli_kv_init(coli_kv *kv, const coli_engine *m, int cap, coli_err *e);
/* Bytes of state one token takes over all main layers (what coli_kv_init allocates per unit of
 * cap: coli_model_state_token_bytes; fixed-size parts come on top, once per sequence). */
uint64_t coli_kv_token_bytes(const coli_model *c);
void coli_kv_release(coli_kv *kv);

/* Speculative decoding's rollback. coli_kv_keep makes every later forward call of at most
 * COLI_DRAFT_MAX + 1 tokens keep what rolling it back needs: for a Gated DeltaNet's conv and
 * recurrent state their value before the call and each token's inputs to them; for deepseek_v4's
 * window and compressors' windows what each token overwrites (a few rows per layer, not a copy
 * of the state per token). coli_kv_rollback(kv, n) then makes the state that of the first n
 * tokens, bit for bit: growing parts are cut at n (deepseek_v4's compressed rows completed by a
 * later token zeroed), a Gated DeltaNet's state restored and the kept tokens before n replayed,
 * deepseek_v4's overwritten slots put back. n must lie within the last forward call (from its first
 * position to kv->n) when the model has fixed parts; EUSAGE otherwise. A model without fixed
 * parts needs no coli_kv_keep: rolling back is setting n. */
int coli_kv_keep(coli_kv *kv, const coli_engine *m, coli_err *e);
int coli_kv_rollback(const coli_engine *m, coli_kv *kv, int n, coli_err *e);

/* Runs n tokens (in batches of max_batch); logits: [n][vocab] (all positions) or NULL; last:
 * [vocab] logits of the last token only (may be NULL). routing may be NULL. Allocates nothing:
 * its working memory is the model's, the KV cache's. */
int coli_forward(coli_engine *m, coli_kv *kv, const int32_t *tokens, int n, float *logits, float *last,
	    coli_routing_log *routing, coli_err *e);

/* Decode's attention core (scores, softmax, the weighted values; not the projections), for a
 * planner's cost model: its multiply-adds for one token at KV position pos over all layers (DSA:
 * over the index_topk selected positions once there are more; deepseek_v4: the window's keys and
 * the compressed rows attended, CSA's index_topk at most), and in *threaded whether the engine
 * shares them over its threads (else one thread does them). */
double coli_attn_decode_fmas(const coli_model *c, int pos, int *threaded);
/* DSA: the lightning indexer's scan at pos over all layers (index heads x index_head_dim per
 * earlier position on each full layer; 0 while every position is attended); deepseek_v4: per
 * complete compressed row of each CSA layer. The engine shares it over its threads (deepseek_v4's
 * runs on one). */
double coli_attn_index_fmas(const coli_model *c, int pos);
/* Gated DeltaNet: the delta rule's multiply-adds per token over its layers (4 per element of each
 * value head's state, in one pass over it), shared over the threads; the same at every position. */
double coli_attn_linear_fmas(const coli_model *c);
/* Bytes of state decode moves at pos: what attention looks at (DSA: index_topk positions;
 * deepseek_v4: the window and the rows attended), the index keys the indexer scans, and
 * fixed-size state (a Gated DeltaNet's) read and written. */
double coli_attn_decode_bytes(const coli_model *c, int pos);
/* Multiply-adds per second of the engine's attention core on the calling thread: one query head
 * of hd dimensions against n cached positions, repeated for seconds (0 when memory is short). */
double coli_attn_core_rate(int hd, int n, double seconds);

/* Gated DeltaNet's delta rule alone, what a linear layer of c runs between its conv and its gated
 * norm (for benchmarks: coli-gdnbench): n tokens through every value head on the layer's state S
 * [v_heads][v_head_dim][k_head_dim] (each head's S^T, nn/gdn.h), from Y [n][conv_dim] (q and k
 * L2-normalised, q scaled by 1/sqrt(k_head_dim), then v), the decays g and betas beta
 * [n][v_heads]; outputs O [n][v_heads x v_head_dim]. scratch NULL: decode's step, token by token;
 * else the chunked form (what prefill runs past COLI_EXACT_N tokens), scratch holding
 * coli_gdn_scratch_floats(c) floats. Over the kernels' threads by value head; allocates nothing. */
void coli_gdn_rule(coli_kernels *kc, const coli_model *c, float *S, const float *Y, const float *g, const float *beta,
		   int n, float *scratch, float *O);
size_t coli_gdn_scratch_floats(const coli_model *c);

/* Weight bytes one decode token reads: every dense matrix of the main layers, top_k experts
 * per MoE layer, lm_head (the embedding row and norms are negligible and left out). */
uint64_t coli_engine_bytes_per_token(const coli_engine *m);
/* Of those, the bytes whose products take 8-bit activations (0 unless opened with precision q8:
 * the int4/int8 matrices). */
uint64_t coli_engine_q8_bytes_per_token(const coli_engine *m);

/* Bytes of working memory coli_engine_open allocates for a model of config c and batches of
 * max_batch tokens (0: COLI_MAX_BATCH): the forward pass's buffers and the kernels' prepared
 * activations (what a RAM budget must leave for them). */
uint64_t coli_engine_work_bytes(const coli_model *c, int max_batch);

/* Number of MoE layers among the main layers. */
int coli_engine_moe_layers(const coli_engine *m);

/* Speculative decoding with the container's first MTP layer (nn/mtp.c; docs/coli-run.md).
 * The draft at position p reads the main model's final hidden state h_p (the lm_head's input,
 * after the final norm) and the token t_{p+1}: x = eh_proj([enorm(embed(t_{p+1})); hnorm(h_p)]),
 * then the MTP layer's decoder block (its own KV cache; MoE through the store like any layer),
 * then shared_head.norm and shared_head.head (the model's final norm and lm_head when absent):
 * the logits of t_{p+2}. A further draft step at p + 1 reads the previous step's head input and
 * the token it chose. deepseek_v4's MTP layer (DeepSeek's MTPBlock, nn/v4.h) reads the main
 * model's final streams h_p (before its mHC head) instead: x_j = e_proj(enorm(embed(t_{p+1}))) +
 * h_proj(hnorm(h_p[j])) on every stream j, its decoder block, its own mHC head and norm, the
 * model's head; a further step reads the previous step's streams. The state of one sequence: */
typedef struct coli_mtp {
	int layer;                 /* the container layer that drafts (the first MTP layer) */
	coli_kv kv;                /* its KV cache (only that layer's slot): positions 0 .. kv.n - 1; with
				    * fixed-size parts (deepseek_v4's window) kept for rolling the draft
				    * steps back (coli_kv_keep) */
	int pos;                   /* the main position of pending row 0 */
	int n_pending, cap;        /* rows waiting for the MTP layer; at most cap (the batch size) */
	float *hid;                /* [cap][hidden] their final hidden states h_p (deepseek_v4: [cap][hc_mult]
				    * [hidden], the streams) */
	int32_t *tok;              /* [cap] t_{p+1} of each (the last one's: -1 until known) */
	float *in;                 /* [cap][2 x hidden] eh_proj's input (deepseek_v4: NULL) */
	float *h;                  /* [hidden] the last draft step's head input (deepseek_v4: its streams) */
	int steps;                 /* draft steps since the last coli_mtp_truncate */
	int base;                  /* kv.n before the first draft step's speculative rows */
} coli_mtp;

/* A state for a KV cache of cap tokens (main positions; drafts take COLI_DRAFT_MAX more), its
 * positions starting at kv_n (a resumed session's: those MTP entries are zero). EUSAGE naming
 * the container when it has no MTP layers. */
int coli_mtp_init(coli_mtp *s, const coli_engine *m, int cap, int kv_n, coli_err *e);
void coli_mtp_release(coli_mtp *s); /* accepts a zeroed or released one */

/* coli_forward, and (s not NULL) the n positions' final hidden states queued for the MTP layer
 * (which takes them in at the next draft step, or in one batch when the queue is full). */
int coli_forward_mtp(coli_engine *m, coli_kv *kv, coli_mtp *s, const int32_t *tokens, int n, float *logits,
		     float *last, coli_err *e);

/* The queued positions whose next token is known (all but the last) taken in by the MTP layer
 * in one batch (after a prefill, so that the first draft step is short). */
int coli_mtp_catch_up(coli_engine *m, coli_mtp *s, coli_err *e);

/* One draft step; logits: [vocab], of the token after `token`. The first step after a forward
 * takes in every queued position, the last with `token` (the token chosen after it); each
 * further step drafts one position on, from the previous step's head input and `token` (the
 * token the previous step's logits gave). Allocates nothing. */
int coli_mtp_step(coli_engine *m, coli_mtp *s, int32_t token, float *logits, coli_err *e);

/* After a verify: the draft steps' speculative rows dropped from the MTP cache (fixed-size parts
 * restored as they were before them), and the queued positions at or beyond n (the main cache's
 * kv->n once rolled back) dropped. */
void coli_mtp_truncate(const coli_engine *m, coli_mtp *s, int n);

#endif
