/* main.c: coli-run's command line. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static const char usage[] =
	"usage: coli-run -m MODEL.coli (--prompt TEXT | --prompt-ids \"IDS\" | --chat) [options]\n"
	"       coli-run --tokenizer tokenizer.json (--encode < text | --decode \"IDS\")\n"
	"\n"
	"Runs a coli container: the exact forward pass of its family, generation, chat.\n"
	"\n"
	"  -m, --model PATH       the container (a folder written by coli-convert)\n"
	"  -p, --prompt TEXT      the prompt, tokenized with the container's tokenizer.json\n"
	"  --prompt-ids \"IDS\"     the prompt as token ids, separated by spaces\n"
	"  --chat                 interactive: each line of stdin is a user turn in the family's chat format\n"
	"  -n N                   tokens to generate (default 128)\n"
	"  --greedy               always the most likely token (the default; same as --temp 0)\n"
	"  --temp T               sample at temperature T > 0\n"
	"  --top-k K              sample among the K most likely tokens (0: all)\n"
	"  --top-p P              sample within the smallest set of probability >= P (default 1)\n"
	"  --seed N               seed of the sampler (default 0)\n"
	"  --ignore-eos           do not stop at the end-of-sequence ids of generation_config.json\n"
	"  --print-ids            print the generated ids on one line of stdout instead of text\n"
	"  --teacher-force        run the prompt only (no generation)\n"
	"  --dump-logits FILE     float32 little-endian logits [positions][vocab]: every prompt\n"
	"                         position with --teacher-force, else each generation step\n"
	"  --dump-routing FILE    with --teacher-force: int32 [moe layers][positions][top_k],\n"
	"                         each token's experts by weight descending, ties by lower id\n"
	"  --session FILE         resume the conversation saved in FILE (.coli_kv) and save it back\n"
	"  --ctx N                KV cache capacity in tokens beyond a resumed session\n"
	"  --threads N            compute threads (default: physical cores)\n"
	"  --stream               read routed experts from disk on demand (default: all in RAM)\n"
	"  --cache-slots N        experts kept in RAM per MoE layer when streaming, pins included\n"
	"                         (implies --stream; default top_k x 4, or what --ram leaves)\n"
	"  --prefetch on|off      when streaming, predict the next layer's experts while decoding\n"
	"                         and read them ahead (default on)\n"
	"  --io uring|threads|mmap\n"
	"                         when streaming, read experts through one io_uring (queue depth\n"
	"                         8 per disk; threads when the kernel refuses it) or 8 pread\n"
	"                         threads per disk (default threads); mmap: no streaming store,\n"
	"                         experts used in place from an mmap and the page cache (the\n"
	"                         llama.cpp way, a baseline: no cache, pins or CRC checks)\n"
	"  --mirror DIR           another copy of the container (on another disk), read alongside\n"
	"                         it: each read goes to the copy expected to finish it first, a\n"
	"                         failed read or CRC to another copy (implies --stream; repeatable,\n"
	"                         up to 7)\n"
	"  --crc on|off           check each streamed record's CRC32 (default on)\n"
	"  --usage FILE           count each expert's routings in this run and fold them into\n"
	"                         FILE (.coli_usage, read by coli-plan; decay 0.9 per run)\n"
	"  --pins N               of each MoE layer's expert cache (--cache-slots), the N most used\n"
	"                         experts (by the --usage FILE read at start) stay in RAM for the\n"
	"                         whole run, the rest is an LRU cache (implies --stream; 0: none;\n"
	"                         default with --usage: half, at most the experts FILE has seen)\n"
	"  --ram GiB              RAM budget of the whole run, e.g. 1.5 (implies --stream): refused\n"
	"                         when the dense weights, KV cache and minimum expert cache do not\n"
	"                         fit; the rest is the expert cache (unless --cache-slots gives it)\n"
	"  --tokenizer FILE       tokenizer.json for --encode / --decode\n"
	"  --encode               read UTF-8 text on stdin, print its ids (no special tokens added)\n"
	"  --decode \"IDS\"         print the text of the ids\n"
	"  -q, --quiet            no closing statistics line\n"
	"  -h, --help             this text\n";

enum {
	OPT_PROMPT_IDS = 256, OPT_GREEDY, OPT_PRINT_IDS, OPT_TEACHER, OPT_DUMP_LOGITS, OPT_DUMP_ROUTING,
	OPT_THREADS, OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_SEED, OPT_IGNORE_EOS, OPT_SESSION, OPT_CHAT, OPT_CTX,
	OPT_TOKENIZER, OPT_ENCODE, OPT_DECODE, OPT_STREAM, OPT_CACHE_SLOTS,
	OPT_PREFETCH, OPT_IO, OPT_USAGE, OPT_PINS, OPT_RAM, OPT_MIRROR, OPT_CRC,
};

static const struct option options[] = {
	{"model", required_argument, NULL, 'm'},
	{"prompt", required_argument, NULL, 'p'},
	{"prompt-ids", required_argument, NULL, OPT_PROMPT_IDS},
	{"chat", no_argument, NULL, OPT_CHAT},
	{"greedy", no_argument, NULL, OPT_GREEDY},
	{"temp", required_argument, NULL, OPT_TEMP},
	{"top-k", required_argument, NULL, OPT_TOPK},
	{"top-p", required_argument, NULL, OPT_TOPP},
	{"seed", required_argument, NULL, OPT_SEED},
	{"ignore-eos", no_argument, NULL, OPT_IGNORE_EOS},
	{"print-ids", no_argument, NULL, OPT_PRINT_IDS},
	{"teacher-force", no_argument, NULL, OPT_TEACHER},
	{"dump-logits", required_argument, NULL, OPT_DUMP_LOGITS},
	{"dump-routing", required_argument, NULL, OPT_DUMP_ROUTING},
	{"session", required_argument, NULL, OPT_SESSION},
	{"ctx", required_argument, NULL, OPT_CTX},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"stream", no_argument, NULL, OPT_STREAM},
	{"cache-slots", required_argument, NULL, OPT_CACHE_SLOTS},
	{"prefetch", required_argument, NULL, OPT_PREFETCH},
	{"io", required_argument, NULL, OPT_IO},
	{"usage", required_argument, NULL, OPT_USAGE},
	{"pins", required_argument, NULL, OPT_PINS},
	{"ram", required_argument, NULL, OPT_RAM},
	{"mirror", required_argument, NULL, OPT_MIRROR},
	{"crc", required_argument, NULL, OPT_CRC},
	{"tokenizer", required_argument, NULL, OPT_TOKENIZER},
	{"encode", no_argument, NULL, OPT_ENCODE},
	{"decode", required_argument, NULL, OPT_DECODE},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "coli-run: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	return 2;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == 0 || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int parse_float(const char *s, double lo, double hi, float *out)
{
	char *end;
	double v = strtod(s, &end);
	if (*s == 0 || *end || !(v >= lo && v <= hi))
		return -1;
	*out = (float)v;
	return 0;
}

/* One option; 0 ok, 2 bad value (message printed). */
static int take(run_opts *o, int c, const char *arg)
{
	long v;
	switch (c) {
	case 'm': o->model = arg; return 0;
	case 'p': o->prompt = arg; return 0;
	case 'n': if (parse_int(arg, 0, 1 << 24, &v) < 0) return bad_usage("-n: '%s' is not a count", arg); o->n_gen = (int)v; return 0;
	case OPT_PROMPT_IDS: o->prompt_ids = arg; return 0;
	case OPT_CHAT: o->chat = 1; return 0;
	case OPT_GREEDY: o->temperature = 0; return 0;
	case OPT_TEMP: if (parse_float(arg, 0, 100, &o->temperature) < 0) return bad_usage("--temp: '%s' is not in [0, 100]", arg); return 0;
	case OPT_TOPK: if (parse_int(arg, 0, 1 << 30, &v) < 0) return bad_usage("--top-k: '%s' is not a count", arg); o->top_k = (int)v; return 0;
	case OPT_TOPP: if (parse_float(arg, 1e-6, 1, &o->top_p) < 0) return bad_usage("--top-p: '%s' is not in (0, 1]", arg); return 0;
	case OPT_SEED: if (parse_int(arg, 0, __LONG_MAX__, &v) < 0) return bad_usage("--seed: '%s' is not a non-negative integer", arg); o->seed = (uint64_t)v; return 0;
	case OPT_IGNORE_EOS: o->ignore_eos = 1; return 0;
	case OPT_PRINT_IDS: o->print_ids = 1; return 0;
	case OPT_TEACHER: o->teacher_force = 1; return 0;
	case OPT_DUMP_LOGITS: o->dump_logits = arg; return 0;
	case OPT_DUMP_ROUTING: o->dump_routing = arg; return 0;
	case OPT_SESSION: o->session = arg; return 0;
	case OPT_CTX: if (parse_int(arg, 1, 1 << 24, &v) < 0) return bad_usage("--ctx: '%s' is not a token count", arg); o->ctx = (int)v; return 0;
	case OPT_THREADS: if (parse_int(arg, 1, 1024, &v) < 0) return bad_usage("--threads: '%s' is not a count in 1..1024", arg); o->threads = (int)v; return 0;
	case OPT_STREAM: o->stream = 1; return 0;
	case OPT_CACHE_SLOTS: if (parse_int(arg, 1, 1 << 20, &v) < 0) return bad_usage("--cache-slots: '%s' is not a count in 1..1048576", arg); o->cache_slots = (int)v; o->stream = 1; return 0;
	case OPT_PREFETCH:
		if (strcmp(arg, "on") && strcmp(arg, "off"))
			return bad_usage("--prefetch: '%s' is not on or off", arg);
		o->prefetch = !strcmp(arg, "on");
		return 0;
	case OPT_IO:
		if (strcmp(arg, "uring") && strcmp(arg, "threads") && strcmp(arg, "mmap"))
			return bad_usage("--io: '%s' is not uring, threads or mmap", arg);
		o->io = !strcmp(arg, "uring") ? STORE_IO_URING : !strcmp(arg, "mmap") ? STORE_IO_MMAP : STORE_IO_THREADS_POOL;
		return 0;
	case OPT_MIRROR:
		if (o->n_mirrors == STORE_MAX_COPIES - 1)
			return bad_usage("--mirror %s: at most 7 mirrors", arg);
		o->mirrors[o->n_mirrors++] = arg;
		o->stream = 1;
		return 0;
	case OPT_CRC:
		if (strcmp(arg, "on") && strcmp(arg, "off"))
			return bad_usage("--crc: '%s' is not on or off", arg);
		o->no_crc = !strcmp(arg, "off");
		return 0;
	case OPT_USAGE: o->usage = arg; return 0;
	case OPT_PINS: if (parse_int(arg, 0, 1 << 20, &v) < 0) return bad_usage("--pins: '%s' is not a count in 0..1048576", arg); o->pins = (int)v; o->stream = 1; return 0;
	case OPT_RAM: {
		float g;
		if (parse_float(arg, 1e-6, 1 << 20, &g) < 0)
			return bad_usage("--ram: '%s' is not a size in GiB > 0", arg);
		o->ram = strtod(arg, NULL);
		o->stream = 1;
		return 0;
	}
	case OPT_TOKENIZER: o->tokenizer = arg; return 0;
	case OPT_ENCODE: o->encode = 1; return 0;
	case OPT_DECODE: o->decode = arg; return 0;
	case 'q': o->quiet = 1; return 0;
	case 'h': fputs(usage, stdout); exit(0);
	default: return bad_usage("%s", "unknown option");
	}
}

static int check(const run_opts *o, int argc, char **argv)
{
	if (optind != argc)
		return bad_usage("unexpected argument '%s'", argv[optind]);
	if (o->encode || o->decode)
		return o->tokenizer ? 0 : bad_usage("%s", "--encode and --decode need --tokenizer FILE");
	if (!o->model)
		return bad_usage("%s", "-m MODEL.coli is required");
	if (!o->prompt && !o->prompt_ids && !o->chat && !o->session)
		return bad_usage("%s", "give --prompt, --prompt-ids, --chat or --session");
	if (o->prompt && o->prompt_ids)
		return bad_usage("%s", "--prompt and --prompt-ids exclude each other");
	if (o->dump_routing && !o->teacher_force)
		return bad_usage("%s", "--dump-routing needs --teacher-force");
	if (o->teacher_force && o->chat)
		return bad_usage("%s", "--teacher-force and --chat exclude each other");
	if (o->io == STORE_IO_MMAP && (o->stream || o->prefetch == 1 || o->no_crc))
		return bad_usage("%s", "--io mmap has no streaming store: it excludes --stream, --cache-slots, --pins, "
				 "--ram, --mirror, --prefetch on and --crc off");
	return 0;
}

int main(int argc, char **argv)
{
	run_opts o = {.n_gen = 128, .top_p = 1.0f, .pins = -1, .prefetch = -1};
	int c, rc;
	while ((c = getopt_long(argc, argv, "m:p:n:qh", options, NULL)) != -1)
		if ((rc = take(&o, c, optarg)) != 0)
			return rc;
	if ((rc = check(&o, argc, argv)) != 0)
		return rc;
	coli_err e = {0, ""};
	if (run_main(&o, &e) < 0) {
		fprintf(stderr, "coli-run: %s\n", e.msg);
		return coli_err_exit_status(&e);
	}
	return 0;
}
