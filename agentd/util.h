/*
 * util.h -- allocation that never fails, clocks, and small helpers.  A leaf:
 * it knows nothing of the daemon above it.
 *
 * The x*alloc functions never return NULL: on exhaustion they take the fatal
 * path, fatal(): log, then the hook main() registered (agentd's: kill the
 * sessions; as PID 1 power off, never exit), or exit(1) without one.
 */
#ifndef AGENTD_UTIL_H
#define AGENTD_UTIL_H

#include <sys/types.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct timeval;

#define nitems(a)	(sizeof (a) / sizeof (a)[0])

void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xrealloc(void *, size_t);
char	*xstrdup(const char *);
int	 xasprintf(char **, const char *, ...)
	    __attribute__((format(printf, 2, 3)));

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t	 clock_mono_ms(void);
int64_t	 clock_mono_us(void);
/* Milliseconds since the epoch (CLOCK_REALTIME). */
int64_t	 clock_wall_ms(void);
/* Fill tv with ms milliseconds (>= 0) for a libevent timer; returns tv. */
struct timeval *timeval_ms(struct timeval *tv, int64_t ms);

/*
 * Raise the soft RLIMIT_NOFILE to want fds (0: to the hard limit), at most
 * to the hard limit; with hard set (PID 1, whose hard limit is the kernel's
 * 4096), the hard limit too, up to fs.nr_open.  Never lowers either.
 * Returns the soft limit now in force, or -errno.
 */
int64_t	 nofile_raise(uint64_t want, int hard);

/* Set O_NONBLOCK and FD_CLOEXEC on fd.  Returns 0 or -errno. */
int	 fd_nonblock_cloexec(int fd);
/*
 * Read up to len bytes of a blocking fd, through EINTR and short reads;
 * the bytes read (fewer at EOF or on an error).  Thread-safe.
 */
size_t	 fd_read_full(int fd, void *buf, size_t len);

/*
 * Read /proc/PID/stat into buf[len]; its 3rd field (the state), past "pid
 * (comm)", or NULL when pid is gone.  proc_stat_skip: the field n fields
 * after field (NULL in, or past the end: NULL out).
 */
char	*proc_stat(pid_t pid, char *buf, size_t len);
const char *proc_stat_skip(const char *field, int n);

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

/*
 * The next word of a kernel command line at *p (blanks inside double quotes
 * belong to it): its start, its length in *len, and *p moved past it; NULL
 * at the end.
 */
const char *cmdline_next(const char **p, size_t *len);

/*
 * Write a message into a caller's cause buffer (as snprintf), if there is
 * one (cause NULL or causelen 0: nothing).  The cause convention of the
 * functions that return -1 and say why.
 */
void	 cause_set(char *cause, size_t causelen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
void	 cause_vset(char *cause, size_t causelen, const char *fmt, va_list)
	    __attribute__((format(printf, 3, 0)));

/* Constant-time comparison of two byte strings; 1 when equal. */
int	 ct_equal(const void *, size_t, const void *, size_t);

/* The fatal path: log msg, then the hook (or exit(1)); never returns. */
void	 fatal(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
/* What fatal() does after its log line; it must not return. */
void	 fatal_set_hook(void (*)(void));

#endif /* AGENTD_UTIL_H */
