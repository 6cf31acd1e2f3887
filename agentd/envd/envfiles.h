/*
 * envfiles.h -- envd's plain files routes on the --envd-listen listeners:
 * GET /files (a file's bytes) and POST /files (multipart/form-data `file`
 * parts, or an application/octet-stream body; Content-Encoding: gzip
 * taken), with envd's `path`, `username` and signed-URL queries
 * (`signature`, `signature_expiration`: v1_ and the unpadded base64 of
 * SHA-256("path:read|write:username:token[:expiration]")).
 *
 * Both go through agentd's files code: GET is GET /v1/files's answer
 * (files_get_as()), POST writes each file atomically on a files worker
 * acting as the user (fileio.h): the same refusals of symlinks and hard
 * links as /v1/files.  A file that exists keeps its mode (envd writes in
 * place); a new one is 0644.  Bodies are at most --max-body (a gzip
 * body's bytes inflated: multipart at most --max-body, octet-stream any
 * size, written as they inflate).  Errors in envd's shape
 * {"code": STATUS, "message": "..."}.  Event loop thread only.
 */
#ifndef AGENTD_ENVFILES_H
#define AGENTD_ENVFILES_H

struct config;

/* Register the routes with the Connect core (cfg: --max-body). */
void	envfiles_register(const struct config *);

#endif /* AGENTD_ENVFILES_H */
