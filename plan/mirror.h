/* mirror.h: coli-plan mirror: stage a container onto another disk, verify a mirror. */
#ifndef COLI_PLAN_MIRROR_H
#define COLI_PLAN_MIRROR_H

/* The command line after the word "mirror": argv[0] is "stage" or "verify". Prints its own
 * errors and reports; returns the exit status (0 ok, 1 bad data or I/O, 2 usage). */
int plan_mirror_main(int argc, char **argv);

#endif
