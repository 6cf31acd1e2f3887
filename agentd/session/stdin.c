/*
 * stdin.c -- a session's input: stdin queued and written as the fd takes
 * it, its close, and the PTY's window size.
 */

#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/capability.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "cgroup.h"
#include "log.h"
#include "pty.h"
#include "ringbuf.h"
#include "session.h"
#include "session_int.h"
#include "spawner.h"
#include "stats.h"
#include "stop.h"
#include "util.h"

static void	session_flush_stdin(struct session *);

/*
 * Queue input at the client's offset (-1: none), exactly once: what was
 * accepted before is skipped.  *dup tells a write accepted whole before.
 */
ssize_t
session_write_stdin_at(struct session *s, const void *data, size_t len,
    int eof, int64_t offset, int *dup, struct proto_err *err)
{
	uint64_t	skip;

	*dup = 0;
	if (offset < 0)
		return (session_write_stdin(s, data, len, eof, err));
	if ((uint64_t)offset > s->stdin_bytes)
		return (proto_fail(err, 409, "stdin_offset_mismatch",
		    "offset %lld is after the %llu stdin bytes accepted",
		    (long long)offset, (unsigned long long)s->stdin_bytes));
	skip = s->stdin_bytes - (uint64_t)offset;
	if (skip > 0 && skip >= len) {
		/* Accepted before, its eof with it: nothing to do again. */
		*dup = 1;
		return (0);
	}
	return (session_write_stdin(s, (const uint8_t *)data + skip,
	    len - skip, eof, err));
}

/* Bytes of stdin accepted so far. */
uint64_t
session_stdin_bytes(const struct session *s)
{
	return (s->stdin_bytes);
}

/* Queue input and write what the fd takes now. */
ssize_t
session_write_stdin(struct session *s, const void *data, size_t len,
    int eof, struct proto_err *err)
{
	char	c;

	if (s->exited)
		return (proto_fail(err, 409, "session_exited",
		    "session '%s' has exited", s->id));
	if (s->in == -1 || s->in_eof)
		return (proto_fail(err, 409, "stdin_closed",
		    "stdin of session '%s' is closed", s->id));
	if (evbuffer_get_length(s->inq) + len + (eof && s->tty) >
	    limits.stdin_buffer)
		return (proto_fail(err, 429, "stdin_backpressure",
		    "%zu bytes of stdin are queued, unread (--stdin-buffer "
		    "%llu)", evbuffer_get_length(s->inq),
		    (unsigned long long)limits.stdin_buffer));
	if (len > 0 && evbuffer_add(s->inq, data, len) != 0)
		fatal("%s: out of memory", __func__);
	s->stdin_bytes += len;
	if (eof && s->tty) {
		c = (char)pty_veof(s->in);	/* the program may have changed it */
		evbuffer_add(s->inq, &c, 1);
	} else if (eof)
		s->in_eof = 1;
	session_flush_stdin(s);
	return ((ssize_t)len);
}

/* Write queued input until the fd would block. */
static void
session_flush_stdin(struct session *s)
{
	int	n;

	while (s->in != -1 && evbuffer_get_length(s->inq) > 0) {
		n = evbuffer_write(s->inq, s->in);
		if (n > 0)
			continue;
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN) {
			event_add(s->in_ev, NULL);
			return;
		}
		/* EPIPE, EIO: nobody reads any more. */
		log_debug("%s: session %s stdin: %s", __func__, s->id,
		    n == 0 ? "closed" : strerror(errno));
		evbuffer_drain(s->inq, evbuffer_get_length(s->inq));
		session_close_stdin(s);
		return;
	}
	if (s->in_eof && !s->tty)
		session_close_stdin(s);
}

/* The stdin fd is writable again. */
void
session_write_cb(evutil_socket_t fd, short events, void *arg)
{
	session_flush_stdin(arg);
}

/* Stop writing stdin; close the pipe (the master is closed with output). */
void
session_close_stdin(struct session *s)
{
	if (s->in == -1)
		return;
	if (s->in_ev != NULL) {
		event_free(s->in_ev);
		s->in_ev = NULL;
	}
	if (!s->tty)
		close(s->in);
	s->in = -1;
	s->in_eof = 1;
}

/* Set the PTY's window size. */
int
session_resize(struct session *s, unsigned rows, unsigned cols,
    struct proto_err *err)
{
	int	error;

	if (!s->tty)
		return (proto_fail(err, 409, "not_a_tty",
		    "session '%s' has no tty", s->id));
	if (s->exited || s->out[0].fd == -1)
		return (proto_fail(err, 409, "session_exited",
		    "session '%s' has exited", s->id));
	if ((error = pty_resize(s->out[0].fd, rows, cols)) != 0)
		return (proto_fail(err, 409, "session_exited",
		    "resize: %s", strerror(-error)));
	s->rows = rows;
	s->cols = cols;
	session_log_resize(s, session_time(s), rows, cols);
	return (0);
}

/* Log a resize; the oldest goes when the log holds --cast-resizes. */
void
session_log_resize(struct session *s, uint32_t time, unsigned rows,
    unsigned cols)
{
	struct session_size	*z;
	size_t			 max = limits.cast_resizes, n = s->nresizes;

	if (max == 0)
		return;
	/* Grown by doubling up to the bound: most sessions log none. */
	if (n < max && (n & (n - 1)) == 0)
		s->resizes = xrealloc(s->resizes, (n == 0 ? 1 : 2 * n > max ?
		    max : 2 * n) * sizeof *s->resizes);
	z = &s->resizes[n % max];
	z->time = time;
	z->rows = rows;
	z->cols = cols;
	s->nresizes++;
}

/* The i-th oldest resize the log holds. */
int
session_resize_at(const struct session *s, size_t i, struct session_size *z)
{
	size_t	max = limits.cast_resizes, held;

	held = s->nresizes < max ? s->nresizes : max;
	if (i >= held)
		return (-1);
	*z = s->resizes[(s->nresizes - held + i) % max];
	return (0);
}

/* Milliseconds since the session's start. */
uint32_t
session_time(const struct session *s)
{
	int64_t	ms = clock_mono_ms() - s->start_mono_ms;

	return (ms < 0 ? 0 : ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms);
}

/* Its start (wall clock ms) and its PTY's size then. */
int64_t
session_start(const struct session *s, unsigned *rows, unsigned *cols)
{
	*rows = s->tty ? s->start_rows : 0;
	*cols = s->tty ? s->start_cols : 0;
	return (s->started_ms);
}
