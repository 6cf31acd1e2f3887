/*
 * vsock.h -- AF_VSOCK for agentd's listeners and agentctl: the addresses
 * (--vsock-listen PORT, agentctl --vsock CID:PORT), the listening socket,
 * and who a peer is.  No state, no logging: every function returns -1 with
 * errno, or with a cause the caller shows.  agentctl links this file too.
 *
 * A virtio-vsock guest talks to the host (CID 2) and, with the
 * vsock_loopback module, to itself (CID 1, or its own CID); a peer with
 * another CID is another VM that the host lets through (sibling
 * communication).  Without a token agentd accepts the first two only
 * (vsock_peer_local_or_host()); with one, any CID that sends it.
 */
#ifndef AGENTD_VSOCK_H
#define AGENTD_VSOCK_H

#include <stddef.h>
#include <stdint.h>

#define VSOCK_CID_LOCAL		1u	/* VMADDR_CID_LOCAL: vsock_loopback */
#define VSOCK_CID_HOST		2u	/* VMADDR_CID_HOST */
#define VSOCK_PORT_MAX		0xfffffffeu /* VMADDR_PORT_ANY is above */
#define VSOCK_NAME_MAX		32	/* bytes of "vsock:CID:PORT" and NUL */

/*
 * Parse a port: decimal, 1..VSOCK_PORT_MAX, nothing else.  Returns 0, or
 * -1 with *cause (static text).
 */
int	vsock_parse_port(const char *, uint32_t *port, const char **cause);

/*
 * Parse "CID:PORT": CID decimal below VMADDR_CID_ANY, or "host" (2) or
 * "local" (1); PORT as vsock_parse_port().  Returns 0, or -1 with *cause.
 */
int	vsock_parse_addr(const char *, uint32_t *cid, uint32_t *port,
	    const char **cause);

/*
 * A nonblocking, close-on-exec AF_VSOCK stream socket bound to port on any
 * CID, listening with backlog.  Returns the fd, or -1 with errno
 * (EAFNOSUPPORT: no vsock module loaded; ENODEV: no transport).
 */
int	vsock_listen(uint32_t port, int backlog);

/*
 * A connected, blocking, close-on-exec AF_VSOCK stream socket to cid:port.
 * Returns the fd, or -1 with errno.
 */
int	vsock_connect(uint32_t cid, uint32_t port);

/*
 * The CID and port of a connected socket's peer.  Returns 0, or -1 with
 * errno (EAFNOSUPPORT: fd is no vsock socket).
 */
int	vsock_peer(int fd, uint32_t *cid, uint32_t *port);

/*
 * Whether a connected socket's peer is the host (CID 2) or this machine
 * (CID 1, or the socket's own local CID): the peers accepted without a
 * token.  0 for any other, and when fd is no vsock socket.
 */
int	vsock_peer_local_or_host(int fd);

/* "vsock:CID:PORT" into buf (VSOCK_NAME_MAX bytes); returns buf. */
char	*vsock_name(char *buf, size_t len, uint32_t cid, uint32_t port);

#endif /* AGENTD_VSOCK_H */
