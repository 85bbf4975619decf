/* spawn.c: child programs with their output in files, coli's sibling programs, the page cache
 * dropped (spawn.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"

extern char **environ;

static volatile sig_atomic_t child_pid; /* the child being waited for; 0: none */
static volatile sig_atomic_t caught;    /* the signal that ends the datapoint; 0: none */

/* Records the first signal and passes it on to the child; a second one kills the child. */
static void on_signal(int sig)
{
	int again = caught != 0, saved = errno;
	if (!again)
		caught = sig;
	if (child_pid > 0)
		kill((pid_t)child_pid, again ? SIGKILL : sig);
	errno = saved;
}

int prof_spawn_catch_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: waitpid returns EINTR, and is called again */
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGINT, &sa, NULL) == 0 && sigaction(SIGTERM, &sa, NULL) == 0 ? 0 : -1;
}

int prof_spawn_signal(void)
{
	return caught;
}

int prof_spawn(char *const *argv, const char *out_path, const char *err_path, coli_err *e)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st = 0;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out_path)
		posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (err_path)
		posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int rc = caught ? ECANCELED : posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return coli_errf(e, COLI_EIO, "%s: cannot run: %s", argv[0], strerror(rc));
	child_pid = pid;
	if (caught) /* came before the child was known */
		kill(pid, caught);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			child_pid = 0;
			return coli_errf(e, COLI_EIO, "%s: wait failed: %s", argv[0], strerror(errno));
		}
	child_pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void prof_sibling(const char *name, char *path, size_t n)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len > 0) {
		self[len] = 0;
		char *slash = strrchr(self, '/');
		if (slash) {
			snprintf(path, n, "%.*s/%s", (int)(slash - self), self, name);
			if (access(path, X_OK) == 0)
				return;
		}
	}
	snprintf(path, n, "%s", name);
}

int prof_drop_caches(coli_err *e)
{
	if (geteuid() != 0)
		return coli_errf(e, COLI_EUSAGE, "not root: the page cache was not dropped (the cold run may be warm)");
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	int ok = fd >= 0 && write(fd, "3\n", 2) == 2;
	int err = errno;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : coli_errf(e, COLI_EIO, "/proc/sys/vm/drop_caches: %s: the page cache was not dropped", strerror(err));
}

int prof_capture(char *const *argv, char *out, size_t n)
{
	char tmp[] = "/tmp/coli-profile-capture.XXXXXX";
	int fd = mkstemp(tmp);
	coli_err e;
	if (fd < 0)
		return -1;
	close(fd);
	int rc = prof_spawn(argv, tmp, "/dev/null", &e);
	FILE *f = fopen(tmp, "r");
	out[0] = 0;
	if (f && fgets(out, (int)n, f))
		out[strcspn(out, "\r\n")] = 0;
	if (f)
		fclose(f);
	unlink(tmp);
	return rc == 0 && out[0] ? 0 : -1;
}
