/*
 * session_int.h -- the session's insides, shared by session.c and
 * sessionsave.c (an upgrade's hand-over of the table) only.  Nothing else
 * includes this: the rest of agentd goes through session.h.
 */
#ifndef AGENTD_SESSION_INT_H
#define AGENTD_SESSION_INT_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stdint.h>

#include "cgroup.h"
#include "proto.h"
#include "ringbuf.h"

#define SESSION_CARRY_MAX	3	/* bytes of a UTF-8 sequence a full
					   joined chunk hands to the next */

struct event;
struct evbuffer;

/* One output fd of a session: the PTY master, or stdout or stderr. */
struct session_out {
	struct session	*s;
	int		 fd;		/* -1 once closed */
	enum ring_stream stream;
	struct event	*ev;
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
	 * at the session (session_publish()).
	 */
	uint8_t		*pend;		/* the reservation, or NULL */
	size_t		 pend_len;	/* bytes read into it */
	size_t		 pend_room;	/* its size */
	enum ring_stream pend_stream;
	uint8_t		 carry[SESSION_CARRY_MAX]; /* the start of a UTF-8
					   sequence a full chunk left to the
					   next one of its stream */
	size_t		 carry_len;
	enum ring_stream carry_stream;
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
