/*
 * util.h -- allocation that never fails, clocks, and small helpers.
 *
 * The x*alloc functions never return NULL: on exhaustion they take agentd's
 * fatal path (log, then shutdown; as PID 1 never an exit).
 */
#ifndef AGENTD_UTIL_H
#define AGENTD_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define nitems(a)	(sizeof (a) / sizeof (a)[0])

void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xrealloc(void *, size_t);
char	*xstrdup(const char *);
int	 xasprintf(char **, const char *, ...)
	    __attribute__((format(printf, 2, 3)));

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t	 clock_mono_ms(void);
/* Milliseconds since the epoch (CLOCK_REALTIME). */
int64_t	 clock_wall_ms(void);

/* Set O_NONBLOCK and FD_CLOEXEC on fd.  Returns 0 or -errno. */
int	 fd_nonblock_cloexec(int fd);

/*
 * Parse "1048576", "64KiB", "8M", "1g" into bytes.  Returns 0, or -1 on
 * garbage or overflow.
 */
int	 parse_size(const char *, uint64_t *);
/*
 * Parse a duration: a plain number is in unit_ms milliseconds; "250ms",
 * "5s", "2m", "1h" carry their own.  Returns 0 or -1.
 */
int	 parse_duration(const char *, int64_t unit_ms, int64_t *ms);

/* Constant-time comparison of two byte strings; 1 when equal. */
int	 ct_equal(const void *, size_t, const void *, size_t);

/* The fatal path: log msg and shut down; never returns. */
void	 fatal(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2), noreturn));

#endif /* AGENTD_UTIL_H */
