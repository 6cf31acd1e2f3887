/*
 * client.c -- HTTP/1.1 over a unix, TCP or vsock stream socket, one request at a
 * time on a keep-alive connection, with a deadline on every exchange.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "vsock.h"

/* What one exchange returned, besides 0. */
#define EX_FAILED	-1	/* cause set */
#define EX_STALE	-2	/* the connection was closed before any answer */

/* One connection and what was read from it. */
struct client {
	int	 fd;
	int	 used;		/* an answer came on fd: a reuse may be stale */
	char	*buf;
	size_t	 len;
	size_t	 cap;
};

/* Where requests go, chosen once. */
static struct {
	int	 unix_socket;
	int	 vsock;
	uint32_t vsock_cid;
	uint32_t vsock_port;
	char	 path[sizeof ((struct sockaddr_un *)0)->sun_path];
	char	 host[256];
	char	 port[16];
	char	 prefix[256];	/* URL path before /v1/..., no trailing '/' */
	char	 hosthdr[300];	/* the Host header's value */
	char	*auth;		/* "Authorization: ...\r\n", or NULL */
	char	 where[600];
} target;

static int64_t	client_now_ms(void);
static int	client_wait(int fd, short events, int64_t deadline);
static int	client_connect(struct client *, char *, size_t);
static int	client_connect_tcp(char *, size_t);
static int	client_auth(const char *, char *, size_t);
static void	client_close(struct client *);
static int	client_send(struct client *, const void *, size_t, int64_t,
		    char *, size_t);
static int	client_fill(struct client *, int64_t, char *, size_t);
static int	client_exchange(struct client *, const char *, size_t,
		    const void *, size_t, int64_t, struct client_resp *, char *,
		    size_t);
static int	client_read_answer(struct client *, int64_t,
		    struct client_resp *, char *, size_t);
static char	*client_find(const char *, size_t, const char *);

/* Milliseconds of CLOCK_MONOTONIC. */
static int64_t
client_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Choose the endpoint. */
int
client_target(const char *socket_path, const char *url, const char *token,
    char *cause, size_t causelen)
{
	const char	*p, *end, *colon, *slash;
	size_t		 hostlen;

	memset(&target, 0, sizeof target);
	if (url == NULL) {
		if (strlen(socket_path) >= sizeof target.path) {
			snprintf(cause, causelen, "socket path too long: %s",
			    socket_path);
			return (-1);
		}
		target.unix_socket = 1;
		strcpy(target.path, socket_path);
		snprintf(target.where, sizeof target.where, "%s", socket_path);
		snprintf(target.hosthdr, sizeof target.hosthdr, "localhost");
		return (0);
	}

	p = url;
	if (strncasecmp(p, "https://", 8) == 0) {
		snprintf(cause, causelen, "%s: https is not supported "
		    "(agentd speaks plain HTTP)", url);
		return (-1);
	}
	if (strncasecmp(p, "http://", 7) == 0)
		p += 7;
	slash = strchr(p, '/');
	end = slash != NULL ? slash : p + strlen(p);
	if (*p == '[') {			/* [v6]:port */
		if ((colon = memchr(p, ']', end - p)) == NULL)
			goto bad;
		hostlen = colon - p - 1;
		if (hostlen == 0 || hostlen >= sizeof target.host)
			goto bad;
		memcpy(target.host, p + 1, hostlen);
		colon = colon + 1 < end && colon[1] == ':' ? colon + 1 : NULL;
	} else {
		colon = memchr(p, ':', end - p);
		hostlen = (colon != NULL ? colon : end) - p;
		if (hostlen == 0 || hostlen >= sizeof target.host)
			goto bad;
		memcpy(target.host, p, hostlen);
	}
	if (colon != NULL) {
		if (end - colon - 1 <= 0 ||
		    (size_t)(end - colon - 1) >= sizeof target.port ||
		    strspn(colon + 1, "0123456789") != (size_t)(end - colon - 1))
			goto bad;
		memcpy(target.port, colon + 1, end - colon - 1);
	} else
		strcpy(target.port, CLIENT_DEFAULT_PORT);
	if (slash != NULL) {
		if (strlen(slash) >= sizeof target.prefix)
			goto bad;
		strcpy(target.prefix, slash);
		while (*target.prefix != '\0' &&
		    target.prefix[strlen(target.prefix) - 1] == '/')
			target.prefix[strlen(target.prefix) - 1] = '\0';
	}
	snprintf(target.hosthdr, sizeof target.hosthdr,
	    strchr(target.host, ':') != NULL ? "[%s]:%s" : "%s:%s",
	    target.host, target.port);
	snprintf(target.where, sizeof target.where, "http://%s%s",
	    target.hosthdr, target.prefix);
	return (client_auth(token, cause, causelen));
bad:
	snprintf(cause, causelen, "bad agentd URL '%s' (want http://HOST:PORT)",
	    url);
	return (-1);
}

/* The Authorization header of token (NULL or "": none). */
static int
client_auth(const char *token, char *cause, size_t causelen)
{
	if (token != NULL && *token != '\0') {
		if (strpbrk(token, "\r\n") != NULL) {
			snprintf(cause, causelen,
			    "AGENTD_TOKEN contains a line break");
			return (-1);
		}
		if (asprintf(&target.auth, "Authorization: Bearer %s\r\n",
		    token) == -1)
			ctl_fatal("out of memory");
	}
	return (0);
}

/* Choose vsock to CID:PORT. */
int
client_target_vsock(const char *spec, const char *token, char *cause,
    size_t causelen)
{
	const char	*why;

	memset(&target, 0, sizeof target);
	if (vsock_parse_addr(spec, &target.vsock_cid, &target.vsock_port,
	    &why) != 0) {
		snprintf(cause, causelen, "--vsock %s: %s", spec, why);
		return (-1);
	}
	target.vsock = 1;
	vsock_name(target.where, sizeof target.where, target.vsock_cid,
	    target.vsock_port);
	/* Any name of this machine passes agentd's Host rule. */
	snprintf(target.hosthdr, sizeof target.hosthdr, "localhost");
	return (client_auth(token, cause, causelen));
}

/* The endpoint, for messages. */
const char *
client_where(void)
{
	return (target.where);
}

/* Whether requests go over the unix socket. */
int
client_is_unix(void)
{
	return (target.unix_socket);
}

/* A client with no connection yet. */
struct client *
client_new(void)
{
	struct client	*c;

	if ((c = calloc(1, sizeof *c)) == NULL)
		ctl_fatal("out of memory");
	c->fd = -1;
	return (c);
}

/* Close and free. */
void
client_free(struct client *c)
{
	if (c == NULL)
		return;
	client_close(c);
	free(c->buf);
	free(c);
}

/* Close the connection; the next request opens a new one. */
static void
client_close(struct client *c)
{
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	c->used = 0;
	c->len = 0;
}

/* Wait for events on fd until deadline (0: none); 0, or -1 at the deadline. */
static int
client_wait(int fd, short events, int64_t deadline)
{
	struct pollfd	pfd = { .fd = fd, .events = events };
	int64_t		left;
	int		n;

	for (;;) {
		left = -1;
		if (deadline != 0 && (left = deadline - client_now_ms()) < 0)
			left = 0;
		n = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (n > 0)
			return (0);
		if (n == 0)
			return (-1);
		if (errno != EINTR)
			return (0);	/* let the read or write tell */
	}
}

/* Connect over TCP; returns the fd or -1 with cause. */
static int
client_connect_tcp(char *cause, size_t causelen)
{
	struct addrinfo	 hints, *res, *ai;
	int64_t		 deadline = client_now_ms() + CLIENT_CONNECT_MS;
	socklen_t	 len;
	int		 fd = -1, error, one = 1, saved = 0;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	if ((error = getaddrinfo(target.host, target.port, &hints, &res)) != 0) {
		snprintf(cause, causelen, "cannot reach agentd at %s: %s",
		    target.where, gai_strerror(error));
		return (-1);
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1) {
			saved = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 &&
		    errno != EINPROGRESS) {
			saved = errno;
			close(fd);
			fd = -1;
			continue;
		}
		if (client_wait(fd, POLLOUT, deadline) == -1) {
			saved = ETIMEDOUT;
			close(fd);
			fd = -1;
			continue;
		}
		len = sizeof error;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == -1)
			error = errno;
		if (error != 0) {
			saved = error;
			close(fd);
			fd = -1;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		break;
	}
	freeaddrinfo(res);
	if (fd == -1)
		snprintf(cause, causelen, "cannot reach agentd at %s: %s",
		    target.where, strerror(saved));
	return (fd);
}

/* Open the connection.  Returns 0, or -1 with cause. */
static int
client_connect(struct client *c, char *cause, size_t causelen)
{
	struct sockaddr_un	sun;
	int			fd;

	if (target.vsock) {
		if ((fd = vsock_connect(target.vsock_cid,
		    target.vsock_port)) == -1) {
			snprintf(cause, causelen, "cannot reach agentd at %s: "
			    "%s", target.where, strerror(errno));
			return (-1);
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		c->fd = fd;
		return (0);
	}
	if (!target.unix_socket) {
		if ((c->fd = client_connect_tcp(cause, causelen)) == -1)
			return (-1);
		return (0);
	}
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, target.path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		snprintf(cause, causelen, "cannot reach agentd at %s: %s",
		    target.where, strerror(errno));
		if (fd != -1)
			close(fd);
		return (-1);
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	c->fd = fd;
	return (0);
}

/* A blocking connection for raw bytes. */
int
client_dial(char *cause, size_t causelen)
{
	struct client	c;

	memset(&c, 0, sizeof c);
	c.fd = -1;
	if (client_connect(&c, cause, causelen) == -1)
		return (-1);
	fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) & ~O_NONBLOCK);
	return (c.fd);
}

/* Write all of data.  Returns 0, EX_STALE or EX_FAILED with cause. */
static int
client_send(struct client *c, const void *data, size_t len, int64_t deadline,
    char *cause, size_t causelen)
{
	const char	*p = data;
	ssize_t		 n;

	while (len > 0) {
		n = send(c->fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (client_wait(c->fd, POLLOUT, deadline) == -1) {
				snprintf(cause, causelen, "agentd at %s did "
				    "not take the request in time",
				    target.where);
				return (EX_FAILED);
			}
			continue;
		}
		snprintf(cause, causelen, "lost the connection to agentd at "
		    "%s: %s", target.where, strerror(errno));
		return (errno == EPIPE || errno == ECONNRESET ? EX_STALE :
		    EX_FAILED);
	}
	return (0);
}

/*
 * Read more into the buffer.  Returns the bytes read, 0 at EOF, EX_FAILED
 * with cause (also at the deadline) or EX_STALE for a reset.
 */
static int
client_fill(struct client *c, int64_t deadline, char *cause, size_t causelen)
{
	ssize_t	n;

	if (c->cap - c->len < 16384) {
		c->cap = c->cap == 0 ? 65536 : c->cap * 2;
		if ((c->buf = realloc(c->buf, c->cap)) == NULL)
			ctl_fatal("out of memory");
	}
	for (;;) {
		n = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
		if (n >= 0) {
			c->len += n;
			return ((int)(n > 0 ? 1 : 0));
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			if (client_wait(c->fd, POLLIN, deadline) == -1) {
				snprintf(cause, causelen, "agentd at %s did "
				    "not answer in time", target.where);
				return (EX_FAILED);
			}
			continue;
		}
		snprintf(cause, causelen, "lost the connection to agentd at "
		    "%s: %s", target.where, strerror(errno));
		return (errno == ECONNRESET ? EX_STALE : EX_FAILED);
	}
}

/* Find needle in the first len bytes of hay. */
static char *
client_find(const char *hay, size_t len, const char *needle)
{
	size_t	n = strlen(needle), i;

	for (i = 0; i + n <= len; i++) {
		if (memcmp(hay + i, needle, n) == 0)
			return ((char *)hay + i);
	}
	return (NULL);
}

/* Read one answer: its head, then its body however it is framed. */
static int
client_read_answer(struct client *c, int64_t deadline,
    struct client_resp *resp, char *cause, size_t causelen)
{
	char		*head_end, *line, *next, *v, *end;
	size_t		 head_len, pos, body_cap = 0, size;
	long long	 clen = -1;
	int		 chunked = 0, close_after = 0, n, minor = 1;

	memset(resp, 0, sizeof *resp);
	/* The head. */
	while ((head_end = client_find(c->buf, c->len, "\r\n\r\n")) == NULL) {
		if (c->len > CLIENT_HEADER_MAX) {
			snprintf(cause, causelen, "agentd's answer head is "
			    "too long");
			return (EX_FAILED);
		}
		if ((n = client_fill(c, deadline, cause, causelen)) <= 0) {
			if (n == 0) {
				snprintf(cause, causelen, "agentd at %s closed "
				    "the connection", target.where);
				return (c->len == 0 ? EX_STALE : EX_FAILED);
			}
			return (c->len == 0 && n == EX_STALE ? EX_STALE :
			    EX_FAILED);
		}
	}
	head_len = head_end - c->buf + 4;
	*head_end = '\0';
	if (sscanf(c->buf, "HTTP/1.%d %d", &minor, &resp->status) != 2 ||
	    resp->status < 100 || resp->status > 999) {
		snprintf(cause, causelen, "agentd at %s sent no HTTP answer",
		    target.where);
		return (EX_FAILED);
	}
	if (minor == 0)
		close_after = 1;
	line = strstr(c->buf, "\r\n");
	for (; line != NULL; line = next) {
		line += 2;
		next = strstr(line, "\r\n");
		if (next != NULL)
			*next = '\0';
		if ((v = strchr(line, ':')) == NULL)
			continue;
		*v++ = '\0';
		v += strspn(v, " \t");
		if (strcasecmp(line, "Content-Length") == 0)
			clen = strtoll(v, NULL, 10);
		else if (strcasecmp(line, "Transfer-Encoding") == 0)
			chunked = strcasestr(v, "chunked") != NULL;
		else if (strcasecmp(line, "Connection") == 0)
			close_after = strcasestr(v, "close") != NULL ? 1 :
			    strcasestr(v, "keep-alive") != NULL ? 0 :
			    close_after;
		else if (strcasecmp(line, "Content-Type") == 0)
			snprintf(resp->ctype, sizeof resp->ctype, "%s", v);
	}

	/* The body. */
	pos = head_len;
	if (chunked) {
		for (;;) {
			while ((end = client_find(c->buf + pos, c->len - pos,
			    "\r\n")) == NULL) {
				if ((n = client_fill(c, deadline, cause,
				    causelen)) <= 0)
					goto short_body;
			}
			size = strtoul(c->buf + pos, NULL, 16);
			pos = end - c->buf + 2;
			if (size == 0)
				break;
			while (c->len - pos < size + 2) {
				if ((n = client_fill(c, deadline, cause,
				    causelen)) <= 0)
					goto short_body;
			}
			if (resp->len + size + 1 > body_cap) {
				body_cap = (resp->len + size + 1) * 2;
				if ((resp->body = realloc(resp->body,
				    body_cap)) == NULL)
					ctl_fatal("out of memory");
			}
			memcpy(resp->body + resp->len, c->buf + pos, size);
			resp->len += size;
			pos += size + 2;
		}
		/* Trailers, up to the empty line. */
		for (;;) {
			while ((end = client_find(c->buf + pos, c->len - pos,
			    "\r\n")) == NULL) {
				if ((n = client_fill(c, deadline, cause,
				    causelen)) <= 0)
					goto short_body;
			}
			if (end == c->buf + pos) {
				pos += 2;
				break;
			}
			pos = end - c->buf + 2;
		}
	} else if (clen >= 0) {
		while (c->len - pos < (size_t)clen) {
			if ((n = client_fill(c, deadline, cause, causelen)) <= 0)
				goto short_body;
		}
		if ((resp->body = malloc(clen + 1)) == NULL)
			ctl_fatal("out of memory");
		memcpy(resp->body, c->buf + pos, clen);
		resp->len = clen;
		pos += clen;
	} else if (resp->status == 204 || resp->status == 304 ||
	    resp->status < 200) {
		/* No body. */
	} else {
		while ((n = client_fill(c, deadline, cause, causelen)) > 0)
			;
		if (n < 0)
			goto short_body;
		close_after = 1;
		if ((resp->body = malloc(c->len - pos + 1)) == NULL)
			ctl_fatal("out of memory");
		memcpy(resp->body, c->buf + pos, c->len - pos);
		resp->len = c->len - pos;
		pos = c->len;
	}
	if (resp->body == NULL && (resp->body = malloc(1)) == NULL)
		ctl_fatal("out of memory");
	resp->body[resp->len] = '\0';

	/* Keep what follows (nothing, without pipelining). */
	memmove(c->buf, c->buf + pos, c->len - pos);
	c->len -= pos;
	c->used = 1;
	if (close_after)
		client_close(c);
	return (0);

short_body:
	if (n == 0)
		snprintf(cause, causelen, "agentd at %s closed the connection "
		    "in the middle of an answer", target.where);
	client_resp_free(resp);
	return (EX_FAILED);
}

/* Send a request and read its answer on the current connection. */
static int
client_exchange(struct client *c, const char *head, size_t head_len,
    const void *body, size_t len, int64_t deadline, struct client_resp *resp,
    char *cause, size_t causelen)
{
	int	error;

	if ((error = client_send(c, head, head_len, deadline, cause,
	    causelen)) != 0)
		return (error);
	if (len > 0 && (error = client_send(c, body, len, deadline, cause,
	    causelen)) != 0)
		return (error);
	return (client_read_answer(c, deadline, resp, cause, causelen));
}

/* Send one request and read its answer. */
int
client_request(struct client *c, const char *method, const char *path,
    const char *ctype, const void *body, size_t len, int timeout_ms,
    struct client_resp *resp, char *cause, size_t causelen)
{
	char	*head;
	int64_t	 deadline = timeout_ms > 0 ? client_now_ms() + timeout_ms : 0;
	char	 lenstr[32];
	int	 head_len, attempt, reused, error = EX_FAILED;
	int	 with_len = body != NULL || strcmp(method, "POST") == 0 ||
		    strcmp(method, "PUT") == 0;

	snprintf(lenstr, sizeof lenstr, "%zu", len);

	head_len = asprintf(&head, "%s %s%s HTTP/1.1\r\n"
	    "Host: %s\r\n"
	    "User-Agent: agentctl/" AGENTCTL_VERSION "\r\n"
	    "Accept: application/json\r\n"
	    "%s%s%s"
	    "%s%s%s"
	    "\r\n",
	    method, target.prefix, path, target.hosthdr,
	    ctype != NULL ? "Content-Type: " : "", ctype != NULL ? ctype : "",
	    ctype != NULL ? "\r\n" : "",
	    with_len ? "Content-Length: " : "", with_len ? lenstr : "",
	    with_len ? "\r\n" : "");
	if (head_len == -1)
		ctl_fatal("out of memory");
	if (target.auth != NULL) {
		/* Put the token before the blank line. */
		char	*h2;

		head[head_len - 2] = '\0';
		head_len = asprintf(&h2, "%s%s\r\n", head, target.auth);
		free(head);
		if (head_len == -1)
			ctl_fatal("out of memory");
		head = h2;
	}
	for (attempt = 0; attempt < 2; attempt++) {
		reused = c->fd != -1 && c->used;
		if (c->fd == -1 && client_connect(c, cause, causelen) == -1)
			break;
		error = client_exchange(c, head, head_len, body, len, deadline,
		    resp, cause, causelen);
		if (error == 0)
			break;
		client_close(c);
		if (error != EX_STALE || !reused)
			break;
	}
	free(head);
	return (error == 0 ? 0 : -1);
}

/* Free an answer's body. */
void
client_resp_free(struct client_resp *resp)
{
	free(resp->body);
	resp->body = NULL;
	resp->len = 0;
}
