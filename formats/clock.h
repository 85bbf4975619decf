/* clock.h: a monotonic clock for timing (CLOCK_MONOTONIC: never steps back with the wall clock). */
#ifndef COLI_CLOCK_H
#define COLI_CLOCK_H

#include <stdint.h>

/* Seconds since an arbitrary fixed point; only differences mean anything. */
double coli_now(void);

/* The same clock in nanoseconds. */
uint64_t coli_now_ns(void);

#endif
