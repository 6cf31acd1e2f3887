/*
 * util.c -- allocation that never fails, clocks, parsing of sizes and
 * durations, constant-time comparison.
 */
#include <sys/resource.h>
#include <sys/time.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

static void	(*fatal_hook)(void);	/* main()'s; see fatal_set_hook() */

/* malloc, or the fatal path. */
void *
xmalloc(size_t size)
{
	void	*p;

	if ((p = malloc(size == 0 ? 1 : size)) == NULL)
		fatal("%s: out of memory (%zu bytes)", __func__, size);
	return (p);
}

/* calloc, or the fatal path. */
void *
xcalloc(size_t n, size_t size)
{
	void	*p;

	if ((p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size)) == NULL)
		fatal("%s: out of memory (%zu x %zu bytes)", __func__, n, size);
	return (p);
}

/* realloc, or the fatal path. */
void *
xrealloc(void *p, size_t size)
{
	if ((p = realloc(p, size == 0 ? 1 : size)) == NULL)
		fatal("%s: out of memory (%zu bytes)", __func__, size);
	return (p);
}

/* strdup, or the fatal path. */
char *
xstrdup(const char *s)
{
	char	*p;

	if ((p = strdup(s)) == NULL)
		fatal("%s: out of memory", __func__);
	return (p);
}

/* asprintf, or the fatal path. */
int
xasprintf(char **out, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vasprintf(out, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal("%s: out of memory", __func__);
	return (n);
}

/* Milliseconds of the monotonic clock. */
int64_t
clock_mono_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Microseconds of the monotonic clock. */
int64_t
clock_mono_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

/* Milliseconds since the epoch. */
int64_t
clock_wall_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Milliseconds as a struct timeval. */
struct timeval *
timeval_ms(struct timeval *tv, int64_t ms)
{
	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
	return (tv);
}

/* Raise the limit of open fds towards want (0: the hard limit). */
int64_t
nofile_raise(uint64_t want, int hard)
{
	struct rlimit	 rl;
	unsigned long	 nr_open;
	FILE		*f;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return (-errno);
	if (hard && want > rl.rlim_max &&
	    (f = fopen("/proc/sys/fs/nr_open", "re")) != NULL) {
		if (fscanf(f, "%lu", &nr_open) == 1 && nr_open > rl.rlim_max)
			rl.rlim_max = want < nr_open ? want : nr_open;
		fclose(f);
	}
	if (want == 0 || want > rl.rlim_max)
		want = rl.rlim_max;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = want;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0 &&
		    getrlimit(RLIMIT_NOFILE, &rl) != 0)
			return (-errno);
	}
	return (rl.rlim_cur == RLIM_INFINITY ? INT64_MAX :
	    (int64_t)rl.rlim_cur);
}

/* Set O_NONBLOCK and FD_CLOEXEC. */
int
fd_nonblock_cloexec(int fd)
{
	int	fl;

	if ((fl = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		return (-errno);
	if ((fl = fcntl(fd, F_GETFD)) == -1 ||
	    fcntl(fd, F_SETFD, fl | FD_CLOEXEC) == -1)
		return (-errno);
	return (0);
}

/* Read up to len bytes of a blocking fd. */
size_t
fd_read_full(int fd, void *buf, size_t len)
{
	size_t	done = 0;
	ssize_t	n;

	while (done < len) {
		n = read(fd, (char *)buf + done, len - done);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	return (done);
}

/*
 * Read /proc/PID/stat into buf and return its 3rd field, the state: "pid
 * (comm)" come first, and comm may hold anything, so the last ')' ends it.
 * NULL when pid is gone.
 */
char *
proc_stat(pid_t pid, char *buf, size_t len)
{
	char	 path[64], *p;
	size_t	 n;
	int	 fd;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if (len < 2 || (fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (NULL);
	n = fd_read_full(fd, buf, len - 1);
	close(fd);
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL || p[1] != ' ')
		return (NULL);
	return (p + 2);
}

/* The field n fields after field in a proc_stat() line; NULL past its end. */
const char *
proc_stat_skip(const char *field, int n)
{
	for (; n > 0 && field != NULL; n--) {
		if ((field = strchr(field, ' ')) != NULL)
			field++;
	}
	return (field);
}

/* Parse a decimal number and the rest of the string after it. */
static int
parse_number(const char *s, uint64_t *v, const char **rest)
{
	char	*end;

	if (*s < '0' || *s > '9')
		return (-1);
	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno != 0)
		return (-1);
	*rest = end;
	return (0);
}

/* Parse a size in bytes with an optional binary suffix. */
int
parse_size(const char *s, uint64_t *bytes)
{
	static const struct {
		const char	*suffix;
		unsigned	 shift;
	} units[] = {
		{ "", 0 }, { "b", 0 },
		{ "k", 10 }, { "kb", 10 }, { "kib", 10 },
		{ "m", 20 }, { "mb", 20 }, { "mib", 20 },
		{ "g", 30 }, { "gb", 30 }, { "gib", 30 },
	};
	const char	*rest;
	uint64_t	 v;
	size_t		 i;

	if (parse_number(s, &v, &rest) != 0)
		return (-1);
	for (i = 0; i < nitems(units); i++) {
		if (strcasecmp(rest, units[i].suffix) != 0)
			continue;
		if (v > (UINT64_MAX >> units[i].shift))
			return (-1);
		*bytes = v << units[i].shift;
		return (0);
	}
	return (-1);
}

/* Parse a duration into milliseconds. */
int
parse_duration(const char *s, int64_t unit_ms, int64_t *ms)
{
	static const struct {
		const char	*suffix;
		int64_t		 ms;
	} units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
	};
	const char	*rest;
	uint64_t	 v;
	int64_t		 unit = unit_ms;
	size_t		 i;

	if (parse_number(s, &v, &rest) != 0)
		return (-1);
	if (*rest != '\0') {
		for (i = 0; i < nitems(units); i++) {
			if (strcmp(rest, units[i].suffix) == 0)
				break;
		}
		if (i == nitems(units))
			return (-1);
		unit = units[i].ms;
	}
	if (v > (uint64_t)(INT64_MAX / unit))
		return (-1);
	*ms = (int64_t)v * unit;
	return (0);
}

/* Write a message into a caller's cause buffer, if there is one. */
void
cause_vset(char *cause, size_t causelen, const char *fmt, va_list ap)
{
	if (cause != NULL && causelen > 0)
		vsnprintf(cause, causelen, fmt, ap);
}

/* The same, with the arguments. */
void
cause_set(char *cause, size_t causelen, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	cause_vset(cause, causelen, fmt, ap);
	va_end(ap);
}

/* The next word of a kernel command line. */
const char *
cmdline_next(const char **pp, size_t *len)
{
	const char	*p = *pp, *start;
	int		 quoted = 0;

	while (isspace((unsigned char)*p))
		p++;
	if (*p == '\0') {
		*pp = p;
		return (NULL);
	}
	start = p;
	while (*p != '\0' && (quoted || !isspace((unsigned char)*p))) {
		if (*p == '"')
			quoted = !quoted;
		p++;
	}
	*len = (size_t)(p - start);
	*pp = p;
	return (start);
}

/* Compare without leaking, through timing, where the first difference is. */
int
ct_equal(const void *a, size_t alen, const void *b, size_t blen)
{
	const volatile unsigned char	*x = a, *y = b;
	unsigned char			 diff = 0;
	size_t				 i;

	if (alen != blen) {
		/* Still walk a, so the time depends only on alen. */
		for (i = 0; i < alen; i++)
			diff |= x[i];
		return (0);
	}
	for (i = 0; i < alen; i++)
		diff |= x[i] ^ y[i];
	return (diff == 0);
}

/* Set what fatal() does after logging (agentd's main: agentd_panic). */
void
fatal_set_hook(void (*hook)(void))
{
	fatal_hook = hook;
}

/* Log and take the fatal path; never returns. */
void
fatal(const char *fmt, ...)
{
	char	msg[LOG_LINE_MAX];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_error("fatal: %s", msg);
	if (fatal_hook != NULL)
		fatal_hook();
	exit(1);
}
