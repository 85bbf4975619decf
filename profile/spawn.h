/* spawn.h: running the programs a datapoint or a comparison measures (coli-run, a shell command),
 * their output to files, and finding coli's own programs beside coli-profile. */
#ifndef COLI_PROFILE_SPAWN_H
#define COLI_PROFILE_SPAWN_H

#include <stddef.h>

#include "error.h"

/* Runs argv[0] (a path, or a name looked up on PATH) with argv, stdin from /dev/null, stdout
 * to out_path and stderr to err_path (NULL: inherited); waits. Its exit status (128 + signal
 * when killed), or -1 with e when it cannot start. */
int prof_spawn(char *const *argv, const char *out_path, const char *err_path, coli_err *e);

/* Signals that end a datapoint (SIGINT, SIGTERM): from now on each is recorded and passed on to
 * the child prof_spawn is waiting for (a second one kills it: SIGKILL); the child prof_spawn
 * starts after one came is stopped at once. -1 when the handlers cannot be installed. */
int prof_spawn_catch_signals(void);

/* The signal caught (SIGINT, SIGTERM), 0 when none: async-signal-safe. */
int prof_spawn_signal(void);

/* The program name beside this executable (bin/coli-run next to bin/coli-profile) into path,
 * else name itself (left to PATH). */
void prof_sibling(const char *name, char *path, size_t n);

/* Syncs and drops the page cache (as root, through /proc/sys/vm/drop_caches): 0, or -1 with e
 * saying why not (not root, or the write failed). */
int prof_drop_caches(coli_err *e);

/* The first line of a command's stdout (NULL-terminated argv), trimmed, into out (size n); 0, or
 * -1 when it fails or prints nothing. */
int prof_capture(char *const *argv, char *out, size_t n);

#endif
