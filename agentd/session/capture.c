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
#include "turn.h"
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
static void	session_sort(struct session *, size_t);
static void	session_split(struct session *, size_t);
static size_t	session_hold(struct session_out *, const uint8_t *, size_t);
static void	session_flush_out(struct session_out *);
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
 * slower).  The turn's first read starts the count again (turn.h).
 */
static size_t
session_turn_budget(void)
{
	if (turn_look(session_turn))
		turn_bytes = 0;
	return (turn_bytes < SESSION_TURN_BUDGET ? SESSION_READ_BUDGET :
	    SESSION_READ_MAX);
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
	int64_t		 now = clock_mono_ms();

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
			if (n > 0) {
				s->output_ms = now;
				session_append_aside(o, small +
				    SESSION_CARRY_MAX, (size_t)n);
			}
		} else if ((n = read(o->fd, p, len)) > 0) {
			s->output_ms = now;
			s->pend_len += n;
			session_sort(s, s->pend_len - n);
			if (s->pend_len == s->pend_room)
				session_publish(s);
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
	agentd_stats.output_bytes += done;
	return (closed);
}

/*
 * Where the next read of o goes, and *len how much to read: the free room
 * of the pending chunk if it is o's stream's and there is room for avail
 * bytes (FIONREAD's figure); else a new pending chunk (the old one
 * published) of avail bytes or the join size, whichever is larger, which
 * begins with the bytes of a character o's last chunk held back.  A read
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
	session_publish(s);

	join = ring_chunk_max(s->ring) / SESSION_JOIN_SHARE;
	if (join > SESSION_JOIN_BYTES)
		join = SESSION_JOIN_BYTES;
	want = (avail > join ? avail : join) + o->carry_len;
	if ((s->pend = ring_reserve(s->ring, &want)) == NULL)
		return (NULL);	/* ids used up: ring_append says so too */
	s->pend_len = s->pend_ok = 0;
	s->pend_bad = 0;
	s->pend_room = want;
	s->pend_time = s->read_time;
	s->pend_stream = o->stream;
	/* What the last chunk of this stream held back begins this one. */
	if (o->carry_len > 0) {
		memcpy(s->pend, o->carry, o->carry_len);
		s->pend_len = o->carry_len;
		o->carry_len = 0;
	}
	*len = want - s->pend_len;
	return (s->pend + s->pend_len);
}

/*
 * Keep the pending chunk all UTF-8 or all not, after a read that put its
 * bytes from off on: a chunk that was UTF-8 is cut before its first byte
 * that is not (valid text read before invalid bytes stays text); one that
 * was not is cut before a read that is (valid text read after them stays
 * text).  A read that mixes both in another order stays with the chunk:
 * a read makes two chunks at most.
 */
static void
session_sort(struct session *s, size_t off)
{
	size_t	end, ok;

	end = proto_utf8_cut(s->pend, s->pend_len);
	if (!s->pend_bad) {
		ok = s->pend_ok + proto_utf8_valid(s->pend + s->pend_ok,
		    end - s->pend_ok);
		if (ok == end) {
			s->pend_ok = end;
			return;
		}
		if (ok > 0)
			session_split(s, ok);
		s->pend_bad = 1;
		return;
	}
	if (end > off && proto_utf8_valid(s->pend + off, end - off) ==
	    end - off) {
		session_split(s, off);
		s->pend_bad = 0;
		s->pend_ok = end - off;
	}
}

/*
 * Publish the first at bytes of the pending chunk; the rest begins a new
 * pending chunk of the same room.  The reservation moves (its bytes stay
 * where they are until then: a reserve only makes room in the index).
 */
static void
session_split(struct session *s, size_t at)
{
	size_t	 rest = s->pend_len - at, want = s->pend_room - at;
	uint8_t	*from = s->pend + at;

	(void)ring_commit(s->ring, at, s->pend_stream);
	if ((s->pend = ring_reserve(s->ring, &want)) == NULL) {
		s->pend_len = s->pend_room = 0;	/* ids used up */
		return;
	}
	memmove(s->pend, from, rest);
	s->pend_len = rest;
	s->pend_room = want;
	agentd_stats.output_cuts++;
}

/*
 * Append bytes read aside (data has SESSION_CARRY_MAX bytes of room before
 * it) as a chunk, after what was pending, with what the last chunk of the
 * stream held back before them, and holding back a character cut short at
 * their end in turn.
 */
static void
session_append_aside(struct session_out *o, uint8_t *data, size_t n)
{
	struct session	*s = o->s;

	session_publish(s);
	if (o->carry_len > 0) {
		data -= o->carry_len;
		memcpy(data, o->carry, o->carry_len);
		n += o->carry_len;
		o->carry_len = 0;
	}
	n = session_hold(o, data, n);
	if (n > 0)
		ring_append(s->ring, data, n, o->stream);
}

/*
 * Publish the pending chunk, if any bytes were read into it.  When it is
 * UTF-8 but for a character cut short at its end (a read stopped inside
 * it), those first bytes are held back for the next chunk of the stream,
 * which is likely to bring the rest: at most --utf8-hold ms, and never
 * past the stream's end (API.md).
 */
void
session_publish(struct session *s)
{
	struct session_out	*o;
	size_t			 len;

	if (s->pend == NULL)
		return;
	len = s->pend_len;
	if (!s->pend_bad) {
		o = &s->out[s->pend_stream == RING_STREAM_STDERR];
		len = session_hold(o, s->pend, len);
	}
	if (len > 0)
		ring_commit(s->ring, len, s->pend_stream);
	s->pend = NULL;
	s->pend_len = s->pend_room = 0;
}

/*
 * Hold back the first bytes of a character that p[0..len) (o's next
 * output, UTF-8 before them) ends with, if o has none held and the last
 * read was less than --utf8-hold ago: arm the hold's timer for the rest
 * of that time.  Returns the bytes to publish now.
 */
static size_t
session_hold(struct session_out *o, const uint8_t *p, size_t len)
{
	struct session	*s = o->s;
	size_t		 keep;
	int64_t		 left;

	if (o->carry_len > 0 || o->fd == -1 ||
	    (keep = proto_utf8_cut(p, len)) == len ||
	    (left = s->output_ms + limits.utf8_hold_ms - clock_mono_ms()) <= 0)
		return (len);
	o->carry_len = len - keep;
	memcpy(o->carry, p + keep, o->carry_len);
	o->carry_ms = s->output_ms + limits.utf8_hold_ms;
	if (!evtimer_pending(s->hold_ev, NULL))
		session_timer_add(s->hold_ev, left);
	agentd_stats.output_held++;
	return (keep);
}

/* Publish what o holds back, as a chunk of its own. */
static void
session_flush_out(struct session_out *o)
{
	if (o->carry_len == 0)
		return;
	(void)ring_append(o->s->ring, o->carry, o->carry_len, o->stream);
	o->carry_len = 0;
}

/*
 * Publish the pending chunk and what every stream holds back: the output
 * ended, the session exited, or agentd hands over.
 */
void
session_flush(struct session *s)
{
	session_publish(s);
	session_flush_out(&s->out[0]);
	session_flush_out(&s->out[1]);
}

/*
 * A hold ended: publish what a stream held back past its time (the rest
 * of the character did not come; the bytes go as they are), and wait
 * again for one held since.
 */
void
session_hold_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session		*s = arg;
	struct session_out	*o;
	uint64_t		 before = ring_newest(s->ring);
	int64_t			 now = clock_mono_ms(), left = 0;
	int			 i;

	for (i = 0; i < 2; i++) {
		o = &s->out[i];
		if (o->carry_len == 0)
			continue;
		if (o->carry_ms > now) {
			if (left == 0 || o->carry_ms - now < left)
				left = o->carry_ms - now;
			continue;
		}
		session_flush_out(o);
		agentd_stats.output_hold_expired++;
	}
	if (left > 0)
		session_timer_add(s->hold_ev, left);
	if (ring_newest(s->ring) != before)
		session_notify(s, SESSION_EV_OUTPUT);
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
	/* The stream ended: what it held back waits no longer. */
	if (s->pend != NULL && s->pend_stream == o->stream)
		session_publish(s);
	session_flush_out(o);
	if (--s->nopen == 0) {
		session_publish(s);
		ring_close(s->ring);
		log_debug("%s: session %s output closed", __func__, s->id);
		session_notify(s, SESSION_EV_CLOSED);
	}
}
