/* main.c: coli-convert's command line: HF safetensors checkpoint -> coli container. */
#include <stdio.h>
#include <stdlib.h>

#include "convert.h"
#include "options.h"
#include "tool.h"

static const char *const synopsis[] = {
	"coli-convert [options] SRC_DIR OUT.coli",
	"coli-convert --verify [-q] OUT.coli",
	"coli-convert --info OUT.coli",
	NULL,
};

enum { CONVERT, VERIFY, INFO };

static const coli_choice bits[] = {{"4", 4}, {"8", 8}, {"16", 16}, {NULL, 0}};

static convert_opts o; /* bits 0: not given (convert.c's defaults) */
static int verify, info, help;

static const coli_option options[] = {
	COLI_OPT_TEXT("Converts a Hugging Face checkpoint (config.json, safetensors shards; bf16, f16, "
		      "f32 or fp8)\ninto a coli container: routed experts as one aligned record each, "
		      "dense part, MTP layer."),
	COLI_OPT_TEXT(""),
	COLI_OPT_CHOICE(0, "expert-bits", &o.bits[0], bits, "routed experts (default 4: gs64 int4; FP4 experts kept as\nshipped, fp4)"),
	COLI_OPT_CHOICE(0, "dense-bits", &o.bits[1], bits,
			"embeddings, attention, dense and shared MLPs, lm_head (default 4)"),
	COLI_OPT_CHOICE(0, "mtp-bits", &o.bits[2], bits, "MTP layer (default 8)\n16 keeps the "
			"source's own values bit for bit (bf16, f16, f32, fp8)"),
	COLI_OPT_INT(0, "threads", &o.threads, "N", 1, 1024,
		     "compute threads (default: the cores this process may use)"),
	COLI_OPT_FLAG(0, "force", &o.force, "overwrite a finished container in OUT.coli"),
	COLI_OPT_FLAG(0, "allow-nonfinite", &o.allow_nonfinite,
		      "keep NaN/Inf weights instead of refusing the checkpoint"),
	COLI_OPT_FLAG(0, "verify", &verify, "re-read every byte of OUT.coli and check it"),
	COLI_OPT_FLAG(0, "info", &info, "print what OUT.coli holds"),
	COLI_OPT_FLAG('q', "quiet", &o.quiet, "no progress bar and no summary"),
	COLI_OPT_HELP(&help),
	COLI_OPT_END(),
};

/* --help on stdout, or the usage error msg and --help on stderr; returns the exit status. */
static int usage(const char *msg)
{
	return tool_usage("coli-convert", msg, synopsis, options);
}

/* The mode and the operands: one container folder with --verify or --info, else SRC_DIR and
 * OUT.coli. */
static int check(int n, int mode, coli_err *e)
{
	if (verify && info)
		return coli_errf(e, COLI_EUSAGE, "--verify and --info cannot be combined; give one of them");
	if (mode != CONVERT && n != 1)
		return coli_errf(e, COLI_EUSAGE, "expected one container folder");
	if (mode == CONVERT && n != 2)
		return coli_errf(e, COLI_EUSAGE, "expected SRC_DIR and OUT.coli");
	return 0;
}

int main(int argc, char **argv)
{
	coli_err e = {0, ""};
	int n = coli_opts_parse(options, argc, argv, &e);
	if (help)
		return usage(NULL);
	int mode = verify ? VERIFY : info ? INFO : CONVERT;
	if (n < 0 || check(n, mode, &e) < 0)
		return usage(e.msg);
	o.src = argv[0], o.out = argv[1];
	convert_signals_install();
	int rc = mode == VERIFY ? verify_run(argv[0], o.quiet, &e)
	       : mode == INFO   ? info_print(argv[0], &e)
				: convert_run(&o, &e);
	if (rc < 0) {
		fprintf(stderr, "coli-convert: %s\n", e.msg);
		return convert_stop_signal() ? 128 + convert_stop_signal() : coli_err_exit_status(&e);
	}
	return 0;
}
