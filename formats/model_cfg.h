/* model_cfg.h: reading config.json for coli_model (internal to libcoli): typed getters over
 * one JSON object that name the file and the key in every message, and the parts of the reader
 * that live in their own files (RoPE parameters, the DSA, hybrid and DeepSeek V4 families' keys). */
#ifndef COLI_MODEL_CFG_H
#define COLI_MODEL_CFG_H

#include <jansson.h>
#include <limits.h>

#include "model.h"

#define CFG_REQUIRED LLONG_MIN /* as a default: the field must be present */
#define DIM_MAX (1LL << 20)    /* bound on hidden/intermediate/rank sizes */
#define HEAD_MAX 4096          /* bound on head counts and per-head dims */

/* One JSON object being read: messages say "<file>: <prefix><key>: ...". */
typedef struct cfg {
	json_t *obj;
	const char *prefix; /* "" or e.g. "rope_scaling." */
	const char *name;
	coli_err *e;
} cfg;

/* Errors "<file>: <prefix><key>: expected <want>, got <kind>" and "...: missing". */
int cfg_bad_type(const cfg *c, const char *key, const char *want, const json_t *v);
int cfg_missing(const cfg *c, const char *key);
/* The value of key; NULL when absent or null (HF then uses its default). */
json_t *cfg_get(const cfg *c, const char *key);
int cfg_is_null(const cfg *c, const char *key);
/* An integer in [lo, hi] (def CFG_REQUIRED: must be present), a number, a number > 0, a boolean,
 * a string (def NULL: required); each refuses another JSON type. */
int cfg_int(const cfg *c, const char *key, long long def, long long lo, long long hi, int *out);
int cfg_num(const cfg *c, const char *key, double def, double *out);
int cfg_pos(const cfg *c, const char *key, double def, double *out);
int cfg_bool(const cfg *c, const char *key, int def, int *out);
int cfg_str(const cfg *c, const char *key, const char *def, const char **out);
/* A string that must be `want`, a boolean that must be true (why: the reference computes only
 * that way), layer_types (when present) giving every layer the kind `want`. */
int cfg_want_str(const cfg *c, const char *key, const char *def, const char *want);
int cfg_want_true(const cfg *c, const char *key, const char *why);
int cfg_all_layers_are(const cfg *c, const coli_model *m, const char *want);

/* model_rope.c: the RoPE object (rope_parameters, else rope_scaling; both set is refused unless
 * rope_scaling says "default"), a number that may stand in it or at the root (both present and
 * different is refused), and the scaling it describes. */
int mdl_rope_object(const cfg *top, json_t **out);
int mdl_rope_num(const cfg *top, const char *key, double def, double *out);
int mdl_parse_rope(const cfg *top, coli_model *m);

/* model_dsa.c: glm_moe_dsa's indexer keys (after MLA's), and mlp_layer_types. */
int mdl_parse_dsa(const cfg *c, coli_model *m);
int mdl_parse_mlp_layer_types(const cfg *c, coli_model *m);

/* model_hybrid.c: qwen3_5_moe: the text model's keys (text_config, else the root itself), the
 * hybrid attention (after the GQA keys), the MoE's shared expert, router and MTP. */
int mdl_text_config(const cfg *root, cfg *text, coli_model *m);
int mdl_parse_hybrid(const cfg *c, coli_model *m);
int mdl_parse_hybrid_moe(const cfg *c, coli_model *m);

/* model_v4.c: deepseek_v4: the attention's keys and the layer schedule (in place of GQA's or
 * MLA's), the router, and after the RoPE object the two RoPEs and expert_dtype. */
int mdl_parse_v4(const cfg *c, coli_model *m);
int mdl_parse_v4_moe(const cfg *c, coli_model *m);
int mdl_parse_v4_late(const cfg *c, coli_model *m);

#endif
