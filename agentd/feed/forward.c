/*
 * forward.c -- listeners on the outward address for services on loopback,
 * each connection spliced to the service with two bufferevents.
 */
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "forward.h"
#include "http.h"
#include "log.h"
#include "ports.h"
#include "proto.h"
#include "upgstate.h"
#include "util.h"

#define FORWARD_OWN_MAX	64	/* agentd's listeners looked at */

/* One side of a connection: 0 the client's, 1 the service's. */
struct fwd_side {
	struct bufferevent	*bev;
	int			 eof;		/* it sent its FIN */
	int			 shut;		/* we sent it ours */
};

struct forward;

/* A connection accepted on a forward and its way to the service. */
struct fwd_conn {
	LIST_ENTRY(fwd_conn)	 entry;
	struct forward		*f;
	struct fwd_side		 s[2];
	int			 connected;	/* the service's side */
};

/* One port forwarded. */
struct forward {
	TAILQ_ENTRY(forward)	 entry;
	uint16_t		 port;
	char			 to[PORTS_ADDR_MAX];	/* the service's address */
	char			 on[PORTS_ADDR_MAX + 8]; /* "ADDR:PORT" */
	struct evconnlistener	*lev;		/* NULL: not listening */
	LIST_HEAD(, fwd_conn)	 conns;
	size_t			 nconns;
	int			 wanted;	/* by the last sync */
	int			 failed;	/* its listen failed (logged) */
};

static int	fwd_lookup(void);
static int	fwd_sockaddr(const char *, uint16_t, struct sockaddr_storage *,
		    socklen_t *);
static struct forward *fwd_find(uint16_t);
static struct forward *fwd_new(uint16_t, const char *);
static void	fwd_listen(struct forward *, int);
static void	fwd_unlisten(struct forward *);
static void	fwd_maybe_free(struct forward *);
static void	fwd_accept(struct evconnlistener *, evutil_socket_t,
		    struct sockaddr *, int, void *);
static void	fwd_accept_error(struct evconnlistener *, void *);
static struct fwd_conn *fwd_conn_new(struct forward *, int, int);
static void	fwd_conn_free(struct fwd_conn *);
static int	fwd_relay(struct fwd_conn *, int);
static void	fwd_read(struct bufferevent *, void *);
static void	fwd_write(struct bufferevent *, void *);
static void	fwd_event(struct bufferevent *, short, void *);
static int	fwd_side_of(struct fwd_conn *, struct bufferevent *);
static int	fwd_loopback(const char *);
static size_t	fwd_own_inodes(uint64_t *, size_t);
static int	fwd_own(uint64_t, const uint64_t *, size_t);

static TAILQ_HEAD(, forward)	 fwd_list = TAILQ_HEAD_INITIALIZER(fwd_list);
static struct event_base	*fwd_base;	/* NULL: forwarding is off */
static char			 fwd_addr[PORTS_ADDR_MAX]; /* "": unknown */
static size_t			 fwd_max, fwd_max_conns, fwd_buffer;
static size_t			 fwd_total_conns; /* of all forwards */
static size_t			 fwd_listening;	/* forwards listening */
static size_t			 fwd_nconns;	/* connections open */
static size_t			 fwd_skipped;	/* wanted, not listening */
static uint64_t			 fwd_conns_total, fwd_refused, fwd_bytes;

/* Start forwarding (see forward.h). */
int
forward_init(struct event_base *base, const char *address, size_t max,
    size_t max_conns, size_t total_conns, size_t buffer)
{
	struct sockaddr_storage	ss;
	socklen_t		len;

	if (address != NULL && fwd_sockaddr(address, 0, &ss, &len) != 0)
		return (-1);
	fwd_base = base;
	/* The flag's now; a route's when first needed (not at the start). */
	snprintf(fwd_addr, sizeof fwd_addr, "%s", address != NULL ? address :
	    "");
	fwd_max = max;
	fwd_max_conns = max_conns;
	fwd_total_conns = total_conns;
	fwd_buffer = buffer;
	return (0);
}

/* Close everything. */
void
forward_free(void)
{
	struct forward	*f;

	while ((f = TAILQ_FIRST(&fwd_list)) != NULL) {
		f->wanted = 1;		/* kept while its connections go */
		while (!LIST_EMPTY(&f->conns))
			fwd_conn_free(LIST_FIRST(&f->conns));
		f->wanted = 0;
		fwd_unlisten(f);
		fwd_maybe_free(f);
	}
	fwd_addr[0] = '\0';
	fwd_base = NULL;
}

/* An address literal and a port as a sockaddr.  0 or -1. */
static int
fwd_sockaddr(const char *addr, uint16_t port, struct sockaddr_storage *ss,
    socklen_t *len)
{
	struct sockaddr_in	*sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof *ss);
	if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		*len = sizeof *sin;
		return (0);
	}
	if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		*len = sizeof *sin6;
		return (0);
	}
	return (-1);
}

/*
 * The outward address: the flag's (set by forward_init()), else the IPv4
 * address of the interface of the default route (/proc/net/route).  0, or
 * -1 while there is none.
 */
static int
fwd_lookup(void)
{
	struct ifreq	 ifr;
	unsigned long	 dst, gw, mask;
	unsigned	 flags;
	char		 line[256], name[IFNAMSIZ] = "";
	FILE		*f;
	int		 s, found = 0;

	if (fwd_addr[0] != '\0')
		return (0);
	if ((f = fopen("/proc/net/route", "re")) == NULL)
		return (-1);
	while (!found && fgets(line, sizeof line, f) != NULL) {
		if (sscanf(line, "%15s %lx %lx %x %*d %*d %*d %lx", name, &dst,
		    &gw, &flags, &mask) == 5 && dst == 0 && mask == 0 &&
		    (flags & 1))	/* RTF_UP */
			found = 1;
	}
	fclose(f);
	if (!found || (s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return (-1);
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, name, sizeof ifr.ifr_name);
	found = ioctl(s, SIOCGIFADDR, &ifr) == 0 &&
	    inet_ntop(AF_INET, &((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr,
	    fwd_addr, sizeof fwd_addr) != NULL;
	close(s);
	if (!found) {
		fwd_addr[0] = '\0';
		return (-1);
	}
	log_info("%s: forwarding to %s (%s)", __func__, fwd_addr, name);
	return (0);
}

/*
 * Whether an address is localhost's as envd's: 127.0.0.1 or ::1 (not the
 * rest of 127.0.0.0/8: a resolver's stub on 127.0.0.53 stays inside).
 */
static int
fwd_loopback(const char *addr)
{
	return (strcmp(addr, "127.0.0.1") == 0 || strcmp(addr, "::1") == 0);
}

/* The socket inodes of agentd's own listeners (its API's, envd's). */
static size_t
fwd_own_inodes(uint64_t *own, size_t max)
{
	const char	*names[FORWARD_OWN_MAX];
	int		 fds[FORWARD_OWN_MAX];
	struct stat	 st;
	size_t		 n, i, k = 0;

	n = http_listener_fds(fds, names, max);
	for (i = 0; i < n; i++) {
		if (fstat(fds[i], &st) == 0)
			own[k++] = (uint64_t)st.st_ino;
	}
	return (k);
}

/* Whether inode is one of own[n]. */
static int
fwd_own(uint64_t inode, const uint64_t *own, size_t n)
{
	size_t	i;

	for (i = 0; i < n && own[i] != inode; i++)
		;
	return (i < n);
}

/* The forward of a port, or NULL. */
static struct forward *
fwd_find(uint16_t port)
{
	struct forward	*f;

	TAILQ_FOREACH(f, &fwd_list, entry) {
		if (f->port == port)
			return (f);
	}
	return (NULL);
}

/* A new forward of port to the service on address to (not listening). */
static struct forward *
fwd_new(uint16_t port, const char *to)
{
	struct forward	*f;

	f = xcalloc(1, sizeof *f);
	f->port = port;
	snprintf(f->to, sizeof f->to, "%s", to);
	snprintf(f->on, sizeof f->on, strchr(fwd_addr, ':') != NULL ?
	    "[%s]:%u" : "%s:%u", fwd_addr, (unsigned)port);
	LIST_INIT(&f->conns);
	TAILQ_INSERT_TAIL(&fwd_list, f, entry);
	return (f);
}

/* Listen on the outward address (fd >= 0: on that socket, handed over). */
static void
fwd_listen(struct forward *f, int fd)
{
	struct sockaddr_storage	ss;
	socklen_t		len;
	int			one = 1;

	if (f->lev != NULL)
		return;
	if (fd == -1) {
		if (fwd_sockaddr(fwd_addr, f->port, &ss, &len) != 0 ||
		    (fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0)) == -1)
			goto fail;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, (struct sockaddr *)&ss, len) == -1 ||
		    listen(fd, FORWARD_BACKLOG) == -1) {
			close(fd);
			goto fail;
		}
	}
	f->lev = evconnlistener_new(fwd_base, fwd_accept, f,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (f->lev == NULL)
		fatal("%s: out of memory", __func__);
	evconnlistener_set_error_cb(f->lev, fwd_accept_error);
	fwd_listening++;
	f->failed = 0;
	log_debug("%s: %s to %s:%u (fd %d)", __func__, f->on, f->to,
	    (unsigned)f->port, fd);
	return;
fail:
	if (!f->failed)
		log_warn("%s: cannot listen on %s: %s", __func__, f->on,
		    strerror(errno));
	f->failed = 1;
}

/* Stop listening (the open connections run on). */
static void
fwd_unlisten(struct forward *f)
{
	if (f->lev == NULL)
		return;
	log_debug("%s: %s (%zu connections)", __func__, f->on, f->nconns);
	evconnlistener_free(f->lev);
	f->lev = NULL;
	fwd_listening--;
}

/* Free a forward no longer wanted once its last connection ended. */
static void
fwd_maybe_free(struct forward *f)
{
	if (f->wanted || f->lev != NULL || f->nconns > 0)
		return;
	TAILQ_REMOVE(&fwd_list, f, entry);
	free(f);
}

/* Open and close forwards to match the list (see forward.h). */
void
forward_sync(const struct ports_set *set)
{
	const struct ports_entry	*e, *lo;
	struct forward			*f, *next;
	uint64_t			 own[FORWARD_OWN_MAX];
	size_t				 i, k, nown;
	int				 covered;

	if (fwd_base == NULL || fwd_lookup() != 0)
		return;
	nown = fwd_own_inodes(own, nitems(own));
	TAILQ_FOREACH(f, &fwd_list, entry)
		f->wanted = 0;
	fwd_skipped = 0;
	for (i = 0; i < set->n; i = k) {
		lo = NULL;
		covered = 0;
		for (k = i; k < set->n && set->e[k].port == set->e[i].port;
		    k++) {
			e = &set->e[k];
			if (e->proto != PORTS_TCP && e->proto != PORTS_TCP6)
				continue;
			if (strcmp(e->address, fwd_addr) == 0) {
				/* Ours, or a service's on the outward address. */
				f = fwd_find(e->port);
				covered |= f == NULL || f->lev == NULL;
			} else if (strcmp(e->address, "0.0.0.0") == 0 ||
			    strcmp(e->address, "::") == 0)
				covered = 1;
			else if (lo == NULL && fwd_loopback(e->address) &&
			    !fwd_own(e->inode, own, nown))
				lo = e;	/* a service's, not agentd's API */
		}
		if (lo == NULL || covered)
			continue;
		if ((f = fwd_find(lo->port)) == NULL) {
			if (fwd_listening >= fwd_max) {
				fwd_skipped++;
				continue;
			}
			f = fwd_new(lo->port, lo->address);
		}
		snprintf(f->to, sizeof f->to, "%s", lo->address);
		f->wanted = 1;
		if (f->lev == NULL && fwd_listening < fwd_max)
			fwd_listen(f, -1);
		else if (f->lev != NULL)
			evconnlistener_enable(f->lev);	/* after EMFILE */
		fwd_skipped += f->lev == NULL;
	}
	for (f = TAILQ_FIRST(&fwd_list); f != NULL; f = next) {
		next = TAILQ_NEXT(f, entry);
		if (!f->wanted) {
			fwd_unlisten(f);
			fwd_maybe_free(f);
		}
	}
}

/* The forward an entry is reached through (see forward.h). */
const char *
forward_of(const struct ports_entry *e, size_t *conns)
{
	struct forward	*f;

	if (fwd_base == NULL || (e->proto != PORTS_TCP &&
	    e->proto != PORTS_TCP6) || (f = fwd_find(e->port)) == NULL ||
	    f->lev == NULL || strcmp(f->to, e->address) != 0)
		return (NULL);
	*conns = f->nconns;
	return (f->on);
}

/* accept failed (EMFILE, ...): rest until the next sync. */
static void
fwd_accept_error(struct evconnlistener *lev, void *arg)
{
	int	error = EVUTIL_SOCKET_ERROR();

	if (error == EINTR || error == EAGAIN || error == ECONNABORTED)
		return;
	log_warn("%s: accept: %s; pausing", __func__, strerror(error));
	evconnlistener_disable(lev);
}

/* A connection on a forward: its way to the service, or closed. */
static void
fwd_accept(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct forward		*f = arg;
	struct fwd_conn		*c;
	struct sockaddr_storage	 ss;
	socklen_t		 len;
	int			 sfd;

	if (f->nconns >= fwd_max_conns || fwd_nconns >= fwd_total_conns ||
	    fwd_sockaddr(f->to, f->port, &ss, &len) != 0 ||
	    (sfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) == -1) {
		fwd_refused++;
		close(fd);
		return;
	}
	c = fwd_conn_new(f, fd, sfd);
	if (bufferevent_socket_connect(c->s[1].bev, (struct sockaddr *)&ss,
	    len) != 0)
		fwd_conn_free(c);	/* closes both */
}

/* A connection on the client's fd and the service's. */
static struct fwd_conn *
fwd_conn_new(struct forward *f, int cfd, int sfd)
{
	struct fwd_conn	*c;
	int		 i;

	c = xcalloc(1, sizeof *c);
	c->f = f;
	c->s[0].bev = bufferevent_socket_new(fwd_base, cfd,
	    BEV_OPT_CLOSE_ON_FREE);
	c->s[1].bev = bufferevent_socket_new(fwd_base, sfd,
	    BEV_OPT_CLOSE_ON_FREE);
	if (c->s[0].bev == NULL || c->s[1].bev == NULL)
		fatal("%s: out of memory", __func__);
	for (i = 0; i < 2; i++) {
		bufferevent_setcb(c->s[i].bev, fwd_read, fwd_write, fwd_event,
		    c);
		/* At most fwd_buffer read ahead, and as much to write. */
		bufferevent_setwatermark(c->s[i].bev, EV_READ, 0, fwd_buffer);
		bufferevent_setwatermark(c->s[i].bev, EV_WRITE,
		    fwd_buffer / 2, 0);
		bufferevent_enable(c->s[i].bev, EV_READ | EV_WRITE);
	}
	LIST_INSERT_HEAD(&f->conns, c, entry);
	f->nconns++;
	fwd_nconns++;
	fwd_conns_total++;
	return (c);
}

/* Close both ends of a connection. */
static void
fwd_conn_free(struct fwd_conn *c)
{
	struct forward	*f = c->f;

	LIST_REMOVE(c, entry);
	f->nconns--;
	fwd_nconns--;
	bufferevent_free(c->s[0].bev);
	bufferevent_free(c->s[1].bev);
	free(c);
	fwd_maybe_free(f);
}

/* Which side a bufferevent is. */
static int
fwd_side_of(struct fwd_conn *c, struct bufferevent *bev)
{
	return (bev == c->s[1].bev);
}

/*
 * Move what side i read to the other side's output, within fwd_buffer (the
 * rest waits in i's input, whose high watermark stops reading); pass on
 * i's FIN once everything before it is written.  The connection ends when
 * both FINs are passed on: then 1 (c is freed), else 0.
 */
static int
fwd_relay(struct fwd_conn *c, int i)
{
	struct evbuffer	*in = bufferevent_get_input(c->s[i].bev);
	struct evbuffer	*out = bufferevent_get_output(c->s[!i].bev);
	size_t		 have = evbuffer_get_length(out);
	int		 n;

	if (have < fwd_buffer) {
		n = evbuffer_remove_buffer(in, out, fwd_buffer - have);
		if (n > 0)
			fwd_bytes += (uint64_t)n;
	}
	if (c->s[i].eof && !c->s[!i].shut && evbuffer_get_length(in) == 0 &&
	    evbuffer_get_length(out) == 0 && (i == 1 || c->connected)) {
		shutdown(bufferevent_getfd(c->s[!i].bev), SHUT_WR);
		c->s[!i].shut = 1;
	}
	if (c->s[0].shut && c->s[1].shut) {
		fwd_conn_free(c);
		return (1);
	}
	return (0);
}

/* A side read: on to the other. */
static void
fwd_read(struct bufferevent *bev, void *arg)
{
	struct fwd_conn	*c = arg;

	fwd_relay(c, fwd_side_of(c, bev));
}

/* A side's output drained (below half): more from the other side. */
static void
fwd_write(struct bufferevent *bev, void *arg)
{
	struct fwd_conn	*c = arg;

	fwd_relay(c, !fwd_side_of(c, bev));
}

/* Connected, a FIN, or an error (which closes both). */
static void
fwd_event(struct bufferevent *bev, short what, void *arg)
{
	struct fwd_conn	*c = arg;
	int		 i = fwd_side_of(c, bev);

	if (what & BEV_EVENT_CONNECTED) {
		c->connected = 1;
		fwd_relay(c, 0);	/* a FIN before the connect */
		return;
	}
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		log_debug("%s: %s: %s side: %s", __func__, c->f->on,
		    i ? "service" : "client", strerror(errno));
		fwd_conn_free(c);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		c->s[i].eof = 1;
		fwd_relay(c, i);
	}
}

/* The /metrics lines. */
void
forward_metrics(struct proto_buf *b)
{
	struct forward	*f;
	struct fwd_conn	*c;
	uint64_t	 held = 0;
	int		 i;

	TAILQ_FOREACH(f, &fwd_list, entry) {
		LIST_FOREACH(c, &f->conns, entry) {
			for (i = 0; i < 2; i++)
				held += evbuffer_get_length(
				    bufferevent_get_input(c->s[i].bev)) +
				    evbuffer_get_length(
				    bufferevent_get_output(c->s[i].bev));
		}
	}
	proto_buf_printf(b,
	    "# TYPE agentd_forwards gauge\n"
	    "agentd_forwards %zu\n"
	    "# TYPE agentd_forwards_skipped gauge\n"
	    "agentd_forwards_skipped %zu\n"
	    "# TYPE agentd_forward_conns gauge\n"
	    "agentd_forward_conns %zu\n"
	    "# TYPE agentd_forward_conns_total counter\n"
	    "agentd_forward_conns_total %" PRIu64 "\n"
	    "# TYPE agentd_forward_refused_total counter\n"
	    "agentd_forward_refused_total %" PRIu64 "\n"
	    "# TYPE agentd_forward_bytes_total counter\n"
	    "agentd_forward_bytes_total %" PRIu64 "\n"
	    "# TYPE agentd_forward_buffered_bytes gauge\n"
	    "agentd_forward_buffered_bytes %" PRIu64 "\n",
	    fwd_listening, fwd_skipped, fwd_nconns, fwd_conns_total,
	    fwd_refused, fwd_bytes, held);
}

/* The /debug/stat object. */
void
forward_stat(struct proto_buf *b)
{
	struct forward	*f;
	const char	*sep = "";

	if (fwd_base == NULL) {
		proto_buf_printf(b, "\"forward\": {\"enabled\": false}");
		return;
	}
	proto_buf_printf(b, "\"forward\": {\"enabled\": true, \"address\": ");
	if (fwd_addr[0] != '\0')
		proto_buf_printf(b, "\"%s\"", fwd_addr);
	else
		proto_buf_printf(b, "null");
	proto_buf_printf(b, ", \"max\": %zu, \"max_conns\": %zu, "
	    "\"total_conns\": %zu, \"buffer\": %zu, \"skipped\": %zu, "
	    "\"refused\": %" PRIu64 ", \"bytes\": %" PRIu64
	    ", \"forwards\": [", fwd_max, fwd_max_conns, fwd_total_conns,
	    fwd_buffer, fwd_skipped, fwd_refused, fwd_bytes);
	TAILQ_FOREACH(f, &fwd_list, entry) {
		proto_buf_printf(b, "%s{\"port\": %u, \"on\": \"%s\", "
		    "\"to\": \"%s\", \"listening\": %s, \"connections\": %zu}",
		    sep, (unsigned)f->port, f->on, f->to,
		    f->lev != NULL ? "true" : "false", f->nconns);
		sep = ", ";
	}
	proto_buf_printf(b, "]}");
}

/* Write the forwards for the successor (see forward.h). */
int
forward_save(struct upgstate_w *w, int *keep, size_t *nkeep, size_t max)
{
	struct evbuffer	*b[2];
	struct forward	*f;
	struct fwd_conn	*c;
	uint64_t	 off[2], len[2], o;
	size_t		 n;
	int		 i, j;

	TAILQ_FOREACH(f, &fwd_list, entry) {
		upgstate_section(w, "forward");
		upgstate_put(w, "port", "%u", (unsigned)f->port);
		upgstate_put(w, "to", "%s", f->to);
		upgstate_put(w, "wanted", "%d", f->wanted);
		if (f->lev != NULL) {
			if (*nkeep >= max)
				return (-1);
			keep[(*nkeep)++] = evconnlistener_get_fd(f->lev);
			upgstate_put(w, "fd", "%d", keep[*nkeep - 1]);
		}
		LIST_FOREACH(c, &f->conns, entry) {
			if (!c->connected)
				continue;	/* closed by the execve */
			if (*nkeep + 2 > max)
				return (-1);
			/* Toward side i: its output, then the other's input. */
			for (i = 0; i < 2; i++) {
				b[0] = bufferevent_get_output(c->s[i].bev);
				b[1] = bufferevent_get_input(c->s[!i].bev);
				len[i] = 0;
				for (j = 0; j < 2; j++) {
					n = evbuffer_get_length(b[j]);
					o = upgstate_blob(w,
					    evbuffer_pullup(b[j], -1), n);
					if (j == 0)
						off[i] = o;
					len[i] += n;
				}
				keep[(*nkeep)++] = bufferevent_getfd(c->s[i].bev);
			}
			upgstate_put(w, "conn", "%d %d %d %d %d %d %" PRIu64
			    " %" PRIu64 " %" PRIu64 " %" PRIu64,
			    keep[*nkeep - 2], keep[*nkeep - 1], c->s[0].eof,
			    c->s[0].shut, c->s[1].eof, c->s[1].shut, off[0],
			    len[0], off[1], len[1]);
		}
	}
	return (0);
}

/* Read one [forward] section (see forward.h). */
void
forward_load(struct upgstate *r)
{
	struct forward	*f = NULL;
	struct fwd_conn	*c;
	const uint8_t	*p;
	const char	*key, *value;
	char		 to[PORTS_ADDR_MAX] = "";
	unsigned	 port = 0;
	uint64_t	 off[2], len[2];
	size_t		 vlen;
	int		 fd[2], fl[4], lfd = -1, wanted = 1, i;

	while (upgstate_next(r, &key, &value, &vlen) == UPGSTATE_ITEM) {
		if (strcmp(key, "port") == 0)
			port = (unsigned)strtoul(value, NULL, 10);
		else if (strcmp(key, "to") == 0)
			snprintf(to, sizeof to, "%s", value);
		else if (strcmp(key, "wanted") == 0)
			wanted = atoi(value);
		else if (strcmp(key, "fd") == 0)
			lfd = atoi(value);
		else if (strcmp(key, "conn") == 0 && sscanf(value,
		    "%d %d %d %d %d %d %" SCNu64 " %" SCNu64 " %" SCNu64
		    " %" SCNu64, &fd[0], &fd[1], &fl[0], &fl[1], &fl[2],
		    &fl[3], &off[0], &len[0], &off[1], &len[1]) == 10) {
			if (fwd_base == NULL || port == 0 || port > 65535 ||
			    fwd_lookup() != 0) {
				close(fd[0]);
				close(fd[1]);
				continue;
			}
			if (f == NULL && (f = fwd_find(port)) == NULL)
				f = fwd_new(port, to);
			c = fwd_conn_new(f, fd[0], fd[1]);
			c->connected = 1;
			for (i = 0; i < 2; i++) {
				c->s[i].eof = fl[2 * i];
				c->s[i].shut = fl[2 * i + 1];
				if ((p = upgstate_blob_at(r, off[i], len[i])) !=
				    NULL)
					evbuffer_add(bufferevent_get_output(
					    c->s[i].bev), p, len[i]);
				if (c->s[i].eof)
					bufferevent_disable(c->s[i].bev,
					    EV_READ);
			}
			if (fwd_relay(c, 0) == 0)	/* FINs due, if any */
				fwd_relay(c, 1);
		} else {
			log_warn("%s: ignoring %s=%s", __func__, key, value);
			/* A conn= we cannot read: its fds, if any, close. */
			if (strcmp(key, "conn") == 0 && sscanf(value, "%d %d",
			    &fd[0], &fd[1]) == 2 && fd[0] > 2 && fd[1] > 2) {
				close(fd[0]);
				close(fd[1]);
			}
		}
	}
	upgstate_unread(r);
	if (lfd < 0)
		return;
	if (fwd_base == NULL || port == 0 || port > 65535 ||
	    fwd_lookup() != 0) {
		close(lfd);
		return;
	}
	if (f == NULL && (f = fwd_find(port)) == NULL)
		f = fwd_new(port, to);
	f->wanted = wanted;
	if (f->lev == NULL)
		fwd_listen(f, lfd);
	else
		close(lfd);
}
