/* pool.h: the persistent worker threads that split one product's rows (internal).
 *
 * One caller at a time per pool (the forward pass is single-threaded apart from its pool). The caller
 * takes part in the work. Workers spin after a job, then spin yielding the CPU, for about a
 * millisecond (products come back to back in a forward pass), then sleep on a condition
 * variable: an idle pool burns no CPU.
 */
#ifndef COLI_KERNELS_POOL_H
#define COLI_KERNELS_POOL_H

#include <stdint.h>

/* Work on [begin, end) of a range. */
typedef void (*kpool_fn)(void *arg, int64_t begin, int64_t end);

/* A pool: no workers until the first kpool_for that wants them. NULL when memory is short. */
typedef struct kpool kpool;
kpool *kpool_new(void);
void kpool_free(kpool *p); /* stops the workers; accepts NULL */

/* Runs fn over [0, total) in pieces of at most `grain` on `threads` threads, the caller included;
 * returns when every piece is done. Pieces start at multiples of `unit` (a divisor of grain; <= 0
 * or above grain: grain) and are whole units but the last: grain while much is left, smaller
 * toward the end (so the threads finish together). The pool is (re)created on first use or when
 * `threads` changes; threads that cannot be created leave the work to the others. */
void kpool_for(kpool *p, int threads, int64_t total, int64_t grain, int64_t unit, kpool_fn fn, void *arg);

/* Which thread of the pool runs the calling piece: 0 the caller, 1 .. threads - 1 the workers
 * (a piece's scratch row, for example). */
int kpool_self(void);

/* Stops and joins the workers (a later kpool_for starts them again). */
void kpool_stop(kpool *p);

#endif
