/*
 * ports.h -- the sandbox's listening sockets: TCP sockets in LISTEN and
 * bound UDP sockets, IPv4 and IPv6, each with the pid that holds it and the
 * session that process belongs to.
 *
 * The list is read from the kernel with sock_diag netlink (four dumps:
 * tcp, tcp6, udp, udp6), not from /proc/net/tcp: the kernel filters by
 * state and hands back binary records, with no text to format and parse.
 * A socket's pid comes from a scan of /proc/PID/fd, done only for inodes
 * the previous list did not have (the previous list is the cache); its
 * session from session_of_pid().  The scan is bounded: each refresh looks
 * at PORTS_SCAN_BUDGET directory entries and links (PORTS_SCAN_US) at
 * most, and the walk
 * of /proc resumes where the last refresh left it, so that a sandbox with
 * millions of fds never holds the loop; a socket no process holds (one
 * passed with SCM_RIGHTS and closed) is given up after one whole walk.
 *
 * ports_refresh() reads it now; ports_watch() keeps it fresh on a timer of
 * --ports-interval while someone waits, ports_feed() on a slower one for
 * the event feed.  Each refresh posts the sockets that opened or closed
 * since the last one (events.h: port.opened, port.closed, with port,
 * address, protocol, pid and the session); the first one is the baseline
 * and posts nothing.  A socket's port.opened waits until its pid is looked
 * up; at most PORTS_EVENTS_MAX events a refresh and PORTS_EVENTS_RATE a
 * second are posted: the openings past them wait for a later refresh, the
 * closings past them are not posted (counted), and one closing whose
 * opening was never posted is not posted either.  So churn never fills the
 * feed faster than PORTS_EVENTS_RATE a second.  The first read, the
 * baseline, is taken when first needed, not at agentd's start (ports_api.h
 * says when).
 *
 * The parsing and the diff are pure functions, for the unit tests.
 * Event loop thread only.
 */
#ifndef AGENTD_PORTS_H
#define AGENTD_PORTS_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define PORTS_ADDR_MAX		46	/* INET6_ADDRSTRLEN */
#define PORTS_RECV_BYTES	32768	/* bytes of one netlink read */
#define PORTS_SCAN_BUDGET	4096	/* fd entries and links looked at by
					   one refresh's walk of /proc */
#define PORTS_KNOWN_BUDGET	2048	/* and in the known holders first */
#define PORTS_SCAN_US		5000	/* and one refresh's look at most */
#define PORTS_EVENTS_MAX	32	/* port events of one refresh */
#define PORTS_EVENTS_RATE	64	/* port events a second */

struct event_base;
struct proto_buf;

/* Protocols, in the order of their names. */
#define PORTS_TCP	0
#define PORTS_TCP6	1
#define PORTS_UDP	2
#define PORTS_UDP6	3

/* One listening or bound socket. */
struct ports_entry {
	uint16_t	 port;
	int		 proto;			/* PORTS_* */
	char		 address[PORTS_ADDR_MAX]; /* "0.0.0.0", "::1", ... */
	uint64_t	 inode;
	pid_t		 pid;			/* 0: no process of ours holds it */
	char		 session[PROTO_ID_MAX + 1]; /* "": none */
	int		 resolved;		/* pid and session looked up */
	uint64_t	 walk;			/* the walk of /proc that must end
						   before it is given up; 0: not
						   looked for yet */
	int		 posted;		/* port.opened posted (or the
						   baseline's) */
};

/* A list of sockets, in ports_cmp() order once sorted. */
struct ports_set {
	struct ports_entry	*e;
	size_t			 n;
	size_t			 cap;
};

/* "tcp", "tcp6", "udp", "udp6". */
const char	*ports_proto_name(int proto);

/*
 * Append the sockets of one sock_diag answer buf[len] (netlink messages of
 * a dump of protocol udp ? UDP : TCP) to set: TCP sockets in LISTEN, UDP
 * sockets unconnected with a local port.  Returns 1 at the dump's end
 * (NLMSG_DONE), 0 when more messages are to come, -errno for an
 * NLMSG_ERROR, -EBADMSG for a truncated or malformed message.  Messages
 * whose sequence number is not seq are skipped (a stale dump's).
 */
int	 ports_parse(const void *buf, size_t len, uint32_t seq, int udp,
	    struct ports_set *set);

/* Order: port, protocol, address, inode (a total order: inodes differ). */
int	 ports_cmp(const struct ports_entry *, const struct ports_entry *);
/* Sort a set in ports_cmp() order. */
void	 ports_sort(struct ports_set *);

/*
 * Walk two sorted sets: fn(opened = 1, e, arg) for each entry of now not in
 * before, fn(0, e, arg) for each of before not in now; and fn(-1, e, arg)
 * for each entry of now also in before, with e the one of before (so that
 * a caller can carry what it knew).  Entries are matched by ports_cmp().
 */
void	 ports_diff(const struct ports_set *before, const struct ports_set *now,
	    void (*fn)(int opened, struct ports_entry *e, size_t i, void *arg),
	    void *arg);

void	 ports_set_free(struct ports_set *);

/*
 * Open the netlink socket and keep base for the timer; interval_ms is
 * --ports-interval; load_modules (PID 1): when sock_diag answers ENOENT,
 * load its modules (kmod.h) and ask again, once.  Nothing is read yet (the
 * first read is the baseline).  Returns 0 or -errno (no netlink: then every
 * refresh fails the same way, and GET /v1/ports says so).
 */
int	 ports_init(struct event_base *, int64_t interval_ms,
	    int load_modules);
/* Close and free everything. */
void	 ports_free(void);

/*
 * Read the list now, look up the pids and sessions of new sockets, and post
 * the sockets that opened or closed since the last refresh; then call the
 * waiters' callback (ports_set_changed()).  Returns 0 or -errno (the list
 * is then unchanged).
 */
int	 ports_refresh(void);
/*
 * A read of the sockets only (four dumps, tens of microseconds), their pids
 * looked up by the next refresh: the baseline, so that it does not wait
 * for a look through every process's fds.  Returns 0 or -errno.
 */
int	 ports_baseline(void);
/*
 * ports_baseline() if no list was read yet (the first read is the
 * baseline, whichever it is), else nothing.  Returns 0 or -errno.
 */
int	 ports_prime(void);
/* The list of the last refresh (valid until the next one). */
const struct ports_set *ports_current(void);
/* Whether the entry's session still exists (else render null). */
const char	*ports_session(const struct ports_entry *);

/*
 * A reader starts (on 1) or stops (on 0) needing a fresh list: while one
 * does, the list is refreshed every interval_ms.
 */
void	 ports_watch(int on);
/*
 * Refresh every interval_ms while nobody watches, so that the event feed
 * hears of ports opening and closing (0: only when asked or watched).
 */
void	 ports_feed(int64_t interval_ms);
/* Called after each successful refresh (the API's waiters), or NULL. */
void	 ports_set_changed(void (*fn)(void));

/* Append "agentd_ports..." lines for GET /metrics. */
void	 ports_metrics(struct proto_buf *);

#endif /* AGENTD_PORTS_H */
