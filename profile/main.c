/* main.c: coli-profile's command line: one subcommand per job (report, replay, datapoint, compare). */
#include <stdio.h>
#include <string.h>

#include "datapoint.h"
#include "replay.h"
#include "report.h"

static const char usage[] =
	"usage: coli-profile report TRACE|BUNDLE [-o DIR] [--probe F] [--plan F] [--json]\n"
	"       coli-profile replay TRACE|ROUTE.csv [--budget MiB,...] [--slots N,...] [--policy NAME,...]\n"
	"       coli-profile replay --layers L --experts E --top-k K [--slots N,...] ROUTING.i32...\n"
	"       coli-profile datapoint MODEL.coli [--plan F] [--probe F] [-o NAME.tar.gz] [-- RUN OPTIONS]\n"
	"       coli-profile compare 'CMD A' 'CMD B' [-r N] [--drop-caches] [--json]\n"
	"\n"
	"Where a run's time goes, in numbers and plots. Each subcommand has its --help.\n"
	"\n"
	"  report    the attribution table, the bottleneck verdict and the plots of a trace or bundle\n"
	"  replay    the decode hit rate of cache policies and sizes on a routing trace or routing dumps\n"
	"  datapoint a container measured cold, warm and over rotating prompts, bundled in one .tar.gz\n"
	"  compare   two commands run alternately, their tokens/s and the ratio B / A\n";

typedef struct sub {
	const char *name;
	int (*main)(int, char **);
} sub;

static const sub subs[] = {
	{"report", prof_report_main},
	{"replay", prof_replay_main},
	{"datapoint", prof_datapoint_main},
	{"compare", prof_compare_main},
};

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return fputs(usage, stdout), 0;
	for (size_t i = 0; argc > 1 && i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strcmp(argv[1], subs[i].name) == 0)
			return subs[i].main(argc - 1, argv + 1);
	if (argc > 1)
		fprintf(stderr, "coli-profile: unknown subcommand '%s' (report, replay, datapoint or compare)\n%s", argv[1],
			usage);
	else
		fprintf(stderr, "coli-profile: no subcommand given\n%s", usage);
	return 2;
}
