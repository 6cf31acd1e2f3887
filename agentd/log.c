/*
 * log.c -- leveled log lines on stderr, and the newest ones in memory.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *const log_names[] = { "debug", "info", "warn", "error" };

static enum log_level	 log_level = LOG_LEVEL_INFO;
static char		 log_ring[LOG_RING_LINES][LOG_LINE_MAX];
static unsigned		 log_next;	/* next slot of log_ring written */
static unsigned		 log_count;	/* lines in log_ring */

static void	log_out(const char *);

/* Set the lowest level written by name. */
int
log_set_level(const char *name)
{
	size_t	i;

	for (i = 0; i < sizeof log_names / sizeof log_names[0]; i++) {
		if (strcmp(name, log_names[i]) == 0) {
			log_level = (enum log_level)i;
			return (0);
		}
	}
	return (-1);
}

/* Set the lowest level written. */
void
log_set_level_value(enum log_level level)
{
	log_level = level;
}

/*
 * Write "agentd: line\n" to stderr in one write(2), so that it is not torn
 * apart by the sessions' output on the same console (musl's dprintf()
 * writes as it formats: two or three writes a line).
 */
static void
log_out(const char *line)
{
	static const char	 prefix[] = "agentd: ";
	char			 out[sizeof prefix - 1 + LOG_LINE_MAX + 1];
	size_t			 len = strlen(line), off = 0;
	ssize_t			 n;

	memcpy(out, prefix, sizeof prefix - 1);
	memcpy(out + sizeof prefix - 1, line, len);
	len += sizeof prefix - 1;
	out[len++] = '\n';
	while (off < len) {
		if ((n = write(STDERR_FILENO, out + off, len - off)) > 0)
			off += (size_t)n;
		else if (n == -1 && errno == EINTR)
			continue;
		else
			break;	/* nowhere to say so */
	}
}

/* Format a line, keep it in the ring and write it to stderr. */
void
log_write(enum log_level level, const char *fmt, ...)
{
	struct timespec	 ts;
	struct tm	 tm;
	va_list		 ap;
	char		*line;
	int		 n, saved = errno;

	if (level < log_level)
		return;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	line = log_ring[log_next];
	n = snprintf(line, LOG_LINE_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, log_names[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, LOG_LINE_MAX - n, fmt, ap);
	va_end(ap);

	log_next = (log_next + 1) % LOG_RING_LINES;
	if (log_count < LOG_RING_LINES)
		log_count++;

	log_out(line);
	errno = saved;
}

/* Call fn for each line kept, oldest first. */
void
log_foreach(void (*fn)(const char *, void *), void *arg)
{
	unsigned	i, first;

	first = (log_next + LOG_RING_LINES - log_count) % LOG_RING_LINES;
	for (i = 0; i < log_count; i++)
		fn(log_ring[(first + i) % LOG_RING_LINES], arg);
}
