/*
 * ports_bench.c -- the cost of one GET /v1/ports refresh (ports.c) with N
 * listening TCP sockets (default 1,000) held by a child process (a server;
 * agentd's own fds are not looked at first): the first
 * refresh (every inode new: the dumps and one /proc/PID/fd scan), a steady
 * one (the dumps only), one after a single new socket; and, beside them,
 * reading /proc/net/tcp and tcp6 whole, the way sock_diag replaces.
 *
 * Run: build/bench/ports_bench [N]
 * session.h is replaced by a lookup that reads /proc/PID/stat once per pid,
 * as session_of_pid() does for a session's own process.
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "events.h"
#include "ports.h"
#include "session.h"
#include "util.h"

#define RUNS	200	/* steady refreshes timed */
#define ONE_RUNS 21	/* refreshes after one new socket timed */

/* session_of_pid(): one /proc/PID/stat read, no session. */
struct session *
session_of_pid(pid_t pid)
{
	char	buf[512];

	proc_stat(pid, buf, sizeof buf);
	return (NULL);
}

/* The event feed: the events are dropped. */
uint64_t
events_post(const char *type, const char *session, json_t *fields)
{
	json_decref(fields);
	return (0);
}

/* Never called: no entry has a session. */
struct session *
session_find(const char *id)
{
	return (NULL);
}

/* Never called. */
const char *
session_id(const struct session *s)
{
	return ("");
}

/* Microseconds of the monotonic clock. */
static double
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (ts.tv_sec * 1e6 + ts.tv_nsec / 1e3);
}

/* A listening socket on 127.0.0.1, any port; its fd. */
static int
listener(void)
{
	struct sockaddr_in	sin;
	int			fd;

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof sin) == -1 ||
	    listen(fd, 1) == -1) {
		perror("listener");
		exit(1);
	}
	return (fd);
}

/* Read /proc/net/tcp and tcp6 whole, counting the LISTEN lines (0A). */
static size_t
proc_net_tcp(void)
{
	static char	buf[1 << 16];
	const char	*files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	size_t		i, n = 0;
	ssize_t		r;
	char		*p;
	int		fd;

	for (i = 0; i < 2; i++) {
		if ((fd = open(files[i], O_RDONLY)) == -1)
			continue;
		while ((r = read(fd, buf, sizeof buf - 1)) > 0) {
			buf[r] = '\0';
			for (p = buf; (p = strstr(p, " 0A ")) != NULL; p += 4)
				n++;
		}
		close(fd);
	}
	return (n);
}

/* Sort doubles. */
static int
dcmp(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return (x < y ? -1 : x > y);
}

/*
 * The server: n listeners, then one more per byte read from cmd, each
 * acknowledged on ack; ends at EOF.
 */
static void
server(int n, int cmd, int ack)
{
	char	c;
	int	i;

	for (i = 0; i < n; i++)
		listener();
	if (write(ack, "r", 1) != 1)
		_exit(1);
	while (read(cmd, &c, 1) == 1) {
		listener();
		if (write(ack, "o", 1) != 1)
			_exit(1);
	}
	_exit(0);
}

int
main(int argc, char **argv)
{
	struct event_base	*base = event_base_new();
	struct rlimit		 rl;
	double			 t, first, ones[ONE_RUNS], us[RUNS], net[RUNS];
	int			 n = argc > 1 ? atoi(argv[1]) : 1000, i;
	int			 cmd[2], ack[2];
	pid_t			 child;
	char			 c;
	size_t			 listed;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (base == NULL || ports_init(base, 250, 0) != 0) {
		fprintf(stderr, "no sock_diag\n");
		return (1);
	}
	if (pipe(cmd) == -1 || pipe(ack) == -1)
		return (1);
	if ((child = fork()) == 0) {
		close(cmd[1]);
		close(ack[0]);
		server(n, cmd[0], ack[1]);
	}
	close(cmd[0]);
	close(ack[1]);
	if (read(ack[0], &c, 1) != 1)
		return (1);
	t = now_us();
	ports_refresh();
	first = now_us() - t;
	listed = ports_current()->n;
	for (i = 0; i < RUNS; i++) {
		t = now_us();
		ports_refresh();
		us[i] = now_us() - t;
	}
	for (i = 0; i < ONE_RUNS; i++) {
		if (write(cmd[1], "n", 1) != 1 || read(ack[0], &c, 1) != 1)
			return (1);
		t = now_us();
		ports_refresh();
		ones[i] = now_us() - t;
	}
	qsort(ones, ONE_RUNS, sizeof *ones, dcmp);
	for (i = 0; i < RUNS; i++) {
		t = now_us();
		proc_net_tcp();
		net[i] = now_us() - t;
	}
	qsort(us, RUNS, sizeof *us, dcmp);
	qsort(net, RUNS, sizeof *net, dcmp);
	close(cmd[1]);
	waitpid(child, NULL, 0);
	printf("sockets listed %zu (%d of the server process)\n", listed, n);
	printf("first refresh (all new, /proc fd scan)  %8.0f us\n", first);
	printf("steady refresh median / p99            %8.0f / %.0f us\n",
	    us[RUNS / 2], us[RUNS * 99 / 100]);
	printf("refresh after one new socket, median   %8.0f us\n",
	    ones[ONE_RUNS / 2]);
	printf("/proc/net/tcp+tcp6 read median / p99   %8.0f / %.0f us\n",
	    net[RUNS / 2], net[RUNS * 99 / 100]);
	ports_free();
	event_base_free(base);
	return (0);
}
