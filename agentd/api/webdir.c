/*
 * webdir.c -- the web terminal's files at /term/ (webdir.h).
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "config.h"
#include "http.h"
#include "log.h"
#include "proto.h"
#include "util.h"
#include "webdir.h"

#define WEBDIR_PATH_MAX		256	/* bytes of a path under /term/ */

/* openat2(2), Linux 5.6; defined here for older headers and musl. */
#ifndef RESOLVE_BENEATH
#define RESOLVE_NO_MAGICLINKS	0x02
#define RESOLVE_BENEATH		0x08
#endif
struct webdir_open_how {
	uint64_t	flags;
	uint64_t	mode;
	uint64_t	resolve;
};

static int		 webdir_fd = -1;
static uint64_t		 webdir_file_max;
static uint64_t		 webdir_served;

static const char	*webdir_type(const char *);
static int		 webdir_plain(const char *);
static int		 webdir_open(const char *);
static void		 webdir_headers(struct evhttp_request *);

/* Open the folder of the page's files. */
void
webdir_init(const char *dir, uint64_t file_max)
{
	webdir_file_max = file_max;
	if (dir != NULL && *dir == '\0')
		return;
	webdir_fd = open(dir != NULL ? dir : CONFIG_WEB_DIR_DEFAULT,
	    O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (webdir_fd == -1 && dir != NULL)
		log_warn("%s: --web-dir %s: %s (/term/ is 404)", __func__, dir,
		    strerror(errno));
	else if (webdir_fd != -1)
		log_info("%s: serving %s at /term/", __func__, dir != NULL ?
		    dir : CONFIG_WEB_DIR_DEFAULT);
}

/* The Content-Type of a name, by its extension. */
static const char *
webdir_type(const char *name)
{
	static const char *const types[] = {
		".html", "text/html; charset=utf-8",
		".js", "text/javascript; charset=utf-8",
		".mjs", "text/javascript; charset=utf-8",
		".css", "text/css; charset=utf-8",
		".json", "application/json",
		".map", "application/json",
		".svg", "image/svg+xml",
		".png", "image/png",
		".ico", "image/x-icon",
		".woff2", "font/woff2",
		".txt", "text/plain; charset=utf-8",
	};
	const char	*dot = strrchr(name, '.');
	size_t		 i;

	for (i = 0; dot != NULL && i < nitems(types); i += 2)
		if (strcmp(dot, types[i]) == 0)
			return (types[i + 1]);
	return ("application/octet-stream");
}

/*
 * Whether a path under /term/ is plain: A-Z a-z 0-9 . _ - and '/', no
 * component empty or starting with '.' (so no "." or ".." and no hidden
 * file), no '%' (nothing to decode).
 */
static int
webdir_plain(const char *p)
{
	const char	*c;

	if (*p == '\0' || strlen(p) > WEBDIR_PATH_MAX)
		return (0);
	for (c = p; *c != '\0'; c++) {
		if ((c == p || c[-1] == '/') && (*c == '.' || *c == '/'))
			return (0);
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' ||
		    *c == '-' || *c == '/'))
			return (0);
	}
	return (c[-1] != '/');
}

/*
 * Open a plain path beneath the folder: openat2's RESOLVE_BENEATH (symlinks
 * that stay inside it are followed); without openat2, a walk that follows
 * no symlink.  The fd, or -1.
 */
static int
webdir_open(const char *path)
{
	struct webdir_open_how	 how;
	char			 name[WEBDIR_PATH_MAX + 1], *p, *slash;
	int			 fd, dfd, flags = O_RDONLY | O_NONBLOCK |
				    O_NOCTTY | O_CLOEXEC;

	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)flags;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
#ifdef SYS_openat2
	fd = (int)syscall(SYS_openat2, webdir_fd, path, &how, sizeof how);
	if (fd != -1 || errno != ENOSYS)
		return (fd);
#endif
	snprintf(name, sizeof name, "%s", path);
	dfd = webdir_fd;
	for (p = name; (slash = strchr(p, '/')) != NULL; p = slash + 1) {
		*slash = '\0';
		fd = openat(dfd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (dfd != webdir_fd)
			close(dfd);
		if ((dfd = fd) == -1)
			return (-1);
	}
	fd = openat(dfd, p, flags | O_NOFOLLOW);
	if (dfd != webdir_fd)
		close(dfd);
	return (fd);
}

/* The headers of every answer of /term. */
static void
webdir_headers(struct evhttp_request *req)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Security-Policy", "default-src 'self'; "
	    "script-src 'self'; style-src 'self' 'unsafe-inline'; "
	    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
	    "form-action 'self'; frame-ancestors 'none'");
	evhttp_add_header(h, "X-Frame-Options", "DENY");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Referrer-Policy", "no-referrer");
	evhttp_add_header(h, "Cache-Control", "no-cache");
}

/* Answer GET or HEAD /term[/...]. */
void
webdir_route(struct http_req *hr)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(hr->req);
	struct evbuffer		*out;
	struct stat		 st;
	const char		*rel = hr->path[5] == '/' ? hr->path + 6 : NULL;
	char			 loc[WEBDIR_PATH_MAX + 16], num[32];
	int			 fd;

	if (http_method(hr, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD) != 0)
		return;
	webdir_headers(hr->req);
	if (rel == NULL) {
		snprintf(loc, sizeof loc, "/term/%s%.*s", *hr->query != '\0' ?
		    "?" : "", WEBDIR_PATH_MAX, hr->query);
		evhttp_add_header(h, "Location", loc);
		http_fail(hr->req, 301, "moved", "the page is at /term/");
		return;
	}
	if (*rel == '\0')
		rel = "index.html";
	if (webdir_fd == -1 || !webdir_plain(rel) ||
	    (fd = webdir_open(rel)) == -1) {
		http_fail(hr->req, 404, "not_found", "no file %s", hr->path);
		return;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > webdir_file_max) {
		close(fd);
		http_fail(hr->req, 404, "not_found", "no file %s (not a "
		    "regular file, or over --web-file-max)", hr->path);
		return;
	}
	if ((out = evbuffer_new()) == NULL)
		fatal("%s: out of memory", __func__);
	evhttp_add_header(h, "Content-Type", webdir_type(rel));
	snprintf(num, sizeof num, "%jd", (intmax_t)st.st_size);
	evhttp_add_header(h, "Content-Length", num);
	/* evhttp would send a HEAD answer's body: only its length goes. */
	if (hr->method == EVHTTP_REQ_HEAD || st.st_size == 0)
		close(fd);
	else if (evbuffer_add_file(out, fd, 0, st.st_size) != 0)
		fatal("%s: out of memory", __func__);	/* closed fd */
	webdir_served++;
	http_count(200);
	evhttp_send_reply(hr->req, 200, "OK", out);
	evbuffer_free(out);
}

/* agentd_web_files_total and agentd_web_file_max_bytes. */
void
webdir_metrics(struct proto_buf *b)
{
	proto_buf_printf(b, "# TYPE agentd_web_files_total counter\n"
	    "agentd_web_files_total %" PRIu64 "\n"
	    "# TYPE agentd_web_file_max_bytes gauge\n"
	    "agentd_web_file_max_bytes %" PRIu64 "\n", webdir_served,
	    webdir_file_max);
}
