/* probe_cmd.h: `coli-plan probe`, the hardware probe (docs/coli-plan.md, formats/probe.md). Not
 * named probe.h: "probe.h" is the probe file's API (formats/probe.h), which plan/ includes too. */
#ifndef COLI_PLAN_PROBE_CMD_H
#define COLI_PLAN_PROBE_CMD_H

/* The command: argv[0..argc) are the arguments after the word "probe" (argv[0] is not a
 * program name: coli_opts_parse skips it, so callers pass argv of "probe" itself, "probe"
 * included). Returns the exit status: 0 ok, 1 bad data or I/O, 2 usage. */
int plan_probe_main(int argc, char **argv);

#endif
