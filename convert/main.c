/* main.c: coli-convert's command line: HF safetensors checkpoint -> coli container. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"

static const char usage[] =
	"usage: coli-convert [options] SRC_DIR OUT.coli\n"
	"       coli-convert --verify OUT.coli\n"
	"       coli-convert --info OUT.coli\n"
	"\n"
	"Converts a Hugging Face checkpoint (config.json, safetensors shards; bf16, f16, f32 or fp8)\n"
	"into a coli container: routed experts as one aligned record each, dense part, MTP layer.\n"
	"\n"
	"  --expert-bits 4|8|16  routed experts (default 4: gs64 int4)\n"
	"  --dense-bits 4|8|16   embeddings, attention, dense and shared MLPs, lm_head (default 4)\n"
	"  --mtp-bits 4|8|16     MTP layer (default 8)\n"
	"                        16 keeps the source's own values bit for bit (bf16, f16, f32, fp8)\n"
	"  --threads N           compute threads (default: the cores this process may use)\n"
	"  --force               overwrite a finished container in OUT.coli\n"
	"  --allow-nonfinite     keep NaN/Inf weights instead of refusing the checkpoint\n"
	"  --verify              re-read every byte of OUT.coli and check it\n"
	"  --info                print what OUT.coli holds\n"
	"  -q, --quiet           no progress bar and no summary\n"
	"  -h, --help            this text\n";

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "coli-convert: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	return 2;
}

static int parse_bits(const char *s, int *out)
{
	if (strcmp(s, "4") != 0 && strcmp(s, "8") != 0 && strcmp(s, "16") != 0)
		return -1;
	*out = atoi(s);
	return 0;
}

static int parse_threads(const char *s, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == 0 || *end || v < 1 || v > 1024)
		return -1;
	*out = (int)v;
	return 0;
}

enum { OPT_EXPERT = 256, OPT_DENSE, OPT_MTP, OPT_THREADS, OPT_FORCE, OPT_NONFINITE, OPT_VERIFY, OPT_INFO };

static const struct option options[] = {
	{"expert-bits", required_argument, NULL, OPT_EXPERT},
	{"dense-bits", required_argument, NULL, OPT_DENSE},
	{"mtp-bits", required_argument, NULL, OPT_MTP},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"force", no_argument, NULL, OPT_FORCE},
	{"allow-nonfinite", no_argument, NULL, OPT_NONFINITE},
	{"verify", no_argument, NULL, OPT_VERIFY},
	{"info", no_argument, NULL, OPT_INFO},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

int main(int argc, char **argv)
{
	convert_opts o = {.bits = {4, 4, 8}};
	int mode = 0, c;
	while ((c = getopt_long(argc, argv, "qh", options, NULL)) != -1) {
		switch (c) {
		case OPT_EXPERT: if (parse_bits(optarg, &o.bits[0]) < 0) return bad_usage("--expert-bits: '%s' is not 4, 8 or 16", optarg); break;
		case OPT_DENSE: if (parse_bits(optarg, &o.bits[1]) < 0) return bad_usage("--dense-bits: '%s' is not 4, 8 or 16", optarg); break;
		case OPT_MTP: if (parse_bits(optarg, &o.bits[2]) < 0) return bad_usage("--mtp-bits: '%s' is not 4, 8 or 16", optarg); break;
		case OPT_THREADS: if (parse_threads(optarg, &o.threads) < 0) return bad_usage("--threads: '%s' is not a count in 1..1024", optarg); break;
		case OPT_FORCE: o.force = 1; break;
		case OPT_NONFINITE: o.allow_nonfinite = 1; break;
		case OPT_VERIFY:
		case OPT_INFO: mode = c; break;
		case 'q': o.quiet = 1; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return bad_usage("%s", "unknown option");
		}
	}
	int want = mode ? 1 : 2;
	if (argc - optind != want)
		return bad_usage("%s", mode ? "expected one container folder" : "expected SRC_DIR and OUT.coli");
	coli_err e = {0, ""};
	int rc = mode == OPT_VERIFY ? verify_run(argv[optind], o.quiet, &e)
	       : mode == OPT_INFO   ? info_print(argv[optind], &e)
				    : (o.src = argv[optind], o.out = argv[optind + 1], convert_run(&o, &e));
	if (rc < 0) {
		fprintf(stderr, "coli-convert: %s\n", e.msg);
		return coli_err_exit_status(&e);
	}
	return 0;
}
