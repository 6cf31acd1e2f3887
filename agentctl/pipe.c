/*
 * pipe.c -- agentctl pipe: stdin to a new connection to agentd and its
 * bytes to stdout, raw (HTTP by hand over vsock, where no curl or socat
 * is; the e2e test's client inside the VM).
 */
#include <sys/socket.h>

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"

#define PIPE_BUF_BYTES	65536	/* bytes moved per read */

static int	pipe_write_all(int fd, const char *, size_t);

/* Write all of buf to fd: 0, or -1 with errno. */
static int
pipe_write_all(int fd, const char *buf, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		n = fd == STDOUT_FILENO ? write(fd, buf, len) :
		    send(fd, buf, len, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return (-1);
		buf += n;
		len -= n;
	}
	return (0);
}

/*
 * pipe: until agentd closes the connection (0), or stdout fails (1: the
 * connection is closed then, mid-answer if it was one).  stdin's end
 * leaves the connection open: agentd ends it after an answer to
 * Connection: close.
 */
int
cmd_pipe(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		CTL_COMMON_OPTIONS
	};
	struct pollfd			 pfd[2];
	char				 buf[PIPE_BUF_BYTES];
	char				 cause[CLIENT_CAUSE_MAX];
	ssize_t				 n;
	int				 fd, ch, in_open = 1;

	while ((ch = ctl_getopt(argc, argv, "", longopts)) != -1)
		ctl_usage(argv[0], "unknown option");
	if (optind != argc)
		ctl_usage(argv[0], "pipe takes no operands");
	client_free(ctl_connect());	/* chooses the endpoint */
	if ((fd = client_dial(cause, sizeof cause)) == -1)
		ctl_fatal("%s", cause);
	for (;;) {
		pfd[0].fd = in_open ? STDIN_FILENO : -1;
		pfd[0].events = POLLIN;
		pfd[1].fd = fd;
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			ctl_fatal("poll: %s", strerror(errno));
		}
		if (pfd[1].revents != 0) {
			if ((n = read(fd, buf, sizeof buf)) == -1 &&
			    errno == EINTR)
				continue;
			if (n <= 0)
				break;
			if (pipe_write_all(STDOUT_FILENO, buf, n) != 0) {
				close(fd);
				return (CTL_EXIT_ERROR);
			}
		}
		if (in_open && pfd[0].revents != 0) {
			if ((n = read(STDIN_FILENO, buf, sizeof buf)) == -1 &&
			    errno == EINTR)
				continue;
			if (n <= 0)
				in_open = 0;
			else if (pipe_write_all(fd, buf, n) != 0)
				break;
		}
	}
	close(fd);
	return (CTL_EXIT_OK);
}
