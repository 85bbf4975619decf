/* main.c: coli-plan's subcommands (temporary: only "probe" is built yet; the lead's main.c replaces it). */
#include <stdio.h>
#include <string.h>

#include "probe_cmd.h"

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "probe"))
		return plan_probe_main(argc - 1, argv + 1);
	fprintf(stderr, "coli-plan: %s: not built yet (only 'coli-plan probe' is)\n", argc > 1 ? argv[1] : "no subcommand");
	return 2;
}
