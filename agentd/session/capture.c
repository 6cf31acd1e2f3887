/*
 * capture.c -- a session's output into its ring: reads within a loop
 * turn's budget, chunks joined from reads and published when anyone looks,
 * a hung-up PTY master, the close of the output.
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

#define SESSION_SMALL_READ	512	/* bytes read when FIONREAD says 0 */
#define SESSION_HUP_POLL_MAX_MS	1000	/* slowest look at a hung-up master */
#define SESSION_JOIN_BYTES	4096	/* bytes a chunk joined from reads grows to */
#define SESSION_JOIN_SHARE	64	/* ... and at most this share of the ring */
#define SESSION_READ_SHARE	16	/* a read takes at most this share of the ring */
#define SESSION_SHORT_READ	4096	/* bytes: a read under this that took
					   all there was ends the turn */
#define SESSION_TTY_ROOM	512	/* bytes of pending room a PTY read
					   wants, in place of FIONREAD */
#define SESSION_TTY_FULL	4095	/* bytes of a PTY read that emptied a
					   full n_tty buffer (4 KiB - 1) */

static size_t			 turn_bytes;	/* read in this loop turn */

static size_t	session_turn_budget(void);
static void	*session_room(struct session_out *, size_t, size_t *);
static void	session_publish_full(struct session *);
static void	session_hup(struct session_out *);
static void	session_append_aside(struct session_out *, uint8_t *, size_t);

/*
 * Give an output pipe --pipe-bytes of kernel buffer.  A flood then runs on
 * while agentd answers a request instead of blocking at 64 KiB, and each
 * read of it wakes the writer less often: in bench scenario 3, half the
 * requests per MiB and 0.78 -> 0.67 ms of agentd CPU per MiB (raw).  The
 * kernel holds at most that much unread per pipe; an unprivileged agentd
 * may not pass /proc/sys/fs/pipe-max-size (1 MiB), and the pipe then keeps
 * its size.
 */
void
session_pipe_size(struct session *s, int fd)
{
	if (limits.pipe_bytes == 0 || fd == -1)
		return;
	if (fcntl(fd, F_SETPIPE_SZ, (int)limits.pipe_bytes) == -1)
		log_debug("%s: session %s fd %d: F_SETPIPE_SZ %llu: %s",
		    __func__, s->id, fd, (unsigned long long)limits.pipe_bytes,
		    strerror(errno));
}

/*
 * Bytes the output fd at hand may read in this loop turn: SESSION_READ_BUDGET
 * while the fds served before it in the turn read less than
 * SESSION_TURN_BUDGET together, else SESSION_READ_MAX.  One flood reads in
 * big turns (a pipe of --pipe-bytes holds more than a turn); many share
 * about SESSION_TURN_BUDGET, so a turn stays short for the requests
 * waiting behind it (six floods with a quarter MiB each made healthz 4x
 * slower).  The turn's first read activates turn_ev, which runs after the
 * callbacks already queued in this turn and starts the count again.
 */
static size_t
session_turn_budget(void)
{
	if (!turn_open) {
		turn_open = 1;
		turn_bytes = 0;
		event_active(turn_ev, EV_TIMEOUT, 1);
	}
	return (turn_bytes < SESSION_TURN_BUDGET ? SESSION_READ_BUDGET :
	    SESSION_READ_MAX);
}

/* The loop turn's output callbacks ran: the next read starts a new count. */
void
session_turn_cb(evutil_socket_t fd, short events, void *arg)
{
	turn_open = 0;
}

/*
 * Whether agentd is exempt from the kernel's per-user pipe budget: the
 * buffers of an unprivileged user's pipes count against
 * fs.pipe-user-pages-soft (64 MiB), and past it the kernel gives that
 * user's new pipes, its sessions' own included, two pages each.
 */
int
session_pipe_exempt(void)
{
	struct __user_cap_header_struct	hdr;
	struct __user_cap_data_struct	data[_LINUX_CAPABILITY_U32S_3];

	memset(&hdr, 0, sizeof hdr);
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	if (syscall(SYS_capget, &hdr, data) == -1)
		return (0);
	return ((data[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective &
	    CAP_TO_MASK(CAP_SYS_RESOURCE)) != 0 ||
	    (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &
	    CAP_TO_MASK(CAP_SYS_ADMIN)) != 0);
}

/* The output pipes' buffer size given to new pipe sessions, 0: the kernel's. */
uint64_t
session_pipe_bytes(void)
{
	return (limits.pipe_bytes);
}

/* Output is readable: capture it. */
void
session_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session_out	*o = arg;
	struct session		*s = o->s;
	uint64_t		 before = ring_newest(s->ring);
	uint64_t		 bytes = agentd_stats.output_bytes;
	int			 closed;

	closed = session_capture(o, session_turn_budget());
	turn_bytes += agentd_stats.output_bytes - bytes;
	if (ring_newest(s->ring) != before) {
		s->hup_ms = 0;
		session_notify(s, SESSION_EV_OUTPUT);
	}
	if (closed && s->tty && !s->reaped)
		session_hup(o);
	else if (closed) {
		session_close_out(o);
		session_check_exit(s, 0);
	}
}

/*
 * EIO on a PTY master while the leader lives: every slave fd is closed (a
 * program closing 0-2 at exit, as coreutils do), but closing the master now
 * would hang the terminal up and SIGHUP the leader.  Keep the master and look
 * at it again later (a hung-up master polls readable, so it cannot stay in
 * the loop): a process may reopen /dev/tty.  The leader's exit closes it.
 */
static void
session_hup(struct session_out *o)
{
	struct session	*s = o->s;

	if (!s->hup)
		log_debug("%s: session %s: slave closed, leader alive",
		    __func__, s->id);
	s->hup = 1;
	event_del(o->ev);
	s->hup_ms = s->hup_ms == 0 ? SESSION_HUP_POLL_MIN_MS :
	    s->hup_ms * 2 > SESSION_HUP_POLL_MAX_MS ? SESSION_HUP_POLL_MAX_MS :
	    s->hup_ms * 2;
	session_timer_add(s->hup_ev, s->hup_ms);
}

/* Time to look at a hung-up master again. */
void
session_hup_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session_out	*o = arg;

	if (o->fd != -1)
		event_add(o->ev, NULL);
}

/*
 * Read from o into the ring until EAGAIN or budget bytes, straight into the
 * ring.  Reads of one stream are joined into one chunk, up to
 * SESSION_JOIN_BYTES, while no reader waits (one chunk per read made tiny
 * chunks fill the ring's index long before its bytes); the chunk is
 * published when full, when the other stream has output, at the end of
 * the round if a reader waits, and whenever anyone looks at the session.
 * Within a budget, a short read that took all FIONREAD announced also ends
 * the turn: the event is level-triggered and comes back if more arrived, so
 * an echo costs no FIONREAD and read that find nothing (a flood still reads
 * to EAGAIN).  A budget of SIZE_MAX drains until EAGAIN or EOF.
 * A PTY master hands out at most n_tty's 4 KiB buffer per read, so a flood
 * is a read per 4 KiB: it is read without FIONREAD (into the pending room
 * when SESSION_TTY_ROOM is left, else a new chunk), and a read that emptied
 * a full buffer goes on at once (the next read waits for the tty's worker
 * to refill it) instead of a trip through epoll (whose tty poll waits for
 * that worker too); a read that found less ends the turn.
 * Returns 1 when the fd reached EOF (or EIO on a PTY master), 0 otherwise.
 */
int
session_capture(struct session_out *o, size_t budget)
{
	struct session	*s = o->s;
	uint8_t		 small[SESSION_CARRY_MAX + SESSION_SMALL_READ];
	size_t		 len, done = 0;
	ssize_t		 n;
	void		*p;
	int		 avail, closed = 0;

	s->read_time = session_time(s);
	ring_set_time(s->ring, s->read_time);
	while (done < budget) {
		if (s->tty)
			avail = SESSION_TTY_ROOM;
		else if (ioctl(o->fd, FIONREAD, &avail) == -1 || avail < 0)
			avail = 0;
		if ((p = session_room(o, (size_t)avail, &len)) == NULL) {
			/* EOF, or data that arrived since: read it aside. */
			n = read(o->fd, small + SESSION_CARRY_MAX,
			    SESSION_SMALL_READ);
			if (n > 0)
				session_append_aside(o, small +
				    SESSION_CARRY_MAX, (size_t)n);
		} else if ((n = read(o->fd, p, len)) > 0) {
			s->pend_len += n;
			if (s->pend_len == s->pend_room)
				session_publish_full(s);
			if (budget != SIZE_MAX && (s->tty ?
			    (size_t)n < len && n < SESSION_TTY_FULL :
			    n == avail && avail < SESSION_SHORT_READ)) {
				done += n;
				break;
			}
		}
		if (n > 0) {
			done += n;
			continue;
		}
		if (n == 0 || errno == EIO) {
			closed = 1;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			break;
		log_warn("%s: session %s fd %d: %s", __func__, s->id, o->fd,
		    strerror(errno));
		closed = 1;
		break;
	}
	if (s->watchers > 0)
		session_publish(s);
	if (done > 0)
		s->output_ms = clock_mono_ms();
	agentd_stats.output_bytes += done;
	return (closed);
}

/*
 * Where the next read of o goes, and *len how much to read: the free room
 * of the pending chunk if it is o's stream's and there is room for avail
 * bytes (FIONREAD's figure); else a new pending chunk (the old one
 * published) of avail bytes or the join size, whichever is larger.  A read
 * takes at most SESSION_READ_MAX and 1/SESSION_READ_SHARE of the ring, so a
 * small ring is not emptied by one eviction.  NULL when avail is 0 and no
 * pending room is left: the caller reads aside rather than evict old output
 * for nothing.
 */
static void *
session_room(struct session_out *o, size_t avail, size_t *len)
{
	struct session	*s = o->s;
	size_t		 join, want, most, room;

	most = ring_chunk_max(s->ring) / SESSION_READ_SHARE;
	if (most > SESSION_READ_MAX)
		most = SESSION_READ_MAX;
	if (avail > most)
		avail = most;
	room = s->pend_room - s->pend_len;
	if (s->pend != NULL && s->pend_stream == o->stream &&
	    room >= (avail > 0 ? avail : 1) &&
	    s->read_time - s->pend_time <= SESSION_JOIN_MS) {
		*len = room;
		return (s->pend + s->pend_len);
	}
	if (avail == 0)
		return (NULL);
	/* A read of the same stream follows: no character split between. */
	if (s->pend != NULL && s->pend_stream == o->stream)
		session_publish_full(s);
	else
		session_publish(s);

	join = ring_chunk_max(s->ring) / SESSION_JOIN_SHARE;
	if (join > SESSION_JOIN_BYTES)
		join = SESSION_JOIN_BYTES;
	want = avail > join ? avail : join;
	if (s->carry_len > 0 && s->carry_stream == o->stream)
		want += s->carry_len;
	if ((s->pend = ring_reserve(s->ring, &want)) == NULL)
		return (NULL);	/* ids used up: ring_append says so too */
	s->pend_len = 0;
	s->pend_room = want;
	s->pend_time = s->read_time;
	s->pend_stream = o->stream;
	/* What the last full chunk of this stream left begins this one. */
	if (s->carry_len > 0 && s->carry_stream == o->stream &&
	    want > s->carry_len) {
		memcpy(s->pend, s->carry, s->carry_len);
		s->pend_len = s->carry_len;
		s->carry_len = 0;
	}
	*len = want - s->pend_len;
	return (s->pend + s->pend_len);
}

/*
 * Append bytes read aside (data has SESSION_CARRY_MAX bytes of room before
 * it) as a chunk, after what was pending: the first bytes of a character
 * that the last full chunk of the stream left over go with them, so that
 * data arriving just after FIONREAD said none splits no character.
 */
static void
session_append_aside(struct session_out *o, uint8_t *data, size_t n)
{
	struct session	*s = o->s;

	if (s->carry_len > 0 && s->carry_stream == o->stream &&
	    s->pend == NULL) {
		data -= s->carry_len;
		memcpy(data, s->carry, s->carry_len);
		n += s->carry_len;
		s->carry_len = 0;
	}
	session_publish(s);
	ring_append(s->ring, data, n, o->stream);
}

/*
 * Publish the pending chunk, if any bytes were read into it, after what a
 * full chunk left over, if anything (then as a chunk of its own: nobody who
 * looks sees output later than it was read).
 */
void
session_publish(struct session *s)
{
	if (s->carry_len > 0 && (s->pend == NULL ||
	    s->pend_stream != s->carry_stream || s->pend_len == 0)) {
		/* The pending chunk, if any, holds no byte yet: rebuilt. */
		s->pend = NULL;
		(void)ring_append(s->ring, s->carry, s->carry_len,
		    s->carry_stream);
		s->carry_len = 0;
	}
	if (s->pend == NULL)
		return;
	if (s->pend_len > 0)
		ring_commit(s->ring, s->pend_len, s->pend_stream);
	s->pend = NULL;
	s->pend_len = s->pend_room = 0;
}

/*
 * Publish the pending chunk, full (or too full for the next read of its
 * stream): when it ends inside a UTF-8 sequence
 * (the last read stopped there, and more of the stream is likely to
 * follow), that sequence's first bytes are left to the next chunk of the
 * stream, so that a cut agentd chose splits no character (API.md).
 */
static void
session_publish_full(struct session *s)
{
	size_t	keep;

	keep = proto_utf8_cut(s->pend, s->pend_len);
	if (keep == 0 || s->pend_len - keep > SESSION_CARRY_MAX ||
	    s->carry_len > 0) {
		session_publish(s);
		return;
	}
	s->carry_len = s->pend_len - keep;
	s->carry_stream = s->pend_stream;
	memcpy(s->carry, s->pend + keep, s->carry_len);
	s->pend_len = keep;
	session_publish(s);
}

/* Milliseconds since output was last read (or since the start). */
int64_t
session_quiet_ms(const struct session *s)
{
	return (clock_mono_ms() - s->output_ms);
}

/* A reader starts (on) or stops waiting for new output. */
void
session_watch(struct session *s, int on)
{
	if (on) {
		s->watchers++;
		session_publish(s);
	} else if (s->watchers > 0)
		s->watchers--;
}

/* Close one output fd; the last one closes the output. */
void
session_close_out(struct session_out *o)
{
	struct session	*s = o->s;

	if (o->fd == -1)
		return;
	event_free(o->ev);
	o->ev = NULL;
	if (s->tty) {
		/* The master is also stdin. */
		session_close_stdin(s);
		evbuffer_drain(s->inq, evbuffer_get_length(s->inq));
	}
	close(o->fd);
	o->fd = -1;
	if (--s->nopen == 0) {
		session_publish(s);
		ring_close(s->ring);
		log_debug("%s: session %s output closed", __func__, s->id);
		session_notify(s, SESSION_EV_CLOSED);
	}
}
