/*
 * session.h -- the session table: one command in its own process group, its
 * output captured into a ring, its stdin queue, its timers and its exit.
 *
 * A session is "exited" once its process's status is in and its output is
 * drained (every output fd at EOF, or EIO on a PTY master: taken only once
 * the leader's status is in, since closing the master before would hang the
 * terminal up and SIGHUP a leader that merely closed fds 0-2), or
 * SESSION_DRAIN_CAP_MS after the status when descendants hold the output
 * open; in that case whatever is readable is captured first, and later
 * output is still captured until the output closes (eof).
 *
 * With containment "cgroup" (cgroup.h) each session runs in a cgroup of its
 * own: every signal of a DELETE, a timeout, the TTL or the shutdown goes to
 * each of its processes, SIGKILL through cgroup.kill, and its leader is
 * kept until the cgroup is empty.
 *
 * A session's leader stays unreaped (alive, then a zombie) for as long as
 * agentd may signal its process group, whose id is the leader's pid: until
 * the session is removed, or until no live process is left in its session
 * (found by a sweep of /proc after each reap).  So kill(-pgid) can never
 * reach a group that took over a reused pid.  Leaders are forked by the
 * spawner's threads and collected by session_collect(); see session_init().
 *
 * Everything here runs on the event loop thread but the spawns (spawner.h).
 */
#ifndef AGENTD_SESSION_H
#define AGENTD_SESSION_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define SESSION_DRAIN_CAP_MS	250	/* exited at most this long after the status */
#define SESSION_KILL_AFTER_MS	2000	/* timeout_ms: SIGTERM, then SIGKILL after this */
#define SESSION_READ_MAX	65536	/* bytes of one read(2) of output: of a chunk too */
#define SESSION_READ_BUDGET	(256 * 1024) /* bytes read per fd per loop turn */
#define SESSION_TURN_BUDGET	(256 * 1024) /* bytes read from all fds in one
						loop turn, beyond which each
						fd gets SESSION_READ_MAX */
#define SESSION_WINDOW_CHUNKS	4096	/* chunks in one output window at most */
#define SESSION_PARENTS_MAX	64	/* ancestors session_of_pid() looks at */

struct session;
struct ring;
struct event_base;

/* What happened to a session, for its observer. */
#define SESSION_EV_OUTPUT	0x1	/* new chunks */
#define SESSION_EV_EXITED	0x2	/* state became exited */
#define SESSION_EV_CLOSED	0x4	/* output closed (eof possible) */
#define SESSION_EV_REMOVED	0x8	/* about to be freed */
#define SESSION_EV_CREATED	0x10	/* started (session_create()) */
#define SESSION_EV_GONE		0x20	/* exited, and no process of it is
					   left: its leader reaped, its cgroup
					   empty and removed */

/* Called on each event; the session is valid during the call. */
typedef void (*session_observer_fn)(struct session *, int events);

/* Limits taken from the configuration. */
struct session_limits {
	uint64_t	 max_sessions;		/* running */
	uint64_t	 max_total_ring_bytes;	/* all sessions' rings */
	uint64_t	 stdin_buffer;		/* bytes queued per session */
	uint64_t	 pipe_bytes;		/* output pipes' buffer, 0: keep */
	int64_t		 exited_ttl_ms;
	int64_t		 utf8_hold_ms;		/* a character's first bytes
						   wait for the rest, 0: no */
	uint64_t	 memory_bytes;		/* default limits of a session's */
	uint64_t	 pids;			/* cgroup (cgroup.h); 0: none */
	uint64_t	 cpu_percent;
	int		 oom_score_adj;		/* of each session's process */
	const char	*workdir;		/* default cwd, or NULL */
	char *const	*env;			/* "K=V" under each request's env, or NULL */
	unsigned	 spawn_threads;		/* spawns running at once */
	int64_t		 spawn_timeout_ms;	/* a create's spawn at most */
	uint64_t	 max_session_bytes;	/* argv, cwd, user of all kept */
	int		 profile;		/* PROTO_PROFILE_* of creates that
						   name none (--profile) */
	uint64_t	 cast_resizes;		/* resizes a session's log keeps
						   (the last; --cast-resizes) */
};

/* A PTY's size from a time on (ms since the session's start). */
struct session_size {
	uint32_t	 time;
	unsigned	 rows, cols;
};

/*
 * Set the loop (capture, timers), the limits and the observer, and start
 * the spawner's threads (once, before any session).
 */
void	 session_init(struct event_base *, const struct session_limits *,
	    session_observer_fn);

/*
 * A create ended, on the loop: s the new session (err NULL), or s NULL and
 * err: 422 spawn_failed, 504 spawn_timeout (--spawn-timeout), 503
 * shutting_down.
 */
typedef void (*session_create_fn)(struct session *s,
	    const struct proto_err *err, void *arg);

/*
 * Start a session: the id and the slot are reserved at once (a second
 * create of the id is 409 while it starts; GET or DELETE of it 404 until
 * fn), the spawn runs on a spawner thread, and fn(arg) is called once it
 * ended, never from within this call.  Returns 0 when the spawn is under
 * way; or -1 with err filled and fn never called: 409 session_exists (*out
 * is the existing session, or NULL while it starts), 429
 * too_many_sessions/ring_budget_exceeded (starting ones count), 422
 * spawn_failed (the user), 503 shutting_down.
 */
int	 session_create(const struct proto_create *, session_create_fn fn,
	    void *arg, struct session **out, struct proto_err *err);
/* Give up the pending create of arg (its client left): fn is not called,
   a child that still execs is killed and reaped. */
void	 session_create_cancel(void *arg);
/* Shutdown: every pending create's fn gets 503 shutting_down. */
void	 session_create_cancel_all(void);
/* Creates whose spawn is under way. */
size_t	 session_count_starting(void);

struct session	*session_find(const char *id);
/*
 * The session whose processes include pid: by the session id (setsid) of
 * pid or of its nearest ancestor that has a session's, up to
 * SESSION_PARENTS_MAX parents; NULL when none (agentd's own, a process
 * reparented after its parent ended).  Reads /proc/PID/stat per step.
 * With a cgroup per session, by /proc/PID/cgroup instead: the exact answer,
 * a reparented daemon too.
 */
struct session	*session_of_pid(pid_t pid);
/* Iterate: the first session, then the next one (NULL at the end). */
struct session	*session_first(void);
struct session	*session_next(struct session *);

/* Running sessions, all sessions, bytes of all rings. */
size_t	 session_count_running(void);
/* Leaders that ended but are kept unreaped (sessions' and removed ones'). */
size_t	 session_count_unreaped(void);
size_t	 session_count(void);
uint64_t session_ring_bytes_total(void);
/* Bytes of argv, cwd and user of every session kept and starting. */
uint64_t session_bytes_total(void);
/* --pipe-bytes as applied (0 when agentd lacks the privilege to exceed the
   per-user pipe budget). */
uint64_t session_pipe_bytes(void);

const char	*session_id(const struct session *);
/* Its place in the order of creation (from 1; the table's order). */
uint64_t	 session_seq(const struct session *);
/* The ring, with every byte captured so far published in it. */
struct ring	*session_ring(struct session *);
int	 session_exited(const struct session *);
/*
 * Exited, and none of its processes is left (SESSION_EV_GONE): with a
 * cgroup, the cgroup was empty; else no live process was in its session.
 * Its leader is reaped then, so its pid names no process.
 */
int	 session_gone(const struct session *);
/* Output closed and every chunk published: nothing more will come. */
int	 session_output_closed(const struct session *);
/* Label the session with envd's tag (copied; NULL: none). */
void	 session_set_tag(struct session *, const char *tag);
/* The observer's per-session slot (the waiters of the API layer). */
void	**session_user(struct session *);

/*
 * Fill a view for rendering (publishing what was captured, as
 * session_ring() does); valid until the session changes.
 */
void	 session_view(struct session *, struct proto_session *);
/*
 * A reader starts (on 1) or stops (on 0) waiting for new output: while one
 * waits, each read of output is published at once instead of being joined
 * with the next ones.
 */
void	 session_watch(struct session *, int on);
/* Milliseconds since the session's output was last read (or its start). */
int64_t	 session_quiet_ms(const struct session *);

/*
 * Queue input.  Returns the bytes accepted (all of len) or -1 with err:
 * 409 session_exited/stdin_closed, 429 stdin_backpressure (nothing queued).
 */
ssize_t	 session_write_stdin(struct session *, const void *, size_t len,
	    int eof, struct proto_err *);
/*
 * The same at the client's offset (API.md, exactly-once stdin): offset
 * -1 is session_write_stdin(); an offset past the bytes accepted so far is
 * 409 stdin_offset_mismatch; a write accepted whole before returns 0 with
 * *dup set (its eof too); one that overlaps the count queues only the
 * bytes after it and returns how many.
 */
ssize_t	 session_write_stdin_at(struct session *, const void *, size_t len,
	    int eof, int64_t offset, int *dup, struct proto_err *);
/* Bytes of stdin accepted so far (the session object's stdin_bytes). */
uint64_t session_stdin_bytes(const struct session *);
int	 session_resize(struct session *, unsigned rows, unsigned cols,
	    struct proto_err *);
/*
 * Milliseconds since the session's start (monotonic; UINT32_MAX after 49
 * days): the times of its ring's chunks (ring_chunk's time) count so.
 */
uint32_t session_time(const struct session *);
/* Its start, wall clock ms, and its PTY's size then (0 0 for pipes). */
int64_t	 session_start(const struct session *, unsigned *rows,
	    unsigned *cols);
/*
 * The i-th oldest resize the log holds (the last --cast-resizes): 0, or -1
 * past the end.
 */
int	 session_resize_at(const struct session *, size_t i,
	    struct session_size *);
/*
 * Send signo to the session's process group (PROTO_TARGET_GROUP), or to its
 * PTY's foreground process group (PROTO_TARGET_FOREGROUND; 409 not_a_tty
 * without a PTY, 409 no_foreground when the terminal names no group of the
 * session's).  409 session_exited once exited.
 */
int	 session_signal(struct session *, int signo, int target,
	    struct proto_err *);

/*
 * Send signo to every process of the session: each of its cgroup's, else
 * each of its session id's (the groups of its jobs too), as a DELETE's
 * signals go.  409 session_exited once exited.
 */
int	 session_signal_all_of(struct session *, int signo, struct proto_err *);

/*
 * Begin a DELETE or a removal: SIGHUP (a running tty) and SIGTERM to the
 * group, SIGKILL after grace_ms.  A running session: the observer sees
 * SESSION_EV_EXITED when it is over; then call session_remove().  An exited
 * one may be removed at once: its leftovers still get the rest of the grace.
 */
void	 session_terminate(struct session *, int64_t grace_ms);
/*
 * Remove the session right after the observer has seen it exit: a DELETE
 * whose client went away, or one answered from the observer.  Call it only
 * before the session exits, or from the observer during SESSION_EV_EXITED
 * or SESSION_EV_GONE.
 */
void	 session_set_remove_on_exit(struct session *);
/*
 * Close everything and free the session.  What remains of its group gets
 * SIGKILL at the end of a session_terminate()'s grace, else now; the leader
 * is reaped after that.
 */
void	 session_remove(struct session *);

/*
 * Called after each SIGCHLD: collect the status of the leaders that ended
 * (waitid WNOWAIT: they stay zombies) and release those whose session is
 * empty.  agentd's own reaping must use waitpid(-1, ..., __WNOTHREAD).
 */
void	 session_collect(void);
/*
 * The status of the leader pid is in (collected by session_collect(), or
 * given by a harness with fake processes); 0 when pid is a session's.
 */
int	 session_reaped(pid_t pid, int status);

/*
 * After an upgrade (sessionsave.h) a restored session's leader is the main
 * thread's child: agentd's reaper hands its status here.  0 when pid was
 * one.  Its pid may be reused from now on: without a cgroup the session
 * is released at once (its group never signalled again); with one, the
 * cgroup still reaches what is left, and the sweep releases it once empty.
 */
int	 session_adopted_reaped(pid_t pid, int status);

/*
 * Shutdown: send sig to the group of every session that may still have
 * processes (not reaped yet, or output held open), or of the tty ones only.
 */
void	 session_signal_all(int sig, int tty_only);
/* Remove every session and reap every leader (after shutdown). */
void	 session_remove_all(void);

#endif /* AGENTD_SESSION_H */
