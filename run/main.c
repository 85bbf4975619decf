/* main.c: coli-run's command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "run.h"
#include "tool.h"

static const char *const synopsis[] = {
	"coli-run -m MODEL.coli (--prompt TEXT | --prompt-ids \"IDS\" | --chat) [options]",
	"coli-run --tokenizer tokenizer.json (--encode < text | --decode \"IDS\")",
	NULL,
};

static const coli_choice on_off_auto[] = {{"on", 1}, {"off", 0}, {"auto", PREFETCH_AUTO}, {NULL, 0}};
static const coli_choice crc_on_off[] = {{"on", 0}, {"off", 1}, {NULL, 0}};
static const coli_choice cache_policies[] = {{"lru", STORE_CACHE_LRU}, {"lfu", STORE_CACHE_LFU}, {NULL, 0}};
static const coli_choice precisions[] = {{"exact", COLI_PREC_EXACT}, {"q8", COLI_PREC_Q8}, {NULL, 0}};
static const coli_choice io_modes[] = {
	{"uring", STORE_IO_URING}, {"threads", STORE_IO_THREADS_POOL}, {"mmap", STORE_IO_MMAP},
	{NULL, 0},
};

static const run_opts defaults = {.n_gen = 128, .top_p = 1.0f, .pins = -1, .prefetch = -1, .draft_oracle_rate = 1,
				  .cache_policy = COLI_CACHE_DEFAULT};
static run_opts o;

/* A count for every MoE layer, or a list of one count per MoE layer. */
typedef struct count_list {
	int *one, **list, *n;
	long long lo, hi;
} count_list;
static const count_list cache_arg = {&o.cache_slots, &o.cache_list, &o.n_cache_list, 1, 1 << 20};
static const count_list pins_arg = {&o.pins, &o.pins_list, &o.n_pins_list, 0, 1 << 20};

/* "N" into *one, "N0,N1,..." into a malloc'd list (the last given counts). */
static int counts(const coli_option *opt, const char *arg, coli_err *e)
{
	const count_list *c = opt->value;
	int *v, n;
	if (!strchr(arg, ','))
		return coli_opts_int(arg, c->lo, c->hi, c->one, e);
	if (coli_opts_int_list(arg, c->lo, c->hi, &v, &n, e) < 0)
		return -1;
	free(*c->list);
	*c->list = v, *c->n = n;
	return 0;
}
/* --draft auto|0|K: K at most COLI_DRAFT_MAX. */
static int draft_arg(const coli_option *opt, const char *arg, coli_err *e)
{
	int *v = opt->value;
	if (strcmp(arg, "auto") == 0) {
		*v = DRAFT_AUTO;
		return 0;
	}
	char *end;
	long k = strtol(arg, &end, 10);
	if (!*arg || *end || k < 0)
		return coli_errf(e, COLI_EUSAGE, "'%s' is not auto or a count of draft tokens", arg);
	if (k > COLI_DRAFT_MAX)
		return coli_errf(e, COLI_EUSAGE, "%s exceeds the maximum of %d draft tokens per verify", arg, COLI_DRAFT_MAX);
	*v = (int)k;
	return 0;
}
static int help;

static const coli_option options[] = {
	COLI_OPT_TEXT("Runs a coli container: the exact forward pass of its family, generation, chat."),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRING('m', "model", &o.model, "PATH",
			"the container (a folder written by coli-convert)"),
	COLI_OPT_STRING('p', "prompt", &o.prompt, "TEXT",
			"the prompt, tokenized with the container's tokenizer.json"),
	COLI_OPT_STRING(0, "prompt-ids", &o.prompt_ids, "\"IDS\"",
			"the prompt as token ids, separated by spaces"),
	COLI_OPT_FLAG(0, "chat", &o.chat,
		      "interactive: each line of stdin is a user turn in the family's chat format"),
	COLI_OPT_INT('n', NULL, &o.n_gen, "N", 0, 1 << 24, "tokens to generate (default 128)"),
	COLI_OPT_FLAG(0, "greedy", &o.greedy, "always the most likely token (the default; same as --temp 0)"),
	COLI_OPT_FLOAT(0, "temp", &o.temperature, "T", 0, 100, "sample at temperature T > 0"),
	COLI_OPT_INT(0, "top-k", &o.top_k, "K", 0, 1 << 30,
		     "sample among the K most likely tokens (0: all)"),
	COLI_OPT_FLOAT(0, "top-p", &o.top_p, "P", 0, 1,
		       "sample within the smallest set of probability >= P (default 1)", .open_lo = 1),
	COLI_OPT_U64(0, "seed", &o.seed, "N", "seed of the sampler (default 0)"),
	COLI_OPT_FLAG(0, "ignore-eos", &o.ignore_eos,
		      "do not stop at the end-of-sequence ids of generation_config.json"),
	COLI_OPT_FLAG(0, "print-ids", &o.print_ids,
		      "print the generated ids on one line of stdout instead of text"),
	COLI_OPT_FLAG(0, "teacher-force", &o.teacher_force, "run the prompt only (no generation)"),
	COLI_OPT_STRING(0, "dump-logits", &o.dump_logits, "FILE", "float32 little-endian logits "
			"[positions][vocab]: every prompt position with --teacher-force, else each "
			"generation step"),
	COLI_OPT_STRING(0, "dump-routing", &o.dump_routing, "FILE", "with --teacher-force: int32 "
			"[moe layers][positions][top_k], each token's experts by weight descending, "
			"ties by lower id"),
	COLI_OPT_STRING(0, "session", &o.session, "FILE",
			"resume the conversation saved in FILE (.coli_kv) and save it back"),
	COLI_OPT_INT(0, "ctx", &o.ctx, "N", 1, 1 << 24,
		     "KV cache capacity in tokens beyond a resumed session"),
	COLI_OPT_INT(0, "threads", &o.threads, "N", 1, 1024,
		     "compute threads (default: physical cores)"),
	COLI_OPT_CHOICE(0, "precision", &o.precision, precisions, "activations of the products over int4/int8 "
			"weights: exact (float32, the default: routing and logits as the reference's) or q8 "
			"(8-bit per group of 64 with float32 scales, integer dot products: faster, not exact; "
			"routers, norms and the attention core stay float32; refused when no weight is int4/int8)"),
	COLI_OPT_FLAG(0, "stream", &o.stream,
		      "read routed experts from disk on demand (default: all in RAM)"),
	COLI_OPT_CALLBACK(0, "cache-slots", (void *)&cache_arg, "N|LIST", counts, "experts kept in RAM "
			  "per MoE layer when streaming, pins included, or a list of one count per MoE "
			  "layer (MTP included; as coli-plan writes it) (implies --stream; default top_k x "
			  "4, or what --ram leaves)", .implies = &o.stream),
	COLI_OPT_CHOICE(0, "cache-policy", &o.cache_policy, cache_policies, "which cached expert (beside the "
			"pins) a miss replaces when streaming: the least used (lfu, the default: the --usage "
			"counts read at start + this run's uses; ties the least recent) or the least recently "
			"used (lru) (implies --stream)", .implies = &o.stream),
	COLI_OPT_CHOICE(0, "prefetch", &o.prefetch, on_off_auto, "when streaming, predict the next "
			"layer's experts while decoding and read them ahead: on, off, or auto (the default: "
			"on or off as decode steps measured with each say, probed again now and then)"),
	COLI_OPT_CHOICE(0, "io", &o.io, io_modes, "when streaming, read experts through one "
			"io_uring (queue depth 8 per disk; threads when the kernel refuses it) or 8 "
			"pread threads per disk (default threads); mmap: no streaming store, experts "
			"used in place from an mmap and the page cache (the llama.cpp way, a baseline: "
			"no cache, pins or CRC checks)"),
	COLI_OPT_INT(0, "queue-depth", &o.qd, "N", 1, STORE_MAX_QD, "when streaming, reads in flight per "
		     "disk: pread threads per disk, or the io_uring's depth per disk (default 8)",
		     .implies = &o.stream),
	COLI_OPT_STRINGS(0, "mirror", o.mirrors, &o.n_mirrors, STORE_MAX_COPIES - 1, "DIR",
			 "another copy of the container (on another disk), read alongside it: the "
			 "copies share the reads by their sustained rates (--plan's shares), a failed "
			 "read or CRC goes to another copy (implies --stream; repeatable, up to 7)",
			 .implies = &o.stream),
	COLI_OPT_CHOICE(0, "crc", &o.no_crc, crc_on_off,
			"check each streamed record's CRC32 (default on)"),
	COLI_OPT_STRING(0, "usage", &o.usage, "FILE", "count each expert's routings in this run "
			"and fold them into FILE (.coli_usage: it chooses --pins; decay 0.9 per run)"),
	COLI_OPT_CALLBACK(0, "pins", (void *)&pins_arg, "N|LIST", counts, "of each MoE layer's expert "
			  "cache (--cache-slots), the N most used experts (by the --usage FILE read at "
			  "start) stay in RAM for the whole run, the rest is an LRU cache; or a list of one "
			  "count per MoE layer (implies --stream; 0: none; default with --usage: half, at "
			  "most the experts FILE has seen)", .implies = &o.stream),
	COLI_OPT_DOUBLE(0, "ram", &o.ram, "GiB", 0, 1 << 20, "RAM budget of the whole run, e.g. "
			"1.5 (implies --stream): refused when the dense weights, KV cache and minimum "
			"expert cache do not fit; the rest is the expert cache (unless --cache-slots "
			"gives it)", .open_lo = 1, .implies = &o.stream),
	COLI_OPT_STRING(0, "trace", &o.trace, "FILE", "record each forward call's spans (attention, "
			"router, expert products, I/O wait, other), every expert read and each routed expert's "
			"outcome into FILE (.coli_trace, formats/trace.md)"),
	COLI_OPT_STRING(0, "route-from", &o.route_from, "TRACE", "benchmarks only: at each token position and "
			"MoE layer, the experts and weights of the route trace TRACE (route_trace v1 CSV, "
			"formats/route.md) replace the router's choice; refused when its experts per layer or "
			"top_k differ from the model's, it has fewer layers than the model's MoE layers, or the "
			"run goes beyond its positions"),
	COLI_OPT_CALLBACK(0, "draft", &o.draft, "auto|0|K", draft_arg, "speculative decoding: K draft "
			  "tokens (1 to 4) from the container's MTP layer, verified in one forward of the "
			  "model; the output is what --draft 0 gives (greedy: token for token); auto: on while "
			  "the measured acceptance and cost of a verify say it pays; K is refused, auto does "
			  "nothing, without MTP layers (default 0)"),
	COLI_OPT_STRING(0, "draft-oracle", &o.draft_oracle, "FILE", "benchmarks only: the drafts are "
			"the ids in FILE (what --print-ids printed for this prompt) instead of the MTP "
			"layer's, with --draft K or auto; greedy decoding only"),
	COLI_OPT_DOUBLE(0, "draft-oracle-rate", &o.draft_oracle_rate, "R", 0, 1, "with --draft-oracle: "
			"each draft is FILE's id with probability R, else a wrong one (default 1)"),
	COLI_OPT_FLAG(0, "json", &o.json, "print the closing statistics as one line of JSON, the last "
		      "line of stdout (after the generated text or ids), instead of text lines on stderr"),
	COLI_OPT_STRING(0, "plan", &o.plan, "FILE", "run as plan.json (coli-plan) says: its knobs (--ram, "
			"--ctx, --threads, --cache-slots, --pins, --cache-policy, --usage, --prefetch, --io, "
			"--queue-depth, --mirror, --draft, --precision) as if "
			"given here (giving one here too is an error); refused for another container or "
			"machine; the closing statistics compare its predictions with the run"),
	COLI_OPT_STRING(0, "tokenizer", &o.tokenizer, "FILE",
			"tokenizer.json for --encode / --decode"),
	COLI_OPT_FLAG(0, "encode", &o.encode,
		      "read UTF-8 text on stdin, print its ids (no special tokens added)"),
	COLI_OPT_STRING(0, "decode", &o.decode, "\"IDS\"", "print the text of the ids"),
	COLI_OPT_FLAG('q', "quiet", &o.quiet, "no closing statistics line"),
	COLI_OPT_HELP(&help),
	COLI_OPT_END(),
};

/* --help on stdout, or the usage error msg and --help on stderr; returns the exit status. */
static int usage(const char *msg)
{
	return tool_usage("coli-run", msg, synopsis, options);
}

/* What the options mean together; n operands are left in argv. */
static int check(int n, char **argv, coli_err *e)
{
	if (n)
		return coli_errf(e, COLI_EUSAGE, "unexpected argument '%s'", argv[0]);
	if (o.encode || o.decode)
		return o.tokenizer ? 0 : coli_errf(e, COLI_EUSAGE,
						   "--encode and --decode need --tokenizer FILE");
	if (o.tokenizer)
		return coli_errf(e, COLI_EUSAGE, "--tokenizer FILE is for --encode or --decode (with -m, coli-run uses "
				 "the container's own tokenizer.json)");
	if (!o.model)
		return coli_errf(e, COLI_EUSAGE, "-m MODEL.coli is required");
	if (!o.prompt && !o.prompt_ids && !o.chat && !o.session)
		return coli_errf(e, COLI_EUSAGE, "give --prompt, --prompt-ids, --chat or --session");
	if (o.prompt && o.prompt_ids)
		return coli_errf(e, COLI_EUSAGE, "--prompt and --prompt-ids exclude each other");
	if (o.dump_routing && !o.teacher_force)
		return coli_errf(e, COLI_EUSAGE, "--dump-routing needs --teacher-force");
	if (o.teacher_force && o.chat)
		return coli_errf(e, COLI_EUSAGE, "--teacher-force and --chat exclude each other");
	if (o.chat && (o.prompt || o.prompt_ids))
		return coli_errf(e, COLI_EUSAGE, "--chat and %s exclude each other (chat turns are the lines of stdin)",
				 o.prompt ? "--prompt" : "--prompt-ids");
	if (o.io == STORE_IO_MMAP && (o.stream || o.prefetch >= 1 || o.no_crc))
		return coli_errf(e, COLI_EUSAGE, "--io mmap has no streaming store: it excludes --stream, "
				 "--cache-slots, --pins, --ram, --mirror, --prefetch on or auto and --crc off");
	if (o.greedy && o.temperature > 0)
		return coli_errf(e, COLI_EUSAGE, "--greedy and --temp %g exclude each other (--greedy is --temp 0)",
				 o.temperature);
	if (o.draft_oracle && o.draft == 0)
		return coli_errf(e, COLI_EUSAGE, "--draft-oracle needs --draft K or auto");
	if (o.draft_oracle && o.temperature > 0)
		return coli_errf(e, COLI_EUSAGE, "--draft-oracle is for greedy decoding only (--temp %g given)", o.temperature);
	if (o.draft_oracle_rate != 1 && !o.draft_oracle)
		return coli_errf(e, COLI_EUSAGE, "--draft-oracle-rate needs --draft-oracle FILE");
	if ((o.pins >= 0 || o.pins_list) && !o.usage)
		return coli_errf(e, COLI_EUSAGE, "--pins needs --usage FILE (the experts pinned are the most used in it)");
	return 0;
}

int main(int argc, char **argv)
{
	coli_err e = {0, ""};
	char **line = malloc((size_t)(argc + 1) * sizeof(*line)); /* the parse reorders argv */
	if (line)
		memcpy(line, argv, (size_t)(argc + 1) * sizeof(*line));
	o = defaults;
	o.argv = (const char *const *)line, o.argc = line ? argc : 0;
	int n = coli_opts_parse(options, argc, argv, &e);
	if (help)
		return usage(NULL);
	if (n < 0 || check(n, argv, &e) < 0)
		return usage(e.msg);
	coli_plan plan;
	memset(&plan, 0, sizeof(plan));
	if (o.plan && run_plan_apply(&o, &defaults, options, &plan, &e) < 0) {
		fprintf(stderr, "coli-run: %s\n", e.msg);
		coli_plan_release(&plan);
		return coli_err_exit_status(&e);
	}
	o.planned = o.plan ? &plan : NULL;
	if (o.plan && check(0, argv, &e) < 0)
		return usage(e.msg);
	int rc = run_main(&o, &e); /* 0, 128 + a signal that ended it (said), or -1 */
	rc = rc < 0 ? coli_err_exit_status(&e) : rc;
	fflush(stdout); /* what was printed before the error */
	if (rc == 1 || rc == 2)
		fprintf(stderr, "coli-run: %s\n", e.msg);
	free(line), free(o.cache_list), free(o.pins_list);
	coli_plan_release(&plan);
	return rc;
}
