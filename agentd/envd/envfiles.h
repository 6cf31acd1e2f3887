/*
 * envfiles.h -- envd's plain files routes on the --envd-listen listeners:
 * GET /files (a file's bytes) and POST /files (multipart/form-data `file`
 * parts, or an application/octet-stream body; Content-Encoding: gzip
 * taken), with envd's `path`, `username` and signed-URL queries
 * (`signature`, `signature_expiration`: v1_ and the unpadded base64 of
 * SHA-256("path:read|write:username:token[:expiration]")).
 *
 * Both go through agentd's files code on a files worker (files.h): as
 * envd's calls, as root (what they make given to the call's user, only
 * root's symlinks followed, and the user's own only by acting as the user
 * from there), or with --envd-confine-files acting as the user; the same
 * refusals of symlinks and hard links as /v1/files either way.  GET is
 * GET /v1/files's answer (files_get_as()).  POST writes each file in place
 * as envd does (fileio_open_inplace(): a watcher sees CREATE, WRITE of the
 * file itself); a file there that the user does not own keeps none of its
 * set-id and group/other write bits; a new one is 0644 less the umask.
 * Each X-Metadata-<key> header becomes the xattr user.e2b.<key> of every
 * file written (fsentry.h), replacing the set they had; bad metadata is
 * 400 before anything is written.  A gzip body is inflated whole before
 * anything is written: with the token up to --envd-max-upload in
 * --envd-spool-dir, allowed by its signature alone up to --max-body in
 * memory, never spooled; past it 413.  Errors in envd's shape
 * {"code": STATUS, "message": "..."}.  Event loop thread only.
 */
#ifndef AGENTD_ENVFILES_H
#define AGENTD_ENVFILES_H

struct config;

/* Register the routes with the Connect core (cfg: --max-body). */
void	envfiles_register(const struct config *);

#endif /* AGENTD_ENVFILES_H */
