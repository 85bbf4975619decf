/* datapoint.h: coli-profile datapoint (a container measured and bundled) and coli-profile compare
 * (two commands run alternately, their tokens/s compared). */
#ifndef COLI_PROFILE_DATAPOINT_H
#define COLI_PROFILE_DATAPOINT_H

int prof_datapoint_main(int argc, char **argv);
int prof_compare_main(int argc, char **argv);

#endif
