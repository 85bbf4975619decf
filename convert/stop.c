/* stop.c: SIGINT and SIGTERM. Before the output folder is touched the handler says so in one
 * line and exits at once (nothing written); from then on it only records the signal, and the
 * writer stops between two jobs, its work checkpointed: the folder is left resumable or finished,
 * never torn (convert.c says what it kept). --verify and --info write nothing: they exit at once. */
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "convert.h"

static volatile sig_atomic_t got;      /* the signal that asked to stop; 0: none */
static volatile sig_atomic_t writing;  /* 0: nothing written yet (exit at once), 1: record it */

static void on_signal(int sig)
{
	if (!writing) {
		const char *m = sig == SIGINT ? "coli-convert: interrupted (SIGINT): nothing written\n"
					      : "coli-convert: terminated (SIGTERM): nothing written\n";
		ssize_t w = write(2, m, strlen(m));
		(void)w;
		_exit(128 + sig);
	}
	got = sig;
}

void convert_signals_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART; /* reads and writes go on; the writer looks between jobs */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

void convert_signals_writing(void)
{
	writing = 1;
}

int convert_stop_signal(void)
{
	return got;
}

const char *convert_stop_name(void)
{
	return got == SIGTERM ? "terminated (SIGTERM)" : "interrupted (SIGINT)";
}

void convert_stop_wait(void)
{
	struct timespec ms = {0, 1000000};
	while (!got)
		nanosleep(&ms, NULL);
}
