/* main.c: coli-plan's command line: probe, mirror, or a plan for a container. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mirror.h"
#include "options.h"
#include "planner.h"
#include "probe_cmd.h"
#include "tool.h"

static const char *const synopsis[] = {
	"coli-plan MODEL.coli [--probe F] [--usage F] [--ram GiB] [--ctx N] [--mirror DIR]... [-o plan.json] "
	"[--explain]",
	"coli-plan CKPT_DIR [--expert-bits B] [--dense-bits B] [--mtp-bits B] [--on DIR] [the options above]",
	"coli-plan probe [--disk DIR]... [-o probe.json]   (coli-plan probe --help)",
	"coli-plan mirror stage MODEL.coli DIR [--max GiB] | mirror verify DIR   (their --help)",
	NULL,
};

static const coli_choice bits[] = {{"4", 4}, {"8", 8}, {"16", 16}, {NULL, 0}};
static plan_args a = {.probe = "probe.json", .out = "plan.json", .ctx = 4096, .recall = 0.8};
static int help;

static const coli_option options[] = {
	COLI_OPT_TEXT("Plans a run of a container on this machine: the RAM budget split, the expert cache "
		      "of each MoE layer and its pins, threads, prefetch, I/O and mirrors, with the predicted "
		      "tokens/s and its breakdown; coli-run --plan FILE executes it. From a Hugging Face "
		      "checkpoint folder (CKPT_DIR: config.json, with or without its safetensors), for the "
		      "container coli-convert would write from it, described without converting (its sizes and "
		      "encodings in the summary; the dtypes of the safetensors' headers, else the release's)."),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRING(0, "probe", &a.probe, "FILE", "this machine's probe (coli-plan probe; default probe.json)"),
	COLI_OPT_STRING(0, "usage", &a.usage, "FILE", "the container's .coli_usage (coli-run --usage): pins and hit "
			"rates follow its counts (without: no pins, routing drawn from the locality model of real "
			"routing, fitted on a real Qwen3-30B-A3B trace or on --routing)"),
	COLI_OPT_STRING(0, "routing", &a.routing, "FILE", "a route_trace CSV (formats/route.md) or a .coli_trace "
			"(coli-run --trace), of any model: the locality model is fitted on it; of this model's shape "
			"(experts, top_k, layers), the simulator also replays it for each MoE layer instead of drawn "
			"routing (its recency counts for the LRU slots)"),
	COLI_OPT_DOUBLE(0, "ram", &a.ram, "GiB", 0, 1 << 20, "RAM budget of the run (default: 90% of the available "
			"RAM or the memory cgroup's limit)", .open_lo = 1),
	COLI_OPT_INT(0, "ctx", &a.ctx, "N", 1, 1 << 24, "KV cache capacity in tokens (default 4096)"),
	COLI_OPT_STRINGS(0, "mirror", a.mirrors, &a.n_mirrors, PLAN_MAX_COPIES - 1, "DIR", "another copy of the "
			 "container, on a probed disk (repeatable, up to 7)"),
	COLI_OPT_DOUBLE(0, "recall", &a.recall, "R", 0, 1, "the share of next-layer predictions the routing chose, "
			"as coli-run's statistics report it (prefetch recall): the cost model's prefetch gain "
			"(default 0.8, measured on synthetic models)"),
	COLI_OPT_FLAG(0, "allow-q8", &a.allow_q8, "the plan may choose coli-run --precision q8 (8-bit activations: "
		      "faster products, not exact) when predicted faster; without it the plan says what q8 would give"),
	COLI_OPT_TEXT("CKPT_DIR only (coli-convert's options of the same names):"),
	COLI_OPT_CHOICE(0, "expert-bits", &a.bits[0], bits, "routed experts (default 4: gs64 int4; FP4 experts kept as "
			"shipped, fp4)"),
	COLI_OPT_CHOICE(0, "dense-bits", &a.bits[1], bits, "embeddings, attention, dense and shared MLPs, lm_head "
			"(default 4)"),
	COLI_OPT_CHOICE(0, "mtp-bits", &a.bits[2], bits, "MTP layer (default 8)"),
	COLI_OPT_STRING(0, "on", &a.on, "DIR", "the folder the container would be written in: its disk, which the "
			"probe measured, serves the reads (default CKPT_DIR)"),
	COLI_OPT_TEXT(""),
	COLI_OPT_STRING('o', "output", &a.out, "FILE", "where the plan goes (default plan.json)"),
	COLI_OPT_FLAG(0, "explain", &a.explain, "print each decision with its reason and its numbers"),
	COLI_OPT_FLAG(0, "json", &a.json, "print the plan's JSON on stdout instead of the summary"),
	COLI_OPT_FLAG('q', "quiet", &a.quiet, "no summary"),
	COLI_OPT_HELP(&help),
	COLI_OPT_END(),
};

static int usage(const char *msg)
{
	return tool_usage("coli-plan", msg, synopsis, options);
}

/* The plan: inputs, the cache, the cost model, then plan.json and the summary. */
static int make_plan(coli_err *e)
{
	plan p;
	int rc = plan_inputs(&p, &a, e);
	if (rc == 0)
		rc = plan_cache(&p, e);
	if (rc == 0)
		rc = plan_cost(&p, e);
	if (rc == 0)
		rc = plan_write(&p, e);
	if (rc == 0 && a.json) {
		json_t *j = plan_json(&p);
		json_dumpf(j, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
		putchar('\n');
		json_decref(j);
	} else if (rc == 0) {
		plan_print(&p);
	}
	plan_release(&p);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "probe") == 0)
		return plan_probe_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "mirror") == 0)
		return plan_mirror_main(argc - 2, argv + 2);
	coli_err e = {0, ""};
	int n = coli_opts_parse(options, argc, argv, &e);
	if (help)
		return usage(NULL);
	if (n < 0)
		return usage(e.msg);
	if (n != 1)
		return usage(n ? "one container or checkpoint folder, please" : "give MODEL.coli or CKPT_DIR (or probe, or mirror)");
	a.model = argv[0];
	int rc = make_plan(&e) < 0 ? coli_err_exit_status(&e) : 0;
	fflush(stdout);
	if (rc)
		fprintf(stderr, "coli-plan: %s\n", e.msg);
	return rc;
}
