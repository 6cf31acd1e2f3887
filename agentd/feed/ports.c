/*
 * ports.c -- the listening sockets, read with sock_diag netlink, their pids
 * from /proc/PID/fd, their sessions from session.h; kept fresh on a timer
 * while watched, posting port.opened and port.closed.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "events.h"
#include "kmod.h"
#include "log.h"
#include "ports.h"
#include "proto.h"
#include "session.h"
#include "util.h"

#define PORTS_TCP_LISTEN	10	/* TCP_LISTEN of the kernel's states */
#define PORTS_TCP_CLOSE		7	/* TCP_CLOSE: an unconnected UDP socket */
#define PORTS_KNOWN_PIDS	64	/* holders of sockets looked at first */

static int	ports_dump(int family, int proto, struct ports_set *);
static int	ports_dump_all(struct ports_set *);
static int	ports_read(int);
static void	ports_carry(int, struct ports_entry *, size_t, void *);
static void	ports_post(int, struct ports_entry *, size_t, void *);
static void	ports_resolve(struct ports_set *);
struct ports_want;
static void	ports_scan_fds(pid_t, struct ports_set *, struct ports_want *,
		    size_t, size_t *left, size_t *budget);
static void	ports_match(pid_t, const char *, ssize_t, struct ports_set *,
		    struct ports_want *, size_t, size_t *);
static void	ports_walk(struct ports_set *, struct ports_want *, size_t,
		    size_t *);
static void	ports_walk_stop(void);
static int	ports_may_post(void);
static int	ports_spend(size_t *);
static int	ports_want_cmp(const void *, const void *);
static int	ports_pid_in(const pid_t *, size_t, pid_t);
static int	ports_fd_cmp(const void *, const void *);
static void	ports_timer(evutil_socket_t, short, void *);
static void	ports_arm(void);
static int	ports_qcmp(const void *, const void *);
static int64_t	ports_now_us(void);

static struct event		*ports_ev;
static int64_t			 ports_interval_ms;	/* --ports-interval */
static int64_t			 ports_feed_ms;		/* --ports-feed-interval */
static int			 ports_primed;		/* a list was read */
static int			 ports_fd = -1;
static int			 ports_init_error;	/* -errno of ports_init() */
static uint32_t			 ports_seq;
static struct ports_set		 ports_now;
static int			 ports_watchers;
static void			(*ports_changed)(void);
static uint64_t			 ports_refreshes;	/* for /metrics */
static uint64_t			 ports_refresh_us;	/* all of them */
static uint64_t			 ports_fd_scans;	/* /proc scans */
static int			 ports_load_modules;	/* PID 1: may load
							   sock_diag's modules */
static unsigned			 ports_missing;		/* dumps that failed */
static int			*ports_fds;		/* a scan's fd numbers */
static size_t			 ports_fds_cap;
static DIR			*ports_walk_proc;	/* the walk: /proc, */
static DIR			*ports_walk_fd;		/* the fds of */
static pid_t			 ports_walk_pid;	/* this process */
static uint64_t			 ports_walks;		/* walks started */
static int64_t			 ports_deadline;	/* a refresh's look ends */
static unsigned			 ports_refresh_n;	/* events this refresh */
static int64_t			 ports_rate_start;	/* this second's start */
static unsigned			 ports_rate_n;		/* and its events */
static uint64_t			 ports_events_dropped;	/* closings not posted */

static const char *const ports_names[] = { "tcp", "tcp6", "udp", "udp6" };

/* The monotonic clock in microseconds (the refresh's cost). */
static int64_t
ports_now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

/* The name of a protocol. */
const char *
ports_proto_name(int proto)
{
	return (proto >= 0 && proto <= PORTS_UDP6 ? ports_names[proto] : "?");
}

/* Append one entry, growing the set. */
static struct ports_entry *
ports_add(struct ports_set *set)
{
	if (set->n == set->cap) {
		set->cap = set->cap == 0 ? 64 : set->cap * 2;
		set->e = xrealloc(set->e, set->cap * sizeof *set->e);
	}
	memset(&set->e[set->n], 0, sizeof *set->e);
	return (&set->e[set->n++]);
}

/* Parse one sock_diag answer into set (see ports.h). */
int
ports_parse(const void *buf, size_t len, uint32_t seq, int udp,
    struct ports_set *set)
{
	const struct nlmsghdr		*h;
	const struct inet_diag_msg	*m;
	const struct nlmsgerr		*err;
	struct ports_entry		*e;
	long				 left = (long)len; /* signed: NLMSG_NEXT
							      may pass the end */
	int				 v6;

	for (h = buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
		if (h->nlmsg_seq != seq)
			continue;
		if (h->nlmsg_type == NLMSG_DONE)
			return (1);
		if (h->nlmsg_type == NLMSG_ERROR) {
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof *err))
				return (-EBADMSG);
			err = NLMSG_DATA(h);
			return (err->error < 0 ? err->error : -EPROTO);
		}
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
			continue;
		if (h->nlmsg_len < NLMSG_LENGTH(sizeof *m))
			return (-EBADMSG);
		m = NLMSG_DATA(h);
		if (m->idiag_family != AF_INET && m->idiag_family != AF_INET6)
			continue;
		if (udp ? m->idiag_state != PORTS_TCP_CLOSE ||
		    m->id.idiag_sport == 0 : m->idiag_state != PORTS_TCP_LISTEN)
			continue;
		v6 = m->idiag_family == AF_INET6;
		e = ports_add(set);
		e->proto = (udp ? PORTS_UDP : PORTS_TCP) + v6;
		e->port = ntohs(m->id.idiag_sport);
		e->inode = m->idiag_inode;
		if (inet_ntop(m->idiag_family, m->id.idiag_src, e->address,
		    sizeof e->address) == NULL)
			return (-EBADMSG);
	}
	/* A partial message at the end: the kernel never splits one. */
	return (left > 0 ? -EBADMSG : 0);
}

/* Compare two entries: port, protocol, address, inode. */
int
ports_cmp(const struct ports_entry *a, const struct ports_entry *b)
{
	int	c;

	if (a->port != b->port)
		return (a->port < b->port ? -1 : 1);
	if (a->proto != b->proto)
		return (a->proto < b->proto ? -1 : 1);
	if ((c = strcmp(a->address, b->address)) != 0)
		return (c);
	if (a->inode != b->inode)
		return (a->inode < b->inode ? -1 : 1);
	return (0);
}

/* qsort's ports_cmp(). */
static int
ports_qcmp(const void *a, const void *b)
{
	return (ports_cmp(a, b));
}

/* Sort a set. */
void
ports_sort(struct ports_set *set)
{
	if (set->n > 1)
		qsort(set->e, set->n, sizeof *set->e, ports_qcmp);
}

/* Walk two sorted sets for what opened, closed and stayed (see ports.h). */
void
ports_diff(const struct ports_set *before, const struct ports_set *now,
    void (*fn)(int, struct ports_entry *, size_t, void *), void *arg)
{
	size_t	i = 0, j = 0;
	int	c;

	while (i < before->n || j < now->n) {
		if (i == before->n)
			c = 1;
		else if (j == now->n)
			c = -1;
		else
			c = ports_cmp(&before->e[i], &now->e[j]);
		if (c < 0) {
			fn(0, &before->e[i], i, arg);
			i++;
		} else if (c > 0) {
			fn(1, &now->e[j], j, arg);
			j++;
		} else {
			fn(-1, &before->e[i], j, arg);
			i++;
			j++;
		}
	}
}

/* Free a set's memory. */
void
ports_set_free(struct ports_set *set)
{
	free(set->e);
	memset(set, 0, sizeof *set);
}

/* Open the netlink socket. */
int
ports_init(struct event_base *base, int64_t interval_ms, int load_modules)
{
	struct sockaddr_nl	sa;
	struct timeval		tv = { 1, 0 };

	ports_load_modules = load_modules;
	ports_interval_ms = interval_ms > 0 ? interval_ms : 1;
	if ((ports_ev = evtimer_new(base, ports_timer, NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	ports_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
	    NETLINK_SOCK_DIAG);
	if (ports_fd == -1) {
		ports_init_error = -errno;
		log_warn("%s: sock_diag netlink: %s", __func__,
		    strerror(errno));
		return (ports_init_error);
	}
	/* The kernel answers a dump at once; never hang the loop on it. */
	setsockopt(ports_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	memset(&sa, 0, sizeof sa);
	sa.nl_family = AF_NETLINK;
	if (bind(ports_fd, (struct sockaddr *)&sa, sizeof sa) == -1) {
		ports_init_error = -errno;
		log_warn("%s: bind netlink: %s", __func__, strerror(errno));
		close(ports_fd);
		ports_fd = -1;
	}
	return (ports_init_error);
}

/* Close the socket and free the list. */
void
ports_free(void)
{
	if (ports_fd != -1)
		close(ports_fd);
	ports_fd = -1;
	if (ports_ev != NULL)
		event_free(ports_ev);
	ports_ev = NULL;
	ports_set_free(&ports_now);
	ports_walk_stop();
	free(ports_fds);
	ports_fds = NULL;
	ports_fds_cap = 0;
	ports_watchers = 0;
	ports_feed_ms = 0;
	ports_primed = 0;
}

/* One sock_diag dump of family and protocol into set.  0 or -errno. */
static int
ports_dump(int family, int proto, struct ports_set *set)
{
	static char	buf[PORTS_RECV_BYTES] __attribute__((aligned(8)));
	struct {
		struct nlmsghdr		nlh;
		struct inet_diag_req_v2	req;
	} rq;
	struct sockaddr_nl	sa;
	ssize_t			n;
	int			r;

	memset(&rq, 0, sizeof rq);
	rq.nlh.nlmsg_len = sizeof rq;
	rq.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	rq.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	rq.nlh.nlmsg_seq = ++ports_seq;
	rq.req.sdiag_family = family;
	rq.req.sdiag_protocol = proto;
	rq.req.idiag_states = proto == IPPROTO_TCP ? 1u << PORTS_TCP_LISTEN :
	    1u << PORTS_TCP_CLOSE;
	memset(&sa, 0, sizeof sa);
	sa.nl_family = AF_NETLINK;
	if (sendto(ports_fd, &rq, sizeof rq, 0, (struct sockaddr *)&sa,
	    sizeof sa) == -1)
		return (-errno);
	for (;;) {
		/* MSG_TRUNC: the whole length, so a cut message is seen. */
		n = recv(ports_fd, buf, sizeof buf, MSG_TRUNC);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return (-errno);
		if (n == 0)
			return (-EPROTO);
		if ((size_t)n > sizeof buf)
			return (-EMSGSIZE);
		r = ports_parse(buf, (size_t)n, ports_seq,
		    proto == IPPROTO_UDP, set);
		if (r != 0)
			return (r < 0 ? r : 0);
	}
}

/* ports_diff() callback: carry what the last refresh knew of a socket. */
static void
ports_carry(int opened, struct ports_entry *e, size_t j, void *arg)
{
	struct ports_set	*now = arg;

	if (opened != -1)
		return;
	now->e[j].pid = e->pid;
	memcpy(now->e[j].session, e->session, sizeof e->session);
	now->e[j].resolved = e->resolved;
	now->e[j].walk = e->walk;
	now->e[j].posted = e->posted;
}

/* A socket whose pid is sought: its inode and its place in the set. */
struct ports_want {
	uint64_t	 inode;
	size_t		 i;
};

/* Compare two wants by inode. */
static int
ports_want_cmp(const void *a, const void *b)
{
	const struct ports_want	*x = a, *y = b;

	return (x->inode < y->inode ? -1 : x->inode > y->inode);
}

/* Whether pid is among pids[n]. */
static int
ports_pid_in(const pid_t *pids, size_t n, pid_t pid)
{
	size_t	i;

	for (i = 0; i < n && pids[i] != pid; i++)
		;
	return (i < n);
}

/* Compare two fd numbers, the larger first. */
static int
ports_fd_cmp(const void *a, const void *b)
{
	int	x = *(const int *)a, y = *(const int *)b;

	return (x > y ? -1 : x < y);
}

/*
 * Count one entry or link off *budget; none is left once the refresh's
 * look has taken PORTS_SCAN_US (looked at every 32, when slow /proc reads
 * on a slow machine would take long before the count runs out).
 */
static int
ports_spend(size_t *budget)
{
	if (*budget == 0)
		return (0);
	if (--*budget % 32 == 0 && ports_now_us() > ports_deadline)
		*budget = 0;
	return (1);
}

/* Set the pid of the socket of a link if it is sought; count it off. */
static void
ports_match(pid_t pid, const char *link, ssize_t len, struct ports_set *set,
    struct ports_want *want, size_t n, size_t *left)
{
	struct ports_want	 key, *w;
	struct ports_entry	*e;

	if (len < 9 || memcmp(link, "socket:[", 8) != 0)
		return;
	key.inode = strtoull(link + 8, NULL, 10);
	if ((w = bsearch(&key, want, n, sizeof *want, ports_want_cmp)) == NULL)
		return;
	e = &set->e[w->i];
	if (e->pid == 0) {
		e->pid = pid;
		(*left)--;
	}
}

/*
 * Look through pid's fds for the sockets sought (want[n], sorted by inode);
 * set the pid of those found and count them off *left.  The newest fds
 * (the largest numbers, mostly) first: a new socket is found at once.
 * Each entry read and each link costs one of *budget; a process with more
 * fds than that is left to the walk (ports_walk()).
 */
static void
ports_scan_fds(pid_t pid, struct ports_set *set, struct ports_want *want,
    size_t n, size_t *left, size_t *budget)
{
	char			 path[64], link[64];
	struct dirent		*d;
	size_t			 nfds = 0, i;
	ssize_t			 len;
	DIR			*dir;
	int			 dfd;

	snprintf(path, sizeof path, "/proc/%ld/fd", (long)pid);
	if ((dir = opendir(path)) == NULL)
		return;		/* gone, or not ours to look at */
	while (ports_spend(budget) && (d = readdir(dir)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		if (nfds == ports_fds_cap) {
			ports_fds_cap = ports_fds_cap == 0 ? 256 : ports_fds_cap * 2;
			ports_fds = xrealloc(ports_fds, ports_fds_cap * sizeof *ports_fds);
		}
		ports_fds[nfds++] = atoi(d->d_name);
	}
	qsort(ports_fds, nfds, sizeof *ports_fds, ports_fd_cmp);
	dfd = dirfd(dir);
	for (i = 0; i < nfds && *left > 0 && ports_spend(budget); i++) {
		snprintf(path, sizeof path, "%d", ports_fds[i]);
		len = readlinkat(dfd, path, link, sizeof link - 1);
		if (len > 0)
			link[len] = '\0';
		ports_match(pid, link, len, set, want, n, left);
	}
	closedir(dir);
}

/* Stop the walk of /proc where it is (nothing is sought, or the end). */
static void
ports_walk_stop(void)
{
	if (ports_walk_fd != NULL)
		closedir(ports_walk_fd);
	ports_walk_fd = NULL;
	if (ports_walk_proc != NULL)
		closedir(ports_walk_proc);
	ports_walk_proc = NULL;
}

/*
 * Walk every process's fds for the sockets sought, resuming where the last
 * refresh stopped, PORTS_SCAN_BUDGET entries and links at most.  When a
 * walk ends, the sockets that were sought from its start and not found
 * are given up (pid 0: no process of this pid namespace holds them).
 */
static void
ports_walk(struct ports_set *set, struct ports_want *want, size_t n,
    size_t *left)
{
	struct ports_entry	*e;
	struct dirent		*d;
	size_t			 budget = PORTS_SCAN_BUDGET, k;
	char			 path[64], link[64], *end;
	ssize_t			 len;
	long			 pid;

	while (*left > 0 && budget > 0) {
		if (ports_walk_fd != NULL) {
			if (!ports_spend(&budget))
				break;
			if ((d = readdir(ports_walk_fd)) == NULL) {
				closedir(ports_walk_fd);
				ports_walk_fd = NULL;
				continue;
			}
			if (d->d_name[0] == '.')
				continue;
			(void)ports_spend(&budget);
			len = readlinkat(dirfd(ports_walk_fd), d->d_name, link,
			    sizeof link - 1);
			if (len > 0)
				link[len] = '\0';
			ports_match(ports_walk_pid, link, len, set, want, n,
			    left);
			continue;
		}
		if (ports_walk_proc == NULL) {
			if ((ports_walk_proc = opendir("/proc")) == NULL)
				return;
			ports_walks++;
			ports_fd_scans++;
		}
		if (!ports_spend(&budget))
			break;
		if ((d = readdir(ports_walk_proc)) == NULL) {
			ports_walk_stop();
			/* The end: give up what was sought all along. */
			for (k = 0; k < n; k++) {
				e = &set->e[want[k].i];
				if (e->pid == 0 && e->walk <= ports_walks) {
					e->pid = -1;
					(*left)--;
				}
			}
			continue;
		}
		pid = strtol(d->d_name, &end, 10);
		if (*end != '\0' || pid <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/fd", pid);
		if ((ports_walk_fd = opendir(path)) != NULL)
			ports_walk_pid = (pid_t)pid;
	}
}

/*
 * Find the pids and sessions of the sockets not resolved yet.  The pids
 * that hold sockets already are looked at first (a server that opens one
 * more port, a test opening a thousand), but agentd's own (its thousands
 * of connections, and its listeners do not change); then the walk of
 * every process, bounded and resumed by the next refresh.  A socket no
 * process of this pid namespace holds keeps pid 0 once a whole walk has
 * looked for it, and is not looked for again.
 */
static void
ports_resolve(struct ports_set *set)
{
	struct ports_want	*want;
	struct ports_entry	*e;
	pid_t			 known[PORTS_KNOWN_PIDS];
	size_t			 i, k, n = 0, nknown = 0, left;
	size_t			 budget = PORTS_KNOWN_BUDGET;
	struct session		*s = NULL;
	pid_t			 self = getpid(), last = 0;

	for (i = 0; i < set->n; i++)
		n += !set->e[i].resolved;
	if (n == 0) {
		ports_walk_stop();	/* its fds back; the next starts anew */
		return;
	}
	want = xcalloc(n, sizeof *want);
	for (i = 0, k = 0; i < set->n; i++) {
		e = &set->e[i];
		if (!e->resolved) {
			if (e->walk == 0)	/* a walk from its start */
				e->walk = ports_walks + 1;
			want[k].inode = e->inode;
			want[k++].i = i;
		} else if (e->pid > 0 && e->pid != self &&
		    nknown < PORTS_KNOWN_PIDS &&
		    !ports_pid_in(known, nknown, e->pid))
			known[nknown++] = e->pid;
	}
	qsort(want, n, sizeof *want, ports_want_cmp);
	left = n;
	ports_deadline = ports_now_us() + PORTS_SCAN_US;
	for (i = 0; i < nknown && left > 0 && budget > 0; i++)
		ports_scan_fds(known[i], set, want, n, &left, &budget);
	if (left > 0)
		ports_walk(set, want, n, &left);
	for (k = 0; k < n; k++) {
		e = &set->e[want[k].i];
		if (e->pid == 0)
			continue;	/* still sought */
		e->resolved = 1;
		if (e->pid < 0) {	/* given up */
			e->pid = 0;
			continue;
		}
		if (e->pid != last) {	/* a server's sockets: one walk */
			last = e->pid;
			s = session_of_pid(e->pid);
		}
		if (s != NULL)
			snprintf(e->session, sizeof e->session, "%s",
			    session_id(s));
	}
	free(want);
}

/* Whether one more port event may be posted now (PORTS_EVENTS_*). */
static int
ports_may_post(void)
{
	int64_t	now = ports_now_us();

	if (now - ports_rate_start >= 1000000) {
		ports_rate_start = now;
		ports_rate_n = 0;
	}
	if (ports_refresh_n >= PORTS_EVENTS_MAX ||
	    ports_rate_n >= PORTS_EVENTS_RATE)
		return (0);
	ports_refresh_n++;
	ports_rate_n++;
	return (1);
}

/*
 * The hook of the event feed: a socket opened (1) or closed (0), as
 * port.opened / port.closed with port, address, protocol, pid and the
 * session; an opening once its pid is looked up, a closing only if its
 * opening was posted; within ports_may_post().  ports_diff() callback.
 */
static void
ports_post(int opened, struct ports_entry *e, size_t i, void *arg)
{
	json_t	*fields;

	if (opened == -1 || (opened && (!e->resolved || e->posted)) ||
	    (!opened && !e->posted))
		return;
	if (!ports_may_post()) {
		if (!opened)
			ports_events_dropped++;
		return;		/* an opening: the next refresh's */
	}
	e->posted = 1;
	log_debug("%s: port.%s %s %s:%u pid %ld session %s", __func__,
	    opened ? "opened" : "closed", ports_proto_name(e->proto),
	    e->address, (unsigned)e->port, (long)e->pid,
	    e->session[0] != '\0' ? e->session : "-");
	fields = json_pack("{s:i, s:s, s:s, s:o}", "port", (int)e->port,
	    "address", e->address, "protocol", ports_proto_name(e->proto),
	    "pid", e->pid > 0 ? json_integer(e->pid) : json_null());
	if (fields == NULL)
		fatal("%s: out of memory", __func__);
	events_post(opened ? "port.opened" : "port.closed",
	    e->session[0] != '\0' ? e->session : NULL, fields);
}

/*
 * The four dumps into set.  Without tcp_diag (a module, and no modprobe in
 * a bare VM) PID 1 loads inet_diag, tcp_diag and udp_diag itself, once;
 * then a kernel without udp_diag or IPv6 still lists the rest (said once
 * in the log).  0, or -errno when even the IPv4 TCP dump fails.
 */
static int
ports_dump_all(struct ports_set *set)
{
	static const char *const	 mods[] = {
		"inet_diag", "tcp_diag", "udp_diag", NULL
	};
	static const struct {
		int	 family, proto;
	} dumps[] = {
		{ AF_INET, IPPROTO_TCP }, { AF_INET6, IPPROTO_TCP },
		{ AF_INET, IPPROTO_UDP }, { AF_INET6, IPPROTO_UDP },
	};
	size_t	i;
	int	error;

	for (i = 0; i < sizeof dumps / sizeof dumps[0]; i++) {
		error = ports_dump(dumps[i].family, dumps[i].proto, set);
		if (error == -ENOENT && ports_load_modules) {
			ports_load_modules = 0;
			kmod_load_names(NULL, mods);
			error = ports_dump(dumps[i].family, dumps[i].proto, set);
		}
		if (error == 0)
			continue;
		if (i == 0)
			return (error);
		if (!(ports_missing & (1u << i)))
			log_warn("%s: sock_diag of %s: %s; not listed", __func__,
			    ports_names[(dumps[i].proto == IPPROTO_UDP ? 2 : 0) +
			    (dumps[i].family == AF_INET6)], strerror(-error));
		ports_missing |= 1u << i;
	}
	return (0);
}

/*
 * Read the list, looking up the pids and sessions of new sockets if
 * resolve (else they are looked up by the next read that does).
 */
static int
ports_read(int resolve)
{
	struct ports_set	 now = { 0 };
	int64_t			 t0 = ports_now_us();
	size_t			 i;
	int			 error;

	if (ports_fd == -1)
		return (ports_init_error != 0 ? ports_init_error : -EBADF);
	if ((error = ports_dump_all(&now)) != 0) {
		log_warn("%s: sock_diag: %s", __func__, strerror(-error));
		ports_set_free(&now);
		return (error);
	}
	ports_sort(&now);
	ports_diff(&ports_now, &now, ports_carry, &now);
	if (resolve)
		ports_resolve(&now);
	/*
	 * The first list is the baseline: what was there before, not news.
	 * Then the closings, and the openings whose pids are known (this
	 * refresh's or deferred ones).
	 */
	ports_refresh_n = 0;
	if (ports_primed) {
		ports_diff(&ports_now, &now, ports_post, NULL);
		for (i = 0; i < now.n; i++)
			ports_post(1, &now.e[i], i, NULL);
	} else {
		for (i = 0; i < now.n; i++)
			now.e[i].posted = 1;
	}
	ports_primed = 1;
	ports_set_free(&ports_now);
	ports_now = now;
	ports_refreshes++;
	ports_refresh_us += (uint64_t)(ports_now_us() - t0);
	if (ports_changed != NULL)
		ports_changed();
	return (0);
}

/* Read the list now (see ports.h). */
int
ports_refresh(void)
{
	return (ports_read(1));
}

/* Read the baseline, without the pids (see ports.h). */
int
ports_baseline(void)
{
	return (ports_read(0));
}

/* The baseline, if no list was read yet (see ports.h). */
int
ports_prime(void)
{
	return (ports_primed ? 0 : ports_read(0));
}

/* The list of the last refresh. */
const struct ports_set *
ports_current(void)
{
	return (&ports_now);
}

/* The entry's session id while that session exists, else NULL. */
const char *
ports_session(const struct ports_entry *e)
{
	if (e->session[0] == '\0' || session_find(e->session) == NULL)
		return (NULL);
	return (e->session);
}

/* The refresh timer. */
static void
ports_timer(evutil_socket_t fd, short events, void *arg)
{
	/* The first list is the baseline: its pids at the next one. */
	if (ports_primed)
		ports_refresh();
	else
		ports_baseline();
	ports_arm();
}

/*
 * (Re)arm the timer: every ports_interval_ms while watched, else every
 * ports_feed_ms for the event feed (0: not at all).
 */
static void
ports_arm(void)
{
	struct timeval	tv;
	int64_t		ms;

	if (ports_ev == NULL)
		return;
	ms = ports_watchers > 0 ? ports_interval_ms : ports_feed_ms;
	if (ms > 0)
		evtimer_add(ports_ev, timeval_ms(&tv, ms));
	else
		evtimer_del(ports_ev);
}

/* A reader starts or stops needing a fresh list. */
void
ports_watch(int on)
{
	if (on && ports_watchers++ == 0)
		ports_arm();	/* the feed's pace, if any, becomes the watch's */
	else if (!on && ports_watchers > 0 && --ports_watchers == 0)
		ports_arm();
}

/* Refresh in the background for the event feed (see ports.h). */
void
ports_feed(int64_t interval_ms)
{
	ports_feed_ms = interval_ms;
	if (ports_watchers == 0)
		ports_arm();
}

/* Set the callback run after each refresh. */
void
ports_set_changed(void (*fn)(void))
{
	ports_changed = fn;
}

/* The /metrics lines. */
void
ports_metrics(struct proto_buf *b)
{
	proto_buf_printf(b,
	    "# TYPE agentd_ports gauge\n"
	    "agentd_ports %zu\n"
	    "# TYPE agentd_ports_refreshes_total counter\n"
	    "agentd_ports_refreshes_total %" PRIu64 "\n"
	    "# TYPE agentd_ports_refresh_seconds_total counter\n"
	    "agentd_ports_refresh_seconds_total %.6f\n"
	    "# TYPE agentd_ports_fd_scans_total counter\n"
	    "agentd_ports_fd_scans_total %" PRIu64 "\n"
	    "# TYPE agentd_ports_events_dropped_total counter\n"
	    "agentd_ports_events_dropped_total %" PRIu64 "\n",
	    ports_now.n, ports_refreshes, (double)ports_refresh_us / 1e6,
	    ports_fd_scans, ports_events_dropped);
}
