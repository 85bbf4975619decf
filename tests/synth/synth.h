/* synth.h: internal interfaces of coli-synth, the synthetic HF checkpoint generator.
 *
 * Flow: main.c parses options -> config.c emits config.json text, parsed back with
 * coli_model_parse so names and shapes come from libcoli -> routing.c calibrates the routing
 * knobs into a per-layer plan -> weights.c defines every weight value as a pure function of
 * (seed, tensor name, element index) -> writer.c streams the shards with a thread pool ->
 * measure.c runs a float32 forward pass over sampled tokens and reports the routing it sees,
 * reading weights through a source (regenerated values, or a checkpoint on disk, source.c).
 */
#ifndef COLI_SYNTH_H
#define COLI_SYNTH_H

#include <pthread.h>
#include <stdint.h>

#include "error.h"
#include "fileio.h"
#include "model.h"

#define SYNTH_TOOL "coli-synth"
#define SYNTH_MARKER ".coli-synth" /* written first into DIR: the folder is coli-synth's */

/* ---- options (options.c) ----------------------------------------------------------------- */

enum { SYNTH_PRESET_NONE, SYNTH_PRESET_BENCH, SYNTH_PRESET_GLM5, SYNTH_PRESET_QWEN36, SYNTH_PRESET_V4FLASH };
enum { SYNTH_GGUF_F32 = 0, SYNTH_GGUF_Q4_0 = 2, SYNTH_GGUF_Q4_1 = 3 }; /* --gguf-*: ggml types */

/* Shape options are -1 until set; synth_opts_resolve fills family defaults after parsing. */
typedef struct synth_opts {
	const char *family, *out, *tokenizer, *measure_only;
	const char *gguf;          /* --gguf FILE, or NULL */
	int gguf_experts;          /* SYNTH_GGUF_*: the routed experts' */
	int gguf_dense;            /* SYNTH_GGUF_Q4_0 or F32: the other matrices' */
	int preset;                /* SYNTH_PRESET_* */
	int no_tokenizer, fp8, quiet, dry_run, help;
	int force;            /* --force: replace files in a DIR coli-synth did not write */
	int layers, experts, top_k, hidden, expert_ffn, ffn, heads, kv_heads, head_dim;
	int dense_layers, shared_experts, mtp;
	int q_lora, kv_lora, rope_dim, v_head_dim;       /* MLA (deepseek_v3, glm_moe_dsa) */
	int index_heads, index_head_dim, index_topk;     /* DSA indexer (glm_moe_dsa) */
	int index_freq, index_offset;                    /* its full/shared layer schedule */
	int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim; /* Gated DeltaNet (qwen3_5_moe) */
	int conv_kernel, full_interval;                  /* its conv taps; every Nth layer full attention */
	int no_vision, unfused;    /* qwen3_5_moe: no model.visual.* tower; one tensor per expert */
	int o_groups, o_lora, window, csa_ratio, hca_ratio, hc_mult, hash_layers; /* deepseek_v4 */
	int vocab;
	uint64_t shard_size, seed;
	double zipf, predict;
	int threads, measure_tokens;
} synth_opts;

void synth_opts_init(synth_opts *o);
/* Parses argv; 0, or -1 with e (COLI_EUSAGE) naming the option and the value. With --help,
 * o->help is set and the rest of argv is not looked at. */
int synth_opts_parse(synth_opts *o, int argc, char **argv, coli_err *e);
/* The --help text; malloc'd (caller frees), NULL when out of memory. */
char *synth_opts_help(void);
/* Applies the preset and family defaults and checks every value; 0, or -1 with e (usage). */
int synth_opts_resolve(synth_opts *o, coli_err *e);
/* The same for --measure-only: defaults of --measure and --threads. */
int synth_opts_resolve_measure(synth_opts *o, coli_err *e);

/* ---- tokenizer (tokenizer.c) ------------------------------------------------------------- */

typedef struct synth_tok {
	char *json_path, *config_path; /* tokenizer.json; tokenizer_config.json or NULL */
	int64_t n_tokens;              /* highest token id + 1 */
	int bos, eos, pad;             /* -1 when the tokenizer has none */
	int image, video, vision_start, vision_end; /* Qwen's <|image_pad|> ... ids, or -1 */
} synth_tok;

/* The default tokenizer.json for a family (inside tests/node_modules next to the binary);
 * malloc'd. */
char *synth_tok_default_path(const char *family);
int synth_tok_load(synth_tok *t, const char *json_path, coli_err *e);
void synth_tok_release(synth_tok *t);

/* ---- config.json (config.c) -------------------------------------------------------------- */

/* qwen3_5_moe's vision tower, the fixture's (written small whatever the text model's size: the
 * converter leaves it out): vision_config and the model.visual.* shapes follow from these. */
#define SYNTH_VIS_DEPTH 1
#define SYNTH_VIS_HIDDEN 32
#define SYNTH_VIS_FFN 64
#define SYNTH_VIS_HEADS 2
#define SYNTH_VIS_POSITIONS 16
#define SYNTH_VIS_PATCH 4
#define SYNTH_VIS_MERGE 2
#define SYNTH_VIS_TEMPORAL 2
#define SYNTH_VIS_CHANNELS 3

/* Derived shape shared by config emission and planning. */
typedef struct synth_shape {
	int n_group, topk_group;              /* deepseek_v3 group-limited routing */
	int q_lora, kv_lora, rope_dim, v_dim; /* MLA (deepseek_v3, glm_moe_dsa) */
	int bos, eos, pad;
	int image, video, vision_start, vision_end; /* qwen3_5_moe's multimodal token ids */
} synth_shape;

void synth_shape_derive(synth_shape *s, const synth_opts *o, const synth_tok *t);
/* qwen3_5_moe's rope_parameters.mrope_section: the three sections of the rotated half
 * (head_dim x 0.25 / 2 dims), as config.json writes them. */
void synth_mrope_sections(const synth_opts *o, int s[3]);
/* config.json and generation_config.json texts as save_pretrained writes them; malloc'd. */
char *synth_config_json(const synth_opts *o, const synth_shape *s);
char *synth_generation_json(const synth_opts *o, const synth_shape *s);

/* ---- weights (weights.c) ----------------------------------------------------------------- */

typedef enum synth_kind {
	SK_EMBED, SK_NORM, SK_BIAS, SK_CORR, SK_ROUTER, SK_LINEAR, SK_OUT, SK_DOWN, SK_HEAD,
	SK_SCALE, /* F32 "<w>_scale_inv" of an fp8 weight: filled from the weight's block amax */
	SK_NORM0, /* a (1 + w) RMSNorm's weight: w centred on 0 (qwen3_5_moe) */
	SK_TID2EID, /* deepseek_v4's hash table [vocab, top_k] (I64): each token's experts */
} synth_kind;

struct synth_plan;

/* One tensor of the model as libcoli's table names it, and how the file stores it. A fused
 * tensor (qwen3_5_moe's experts.gate_up_proj [E, 2I, H]) is a run of table tensors that
 * follow each other in the data: the first (the lead) carries the stored name and shape, the
 * others point at it and are left out of the header. */
typedef struct synth_tensor {
	char name[208];            /* the table's name: keys, lookups, measurement */
	char *stored;              /* the name in the file when it differs (malloc'd), else NULL */
	int ndim;
	int64_t rows, cols;        /* 1-D tensors: rows 1, cols = length */
	int sndim;                 /* stored shape when it is not [rows, cols] (fused, conv taps,
				      the vision tower's patch embedding), else 0 */
	int64_t sshape[5];
	int lead;                  /* a fused tensor's lead (index), else -1 */
	uint64_t fused_bytes;      /* the lead: bytes of the whole fused tensor */
	int glue;                  /* stays in the shard of the tensor before it */
	int dtype;                 /* coli_dtype: BF16, F32, F8_E4M3; deepseek_v4 also I8 (an FP4
				      expert, two e2m1 codes a byte), F8_E8M0 (a .scale), I64 */
	int ue8m0;                 /* an F8_E4M3 weight with deepseek_v4's power-of-two block scales */
	const struct synth_tensor *weight; /* an F8_E8M0 .scale: its weight (its bytes are computed
					      from the weight's values, not kept in scales) */
	synth_kind kind;
	int layer, expert;         /* -1 when none */
	uint64_t key;              /* PRNG stream */
	float std;                 /* N(0, std^2) part */
	int scale_of;              /* SK_SCALE: index of its weight */
	float *scales;             /* F8 weights: [ceil(rows/128) x ceil(cols/128)] scale_inv */
	float *sj;                 /* SK_DOWN in an aligned layer: [cols] aligned coefficients */
	int shard;
	uint64_t offset;           /* inside the shard's data section */
	uint64_t nbytes;
} synth_tensor;

#define SYNTH_FP8_BLOCK 128

uint64_t synth_key(uint64_t seed, const char *name);
/* Uniform 64-bit value number i of stream key. */
uint64_t synth_rand64(uint64_t key, uint64_t i);
/* Standard-normal-like value number i of stream key (Irwin-Hall of four 16-bit uniforms:
 * mean 0, variance 1, bounded by +-3.46). */
float synth_gauss(uint64_t key, uint64_t i);
/* Fills out[0..n) with synth_gauss(key, i0 + j). */
void synth_gauss_fill(uint64_t key, uint64_t i0, float *out, int64_t n);

/* Bytes of one stored row; F8 weights are generated in blocks of 128 rows. */
uint64_t synth_row_bytes(const synth_tensor *t);
int synth_row_align(const synth_tensor *t);
/* Floats of scratch a caller must provide to synth_encode_rows for nrows rows of t. */
int64_t synth_scratch_floats(const synth_tensor *t, int64_t nrows);
/* Stored bytes of rows [row0, row0+nrows) (row0 and nrows multiples of synth_row_align
 * except at the end); F8 weights also fill t->scales for those rows. */
void synth_encode_rows(const struct synth_plan *p, const synth_tensor *t, int64_t row0,
		       int64_t nrows, float *scratch, uint8_t *out);
/* One 128-row block of an fp8 weight (row0 % 128 == 0, nrows <= 128): codes into out, the
 * block scale_inv values of those rows into scale[ceil(cols/128)]; w: nrows x cols scratch. */
void synth_fp8_block(const struct synth_plan *p, const synth_tensor *t, int64_t row0,
		     int64_t nrows, float *w, uint8_t *out, float *scale);
/* The aligned coefficients alpha * s_j of an SK_DOWN tensor (sj: t->cols floats). */
void synth_align_coefs(const struct synth_plan *p, const synth_tensor *t, float *sj);
/* Removes from each of nrows rows (cols = H) its component along the plan's u. */
void synth_project_out_u(const struct synth_plan *p, float *rows, int64_t nrows, int64_t cols);
/* Float values before storage rounding. */
void synth_gen_rows(const struct synth_plan *p, const synth_tensor *t, int64_t row0,
		    int64_t nrows, float *out);

/* ---- routing plan (routing.c) ------------------------------------------------------------ */

/* The router selects with a stored bias (sigmoid + e_score_correction_bias, deepseek_v4's
 * sqrt(softplus) + gate.bias), else softmax over logits. */
int synth_biased(const coli_model *m);
/* A deepseek_v4 hash layer l's top_k experts for token tok (tid2eid's row): distinct, drawn
 * with probability in proportion to rank^-zipf of the layer's popularity order. */
void synth_hash_ids(const struct synth_plan *p, int l, int64_t tok, int64_t *ids);

/* Router selection, identical to the HF families: fills idx[k] and weights w[k] (w may be NULL
 * when only the selection is wanted). z: logits [E]; bias: e_score_correction_bias or NULL;
 * tmp: scratch of 2*E floats. */
void synth_route(const coli_model *m, const float *z, const float *bias, int *idx, float *w,
		 float *tmp);

/* Skew statistics of per-expert counts: least-squares slope of ln(count+0.5) over ln(rank)
 * (negated: 0 = uniform) and the share of the top ceil(E/10) experts. */
double synth_zipf_fit(const double *counts, int n);
double synth_top_share(const double *counts, int n);

typedef struct synth_layer_plan {
	int moe;
	float s_out, s_down;  /* std multipliers of o_proj and of down projections (random part) */
	float alpha;          /* aligned part of down projections toward the next router's rows */
	float u_gain;         /* softmax routers: row e gets bias[e] * u_gain along u */
	float *bias;          /* [E] popularity of each expert, >= 0 */
	float *logw;          /* deepseek_v4 hash layers: [E] -zipf ln(rank), else NULL */
	float *unit_t;        /* [H x E] unit random rows of this layer's router, transposed;
				 built when the previous layer aligns to it, else NULL */
} synth_layer_plan;

typedef struct synth_plan {
	const coli_model *m;
	uint64_t seed;
	int n_layers;          /* including MTP layers */
	synth_layer_plan *layer;
	float c;               /* component of every embedding along u (softmax routers), else 0 */
	float *u;              /* [H] unit vector */
	float router_std;
	/* calibration */
	double zipf, predict;  /* targets */
	double gamma, gamma0, r_eff, sumw2, mc_zipf, mc_recall;
	int predict_reachable;
} synth_plan;

int synth_plan_build(synth_plan *p, const coli_model *m, const synth_opts *o,
		     const coli_tensor_spec *spec, int n_spec, coli_err *e);
void synth_plan_release(synth_plan *p);

/* ---- tensor table and shard writer (table.c, writer.c) ----------------------------------- */

typedef struct synth_table {
	synth_tensor *t;
	int n;
	int n_shards;
	uint64_t *shard_data;      /* data bytes per shard */
	int **order;               /* per shard: tensor indices in data (name) order */
	int *count;                /* per shard: number of tensors */
	int *sorted;               /* all tensor indices in name order (synth_table_find) */
	uint64_t total_size;       /* sum of tensor bytes (index metadata.total_size) */
	int n_stored;              /* tensors in the files (a fused tensor counts once) */
} synth_table;

int synth_table_build(synth_table *tb, const synth_plan *p, const coli_tensor_spec *spec,
		      int n_spec, const synth_opts *o, coli_err *e);
void synth_table_release(synth_table *tb);
int synth_table_find(const synth_table *tb, const char *name);
/* The name a tensor has in the file. */
const char *synth_stored_name(const synth_tensor *t);

/* ---- the released layout (layout.c) -------------------------------------------------------- */

/* qwen3_5_moe's multimodal release: the stored name of table tensor s (model.language_model.*,
 * mtp.*, experts fused per layer unless o->unfused) into t->stored, the conv taps' stored shape
 * [C, 1, K]; 0, or -1 with e. Other families: nothing. */
int synth_layout_name(synth_tensor *t, const coli_tensor_spec *s, const coli_model *m,
		      const synth_opts *o, coli_err *e);
/* Experts fused into one stored tensor per layer and projection kind. */
int synth_layout_fused(const coli_model *m, const synth_opts *o);
/* The vision tower's tensors (model.visual.*, the vision_config of config.c) appended to
 * tb->t; tb->t must have room for synth_layout_vision_count more. */
int synth_layout_vision_count(const coli_model *m, const synth_opts *o);
void synth_layout_vision(synth_table *tb, const synth_plan *p, const synth_opts *o);
/* "model-00001-of-00003.safetensors", or "model.safetensors" for a single shard. */
void synth_shard_name(const synth_table *tb, int shard, char *buf, size_t cap);

/* Files written so far, removed again on failure. */
typedef struct synth_files {
	char **path;
	int n, cap;
} synth_files;
int synth_files_add(synth_files *f, const char *path, coli_err *e);
void synth_files_remove_all(synth_files *f);
void synth_files_release(synth_files *f);
/* Writes a small file via "<path>.tmp" and rename, recording it in f. */
int synth_write_small(synth_files *f, const char *dir, const char *name, const void *data,
		      size_t n, coli_err *e);

extern volatile int synth_interrupted;

/* Writes every shard and the index into dir; bytes written in *bytes. show_progress: a
 * rate-limited progress line on stderr. */
int synth_write_shards(const synth_table *tb, synth_plan *p, const char *dir, int threads,
		       int show_progress, synth_files *f, uint64_t *bytes, coli_err *e);

/* ---- weight sources and measurement (source.c, measure.c) -------------------------------- */

typedef struct synth_src synth_src;
struct synth_src {
	const coli_model *m;
	/* Rows [row0, row0+n) of the named tensor as float32, as the checkpoint defines them. */
	int (*rows)(const synth_src *s, const char *name, int64_t row0, int64_t n, float *out,
		    coli_err *e);
	/* Shape as rows x cols (1-D: 1 x n); -1 when absent. */
	int (*shape)(const synth_src *s, const char *name, int64_t *rows, int64_t *cols);
	void *ctx;
	const void *ctx2;
};

/* Regenerates stored values from the plan (identical to the written bytes). */
void synth_src_regen(synth_src *s, const synth_plan *p, const synth_table *tb);
/* Reads a checkpoint folder (any HF checkpoint of a supported family). */
int synth_src_ckpt_open(synth_src *s, coli_model *m, const char *dir, coli_err *e);
void synth_src_ckpt_close(synth_src *s);

typedef struct synth_measure_opts {
	int tokens, threads, quiet;
	uint64_t seed;
	const synth_plan *plan; /* targets to print; NULL for --measure-only */
} synth_measure_opts;

/* Runs the forward pass and prints the routing table on stdout. */
int synth_measure(const synth_src *s, const synth_measure_opts *o, coli_err *e);

/* ---- GGUF for llama.cpp (gguf.c, gguf_qwen.c) ------------------------------------------------ */

/* Writes the model as a llama.cpp GGUF at path ("<path>.tmp" renamed when complete): qwen3_moe
 * as "qwen3moe", qwen3_5_moe as "qwen35moe"; the checkpoint's values, matrices o->gguf_dense
 * (routed experts o->gguf_experts), routers, norms and the small Gated DeltaNet tensors F32,
 * tok's vocabulary and merges as tokenizer metadata. */
int synth_gguf_write(const char *path, const synth_plan *p, const synth_table *tb,
		     const synth_tok *tok, const synth_shape *s, const synth_opts *o, coli_err *e);

/* ---- small helpers (util.c) -------------------------------------------------------------- */

int synth_nthreads(void);
/* Runs fn(ctx, i) for i in [0, n) on up to `threads` threads; returns the first error. */
int synth_parallel(int n, int threads, int (*fn)(void *ctx, int i, coli_err *e), void *ctx,
		   coli_err *e);

#endif
