/*
 * webdir.h -- the web terminal's files (--web-dir) at /term/.
 *
 * GET and HEAD of /term/PATH answer the regular file PATH of the folder
 * (/term/ its index.html), without the token: the files hold no data, so
 * http.c lets them through; the gate's Host and cross-site rules apply as
 * to every route.  Every answer of /term carries the page's
 * Content-Security-Policy, X-Frame-Options: DENY and X-Content-Type-Options:
 * nosniff; a Content-Type by the name's extension.  404 for a path that is
 * not plain (only A-Z a-z 0-9 . _ - /, no component starting with '.'), a
 * file that is not regular, that lies outside the folder (openat2
 * RESOLVE_BENEATH: no "..", no symlink out) or is larger than
 * --web-file-max.  /term redirects to /term/.  Event loop thread only.
 */
#ifndef AGENTD_WEBDIR_H
#define AGENTD_WEBDIR_H

#include <stdint.h>

struct http_req;
struct proto_buf;

/*
 * Open the folder: dir, or the default when dir is NULL and it exists ("":
 * none).  Without one, /term is 404.  Logs what it serves.
 */
void	 webdir_init(const char *dir, uint64_t file_max);
/* Answer GET or HEAD /term[/...]. */
void	 webdir_route(struct http_req *);
/* agentd_web_files_total, agentd_web_file_max_bytes into /metrics. */
void	 webdir_metrics(struct proto_buf *);

#endif /* AGENTD_WEBDIR_H */
