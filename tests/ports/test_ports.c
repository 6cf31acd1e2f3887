/*
 * test_ports.c -- Check unit tests of ports.c: the parsing of sock_diag
 * answers (canned netlink messages), the diff of two lists, and one real
 * refresh that must find a socket this test listens on, with its pid.
 * session.h is faked: a session "s7" holds the pids below FAKE_SESSION_PID.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "../checkmain.h"
#include <event2/event.h>

#include "events.h"
#include "ports.h"
#include "session.h"

#define SEQ	42

static pid_t	fake_session_pid;	/* session_of_pid() knows this one */

/* The fake session table: one session, "s7", holding fake_session_pid. */
struct session *
session_of_pid(pid_t pid)
{
	return (pid == fake_session_pid ? (struct session *)&fake_session_pid :
	    NULL);
}

/* The fake's lookup by id. */
struct session *
session_find(const char *id)
{
	return (strcmp(id, "s7") == 0 ? (struct session *)&fake_session_pid :
	    NULL);
}

/* The fake's id. */
const char *
session_id(const struct session *s)
{
	return ("s7");
}

/*
 * The events posted (events.h faked) about one port: other sockets of the
 * machine come and go meanwhile.
 */
static int	 posted_port;		/* the port looked at */
static char	 posted_type[32];	/* its last event */
static json_t	*posted;
static int	 nposted;		/* its events */

static int	 nall;			/* port events of any port */
static int	 many[256];		/* ports of the many_* test, */
static int	 many_opened[256];	/* and port.opened of each */
static int	 nmany;

/* The fake feed: keep the last event of posted_port. */
uint64_t
events_post(const char *type, const char *session, json_t *fields)
{
	int	 i, port;

	nall++;
	port = (int)json_integer_value(json_object_get(fields, "port"));
	/* Ours: 127.0.0.1 over tcp (others' sockets may share the number). */
	for (i = 0; i < nmany; i++) {
		if (many[i] == port && strcmp(type, "port.opened") == 0 &&
		    strcmp(json_string_value(json_object_get(fields, "address")),
		    "127.0.0.1") == 0 && strcmp(json_string_value(
		    json_object_get(fields, "protocol")), "tcp") == 0)
			many_opened[i]++;
	}
	if (json_integer_value(json_object_get(fields, "port")) !=
	    posted_port) {
		json_decref(fields);
		return (0);
	}
	snprintf(posted_type, sizeof posted_type, "%s", type);
	json_decref(posted);
	posted = fields;
	json_object_set_new(posted, "session", session != NULL ?
	    json_string(session) : json_null());
	return (++nposted);
}

/* A buffer of netlink messages being built. */
struct msgs {
	char	buf[8192] __attribute__((aligned(8)));
	size_t	len;
};

/* Append one inet_diag_msg. */
static void
add_sock(struct msgs *m, uint32_t seq, int family, int state,
    const char *addr, uint16_t port, uint32_t inode)
{
	struct nlmsghdr		*h = (struct nlmsghdr *)(m->buf + m->len);
	struct inet_diag_msg	*d;

	memset(h, 0, NLMSG_SPACE(sizeof *d));
	h->nlmsg_len = NLMSG_LENGTH(sizeof *d);
	h->nlmsg_type = SOCK_DIAG_BY_FAMILY;
	h->nlmsg_flags = NLM_F_MULTI;
	h->nlmsg_seq = seq;
	d = NLMSG_DATA(h);
	d->idiag_family = family;
	d->idiag_state = state;
	d->id.idiag_sport = htons(port);
	d->idiag_inode = inode;
	ck_assert_int_eq(inet_pton(family, addr, d->id.idiag_src), 1);
	m->len += NLMSG_SPACE(sizeof *d);
}

/* Append NLMSG_DONE, or NLMSG_ERROR with error when error != 0. */
static void
add_end(struct msgs *m, uint32_t seq, int error)
{
	struct nlmsghdr	*h = (struct nlmsghdr *)(m->buf + m->len);
	struct nlmsgerr	*e;
	size_t		 body = error != 0 ? sizeof *e : sizeof(int);

	memset(h, 0, NLMSG_SPACE(body));
	h->nlmsg_len = NLMSG_LENGTH(body);
	h->nlmsg_type = error != 0 ? NLMSG_ERROR : NLMSG_DONE;
	h->nlmsg_seq = seq;
	if (error != 0) {
		e = NLMSG_DATA(h);
		e->error = error;
	}
	m->len += NLMSG_SPACE(body);
}

START_TEST(parse_tcp)
{
	struct msgs		m = { .len = 0 };
	struct ports_set	set = { 0 };

	add_sock(&m, SEQ, AF_INET, 10, "127.0.0.1", 8000, 101);
	add_sock(&m, SEQ, AF_INET, 1, "10.0.0.2", 40000, 102);	/* ESTABLISHED */
	add_sock(&m, SEQ, AF_INET6, 10, "::", 9000, 103);
	add_sock(&m, SEQ + 1, AF_INET, 10, "1.2.3.4", 1, 104);	/* stale */
	ck_assert_int_eq(ports_parse(m.buf, m.len, SEQ, 0, &set), 0);
	ck_assert_uint_eq(set.n, 2);
	ck_assert_str_eq(set.e[0].address, "127.0.0.1");
	ck_assert_uint_eq(set.e[0].port, 8000);
	ck_assert_int_eq(set.e[0].proto, PORTS_TCP);
	ck_assert_uint_eq(set.e[0].inode, 101);
	ck_assert_str_eq(set.e[1].address, "::");
	ck_assert_int_eq(set.e[1].proto, PORTS_TCP6);
	ck_assert_str_eq(ports_proto_name(set.e[1].proto), "tcp6");

	m.len = 0;
	add_end(&m, SEQ, 0);
	ck_assert_int_eq(ports_parse(m.buf, m.len, SEQ, 0, &set), 1);
	ck_assert_uint_eq(set.n, 2);
	ports_set_free(&set);
}
END_TEST

START_TEST(parse_udp)
{
	struct msgs		m = { .len = 0 };
	struct ports_set	set = { 0 };

	add_sock(&m, SEQ, AF_INET, 7, "0.0.0.0", 5353, 201);
	add_sock(&m, SEQ, AF_INET, 7, "0.0.0.0", 0, 202);	/* unbound */
	add_sock(&m, SEQ, AF_INET, 1, "127.0.0.1", 5000, 203);	/* connected */
	add_sock(&m, SEQ, AF_INET6, 7, "fe80::1", 53, 204);
	add_end(&m, SEQ, 0);
	ck_assert_int_eq(ports_parse(m.buf, m.len, SEQ, 1, &set), 1);
	ck_assert_uint_eq(set.n, 2);
	ck_assert_int_eq(set.e[0].proto, PORTS_UDP);
	ck_assert_uint_eq(set.e[0].port, 5353);
	ck_assert_int_eq(set.e[1].proto, PORTS_UDP6);
	ck_assert_str_eq(set.e[1].address, "fe80::1");
	ports_set_free(&set);
}
END_TEST

START_TEST(parse_errors)
{
	struct msgs		m = { .len = 0 };
	struct ports_set	set = { 0 };

	add_end(&m, SEQ, -ENOENT);
	ck_assert_int_eq(ports_parse(m.buf, m.len, SEQ, 0, &set), -ENOENT);

	/* A message cut short, and a header claiming more than was read. */
	m.len = 0;
	add_sock(&m, SEQ, AF_INET, 10, "127.0.0.1", 8000, 101);
	ck_assert_int_eq(ports_parse(m.buf, m.len - 8, SEQ, 0, &set),
	    -EBADMSG);
	((struct nlmsghdr *)m.buf)->nlmsg_len = NLMSG_LENGTH(8);
	ck_assert_int_eq(ports_parse(m.buf, NLMSG_SPACE(8), SEQ, 0, &set),
	    -EBADMSG);
	ck_assert_uint_eq(set.n, 0);

	/* A last message without its padding is whole: no read past it. */
	m.len = 0;
	add_sock(&m, SEQ, AF_INET, 10, "127.0.0.1", 8000, 101);
	((struct nlmsghdr *)m.buf)->nlmsg_len += 2;
	ck_assert_int_eq(ports_parse(m.buf, m.len + 2, SEQ, 0, &set), 0);
	ck_assert_uint_eq(set.n, 1);
	ports_set_free(&set);
}
END_TEST

/* What a diff reported. */
struct seen {
	char	ops[16];	/* '+', '-', '=' per call */
	int	ports[16];
	size_t	n;
};

/* ports_diff() callback: record. */
static void
record(int opened, struct ports_entry *e, size_t i, void *arg)
{
	struct seen	*s = arg;

	s->ops[s->n] = opened == 1 ? '+' : opened == 0 ? '-' : '=';
	s->ports[s->n++] = e->port;
}

/* An entry. */
static void
put(struct ports_set *set, int proto, const char *addr, uint16_t port,
    uint64_t inode)
{
	struct ports_entry	*e;

	set->e = realloc(set->e, (set->n + 1) * sizeof *set->e);
	e = &set->e[set->n++];
	memset(e, 0, sizeof *e);
	e->proto = proto;
	snprintf(e->address, sizeof e->address, "%s", addr);
	e->port = port;
	e->inode = inode;
}

START_TEST(diff)
{
	struct ports_set	a = { 0 }, b = { 0 };
	struct seen		s = { .n = 0 };

	put(&a, PORTS_TCP, "0.0.0.0", 8000, 1);
	put(&a, PORTS_TCP6, "::", 8000, 2);
	put(&a, PORTS_UDP, "0.0.0.0", 53, 3);
	/* 8000/tcp stays, 8000/tcp6 closes, a new socket on 8000/tcp6 (a
	   restart: another inode), 53 closes, 3000 opens. */
	put(&b, PORTS_TCP6, "::", 8000, 9);
	put(&b, PORTS_TCP, "0.0.0.0", 8000, 1);
	put(&b, PORTS_TCP, "127.0.0.1", 3000, 7);
	ports_sort(&a);
	ports_sort(&b);
	ck_assert_uint_eq(b.e[0].port, 3000);
	ports_diff(&a, &b, record, &s);
	ck_assert_uint_eq(s.n, 5);
	s.ops[s.n] = '\0';
	/* in order: 53 closed, 3000 opened, 8000 tcp stays, tcp6 2 closed,
	   tcp6 9 opened */
	ck_assert_str_eq(s.ops, "-+=-+");
	ck_assert_int_eq(s.ports[0], 53);
	ck_assert_int_eq(s.ports[1], 3000);
	ck_assert_int_eq(s.ports[2], 8000);

	/* Nothing changed: only '='; from nothing: only '+'. */
	s.n = 0;
	ports_diff(&b, &b, record, &s);
	s.ops[s.n] = '\0';
	ck_assert_str_eq(s.ops, "===");
	s.n = 0;
	ports_set_free(&a);
	ports_diff(&a, &b, record, &s);
	s.ops[s.n] = '\0';
	ck_assert_str_eq(s.ops, "+++");
	ports_set_free(&b);
}
END_TEST

/* The entry of the current list on port, or NULL. */
static const struct ports_entry *
find(int proto, uint16_t port)
{
	const struct ports_set	*set = ports_current();
	size_t			 i;

	for (i = 0; i < set->n; i++) {
		if (set->e[i].port == port && set->e[i].proto == proto)
			return (&set->e[i]);
	}
	return (NULL);
}

/*
 * Refresh until every socket listed is resolved: the look for pids is
 * bounded per refresh (PORTS_SCAN_BUDGET, PORTS_SCAN_US) and resumed.
 */
static void
refresh_resolved(void)
{
	const struct ports_set	*set;
	size_t			 i, n;
	int			 tries;

	for (tries = 0; tries < 10000; tries++) {
		ck_assert_int_eq(ports_refresh(), 0);
		set = ports_current();
		for (i = 0, n = 0; i < set->n; i++)
			n += !set->e[i].resolved;
		if (n == 0)
			return;
	}
	ck_abort_msg("sockets still not resolved");
}

START_TEST(refresh_real)
{
	struct event_base		*base = event_base_new();
	struct sockaddr_in		 sin;
	socklen_t			 len = sizeof sin;
	const struct ports_entry	*e;
	int				 t, u;
	uint16_t			 tport, uport;

	ck_assert_ptr_nonnull(base);
	ck_assert_int_eq(ports_init(base, 250, 0), 0);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ne(t = socket(AF_INET, SOCK_STREAM, 0), -1);
	ck_assert_int_eq(bind(t, (struct sockaddr *)&sin, sizeof sin), 0);
	ck_assert_int_eq(listen(t, 1), 0);
	ck_assert_int_eq(getsockname(t, (struct sockaddr *)&sin, &len), 0);
	tport = ntohs(sin.sin_port);
	sin.sin_port = 0;
	ck_assert_int_ne(u = socket(AF_INET, SOCK_DGRAM, 0), -1);
	ck_assert_int_eq(bind(u, (struct sockaddr *)&sin, sizeof sin), 0);
	ck_assert_int_eq(getsockname(u, (struct sockaddr *)&sin, &len), 0);
	uport = ntohs(sin.sin_port);

	/* The first list is the baseline: no event. */
	posted_port = tport;
	fake_session_pid = getpid();
	refresh_resolved();
	ck_assert_int_eq(nposted, 0);
	ck_assert_ptr_nonnull(e = find(PORTS_TCP, tport));
	ck_assert_str_eq(e->address, "127.0.0.1");
	ck_assert_int_eq(e->pid, getpid());
	ck_assert_str_eq(e->session, "s7");
	ck_assert_str_eq(ports_session(e), "s7");
	ck_assert_ptr_nonnull(e = find(PORTS_UDP, uport));
	ck_assert_int_eq(e->pid, getpid());

	/* Closed: gone at the next refresh, posted with what was known of
	   it; the other is carried over. */
	close(t);
	fake_session_pid = 0;
	ck_assert_int_eq(ports_refresh(), 0);
	ck_assert_ptr_null(find(PORTS_TCP, tport));
	ck_assert_int_eq(nposted, 1);
	ck_assert_str_eq(posted_type, "port.closed");
	ck_assert_int_eq(json_integer_value(json_object_get(posted, "port")),
	    tport);
	ck_assert_str_eq(json_string_value(json_object_get(posted, "address")),
	    "127.0.0.1");
	ck_assert_str_eq(json_string_value(json_object_get(posted,
	    "protocol")), "tcp");
	ck_assert_int_eq(json_integer_value(json_object_get(posted, "pid")),
	    getpid());
	ck_assert_str_eq(json_string_value(json_object_get(posted,
	    "session")), "s7");

	/* Opened: posted once. */
	ck_assert_int_ne(t = socket(AF_INET, SOCK_STREAM, 0), -1);
	sin.sin_port = 0;
	ck_assert_int_eq(bind(t, (struct sockaddr *)&sin, sizeof sin), 0);
	ck_assert_int_eq(listen(t, 1), 0);
	ck_assert_int_eq(getsockname(t, (struct sockaddr *)&sin, &len), 0);
	posted_port = ntohs(sin.sin_port);
	nposted = 1;
	refresh_resolved();
	ck_assert_int_eq(nposted, 2);
	ck_assert_str_eq(posted_type, "port.opened");
	ck_assert(json_is_null(json_object_get(posted, "session")));
	ck_assert_int_eq(ports_refresh(), 0);
	ck_assert_int_eq(nposted, 2);
	close(t);
	ck_assert_ptr_nonnull(e = find(PORTS_UDP, uport));
	ck_assert_str_eq(e->session, "s7");
	close(u);
	json_decref(posted);
	posted = NULL;
	ports_free();
	event_base_free(base);
}
END_TEST

START_TEST(baseline_then_pids)
{
	struct event_base		*base = event_base_new();
	struct sockaddr_in		 sin;
	socklen_t			 len = sizeof sin;
	const struct ports_entry	*e;
	int				 t;

	ck_assert_ptr_nonnull(base);
	ck_assert_int_eq(ports_init(base, 250, 0), 0);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ne(t = socket(AF_INET, SOCK_STREAM, 0), -1);
	ck_assert_int_eq(bind(t, (struct sockaddr *)&sin, sizeof sin), 0);
	ck_assert_int_eq(listen(t, 1), 0);
	ck_assert_int_eq(getsockname(t, (struct sockaddr *)&sin, &len), 0);
	posted_port = ntohs(sin.sin_port);
	nposted = 0;

	/* The baseline: the socket, no pid yet, no event. */
	ck_assert_int_eq(ports_baseline(), 0);
	ck_assert_ptr_nonnull(e = find(PORTS_TCP, posted_port));
	ck_assert_int_eq(e->pid, 0);
	/* The next refreshes look it up, and post nothing: it is not new. */
	refresh_resolved();
	ck_assert_ptr_nonnull(e = find(PORTS_TCP, posted_port));
	ck_assert_int_eq(e->pid, getpid());
	ck_assert_int_eq(nposted, 0);
	close(t);
	ports_free();
	event_base_free(base);
}
END_TEST

/*
 * Issue 32 R3: a refresh posts PORTS_EVENTS_MAX port events at most; the
 * openings past it are posted by later refreshes, each once.
 */
START_TEST(many_openings_bounded)
{
	struct event_base	*base = event_base_new();
	struct sockaddr_in	 sin;
	socklen_t		 len;
	int			 fds[100], i, tries, before, done;

	ck_assert_ptr_nonnull(base);
	ck_assert_int_eq(ports_init(base, 250, 0), 0);
	refresh_resolved();		/* the baseline, and its pids */
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (i = 0; i < 100; i++) {
		ck_assert_int_ne(fds[i] = socket(AF_INET, SOCK_STREAM, 0), -1);
		sin.sin_port = 0;
		ck_assert_int_eq(bind(fds[i], (struct sockaddr *)&sin,
		    sizeof sin), 0);
		ck_assert_int_eq(listen(fds[i], 1), 0);
		len = sizeof sin;
		ck_assert_int_eq(getsockname(fds[i], (struct sockaddr *)&sin,
		    &len), 0);
		many[i] = ntohs(sin.sin_port);
	}
	nmany = 100;
	for (tries = 0, done = 0; tries < 100000 && !done; tries++) {
		before = nall;
		ck_assert_int_eq(ports_refresh(), 0);
		ck_assert_int_le(nall - before, PORTS_EVENTS_MAX);
		for (i = 0, done = 1; i < 100; i++)
			done &= many_opened[i] > 0;
		if (!done)
			usleep(2000);
	}
	ck_assert_msg(done, "not every opening was posted");
	for (i = 0; i < 100; i++) {
		ck_assert_int_eq(many_opened[i], 1);
		close(fds[i]);
	}
	nmany = 0;
	ports_free();
	event_base_free(base);
}
END_TEST

/* The suite. */
static Suite *
ports_suite(void)
{
	Suite	*s = suite_create("ports");
	TCase	*tc = tcase_create("ports");

	tcase_add_test(tc, parse_tcp);
	tcase_add_test(tc, many_openings_bounded);
	tcase_add_test(tc, parse_udp);
	tcase_add_test(tc, parse_errors);
	tcase_add_test(tc, diff);
	tcase_add_test(tc, refresh_real);
	tcase_add_test(tc, baseline_then_pids);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(ports_suite()));
}
