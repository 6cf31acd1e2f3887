/*
 * upgguard.c -- a live upgrade's way back to the old binary (see
 * upgguard.h).  The record is NUL-terminated strings: UPGGUARD_MAGIC,
 * then "image=FD", "state=FD", "ready-ms=MS", "arg=..." for each of argv,
 * "env=..." for each variable, "keep=FD" for each fd the state names.
 */
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "proto.h"
#include "upgguard.h"
#include "upgrade.h"
#include "util.h"

/* The signals that mean the successor crashed, or did not take over. */
static const int	 guard_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE,
			    SIGABRT, SIGSYS, SIGTRAP, SIGALRM };

static volatile sig_atomic_t guard_armed;
static pid_t		 guard_pid;		/* a fork's child never goes back */
static int		 guard_image = -1;	/* the old binary */
static char		**guard_argv;
static char		**guard_envp;		/* ..., state, why, NULL */
static int		*guard_keep;
static size_t		 guard_nkeep;
static sigset_t		 guard_mask;		/* the mask it started with */
static char		*guard_why;		/* UPGGUARD_BACK_ENV=... */
static size_t		 guard_why_at;		/* where the reason goes */
static char		*guard_back;		/* a rollback's reason */
static char		*guard_buf;		/* the record: argv, envp point in */
static char		*guard_state;		/* UPGRADE_ENV=... */

static void	upgguard_put(struct proto_buf *, const char *, const char *);
static int	upgguard_read(int, char **, size_t *);
static int	upgguard_parse(char *, size_t, int64_t *);
static void	upgguard_signal(int);
static void	upgguard_atexit(void);
static void	upgguard_back(const char *, int);
static void	upgguard_clear(void);

/* Append one string of the record, key then value, NUL-terminated. */
static void
upgguard_put(struct proto_buf *b, const char *key, const char *value)
{
	proto_buf_append(b, key, strlen(key));
	proto_buf_append(b, value, strlen(value) + 1);
}

/* Write the record of what a rollback runs; its fd and the image's. */
int
upgguard_record(char **argv, int statefd, const int *keep, size_t nkeep,
    int64_t ready_ms, int *imagefd, int *recfd, char *cause, size_t len)
{
	extern char		**environ;
	struct proto_buf	  b = { 0 };
	char			  num[32];
	size_t			  i, off;
	ssize_t			  n;
	int			  fd;

	if ((*imagefd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, len, "/proc/self/exe: %s", strerror(errno));
		return (-1);
	}
	proto_buf_append(&b, UPGGUARD_MAGIC, sizeof UPGGUARD_MAGIC);
	snprintf(num, sizeof num, "%d", *imagefd);
	upgguard_put(&b, "image=", num);
	snprintf(num, sizeof num, "%d", statefd);
	upgguard_put(&b, "state=", num);
	snprintf(num, sizeof num, "%" PRId64, ready_ms);
	upgguard_put(&b, "ready-ms=", num);
	for (i = 0; argv[i] != NULL; i++)
		upgguard_put(&b, "arg=", argv[i]);
	for (i = 0; environ[i] != NULL; i++) {
		if (strncmp(environ[i], "AGENTD_UPGRADE_", 15) != 0)
			upgguard_put(&b, "env=", environ[i]);
	}
	for (i = 0; i < nkeep; i++) {
		snprintf(num, sizeof num, "%d", keep[i]);
		upgguard_put(&b, "keep=", num);
	}
	if (b.oom || b.len > UPGGUARD_RECORD_MAX) {
		cause_set(cause, len, "the rollback record: %zu bytes", b.len);
		goto fail;
	}
	if ((fd = memfd_create("agentd-rollback", MFD_CLOEXEC)) == -1) {
		cause_set(cause, len, "memfd_create: %s", strerror(errno));
		goto fail;
	}
	for (off = 0; off < b.len; off += (size_t)n) {
		if ((n = write(fd, b.data + off, b.len - off)) <= 0) {
			cause_set(cause, len, "the rollback record: %s",
			    n == 0 ? "short write" : strerror(errno));
			close(fd);
			goto fail;
		}
	}
	proto_buf_free(&b);
	*recfd = fd;
	return (0);
fail:
	proto_buf_free(&b);
	close(*imagefd);
	return (-1);
}

/* Read a record whole; 0 with a malloc'd *buf, or -1. */
static int
upgguard_read(int fd, char **buf, size_t *len)
{
	struct stat	st;
	ssize_t		n;
	size_t		off;

	if (fstat(fd, &st) == -1 || st.st_size <= 0 ||
	    (uint64_t)st.st_size > UPGGUARD_RECORD_MAX)
		return (-1);
	*len = (size_t)st.st_size;
	*buf = xmalloc(*len);
	for (off = 0; off < *len; off += (size_t)n) {
		n = pread(fd, *buf + off, *len - off, (off_t)off);
		if (n == -1 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n <= 0) {
			free(*buf);
			*buf = NULL;
			return (-1);
		}
	}
	return (0);
}

/* Take the record's strings apart into the guard's arrays; 0 or -1. */
static int
upgguard_parse(char *buf, size_t len, int64_t *ready_ms)
{
	size_t		 nargs = 0, nenv = 0, nkeep = 0;
	int64_t		 v;
	char		*p, *end = buf + len, *state = NULL, *prefix;
	int		 magic = 0;

	if (len == 0 || buf[len - 1] != '\0')
		return (-1);
	for (p = buf; p < end; p += strlen(p) + 1) {
		if (strncmp(p, "arg=", 4) == 0)
			nargs++;
		else if (strncmp(p, "env=", 4) == 0)
			nenv++;
		else if (strncmp(p, "keep=", 5) == 0)
			nkeep++;
	}
	guard_argv = xcalloc(nargs + 1, sizeof *guard_argv);
	guard_envp = xcalloc(nenv + 3, sizeof *guard_envp);
	guard_keep = xcalloc(nkeep + 1, sizeof *guard_keep);
	nargs = nenv = 0;
	for (p = buf; p < end; p += strlen(p) + 1) {
		if (strcmp(p, UPGGUARD_MAGIC) == 0)
			magic = 1;
		else if (strncmp(p, "arg=", 4) == 0)
			guard_argv[nargs++] = p + 4;
		else if (strncmp(p, "env=", 4) == 0)
			guard_envp[nenv++] = p + 4;
		else if (strncmp(p, "state=", 6) == 0)
			state = p + 6;
		else if (sscanf(p, "image=%" SCNd64, &v) == 1 && v > 2 &&
		    v <= INT32_MAX)
			guard_image = (int)v;
		else if (sscanf(p, "ready-ms=%" SCNd64, &v) == 1 && v > 0)
			*ready_ms = v;
		else if (sscanf(p, "keep=%" SCNd64, &v) == 1 && v > 2 &&
		    v <= INT32_MAX)
			guard_keep[guard_nkeep++] = (int)v;
	}
	if (!magic || nargs == 0 || state == NULL || guard_image == -1)
		return (-1);
	xasprintf(&guard_state, "%s=%s", UPGRADE_ENV, state);
	guard_envp[nenv++] = guard_state;
	/* The reason is written in here by the handler: room for it now. */
	guard_why_at = (size_t)xasprintf(&prefix, "%s=agentd %s: ",
	    UPGGUARD_BACK_ENV, AGENTD_VERSION);
	guard_why = xcalloc(1, guard_why_at + UPGGUARD_WHY_MAX);
	memcpy(guard_why, prefix, guard_why_at);
	free(prefix);
	guard_envp[nenv++] = guard_why;
	return (0);
}

/* Arm the guard (a successor), or keep a rollback's reason. */
void
upgguard_arm(void)
{
	struct sigaction	 sa;
	struct itimerval	 it;
	const char		*env;
	size_t			 len = 0, i;
	int64_t			 fd, ready_ms = 0;

	if ((env = getenv(UPGGUARD_BACK_ENV)) != NULL) {
		guard_back = xstrdup(env);
		unsetenv(UPGGUARD_BACK_ENV);
		memset(&it, 0, sizeof it);	/* no successor's timer left */
		setitimer(ITIMER_REAL, &it, NULL);
	}
	if ((env = getenv(UPGGUARD_ENV)) == NULL)
		return;
	if (sscanf(env, "%" SCNd64, &fd) != 1 || fd < 3 || fd > INT32_MAX) {
		log_error("%s: %s=%s: no fd; no way back", __func__,
		    UPGGUARD_ENV, env);
		unsetenv(UPGGUARD_ENV);
		return;
	}
	unsetenv(UPGGUARD_ENV);
	if (upgguard_read((int)fd, &guard_buf, &len) != 0 ||
	    upgguard_parse(guard_buf, len, &ready_ms) != 0) {
		log_error("%s: the rollback record cannot be read; no way "
		    "back", __func__);
		close((int)fd);
		upgguard_clear();
		return;
	}
	close((int)fd);
	fcntl(guard_image, F_SETFD, FD_CLOEXEC);
	sigprocmask(SIG_SETMASK, NULL, &guard_mask);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = upgguard_signal;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < nitems(guard_signals); i++)
		sigaction(guard_signals[i], &sa, NULL);
	atexit(upgguard_atexit);
	memset(&it, 0, sizeof it);
	it.it_value.tv_sec = ready_ms / 1000;
	it.it_value.tv_usec = (ready_ms % 1000) * 1000;
	setitimer(ITIMER_REAL, &it, NULL);
	guard_pid = getpid();
	guard_armed = 1;
	log_info("%s: the old binary (fd %d) runs again unless the state is "
	    "taken over within %" PRId64 " ms", __func__, guard_image,
	    ready_ms);
}

/* The state is taken over: no way back from here. */
void
upgguard_disarm(void)
{
	struct itimerval	it;
	size_t			i;

	if (!guard_armed)
		return;
	memset(&it, 0, sizeof it);
	setitimer(ITIMER_REAL, &it, NULL);	/* first: no SIGALRM after */
	guard_armed = 0;
	for (i = 0; i < nitems(guard_signals); i++)
		signal(guard_signals[i], SIG_DFL);
	upgguard_clear();
	log_debug("%s: the state is taken over", __func__);
}

/* Free what a rollback would have run, close the old image. */
static void
upgguard_clear(void)
{
	if (guard_image != -1)
		close(guard_image);
	guard_image = -1;
	free(guard_argv);
	free(guard_envp);
	free(guard_keep);
	free(guard_why);
	free(guard_state);
	free(guard_buf);
	guard_argv = guard_envp = NULL;
	guard_keep = NULL;
	guard_nkeep = 0;
	guard_why = guard_state = guard_buf = NULL;
}

/* A crash, or no take-over in time: roll back. */
static void
upgguard_signal(int sig)
{
	upgguard_back(sig == SIGALRM ? "not ready in time" : "signal", sig);
	/* Disarmed, or the exec failed: a crash dies as it would have. */
	if (sig != SIGALRM)
		raise(sig);
}

/* exit() before the take-over: roll back. */
static void
upgguard_atexit(void)
{
	upgguard_back("exit", 0);
}

/* A fatal path: roll back now. */
void
upgguard_fire(const char *why)
{
	upgguard_back(why, 0);
}

/*
 * Run the old binary again: async-signal-safe calls only.  The reason,
 * with the signal's number, goes into the prepared environment.
 */
static void
upgguard_back(const char *why, int sig)
{
	static const char	 msg[] = "agentd: upgguard: the new agentd did "
				    "not start; running the old one again\n";
	struct itimerval	 it;
	char			*p;
	size_t			 i, room;
	int			 saved = errno, d;

	if (!guard_armed || getpid() != guard_pid)
		return;
	guard_armed = 0;
	p = guard_why + guard_why_at;
	room = UPGGUARD_WHY_MAX - 8;	/* " NNN" and the NUL fit after */
	for (i = 0; why[i] != '\0' && i < room; i++)
		*p++ = why[i];
	if (sig > 0) {
		*p++ = ' ';
		for (d = 100; d > 0; d /= 10) {
			if (sig >= d || d == 1)
				*p++ = (char)('0' + sig / d % 10);
		}
	}
	*p = '\0';
	(void)!write(2, msg, sizeof msg - 1);
	/* An interval timer outlives the execve: it goes first. */
	memset(&it, 0, sizeof it);
	setitimer(ITIMER_REAL, &it, NULL);
	for (i = 0; i < guard_nkeep; i++)
		fcntl(guard_keep[i], F_SETFD, 0);
	sigprocmask(SIG_SETMASK, &guard_mask, NULL);
	fexecve(guard_image, guard_argv, guard_envp);
	for (i = 0; i < guard_nkeep; i++)
		fcntl(guard_keep[i], F_SETFD, FD_CLOEXEC);
	errno = saved;
}

/* A rollback's reason, or NULL. */
const char *
upgguard_rolled_back(void)
{
	return (guard_back);
}
