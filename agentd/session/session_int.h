/*
 * session_int.h -- what the files of a session's life share (session.c,
 * create.c, capture.c, stdin.c, kill.c, reap.c; and sessionsave.c, an
 * upgrade's hand-over of the table): the session's struct, the
 * table and its limits.  Private: nobody else includes it (session.h is the
 * contract).  Made by split.py from session.c's top.
 */
#ifndef AGENTD_SESSION_INT_H
#define AGENTD_SESSION_INT_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"
#include "proto.h"
#include "ringbuf.h"
#include "session.h"

#define SESSION_HUP_POLL_MIN_MS	10	/* first look at a hung-up master */

#define SESSION_JOIN_MS		100	/* ms: reads joined into one chunk
					   are at most this far apart (its
					   time is its first read's) */
#define SESSION_CARRY_MAX	3	/* bytes of a UTF-8 sequence a chunk
					   hands to the next of its stream */

/* One output fd of a session: the PTY master, or stdout or stderr. */
struct session_out {
	struct session	*s;
	int		 fd;		/* -1 once closed */
	enum ring_stream stream;
	struct event	*ev;
	uint8_t		 carry[SESSION_CARRY_MAX]; /* the first bytes of a
					   character a published chunk of the
					   stream left to the next, held */
	size_t		 carry_len;
	int64_t		 carry_ms;	/* monotonic: the hold's end */
};

struct session {
	TAILQ_ENTRY(session) entry;
	char		 id[PROTO_ID_MAX + 1];
	char		**argv;
	char		*cwd;
	char		*user;
	char		*tag;		/* envd's tag (a label), or NULL */
	int		 tty;
	unsigned	 rows, cols;
	unsigned	 start_rows, start_cols; /* the PTY's size at the start */
	int64_t		 start_mono_ms;	/* monotonic: the start, from which
					   chunk times count */
	struct session_size *resizes;	/* the last limits.cast_resizes, a
					   circle from nresizes on */
	size_t		 nresizes;	/* resizes logged */
	uint32_t	 read_time;	/* session_time() of the reads at hand */

	pid_t		 pid;		/* also the group and session id */
	int		 reaped;	/* the status is in; the zombie stays */
	int		 released;	/* reaped: never signal the group */
	int		 status;	/* as from waitpid() */
	int		 exited;	/* state "exited" */
	int		 timed_out;
	int		 terminating;	/* DELETE, TTL or shutdown under way */
	int		 killed;	/* the session got its SIGKILL */
	int64_t		 kill_at_ms;	/* monotonic: the group's SIGKILL */
	int		 remove_on_exit;
	int64_t		 started_ms;	/* wall clock */
	int64_t		 ended_ms;	/* wall clock, -1 while running */

	struct ring	*ring;
	size_t		 ring_bytes;
	size_t		 kept_bytes;	/* argv, cwd, user: session_bytes() */
	uint64_t	 seq;		/* order of creation, from 1 */

	/*
	 * The chunk being joined from reads of one stream while no reader
	 * waits: the ring's pending reservation, published when anyone looks
	 * at the session (session_publish()).  It is all UTF-8 (but for a
	 * character's first bytes at its end) or starts with a byte that is
	 * not (pend_bad): reads are joined only where that stays so.
	 */
	uint8_t		*pend;		/* the reservation, or NULL */
	size_t		 pend_len;	/* bytes read into it */
	size_t		 pend_room;	/* its size */
	size_t		 pend_ok;	/* bytes of it known to be UTF-8 */
	int		 pend_bad;	/* it holds bytes that are not */
	enum ring_stream pend_stream;
	uint32_t	 pend_time;	/* its first read's */
	struct event	*hold_ev;	/* publishes carries held too long */
	int		 watchers;	/* readers waiting for new output */
	int64_t		 output_ms;	/* monotonic: the last output read, or
					   the start */
	struct session_out out[2];	/* tty: out[0] only */
	int		 nopen;		/* output fds still open */
	int		 hup;		/* tty: EIO while the leader lives */
	int64_t		 hup_ms;	/* next look at the hung-up master */
	struct event	*hup_ev;

	int		 in;		/* stdin fd (the master for a tty), or -1 */
	int		 in_eof;	/* pipes: close stdin once the queue drains */
	uint64_t	 stdin_bytes;	/* bytes of stdin accepted so far */
	struct evbuffer	*inq;
	struct event	*in_ev;

	struct event	*timeout_ev;	/* timeout_ms */
	struct event	*kill_ev;	/* SIGKILL after a grace */
	struct event	*drain_ev;	/* the 250 ms exit cap */
	struct event	*ttl_ev;	/* removal of an exited session */

	struct cgroup	*cg;		/* its cgroup, or NULL (process_group);
					   freed once released */
	struct cgroup_usage usage;	/* last read; final once released */
	int64_t		 usage_ms;	/* monotonic: when usage was read */
	int		 oom_killed;	/* its cgroup saw an OOM kill */
	int		 gone;		/* SESSION_EV_GONE was sent */

	void		*user_data;	/* the observer's */
	int		 restored;	/* handed over by an upgrade: its
					   leader is the main thread's child;
					   2: which agentd's reaper reaped */
};

/*
 * A removed session's leader, kept unreaped (alive, or a zombie) so that its
 * pid, which is the group's id, cannot be reused before the group's SIGKILL.
 */
struct session_corpse {
	LIST_ENTRY(session_corpse) entry;
	pid_t		 pid;		/* its leader, or 0: a cgroup alone */
	int		 reaped;	/* the status is in */
	int		 killed;	/* the SIGKILL went out */
	int		 wide;		/* SIGKILL every group of the session */
	int		 fds[2];	/* output kept open, unread, or -1 */
	struct cgroup	*cg;		/* the session's cgroup, or NULL */
	struct event	*kill_ev;
};

extern TAILQ_HEAD(sessions_head, session)	 sessions;
extern LIST_HEAD(corpses_head, session_corpse) corpses;
extern struct event		*sweep_ev;
extern struct event_base	*session_base;	/* the capture loop */
extern struct session_limits	 limits;
extern struct turn		*session_turn;	/* the reads' loop turn */

/* Log a resize (stdin.c; sessionsave.c puts an upgrade's back). */
void	session_log_resize(struct session *, uint32_t time, unsigned rows,
	    unsigned cols);
extern size_t			 nrunning;
extern uint64_t			 ring_total;	/* bytes of every ring */
extern uint64_t			 kept_total;	/* bytes of session_bytes(),
						   every session's and pending */
extern uint64_t			 next_seq;
extern int			 removing_all;	/* in session_remove_all() */

void	session_notify(struct session *, int);
void	session_strv_free(char **);
void	session_read_cb(evutil_socket_t, short, void *);
int	session_capture(struct session_out *, size_t budget);
void	session_pipe_size(struct session *, int);
int	session_pipe_exempt(void);
void	session_publish(struct session *);
void	session_flush(struct session *);
void	session_hold_cb(evutil_socket_t, short, void *);
void	session_close_out(struct session_out *);
void	session_write_cb(evutil_socket_t, short, void *);
void	session_close_stdin(struct session *);
void	session_timeout_cb(evutil_socket_t, short, void *);
void	session_kill_cb(evutil_socket_t, short, void *);
void	session_drain_cb(evutil_socket_t, short, void *);
void	session_ttl_cb(evutil_socket_t, short, void *);
void	session_check_exit(struct session *, int capped);
void	session_timer_add(struct event *, int64_t ms);
int	session_waitid(pid_t, int *status);
void	session_status_in(struct session *, int status);
void	session_hup_cb(evutil_socket_t, short, void *);
void	session_bury(struct session *, int64_t ms);
void	session_corpse_cb(evutil_socket_t, short, void *);
void	session_bury_cgroup(struct cgroup *);
void	session_corpse_free(struct session_corpse *, int reap);
void	session_sweep_soon(int fresh);
void	session_sweep_cb(evutil_socket_t, short, void *);
void	session_usage_read(struct session *, int force);

/*
 * The hand-over of an upgrade (sessionsave.c, which includes this too).
 */
/* A session restored by an upgrade: its timers, as time left (-1: none). */
struct session_timers {
	int64_t		 timeout_ms;	/* timeout_ms's SIGTERM */
	int64_t		 kill_ms;	/* the SIGKILL after a grace */
	int64_t		 ttl_ms;	/* an exited session's removal */
	int64_t		 drain_ms;	/* the exit cap */
};

/*
 * List a session restored by an upgrade (sessionsave.c): its fds, ring,
 * argv, cwd, user and state filled in, its events made here; the timers
 * are armed with the time they had left.  Counts it and tells the
 * observer SESSION_EV_CREATED.
 */
void	 session_insert(struct session *, const struct session_timers *);
/* The time left on each timer of s (-1: not armed). */
void	 session_timers_left(struct session *, struct session_timers *);
/* Before a hand-over: every pending chunk published, every corpse's
   SIGKILL sent now. */
void	 session_upgrade_prepare(void);

#endif /* AGENTD_SESSION_INT_H */
