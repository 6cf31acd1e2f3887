/*
 * compose.h -- envd's POST /files/compose on the --envd-listen listeners:
 * {"source_paths": [...], "destination": "...", "username": "..."}, the
 * sources concatenated in order into the destination, then removed; the
 * answer envd's EntryInfo {"name", "path", "type": "file"}.
 *
 * On a files worker (files_call()), as envd's file calls are: as root,
 * what it makes given to the call's user (the destination's missing
 * folders too, envd's EnsureDirs), or with --envd-confine-files as the
 * user; the same refusals of symlinks and hard links as GET /files.  The
 * bytes go into a temporary file beside the destination, kernel to kernel
 * (copy_file_range; read and write where the file systems cannot), which
 * is renamed over it only when all went well: a failure leaves the
 * destination and every source as they were.  At most
 * --envd-compose-sources sources (more: 400); sources larger together than
 * the destination's file system has room for: 507 before anything is
 * written.  Errors in envd's shape {"code": STATUS, "message": "..."}:
 * 400 bad input, 401 an unknown user, 404 a missing source, 507 no room.
 * Event loop thread only (the work itself on its worker).
 */
#ifndef AGENTD_COMPOSE_H
#define AGENTD_COMPOSE_H

struct config;
struct proto_buf;

/* Register the route (cfg: --envd-compose-sources). */
void	compose_register(const struct config *);
/* Append the compose figures to a /metrics answer. */
void	compose_metrics(struct proto_buf *);

#endif /* AGENTD_COMPOSE_H */
