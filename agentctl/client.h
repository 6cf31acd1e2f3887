/*
 * client.h -- a small blocking HTTP/1.1 client for agentd's API, over the
 * unix socket, TCP or vsock.
 *
 * client_target() chooses the endpoint once for the process; then each
 * thread makes its own struct client (one keep-alive connection) and sends
 * requests one at a time.  A reused connection that the server closed while
 * idle is reopened and the request sent once more, only when no byte of an
 * answer had arrived.  Bodies may come with Content-Length, chunked, or
 * until close.  Sockets are written with MSG_NOSIGNAL: no SIGPIPE from here.
 *
 * Errors: functions return -1 and write a one-line cause (no "agentctl:"
 * prefix) into the caller's buffer; nothing here prints or exits, except
 * running out of memory (ctl_fatal).
 */
#ifndef AGENTCTL_CLIENT_H
#define AGENTCTL_CLIENT_H

#include <stddef.h>

#define CLIENT_DEFAULT_SOCKET	"/run/agentd.sock"
#define CLIENT_DEFAULT_PORT	"49984"		/* AGENTD_URL without a port */
#define CLIENT_CONNECT_MS	10000		/* TCP connect timeout, ms */
#define CLIENT_HEADER_MAX	(64 * 1024)	/* bytes of an answer's head */
#define CLIENT_CAUSE_MAX	512		/* bytes of a cause */

struct client;

/* A complete answer. */
struct client_resp {
	int	 status;
	char	*body;		/* malloc'd, NUL-terminated (also when empty) */
	size_t	 len;
	char	 ctype[128];	/* Content-Type, "" when none */
};

/*
 * Choose the endpoint: the unix socket path, or, when url is not NULL, TCP
 * to "http://HOST[:PORT][/PREFIX]" (also "HOST:PORT") with token (may be
 * NULL) sent as a Bearer token.  Returns 0, or -1 with cause for a bad URL.
 */
int		 client_target(const char *socket_path, const char *url,
		     const char *token, char *cause, size_t causelen);
/*
 * Choose vsock to "CID:PORT" (CID a number, host or local) with token (may
 * be NULL) sent as a Bearer token.  Returns 0, or -1 with cause.
 */
int		 client_target_vsock(const char *spec, const char *token,
		     char *cause, size_t causelen);
/*
 * A new connection to the endpoint, blocking, for raw bytes (agentctl
 * pipe).  Returns the fd, or -1 with cause.
 */
int		 client_dial(char *cause, size_t causelen);
/* The endpoint for messages: the socket path, the URL, or vsock:CID:PORT. */
const char	*client_where(void);
/* Whether the endpoint is the unix socket. */
int		 client_is_unix(void);

struct client	*client_new(void);
void		 client_free(struct client *);

/*
 * Send one request and read its answer into *resp (free it with
 * client_resp_free).  body may be NULL (no body; POST gets
 * Content-Length: 0); ctype NULL means none.  timeout_ms bounds the whole
 * exchange (0: none).  Returns 0 for any HTTP status, -1 with cause when
 * agentd could not be reached or the exchange failed.
 */
int		 client_request(struct client *, const char *method,
		     const char *path, const char *ctype, const void *body,
		     size_t len, int timeout_ms, struct client_resp *resp,
		     char *cause, size_t causelen);
void		 client_resp_free(struct client_resp *);

#endif /* AGENTCTL_CLIENT_H */
