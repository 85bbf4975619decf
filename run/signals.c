/* signals.c: SIGINT and SIGTERM during a run. While the model loads nothing is written yet: the
 * handler removes the run's lock files and exits at once. Once the run has begun, the handler
 * only sets a flag and writes a byte to a pipe (both async-signal-safe): the generation loop
 * checks the flag between tokens and the chat prompt polls the pipe, so the answer stops, the
 * conversation is saved and the run ends with 128 + the signal (docs/coli-run.md, Signals). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

#define CLEANUP_MAX 4

static atomic_int got;                 /* the last signal not yet taken; 0: none (lock-free) */
static volatile sig_atomic_t running;  /* 0: loading (exit at once), 1: the run (flag it) */
static int pipe_fd[2] = {-1, -1};
static char cleanup[CLEANUP_MAX][4096]; /* removed when a signal ends the loading */
static volatile sig_atomic_t n_cleanup;

static void say(const char *s)
{
	ssize_t w = write(2, s, strlen(s));
	(void)w;
}

static void handler(int sig)
{
	int saved = errno;
	if (!running) {
		for (int i = 0; i < n_cleanup; i++)
			unlink(cleanup[i]);
		say(sig == SIGINT ? "coli-run: interrupted (SIGINT) while loading: nothing written\n"
				  : "coli-run: terminated (SIGTERM) while loading: nothing written\n");
		_exit(128 + sig);
	}
	atomic_store(&got, sig);
	if (pipe_fd[1] >= 0) {
		ssize_t w = write(pipe_fd[1], "", 1);
		(void)w;
	}
	errno = saved;
}

int run_signals_install(coli_err *e)
{
	struct sigaction sa;
	if (pipe(pipe_fd) < 0)
		return coli_errf(e, COLI_EIO, "pipe: %s", strerror(errno));
	for (int i = 0; i < 2; i++) /* a full pipe never blocks the handler; never inherited */
		if (fcntl(pipe_fd[i], F_SETFL, O_NONBLOCK) < 0 || fcntl(pipe_fd[i], F_SETFD, FD_CLOEXEC) < 0)
			return coli_errf(e, COLI_EIO, "pipe: fcntl: %s", strerror(errno));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART; /* reads and writes resume; the prompt polls the pipe */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0)
		return coli_errf(e, COLI_EIO, "sigaction: %s", strerror(errno));
	return 0;
}

/* Signals block while the list changes, so the handler never sees a half-written entry. */
void run_signals_cleanup(const char *path)
{
	sigset_t s, old;
	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &s, &old);
	if (n_cleanup < CLEANUP_MAX && strlen(path) < sizeof(cleanup[0])) {
		snprintf(cleanup[n_cleanup], sizeof(cleanup[0]), "%s", path);
		n_cleanup = n_cleanup + 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void run_signals_running(void)
{
	running = 1;
}

int run_signal_pending(void)
{
	return atomic_load(&got);
}

/* The pipe drained first: a signal that lands in between is taken now and leaves a byte (a
 * wake-up the prompt finds no signal for), never a signal without its byte. */
int run_signal_take(void)
{
	char buf[64];
	while (pipe_fd[0] >= 0 && read(pipe_fd[0], buf, sizeof(buf)) > 0)
		;
	return atomic_exchange(&got, 0);
}

int run_signal_fd(void)
{
	return pipe_fd[0];
}
