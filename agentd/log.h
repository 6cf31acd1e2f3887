/*
 * log.h -- agentd's own log: leveled lines on stderr, the newest kept in a
 * small in-memory ring for `agentctl logs`.
 *
 * Every line says which function spoke: log_info("%s: ...", __func__).
 * Log ids, fds and pids; never payload bytes or tokens.  Single-threaded:
 * called from the event loop thread only.
 */
#ifndef AGENTD_LOG_H
#define AGENTD_LOG_H

#include <stddef.h>

enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
};

#define LOG_RING_LINES	256	/* lines kept in memory */
#define LOG_LINE_MAX	512	/* bytes of one line */

/* Set the lowest level written; returns -1 for an unknown name. */
int	log_set_level(const char *);
void	log_set_level_value(enum log_level);

void	log_write(enum log_level, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

#define log_debug(...)	log_write(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...)	log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...)	log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_error(...)	log_write(LOG_LEVEL_ERROR, __VA_ARGS__)

/*
 * Call fn for each kept line, oldest first.  Lines are NUL-terminated and
 * carry their time and level.
 */
void	log_foreach(void (*fn)(const char *line, void *arg), void *arg);

#endif /* AGENTD_LOG_H */
