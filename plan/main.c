/* main.c: coli-plan's command line (temporary: only "mirror"; the planner's main replaces it). */
#include <stdio.h>
#include <string.h>

#include "mirror.h"

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "mirror"))
		return plan_mirror_main(argc - 2, argv + 2);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		puts("usage: coli-plan mirror stage|verify ...");
		return 0;
	}
	fputs("coli-plan: expected a command: mirror stage|verify (coli-plan mirror stage --help)\n", stderr);
	return 2;
}
