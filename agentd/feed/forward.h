/*
 * forward.h -- services on localhost reach the platform: a TCP service
 * that listens only on localhost (127.0.0.1 or ::1, as envd) gets a listener on
 * the sandbox's outward address and the same port, and each connection
 * accepted there is spliced to the service, in the loop, with no helper
 * process (envd runs a socat per port).
 *
 * The port list (ports.h) drives it: forward_sync() after each refresh
 * opens the forwards of ports listened on loopback only, and closes those
 * whose service went (its open connections run to their end).  A port
 * also listened on by a wildcard (0.0.0.0, ::) or on the outward address
 * gets no forward.
 *
 * Bounds: forwards at once, connections per forward (one more is closed
 * at once and counted), and bytes held per connection and direction
 * (reading stops past them until the other side drains).  Half-closes are
 * passed on both ways; an error on either side closes both.
 *
 * Event loop thread only.
 */
#ifndef AGENTD_FORWARD_H
#define AGENTD_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#define FORWARD_INTERVAL_MS	1000	/* the list's refresh at least, ms */
#define FORWARD_BACKLOG		128	/* a forward's listen() backlog */

struct event_base;
struct ports_entry;
struct ports_set;
struct proto_buf;
struct upgstate;
struct upgstate_w;

/*
 * Start forwarding: to address (a literal; NULL: the IPv4 address of the
 * interface with the default route, looked up when first needed), at most
 * max forwards, max_conns connections each and total_conns in all, buffer
 * bytes held per connection and direction.  0 or -1 (a bad address).
 */
int	 forward_init(struct event_base *, const char *address, size_t max,
	    size_t max_conns, size_t total_conns, size_t buffer);
/* Close every forward and connection. */
void	 forward_free(void);
/* Open and close forwards to match a refreshed list (sorted). */
void	 forward_sync(const struct ports_set *);
/*
 * The forward an entry is reached through: "ADDR:PORT" and its open
 * connections, or NULL.
 */
const char *forward_of(const struct ports_entry *, size_t *conns);

/* Append "agentd_forward..." lines for GET /metrics. */
void	 forward_metrics(struct proto_buf *);
/* Append "\"forward\": {...}" for GET /debug/stat. */
void	 forward_stat(struct proto_buf *);

/*
 * The live upgrade: write a [forward] section per forward (its listener's
 * fd, each connection's two fds, flags and unsent bytes in the blob), the
 * fds added to keep[*nkeep] up to max.  -1 when they do not fit.
 */
int	 forward_save(struct upgstate_w *, int *keep, size_t *nkeep,
	    size_t max);
/* Read one [forward] section's items (its header just read). */
void	 forward_load(struct upgstate *);

#endif /* AGENTD_FORWARD_H */
