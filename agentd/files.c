/*
 * files.c -- GET and PUT /v1/files, POST /v1/files/stat and
 * POST /v1/files/fetch (see files.h).
 */
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "agentd.h"
#include "fetch.h"
#include "fileio.h"
#include "files.h"
#include "http.h"
#include "log.h"
#include "proto.h"
#include "util.h"

/* A fetch on its worker thread. */
struct files_job {
	TAILQ_ENTRY(files_job)		 entry;
	struct proto_fetch		 req;	/* read-only while the worker runs */
	atomic_int			 cancel;	/* loop sets, worker reads */
	pthread_t			 thread;
	/* Written by the worker; read by the loop after pthread_join. */
	int				 rc;
	struct fetch_result		 res;
	struct proto_err		 err;
	/* Loop only. */
	int				 joined;	/* pthread_join done */
	struct evhttp_request		*http;	/* NULL once the client is gone */
	struct evhttp_connection	*evcon;
	struct event			*closed;
};
TAILQ_HEAD(files_jobs, files_job);

static struct files_jobs	 files_jobs = TAILQ_HEAD_INITIALIZER(files_jobs);
static size_t			 files_njobs;
static int			 files_pipe[2] = { -1, -1 };	/* worker -> loop */
static struct event		*files_pipe_ev;

static void	files_get(struct http_req *);
static void	files_get_pseudo(struct http_req *, int fd,
		    const struct proto_files_query *);
static void	files_put(struct http_req *);
static void	files_stat(struct http_req *);
static void	files_fetch(struct http_req *);
static int	files_pipe_open(void);
static void	files_pipe_close(void);
static void	*files_worker(void *);
static void	files_fetch_done(evutil_socket_t, short, void *);
static void	files_fetch_closed(evutil_socket_t, short, void *);
static void	files_conn_gone(struct evhttp_connection *, void *);
static void	files_reply_err(struct evhttp_request *, const struct proto_err *);

/* Route a request under /v1/files. */
void
files_route(struct http_req *hr)
{
	const char	*p = hr->path;

	if (strcmp(p, "/v1/files") == 0 || strcmp(p, "/v1/files/") == 0) {
		if (http_method(hr, EVHTTP_REQ_GET | EVHTTP_REQ_PUT) != 0)
			return;
		if (hr->method == EVHTTP_REQ_GET)
			files_get(hr);
		else
			files_put(hr);
	} else if (strcmp(p, "/v1/files/stat") == 0) {
		if (http_method(hr, EVHTTP_REQ_POST) == 0)
			files_stat(hr);
	} else if (strcmp(p, "/v1/files/fetch") == 0) {
		if (http_method(hr, EVHTTP_REQ_POST) == 0)
			files_fetch(hr);
	} else
		http_fail(hr->req, 404, "not_found", "no route %s", p);
}

/* Answer with an error (a status agentd does not use becomes 500). */
static void
files_reply_err(struct evhttp_request *req, const struct proto_err *err)
{
	struct proto_err	e = *err;

	if (e.status < 400 || e.status > 599)
		e.status = 500;
	http_reply_error(req, &e, NULL);
}

/* GET /v1/files?path=P&offset=O&length=L */
static void
files_get(struct http_req *hr)
{
	struct proto_files_query	 q;
	struct proto_err		 err;
	struct evbuffer_file_segment	*seg;
	struct evbuffer			*out;
	struct stat			 st;
	uint64_t			 off, len;
	int				 fd;

	if (proto_parse_files_query(hr->query, &q, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	/* O_NONBLOCK: a FIFO must not hang the loop in open(). */
	fd = open(q.path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd == -1 || fstat(fd, &st) == -1) {
		fileio_fail(&err, errno, "open", q.path);
		if (err.status == 404)
			snprintf(err.message, sizeof err.message,
			    "no file %.200s", q.path);
		files_reply_err(hr->req, &err);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		http_fail(hr->req, 409, "is_a_directory",
		    "%.200s is a directory", q.path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		http_fail(hr->req, 409, "not_a_file",
		    "%.200s is not a regular file", q.path);
		goto out;
	}
	if (st.st_size == 0) {
		files_get_pseudo(hr, fd, &q);	/* takes fd */
		fd = -1;
		goto out;
	}
	off = q.offset < (uint64_t)st.st_size ? q.offset : (uint64_t)st.st_size;
	len = (uint64_t)st.st_size - off;
	if (q.length < len)
		len = q.length;
	if ((out = evbuffer_new()) == NULL)
		fatal("%s: out of memory", __func__);
	/*
	 * Only a buffer that drains to an fd takes a segment as sendfile
	 * (else libevent mmaps the file, and its pages count in our RSS).
	 * This one's chains move unread into the connection's output.
	 */
	evbuffer_set_flags(out, EVBUFFER_FLAG_DRAINS_TO_FD);
	if (len > 0) {
		seg = evbuffer_file_segment_new(fd, (ev_off_t)off, (ev_off_t)len,
		    EVBUF_FS_CLOSE_ON_FREE);
		if (seg == NULL) {
			evbuffer_free(out);
			http_fail(hr->req, 500, "internal_error",
			    "cannot send %.200s", q.path);
			goto out;
		}
		fd = -1;		/* the segment's now */
		if (evbuffer_add_file_segment(out, seg, 0, (ev_off_t)len) != 0)
			fatal("%s: out of memory", __func__);
		evbuffer_file_segment_free(seg);	/* out holds it */
	}
	evhttp_add_header(evhttp_request_get_output_headers(hr->req),
	    "Content-Type", "application/octet-stream");
	evhttp_send_reply(hr->req, 200, "OK", out);
	evbuffer_free(out);
out:
	if (fd != -1)
		close(fd);
	proto_files_query_free(&q);
}

/*
 * A regular file of size 0 may be a pseudo-file (/proc, /sys) whose size
 * shows only when read: read it, up to FILES_PSEUDO_MAX bytes.
 */
static void
files_get_pseudo(struct http_req *hr, int fd, const struct proto_files_query *q)
{
	struct proto_buf	 b = { 0 };
	struct proto_err	 err;
	char			*p;
	ssize_t			 n;
	uint64_t		 off, len;

	for (;;) {
		if (b.len >= FILES_PSEUDO_MAX)
			break;
		if ((p = proto_buf_space(&b, 65536)) == NULL)
			fatal("%s: out of memory", __func__);
		n = read(fd, p, 65536);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			fileio_fail(&err, errno, "read", q->path);
			files_reply_err(hr->req, &err);
			close(fd);
			proto_buf_free(&b);
			return;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
	}
	close(fd);
	off = q->offset < b.len ? q->offset : b.len;
	len = b.len - off;
	if (q->length < len)
		len = q->length;
	if (off > 0)
		memmove(b.data, b.data + off, (size_t)len);
	b.len = (size_t)len;
	http_reply_raw(hr->req, 200, "application/octet-stream", &b);
}

/* PUT /v1/files?path=P&mode=0644&mkdir=true with the raw bytes. */
static void
files_put(struct http_req *hr)
{
	struct proto_files_query	 q;
	struct proto_err		 err;
	struct proto_buf		 b = { 0 };
	struct fileio_tmp		 t;
	uint8_t				 sha[32];

	if (proto_parse_files_query(hr->query, &q, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	if (fileio_tmp_open(q.path, q.mkdir, &t, &err) != 0) {
		files_reply_err(hr->req, &err);
		goto out;
	}
	if (fileio_tmp_write(&t, hr->body, hr->body_len, &err) != 0) {
		fileio_tmp_abort(&t);
		files_reply_err(hr->req, &err);
		goto out;
	}
	fetch_sha256(hr->body, hr->body_len, sha);
	if (fileio_tmp_commit(&t, q.mode >= 0 ? (mode_t)q.mode :
	    FILEIO_MODE_DEFAULT, &err) != 0) {
		files_reply_err(hr->req, &err);
		goto out;
	}
	proto_render_file(&b, q.path, hr->body_len, sha);
	http_reply(hr->req, 200, &b);
out:
	proto_files_query_free(&q);
}

/* POST /v1/files/stat {"paths": [...]} */
static void
files_stat(struct http_req *hr)
{
	struct proto_stat_req	 r;
	struct proto_stat	*res;
	struct proto_err	 err;
	struct proto_buf	 b = { 0 };
	struct stat		 st;
	char			(*names)[16], *target;
	ssize_t			 n;
	size_t			 i;

	if (proto_parse_stat(hr->body, hr->body_len, &r, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	res = xcalloc(r.n + 1, sizeof *res);
	names = xcalloc(r.n + 1, sizeof *names);
	target = xmalloc(PROTO_PATH_MAX + 1);
	for (i = 0; i < r.n; i++) {
		res[i].path = r.paths[i];
		if (lstat(r.paths[i], &st) == -1) {
			res[i].error = fileio_errno_name(errno, names[i]);
			continue;
		}
		res[i].exists = 1;
		if (S_ISREG(st.st_mode))
			res[i].type = PROTO_FTYPE_FILE;
		else if (S_ISDIR(st.st_mode))
			res[i].type = PROTO_FTYPE_DIR;
		else if (S_ISLNK(st.st_mode))
			res[i].type = PROTO_FTYPE_SYMLINK;
		else
			res[i].type = PROTO_FTYPE_OTHER;
		res[i].size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
		res[i].mode = st.st_mode & 07777;
		res[i].mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 +
		    st.st_mtim.tv_nsec / 1000000;
		res[i].uid = st.st_uid;
		res[i].gid = st.st_gid;
		if (S_ISLNK(st.st_mode) &&
		    (n = readlink(r.paths[i], target, PROTO_PATH_MAX)) >= 0) {
			target[n] = '\0';
			res[i].target = xstrdup(target);
		}
	}
	proto_render_stat(&b, res, r.n);
	for (i = 0; i < r.n; i++)
		free((char *)res[i].target);
	free(target);
	free(names);
	free(res);
	proto_stat_req_free(&r);
	http_reply(hr->req, 200, &b);
}

/* The pipe from the workers, and its event; made at the first fetch. */
static int
files_pipe_open(void)
{
	if (files_pipe_ev != NULL)
		return (0);
	if (pipe2(files_pipe, O_CLOEXEC) == -1)
		return (-1);
	/* The write side blocks (it never fills: 8 bytes a job). */
	if (fd_nonblock_cloexec(files_pipe[0]) != 0)
		goto fail;
	files_pipe_ev = event_new(agentd_base, files_pipe[0],
	    EV_READ | EV_PERSIST, files_fetch_done, NULL);
	if (files_pipe_ev == NULL)
		fatal("%s: out of memory", __func__);
	event_add(files_pipe_ev, NULL);
	return (0);
fail:
	close(files_pipe[0]);
	close(files_pipe[1]);
	files_pipe[0] = files_pipe[1] = -1;
	return (-1);
}

/* Close the pipe once no fetch runs. */
static void
files_pipe_close(void)
{
	if (files_pipe_ev == NULL)
		return;
	event_free(files_pipe_ev);
	files_pipe_ev = NULL;
	close(files_pipe[0]);
	close(files_pipe[1]);
	files_pipe[0] = files_pipe[1] = -1;
}

/* A fetch worker: download, then hand the job back to the loop. */
static void *
files_worker(void *arg)
{
	struct files_job	*j = arg;
	ssize_t			 n;

	j->rc = fetch_run(&j->req, &j->cancel, &j->res, &j->err);
	/*
	 * Cross-thread: the job pointer goes to the loop through the pipe
	 * (8 bytes: atomic; the pipe holds far more than FILES_FETCH_MAX).
	 * No logging here: the log is the loop's.
	 */
	do
		n = write(files_pipe[1], &j, sizeof j);
	while (n == -1 && errno == EINTR);
	return (NULL);
}

/* Workers finished: answer their requests and free their jobs. */
static void
files_fetch_done(evutil_socket_t fd, short events, void *arg)
{
	struct files_job	*j;
	struct proto_buf	 b;

	while (read(fd, &j, sizeof j) == (ssize_t)sizeof j) {
		if (!j->joined)
			pthread_join(j->thread, NULL);
		TAILQ_REMOVE(&files_jobs, j, entry);
		files_njobs--;
		if (j->http != NULL) {
			event_free(j->closed);
			evhttp_connection_set_closecb(j->evcon, NULL, NULL);
			if (j->rc == 0) {
				memset(&b, 0, sizeof b);
				proto_render_file(&b, j->req.path, j->res.size,
				    j->res.sha256);
				http_reply(j->http, 200, &b);
			} else
				files_reply_err(j->http, &j->err);
		}
		log_debug("%s: fetch into %s: %s", __func__, j->req.path,
		    j->rc == 0 ? "done" : j->err.code);
		proto_fetch_free(&j->req);
		free(j);
	}
	if (files_njobs == 0)
		files_pipe_close();
}

/* The client of a running fetch closed its connection: free it. */
static void
files_fetch_closed(evutil_socket_t fd, short events, void *arg)
{
	struct files_job	*j = arg;

	if (!http_client_gone(fd, events))
		return;		/* a pipelined request, not a close */
	log_debug("%s: fetch into %s: client fd %d went away", __func__,
	    j->req.path, (int)fd);
	evhttp_connection_free(j->evcon);	/* files_conn_gone runs */
}

/* The connection of a running fetch is going away: cancel the fetch. */
static void
files_conn_gone(struct evhttp_connection *evcon, void *arg)
{
	struct files_job	*j = arg;

	struct timespec		 ts;

	atomic_store(&j->cancel, 1);
	j->http = NULL;
	if (j->closed != NULL) {
		event_free(j->closed);
		j->closed = NULL;
	}
	/*
	 * At shutdown the loop will not run again: give the worker a moment
	 * to see the cancel and remove its temporary file before agentd
	 * exits.  Its job stays listed (its pointer may be in the pipe).
	 */
	if (agentd_stopping()) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += FILES_FETCH_STOP_MS / 1000;
		if (pthread_timedjoin_np(j->thread, NULL, &ts) == 0)
			j->joined = 1;
		else
			log_warn("%s: fetch into %s still running", __func__,
			    j->req.path);
	}
}

/* POST /v1/files/fetch */
static void
files_fetch(struct http_req *hr)
{
	struct files_job	*j;
	struct proto_fetch	 req;
	struct proto_err	 err;
	pthread_attr_t		 attr;
	sigset_t		 all, old;
	int			 error;

	if (proto_parse_fetch(hr->body, hr->body_len, &req, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	if (agentd_stopping()) {
		http_fail(hr->req, 503, "shutting_down",
		    "agentd is shutting down");
		proto_fetch_free(&req);
		return;
	}
	if (files_njobs >= FILES_FETCH_MAX) {
		http_fail(hr->req, 429, "too_many_fetches",
		    "%d fetches are running; try again later", FILES_FETCH_MAX);
		proto_fetch_free(&req);
		return;
	}
	if (files_pipe_open() != 0) {
		http_fail(hr->req, 500, "internal_error", "pipe: %s",
		    strerror(errno));
		proto_fetch_free(&req);
		return;
	}
	j = xcalloc(1, sizeof *j);
	j->req = req;
	atomic_init(&j->cancel, 0);
	j->http = hr->req;
	j->evcon = evhttp_request_get_connection(hr->req);

	/* The worker takes no signal: they are the loop's (signalfd). */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, FILES_FETCH_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	error = pthread_create(&j->thread, &attr, files_worker, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (error != 0) {
		http_fail(hr->req, 500, "internal_error",
		    "cannot start a fetch: %s", strerror(error));
		proto_fetch_free(&j->req);
		free(j);
		if (files_njobs == 0)
			files_pipe_close();
		return;
	}
	TAILQ_INSERT_TAIL(&files_jobs, j, entry);
	files_njobs++;

	/* evhttp stops reading while a request is out: watch for the close. */
	j->closed = http_watch_client(hr->req, files_fetch_closed, j);
	evhttp_connection_set_closecb(j->evcon, files_conn_gone, j);
}
