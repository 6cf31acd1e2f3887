/*
 * vsock.c -- AF_VSOCK addresses, listening and peers (see vsock.h).
 */
#include <sys/socket.h>
#include <linux/vm_sockets.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vsock.h"

static int	vsock_number(const char *, size_t, uint32_t max, uint32_t *);

/* A decimal number of len bytes in 0..max: 0, or -1. */
static int
vsock_number(const char *s, size_t len, uint32_t max, uint32_t *out)
{
	uint64_t	n = 0;
	size_t		i;

	if (len == 0 || len > 10)
		return (-1);
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return (-1);
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	if (n > max)
		return (-1);
	*out = (uint32_t)n;
	return (0);
}

/* Parse a port, 1..VSOCK_PORT_MAX. */
int
vsock_parse_port(const char *s, uint32_t *port, const char **cause)
{
	uint32_t	p;

	if (vsock_number(s, strlen(s), VSOCK_PORT_MAX, &p) != 0 || p == 0) {
		*cause = "a vsock port is a number in 1..4294967294";
		return (-1);
	}
	*port = p;
	return (0);
}

/* Parse "CID:PORT"; CID may be "host" or "local". */
int
vsock_parse_addr(const char *s, uint32_t *cid, uint32_t *port,
    const char **cause)
{
	const char	*colon;
	size_t		 len;
	uint32_t	 c;

	if ((colon = strchr(s, ':')) == NULL) {
		*cause = "want CID:PORT (CID a number, host or local)";
		return (-1);
	}
	len = colon - s;
	if (len == 4 && strncmp(s, "host", 4) == 0)
		c = VSOCK_CID_HOST;
	else if (len == 5 && strncmp(s, "local", 5) == 0)
		c = VSOCK_CID_LOCAL;
	else if (vsock_number(s, len, VMADDR_CID_ANY - 1, &c) != 0) {
		*cause = "the CID is a number in 0..4294967294, host (2) or "
		    "local (1)";
		return (-1);
	}
	if (vsock_parse_port(colon + 1, port, cause) != 0)
		return (-1);
	*cid = c;
	return (0);
}

/* A listening socket on port, any CID. */
int
vsock_listen(uint32_t port, int backlog)
{
	struct sockaddr_vm	svm;
	int			fd, error;

	memset(&svm, 0, sizeof svm);
	svm.svm_family = AF_VSOCK;
	svm.svm_cid = VMADDR_CID_ANY;
	svm.svm_port = port;
	if ((fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return (-1);
	if (bind(fd, (struct sockaddr *)&svm, sizeof svm) == -1 ||
	    listen(fd, backlog) == -1) {
		error = errno;
		close(fd);
		errno = error;
		return (-1);
	}
	return (fd);
}

/* A connected socket to cid:port. */
int
vsock_connect(uint32_t cid, uint32_t port)
{
	struct sockaddr_vm	svm;
	int			fd, error;

	memset(&svm, 0, sizeof svm);
	svm.svm_family = AF_VSOCK;
	svm.svm_cid = cid;
	svm.svm_port = port;
	if ((fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return (-1);
	if (connect(fd, (struct sockaddr *)&svm, sizeof svm) == -1) {
		error = errno;
		close(fd);
		errno = error;
		return (-1);
	}
	return (fd);
}

/* The peer's CID and port. */
int
vsock_peer(int fd, uint32_t *cid, uint32_t *port)
{
	struct sockaddr_vm	svm;
	socklen_t		len = sizeof svm;

	memset(&svm, 0, sizeof svm);
	if (getpeername(fd, (struct sockaddr *)&svm, &len) == -1)
		return (-1);
	if (svm.svm_family != AF_VSOCK) {
		errno = EAFNOSUPPORT;
		return (-1);
	}
	*cid = svm.svm_cid;
	*port = svm.svm_port;
	return (0);
}

/* Whether the peer is the host or this machine. */
int
vsock_peer_local_or_host(int fd)
{
	struct sockaddr_vm	svm;
	socklen_t		len = sizeof svm;
	uint32_t		cid, port;

	if (vsock_peer(fd, &cid, &port) != 0)
		return (0);
	if (cid == VSOCK_CID_LOCAL || cid == VSOCK_CID_HOST)
		return (1);
	/* Our own CID over vsock_loopback: the local end's. */
	memset(&svm, 0, sizeof svm);
	if (getsockname(fd, (struct sockaddr *)&svm, &len) == -1 ||
	    svm.svm_family != AF_VSOCK || svm.svm_cid == VMADDR_CID_ANY)
		return (0);
	return (cid == svm.svm_cid);
}

/* "vsock:CID:PORT". */
char *
vsock_name(char *buf, size_t len, uint32_t cid, uint32_t port)
{
	snprintf(buf, len, "vsock:%u:%u", cid, port);
	return (buf);
}
