/*
 * files.c -- GET and PUT /v1/files, POST /v1/files/stat and
 * POST /v1/files/fetch (see files.h).
 */
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

#include "config.h"
#include "fetch.h"
#include "fileio.h"
#include "files.h"
#include "http.h"
#include "log.h"
#include "outq.h"
#include "proto.h"
#include "pty.h"
#include "stop.h"
#include "util.h"

/* What a job does. */
enum files_kind {
	FILES_GET,
	FILES_PUT,
	FILES_STAT,
	FILES_FETCH,
	FILES_CALL,	/* files_call(): another module's work */
};

/* How a GET's bytes go out. */
enum files_send {
	FILES_SEND_FILE,	/* sendfile of fd, on the loop */
	FILES_SEND_BUF,		/* the bytes the worker read, in out */
	FILES_SEND_STREAM,	/* chunk by chunk from the worker */
};

/* A message from a worker to the loop. */
struct files_msg {
	struct files_job	*job;
	int			 what;
#define FILES_MSG_DONE		0	/* the job is over: join and answer */
#define FILES_MSG_CHUNK		1	/* a GET's chunk is ready to send */
};

/*
 * A files call on its worker thread.  The loop fills the request, the
 * worker the answer; the loop reads the answer after FILES_MSG_DONE (and
 * the chunk after FILES_MSG_CHUNK, while the worker waits for sent).
 */
struct files_job {
	TAILQ_ENTRY(files_job)		 entry;
	enum files_kind			 kind;
	/* The request: read-only while the worker runs. */
	struct proto_files_query	 q;	/* GET, PUT */
	struct proto_stat_req		 st;	/* STAT */
	struct proto_fetch		 req;	/* FETCH */
	files_work_fn			 work;	/* CALL */
	files_done_fn			 done;	/* CALL */
	void				*arg;	/* CALL */
	char				*call_user;	/* CALL, malloc'd */
	int				 envd;	/* errors in envd's shape */
	uid_t				 for_uid;	/* as root, for it; or -1 */
	const char			*user;	/* in one of the above */
	struct evbuffer			*body;	/* PUT: the request's bytes */
	const char			*body_data;
	size_t				 body_len;
	atomic_int			 cancel;	/* loop sets, worker reads */
	pthread_t			 thread;
	/* GET streaming: the loop says a chunk went out (or cancel). */
	pthread_mutex_t			 lock;
	pthread_cond_t			 cond;
	int				 sent;
	char				*chunk;		/* FILES_CHUNK bytes */
	size_t				 chunk_len;
	/* Written by the worker; read by the loop after a message. */
	int				 rc;
	struct fetch_result		 res;
	struct proto_err		 err;
	struct proto_buf		 out;	/* a JSON answer or GET's bytes */
	enum files_send			 send;
	int				 fd;	/* FILES_SEND_FILE */
	uint64_t			 off, len;
	/* Loop only. */
	int				 started;	/* a stream's head went out */
	int				 joined;	/* pthread_join done */
	struct evhttp_request		*http;	/* NULL once the client is gone */
	struct evhttp_connection	*evcon;
	struct event			*closed;
};
TAILQ_HEAD(files_jobs, files_job);

static struct files_jobs	 files_jobs = TAILQ_HEAD_INITIALIZER(files_jobs);
static size_t			 files_njobs;	/* jobs listed */
static size_t			 files_nfetches;	/* of them fetches */
static int			 files_pipe[2] = { -1, -1 };	/* worker -> loop */
static struct event		*files_pipe_ev;
static struct timespec		 files_stop_at;	/* shutdown: wait no later */
static struct event_base	*files_base;	/* the loop */
static const struct config	*files_cfg;

static void	files_get(struct http_req *);
static void	files_put(struct http_req *);
static void	files_stat(struct http_req *);
static void	files_fetch(struct http_req *);
static struct files_job *files_job_new(struct http_req *, enum files_kind);
static int	files_job_start(struct files_job *);
static void	files_job_free(struct files_job *);
static int	files_pipe_open(void);
static void	files_pipe_close(void);
static void	files_post(struct files_job *, int);
static void	*files_worker(void *);
static int	files_become(const char *, uid_t *, struct proto_err *);
static int	files_fs_kind(int);
static void	files_work_get(struct files_job *, uid_t);
static int	files_work_read_all(struct files_job *, int);
static int	files_work_stream(struct files_job *, int);
static void	files_work_put(struct files_job *, uid_t);
static void	files_work_stat(struct files_job *, uid_t);
static void	files_done(evutil_socket_t, short, void *);
static void	files_answer(struct files_job *);
static void	files_send_chunk(struct files_job *);
static void	files_chunk_sent(struct evhttp_connection *, void *);
static void	files_wake(struct files_job *);
static void	files_closed(evutil_socket_t, short, void *);
static void	files_conn_gone(struct evhttp_connection *, void *);
static void	files_reply_err(struct evhttp_request *, const struct proto_err *);
static void	files_reply_envd(struct evhttp_request *,
		    const struct proto_err *);

/* Set the loop and the configuration, and the downloads' limit. */
void
files_init(struct event_base *base, const struct config *cfg)
{
	files_base = base;
	files_cfg = cfg;
	fetch_init(cfg->max_fetch_bytes);
}

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

/* Calls running on workers now, for /metrics. */
void
files_running(size_t *calls, size_t *fetches)
{
	*calls = files_njobs - files_nfetches;
	*fetches = files_nfetches;
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

/*
 * Answer an error in envd's shape, {"code": STATUS, "message": "..."}: a
 * folder is 400 there, not 409.
 */
static void
files_reply_envd(struct evhttp_request *req, const struct proto_err *err)
{
	struct proto_buf	b = { 0 };
	int			status = err->status;

	if (status == 409)
		status = 400;
	if (status < 400 || status > 599)
		status = 500;
	proto_buf_printf(&b, "{\"code\":%d,\"message\":", status);
	proto_buf_json_string(&b, err->message, strlen(err->message));
	proto_buf_append(&b, "}", 1);
	http_reply_raw(req, status, "application/json", &b);
}

/* Send the file path to req as GET /v1/files does, acting as user. */
void
files_get_as(struct http_req *hr, const char *path, const char *user,
    uid_t uid)
{
	struct files_job	*j;
	struct proto_err	 err;

	if ((j = calloc(1, sizeof *j)) == NULL ||
	    (j->q.path = strdup(path)) == NULL ||
	    (user != NULL && (j->q.user = strdup(user)) == NULL)) {
		if (j != NULL)
			free(j->q.path);
		free(j);
		proto_fail(&err, 503, "out_of_memory", "no memory for a files "
		    "job; try again later");
		files_reply_envd(hr->req, &err);
		return;
	}
	j->kind = FILES_GET;
	j->envd = 1;
	j->for_uid = user == NULL ? uid : (uid_t)-1;
	j->fd = -1;
	j->q.path_len = strlen(path);
	j->q.length = UINT64_MAX;
	j->q.mode = -1;
	atomic_init(&j->cancel, 0);
	j->user = j->q.user;
	if (agentd_stopping())
		proto_fail(&err, 503, "shutting_down", "agentd is shutting down");
	else if (files_njobs - files_nfetches >= files_cfg->max_file_jobs)
		proto_fail(&err, 429, "too_many_file_jobs", "%zu files calls "
		    "are running (--max-file-jobs); try again later",
		    files_njobs - files_nfetches);
	else if (files_pipe_open() != 0)
		proto_fail(&err, 500, "internal_error", "pipe: %s",
		    strerror(errno));
	else {
		j->http = hr->req;
		j->evcon = evhttp_request_get_connection(hr->req);
		/* Started, or answered by files_job_start(). */
		(void)files_job_start(j);
		return;
	}
	files_reply_envd(hr->req, &err);
	files_job_free(j);
}

/* GET /v1/files?path=P&offset=O&length=L&user=U */
static void
files_get(struct http_req *hr)
{
	struct files_job	*j;

	if ((j = files_job_new(hr, FILES_GET)) == NULL)
		return;
	j->user = j->q.user;
	files_job_start(j);
}

/* PUT /v1/files?path=P&mode=0644&mkdir=true&user=U with the raw bytes. */
static void
files_put(struct http_req *hr)
{
	struct files_job	*j;
	struct evbuffer		*in;

	if ((j = files_job_new(hr, FILES_PUT)) == NULL)
		return;
	j->user = j->q.user;
	/* The body's chains move to the job: a client gone frees the request. */
	in = evhttp_request_get_input_buffer(hr->req);
	if ((j->body = evbuffer_new()) == NULL ||
	    evbuffer_add_buffer(j->body, in) != 0 ||
	    (evbuffer_get_length(j->body) > 0 &&
	    (j->body_data = (const char *)evbuffer_pullup(j->body, -1)) ==
	    NULL)) {
		http_fail(hr->req, 503, "out_of_memory",
		    "no memory for the body; try again later");
		files_job_free(j);
		return;
	}
	j->body_len = hr->body_len;
	files_job_start(j);
}

/* POST /v1/files/stat {"paths": [...], "user": U} */
static void
files_stat(struct http_req *hr)
{
	struct files_job	*j;

	if ((j = files_job_new(hr, FILES_STAT)) == NULL)
		return;
	j->user = j->st.user;
	files_job_start(j);
}

/* POST /v1/files/fetch */
static void
files_fetch(struct http_req *hr)
{
	struct files_job	*j;

	if ((j = files_job_new(hr, FILES_FETCH)) == NULL)
		return;
	j->user = j->req.user;
	files_job_start(j);
}

/*
 * Parse the request into a new job, or answer it (the parse error, 429
 * over the limits, 503 at shutdown or without memory) and return NULL.
 */
static struct files_job *
files_job_new(struct http_req *hr, enum files_kind kind)
{
	struct files_job	*j;
	struct proto_err	 err;
	int			 rc;

	if ((j = calloc(1, sizeof *j)) == NULL) {
		http_fail(hr->req, 503, "out_of_memory",
		    "no memory for a files job; try again later");
		return (NULL);
	}
	j->kind = kind;
	j->fd = -1;
	atomic_init(&j->cancel, 0);
	switch (kind) {
	case FILES_GET:
	case FILES_PUT:
		rc = proto_parse_files_query(hr->query, &j->q, &err);
		break;
	case FILES_STAT:
		rc = proto_parse_stat(hr->body, hr->body_len, &j->st, &err);
		break;
	default:
		rc = proto_parse_fetch(hr->body, hr->body_len, &j->req, &err);
		break;
	}
	if (rc != 0) {
		free(j);
		http_reply_error(hr->req, &err, NULL);
		return (NULL);
	}
	if (agentd_stopping())
		http_fail(hr->req, 503, "shutting_down",
		    "agentd is shutting down");
	else if (kind == FILES_FETCH && files_nfetches >= FILES_FETCH_MAX)
		http_fail(hr->req, 429, "too_many_fetches",
		    "%d fetches are running; try again later", FILES_FETCH_MAX);
	else if (kind != FILES_FETCH && files_njobs - files_nfetches >=
	    files_cfg->max_file_jobs)
		http_fail(hr->req, 429, "too_many_file_jobs", "%zu files calls "
		    "are running (--max-file-jobs); try again later",
		    files_njobs - files_nfetches);
	else if (files_pipe_open() != 0)
		http_fail(hr->req, 500, "internal_error", "pipe: %s",
		    strerror(errno));
	else {
		j->http = hr->req;
		j->evcon = evhttp_request_get_connection(hr->req);
		return (j);
	}
	files_job_free(j);
	return (NULL);
}

/*
 * Start the job's worker, or answer why not (a CALL's caller answers) and
 * free the job: 0 or -1.
 */
static int
files_job_start(struct files_job *j)
{
	pthread_attr_t	 attr;
	sigset_t	 all, old;
	int		 error;

	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->cond, NULL);
	/* The worker takes no signal: they are the loop's (signalfd). */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, FILES_FETCH_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	error = pthread_create(&j->thread, &attr, files_worker, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (error != 0) {
		if (j->kind != FILES_CALL)
			http_fail(j->http, 503, "out_of_memory",
			    "cannot start a worker: %s", strerror(error));
		pthread_mutex_destroy(&j->lock);
		pthread_cond_destroy(&j->cond);
		files_job_free(j);
		if (files_njobs == 0)
			files_pipe_close();
		return (-1);
	}
	TAILQ_INSERT_TAIL(&files_jobs, j, entry);
	files_njobs++;
	if (j->kind == FILES_FETCH)
		files_nfetches++;

	/* evhttp stops reading while a request is out: watch for the close. */
	j->closed = http_watch_client(j->http, files_closed, j);
	evhttp_connection_set_closecb(j->evcon, files_conn_gone, j);
	return (0);
}

/*
 * Run work on a worker acting as user, then done on the loop (see
 * files.h).  0, or -1 with err (429, 503) and nothing started.
 */
int
files_call(struct evhttp_request *req, const char *user, files_work_fn work,
    files_done_fn done, void *arg, struct proto_err *err)
{
	struct files_job	*j;

	if (agentd_stopping())
		return (proto_fail(err, 503, "shutting_down",
		    "agentd is shutting down"));
	if (files_njobs - files_nfetches >= files_cfg->max_file_jobs)
		return (proto_fail(err, 429, "too_many_file_jobs", "%zu files "
		    "calls are running (--max-file-jobs); try again later",
		    files_njobs - files_nfetches));
	if ((j = calloc(1, sizeof *j)) == NULL ||
	    (user != NULL && (j->call_user = strdup(user)) == NULL)) {
		free(j);
		return (proto_fail(err, 503, "out_of_memory",
		    "no memory for a files job; try again later"));
	}
	if (files_pipe_open() != 0) {
		free(j->call_user);
		free(j);
		return (proto_fail(err, 500, "internal_error", "pipe: %s",
		    strerror(errno)));
	}
	j->kind = FILES_CALL;
	j->fd = -1;
	atomic_init(&j->cancel, 0);
	j->user = j->call_user;
	j->work = work;
	j->done = done;
	j->arg = arg;
	j->http = req;
	j->evcon = evhttp_request_get_connection(req);
	if (files_job_start(j) != 0)
		return (proto_fail(err, 503, "out_of_memory",
		    "cannot start a worker; try again later"));
	return (0);
}

/* Free a job that is not listed (or no longer). */
static void
files_job_free(struct files_job *j)
{
	proto_files_query_free(&j->q);
	proto_stat_req_free(&j->st);
	proto_fetch_free(&j->req);
	free(j->call_user);
	if (j->body != NULL)
		evbuffer_free(j->body);
	if (j->fd != -1)
		close(j->fd);
	proto_buf_free(&j->out);
	free(j->chunk);
	free(j);
}

/* The pipe from the workers, and its event; made at the first job. */
static int
files_pipe_open(void)
{
	if (files_pipe_ev != NULL)
		return (0);
	if (pipe2(files_pipe, O_CLOEXEC) == -1)
		return (-1);
	/* The write side blocks (it never fills: 16 bytes a job at most). */
	if (fd_nonblock_cloexec(files_pipe[0]) != 0)
		goto fail;
	files_pipe_ev = event_new(files_base, files_pipe[0],
	    EV_READ | EV_PERSIST, files_done, NULL);
	if (files_pipe_ev == NULL || event_add(files_pipe_ev, NULL) != 0) {
		if (files_pipe_ev != NULL)
			event_free(files_pipe_ev);
		files_pipe_ev = NULL;
		goto fail;
	}
	return (0);
fail:
	close(files_pipe[0]);
	close(files_pipe[1]);
	files_pipe[0] = files_pipe[1] = -1;
	return (-1);
}

/* Close the pipe once no job runs. */
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

/*
 * On a worker: hand the job to the loop.  Cross-thread: 16 bytes through
 * the pipe, atomic (under PIPE_BUF), and the pipe holds more than all
 * the jobs could send at once (each has at most one message unread).
 */
static void
files_post(struct files_job *j, int what)
{
	struct files_msg	m;
	ssize_t			n;

	memset(&m, 0, sizeof m);	/* the padding too: it goes out */
	m.job = j;
	m.what = what;
	do
		n = write(files_pipe[1], &m, sizeof m);
	while (n == -1 && errno == EINTR);
}

/*
 * On a worker: become user, on this thread only (the raw syscalls: the
 * libcs' setgroups() and setresuid() change every thread): groups, then
 * real, effective and saved gid and uid.  Leaving uid 0 clears the thread's
 * capabilities (no SECBIT_KEEP_CAPS), so the call is checked as a process
 * of that user would be, for more than file permissions: /proc/PID/maps of
 * agentd is EACCES, /proc/kallsyms zeros.  For good: the thread ends with
 * the job.  *owner: the uid whose symlinks are followed besides root's.
 */
static int
files_become(const char *spec, uid_t *owner, struct proto_err *err)
{
	struct pty_user	 u;
	char		 cause[PTY_CAUSE_MAX];

	*owner = geteuid();
	if (spec == NULL)
		return (0);
	if (pty_user_lookup(spec, &u, cause, sizeof cause) != 0)
		return (proto_fail(err, 400, "invalid_request", "user: %s",
		    cause));
	if (syscall(SYS_setgroups, (size_t)u.ngroups, u.groups) == -1 &&
	    !(errno == EPERM && u.uid == geteuid() && u.gid == getegid()))
		return (proto_fail(err, 403, "permission_denied", "cannot act "
		    "as user %.64s: setgroups: %s", spec, strerror(errno)));
	if (syscall(SYS_setresgid, u.gid, u.gid, u.gid) == -1 ||
	    syscall(SYS_setresuid, u.uid, u.uid, u.uid) == -1) {
		if (errno != EPERM)
			return (proto_fail(err, 403, "permission_denied",
			    "cannot act as user %.64s: setresuid: %s", spec,
			    strerror(errno)));
		/* Not root: only the file system's view, if that. */
		syscall(SYS_setfsgid, u.gid);
		syscall(SYS_setfsuid, u.uid);
	}
	/* setfsuid() reports no error: read the values back. */
	if ((uid_t)syscall(SYS_setfsuid, (uid_t)-1) != u.uid ||
	    (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != u.gid)
		return (proto_fail(err, 403, "permission_denied", "cannot act "
		    "as user %.64s (agentd is not root)", spec));
	*owner = u.uid;
	return (0);
}

/* As root for uid: trust root's symlinks, or act as uid past one of its. */
int
files_act(uid_t uid, const char *path, const char *path2, uid_t *trust,
    int *give, struct proto_err *err)
{
	const char	*p;
	char		 spec[32];
	int		 fd, i;

	*trust = 0;
	*give = 1;
	if (uid == 0)
		return (0);
	for (i = 0; i < 2; i++) {
		if ((p = i == 0 ? path : path2) == NULL)
			continue;
		if ((fd = fileio_open(p, O_PATH, uid, err)) != -1)
			close(fd);
		if (fileio_followed()) {
			*give = 0;
			snprintf(spec, sizeof spec, "%lu", (unsigned long)uid);
			return (files_become(spec, trust, err));
		}
	}
	return (0);
}

/* A files worker: do the job, then hand it back to the loop. */
static void *
files_worker(void *arg)
{
	struct files_job	*j = arg;
	uid_t			 owner;

	/* No logging here: the log is the loop's. */
	if ((j->rc = files_become(j->user, &owner, &j->err)) == 0) {
		switch (j->kind) {
		case FILES_GET:
			files_work_get(j, owner);
			break;
		case FILES_PUT:
			files_work_put(j, owner);
			break;
		case FILES_STAT:
			files_work_stat(j, owner);
			break;
		case FILES_FETCH:
			j->rc = fetch_run(&j->req, owner, &j->cancel, &j->res,
			    &j->err);
			break;
		case FILES_CALL:
			j->rc = j->work(j->arg, owner, &j->err);
			break;
		}
	}
	files_post(j, FILES_MSG_DONE);
	return (NULL);
}

/*
 * What a file system's f_type says about reading it: 0 a disk or memory
 * (sendfile from the loop is quick), 1 a pseudo file system whose sizes
 * lie (/proc, /sys: read it all), 2 anything else, such as FUSE or NFS,
 * which may block for long (read on the worker).
 */
static int
files_fs_kind(int type)
{
	switch ((unsigned int)type) {
	case 0xEF53:		/* ext2, ext3, ext4 */
	case 0x58465342:	/* xfs */
	case 0x9123683E:	/* btrfs */
	case 0x01021994:	/* tmpfs */
	case 0x858458F6:	/* ramfs */
	case 0x794C7630:	/* overlayfs */
	case 0xF2F52010:	/* f2fs */
	case 0x73717368:	/* squashfs */
	case 0xE0F5E1E2:	/* erofs */
	case 0x28CD3D45:	/* cramfs */
	case 0x4D44:		/* vfat */
	case 0x2011BAB0:	/* exfat */
		return (0);
	case 0x9FA0:		/* proc */
	case 0x62656572:	/* sysfs */
	case 0x64626720:	/* debugfs */
	case 0x74726163:	/* tracefs */
	case 0x27E0EB:		/* cgroup */
	case 0x63677270:	/* cgroup2 */
	case 0x73636673:	/* securityfs */
	case 0x62656570:	/* configfs */
	case 0xCAFE4A11:	/* bpf */
	case 0x6165676C:	/* pstore */
	case 0xDE5E81E4:	/* efivarfs */
		return (1);
	}
	return (2);
}

/* On a worker: open, check and read (or prepare to send) a GET's file. */
static void
files_work_get(struct files_job *j, uid_t owner)
{
	struct stat	st;
	struct statfs	sfs;
	uid_t		links = owner;
	int		fd, kind = 2, give = 1, as_user = j->user != NULL;

	j->rc = -1;
	/* envd's GET: as root unless the user's own symlink is on the way. */
	if (j->for_uid != (uid_t)-1 && j->for_uid != 0) {
		if (files_act(j->for_uid, j->q.path, NULL, &owner, &give,
		    &j->err) != 0)
			return;
		as_user = !give;
		links = j->for_uid;	/* its hard links pass */
	}
	/* O_NONBLOCK: a FIFO must not hang the worker in open(). */
	fd = fileio_open(j->q.path, O_RDONLY | O_NOCTTY | O_NONBLOCK, owner,
	    &j->err);
	if (fd == -1) {
		if (j->err.status == 404)
			snprintf(j->err.message, sizeof j->err.message,
			    "no file %.200s", j->q.path);
		return;
	}
	if (fstat(fd, &st) == -1) {
		fileio_fail(&j->err, errno, "stat", j->q.path);
		goto out;
	}
	/* The kernel lets any thread of ours read our own /proc entries. */
	if (as_user && fileio_own_proc(fd)) {
		fileio_fail(&j->err, EACCES, "open", j->q.path);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		proto_fail(&j->err, 409, "is_a_directory",
		    "%.200s is a directory", j->q.path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		proto_fail(&j->err, 409, "not_a_file",
		    "%.200s is not a regular file", j->q.path);
		goto out;
	}
	if (fileio_links_ok(&st, links, j->q.path, &j->err) != 0 ||
	    fileio_link_folder_ok(fd, &st, owner, j->q.path, &j->err) != 0)
		goto out;
	if (fstatfs(fd, &sfs) == 0)
		kind = files_fs_kind((int)sfs.f_type);
	if (st.st_size == 0 || kind == 1) {
		j->send = FILES_SEND_BUF;
		j->rc = files_work_read_all(j, fd);
		goto out;
	}
	j->off = j->q.offset < (uint64_t)st.st_size ? j->q.offset :
	    (uint64_t)st.st_size;
	j->len = (uint64_t)st.st_size - j->off;
	if (j->q.length < j->len)
		j->len = j->q.length;
	if (kind == 0) {
		j->send = FILES_SEND_FILE;
		j->fd = fd;
		j->rc = 0;
		return;
	}
	j->send = FILES_SEND_STREAM;
	j->rc = files_work_stream(j, fd);
out:
	close(fd);
}

/*
 * A pseudo-file (/proc, /sys) shows its size only when read: read it, up
 * to FILES_PSEUDO_MAX bytes, and keep the range asked for in j->out.
 */
static int
files_work_read_all(struct files_job *j, int fd)
{
	struct proto_buf	*b = &j->out;
	char			*p;
	ssize_t			 n;
	uint64_t		 off, len;

	for (;;) {
		if (b->len >= FILES_PSEUDO_MAX)
			break;
		if ((p = proto_buf_space(b, 65536)) == NULL)
			return (proto_fail(&j->err, 503, "out_of_memory",
			    "no memory to read %.160s; try again later",
			    j->q.path));
		n = read(fd, p, 65536);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return (fileio_fail(&j->err, errno, "read", j->q.path));
		if (n == 0)
			break;
		b->len += (size_t)n;
	}
	off = j->q.offset < b->len ? j->q.offset : b->len;
	len = b->len - off;
	if (j->q.length < len)
		len = j->q.length;
	if (off > 0)
		memmove(b->data, b->data + off, (size_t)len);
	b->len = (size_t)len;
	return (0);
}

/*
 * On a worker: read j->len bytes from j->off, FILES_CHUNK at a time, each
 * handed to the loop and sent before the next is read: memory stays at
 * one chunk however big the file, and a slow read blocks only this thread.
 */
static int
files_work_stream(struct files_job *j, int fd)
{
	uint64_t	done = 0;
	ssize_t		n;
	size_t		want;

	if (j->len > 0 && (j->chunk = malloc(FILES_CHUNK)) == NULL)
		return (proto_fail(&j->err, 503, "out_of_memory",
		    "no memory to read %.160s; try again later", j->q.path));
	while (done < j->len) {
		if (atomic_load(&j->cancel))
			return (proto_fail(&j->err, 499, "cancelled",
			    "cancelled: the client went away"));
		want = j->len - done < FILES_CHUNK ? (size_t)(j->len - done) :
		    FILES_CHUNK;
		n = pread(fd, j->chunk, want, (off_t)(j->off + done));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return (fileio_fail(&j->err, errno, "read", j->q.path));
		if (n == 0)
			return (proto_fail(&j->err, 500, "internal_error",
			    "%.160s shrank while it was read", j->q.path));
		done += (uint64_t)n;
		j->chunk_len = (size_t)n;
		pthread_mutex_lock(&j->lock);
		j->sent = 0;
		pthread_mutex_unlock(&j->lock);
		files_post(j, FILES_MSG_CHUNK);
		pthread_mutex_lock(&j->lock);
		while (!j->sent && !atomic_load(&j->cancel))
			pthread_cond_wait(&j->cond, &j->lock);
		pthread_mutex_unlock(&j->lock);
	}
	return (0);
}

/* On a worker: write a PUT's body atomically. */
static void
files_work_put(struct files_job *j, uid_t owner)
{
	struct fileio_tmp	 t;
	struct stat		 st;
	uint8_t			 sha[32];

	j->rc = -1;
	if (fileio_tmp_open(j->q.path, j->q.mkdir, owner, &t, &j->err) != 0)
		return;
	if (fileio_tmp_write(&t, j->body_data, j->body_len, &j->err) != 0) {
		fileio_tmp_abort(&t);
		return;
	}
	/* The file replaced: one hard link, or the acting user's. */
	if (fstatat(t.dfd, t.base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode) &&
	    fileio_links_ok(&st, owner, j->q.path, &j->err) != 0) {
		fileio_tmp_abort(&t);
		return;
	}
	fetch_sha256(j->body_data, j->body_len, sha);
	if (fileio_tmp_commit(&t, j->q.mode >= 0 ? (mode_t)j->q.mode :
	    FILEIO_MODE_DEFAULT, &j->err) != 0)
		return;
	proto_render_file(&j->out, j->q.path, j->body_len, sha);
	j->rc = 0;
}

/* On a worker: lstat every path (the last component not followed). */
static void
files_work_stat(struct files_job *j, uid_t owner)
{
	struct proto_stat	*res;
	struct proto_err	 err;
	struct stat		 st;
	char			(*names)[16], *target, *base;
	ssize_t			 n;
	size_t			 i, len;
	int			 dfd, r;

	j->rc = -1;
	res = calloc(j->st.n + 1, sizeof *res);
	names = calloc(j->st.n + 1, sizeof *names);
	target = malloc(PROTO_PATH_MAX + 1);
	if (res == NULL || names == NULL || target == NULL) {
		proto_fail(&j->err, 503, "out_of_memory",
		    "no memory for the answer; try again later");
		goto out;
	}
	for (i = 0; i < j->st.n; i++) {
		res[i].path = j->st.paths[i];
		len = strlen(j->st.paths[i]);
		if (len > 1 && j->st.paths[i][len - 1] == '/') {
			/*
			 * "/a/b/", as lstat(2) takes it: b must be a folder,
			 * or a symlink to one (followed, if trusted).
			 */
			base = NULL;
			dfd = fileio_open(j->st.paths[i], O_PATH | O_DIRECTORY,
			    owner, &err);
		} else
			dfd = fileio_parent(j->st.paths[i], 0, owner, &base,
			    &err);
		if (dfd == -1) {
			res[i].error = fileio_errno_name(errno, names[i]);
			continue;
		}
		if (base == NULL || *base == '\0')
			r = fstat(dfd, &st);
		else
			r = fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW);
		if (r == -1) {
			res[i].error = fileio_errno_name(errno, names[i]);
			goto next;
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
		    (n = readlinkat(dfd, base, target, PROTO_PATH_MAX)) >= 0) {
			target[n] = '\0';
			res[i].target = strdup(target);
		}
next:
		close(dfd);
		free(base);
	}
	proto_render_stat(&j->out, res, j->st.n);
	if (j->out.oom)
		proto_fail(&j->err, 503, "out_of_memory",
		    "no memory for the answer; try again later");
	else
		j->rc = 0;
	for (i = 0; i < j->st.n; i++)
		free((char *)res[i].target);
out:
	free(target);
	free(names);
	free(res);
}

/* Workers wrote: answer their requests, send chunks, free finished jobs. */
static void
files_done(evutil_socket_t fd, short events, void *arg)
{
	struct files_msg	 m;
	struct files_job	*j;

	while (read(fd, &m, sizeof m) == (ssize_t)sizeof m) {
		j = m.job;
		if (m.what == FILES_MSG_CHUNK) {
			files_send_chunk(j);
			continue;
		}
		if (!j->joined)
			pthread_join(j->thread, NULL);
		TAILQ_REMOVE(&files_jobs, j, entry);
		files_njobs--;
		if (j->kind == FILES_FETCH)
			files_nfetches--;
		if (j->http != NULL) {
			event_free(j->closed);
			evhttp_connection_set_closecb(j->evcon, NULL, NULL);
			if (j->kind != FILES_CALL)
				files_answer(j);
		}
		if (j->kind == FILES_CALL)
			j->done(j->http, j->arg, j->rc, &j->err);
		log_debug("%s: files call %d on %s: %s", __func__, (int)j->kind,
		    j->kind == FILES_FETCH ? j->req.path : j->kind == FILES_STAT ?
		    "paths" : j->kind == FILES_CALL ? "call" : j->q.path, j->rc == 0 ? "done" : j->err.code);
		pthread_mutex_destroy(&j->lock);
		pthread_cond_destroy(&j->cond);
		files_job_free(j);
	}
	if (files_njobs == 0)
		files_pipe_close();
}

/* Answer a finished job's request. */
static void
files_answer(struct files_job *j)
{
	struct evbuffer_file_segment	*seg;
	struct evbuffer			*out;
	struct proto_buf		 b = { 0 };

	if (j->send == FILES_SEND_STREAM && j->started) {
		if (j->rc == 0)
			evhttp_send_reply_end(j->http);
		else		/* the length was promised: only a close tells */
			evhttp_connection_free(j->evcon);
		return;
	}
	if (j->rc != 0 && j->envd) {
		files_reply_envd(j->http, &j->err);
		return;
	}
	if (j->rc != 0) {
		files_reply_err(j->http, &j->err);
		return;
	}
	switch (j->kind) {
	case FILES_FETCH:
		proto_render_file(&b, j->req.path, j->res.size, j->res.sha256);
		http_reply(j->http, 200, &b);
		return;
	case FILES_PUT:
	case FILES_STAT:
		http_reply(j->http, 200, &j->out);
		return;
	case FILES_GET:
	case FILES_CALL:	/* not here: files_done() calls done */
		break;
	}
	if (j->send == FILES_SEND_BUF || j->send == FILES_SEND_STREAM) {
		/* A stream of length 0 sent nothing yet: an empty answer. */
		http_reply_raw(j->http, 200, "application/octet-stream", &j->out);
		return;
	}
	if ((out = evbuffer_new()) == NULL)
		goto oom;
	/*
	 * Only a buffer that drains to an fd takes a segment as sendfile
	 * (else libevent mmaps the file, and its pages count in our RSS).
	 * This one's chains move unread into the connection's output.
	 */
	evbuffer_set_flags(out, EVBUFFER_FLAG_DRAINS_TO_FD);
	if (j->len > 0) {
		seg = evbuffer_file_segment_new(j->fd, (ev_off_t)j->off,
		    (ev_off_t)j->len, EVBUF_FS_CLOSE_ON_FREE);
		if (seg == NULL) {
			evbuffer_free(out);
			goto oom;
		}
		j->fd = -1;		/* the segment's now */
		if (evbuffer_add_file_segment(out, seg, 0,
		    (ev_off_t)j->len) != 0) {
			evbuffer_file_segment_free(seg);
			evbuffer_free(out);
			goto oom;
		}
		evbuffer_file_segment_free(seg);	/* out holds it */
	}
	evhttp_add_header(evhttp_request_get_output_headers(j->http),
	    "Content-Type", "application/octet-stream");
	outq_skip((size_t)j->len);	/* sendfile: no memory held */
	evhttp_send_reply(j->http, 200, "OK", out);
	outq_skip(0);
	evbuffer_free(out);
	return;
oom:
	http_fail(j->http, 503, "out_of_memory",
	    "no memory to send %.200s; try again later", j->q.path);
}

/* A streaming GET's chunk is ready: send it (the head first). */
static void
files_send_chunk(struct files_job *j)
{
	struct evkeyvalq	*h;
	struct evbuffer		*buf;
	char			 len[32];

	buf = NULL;
	if (j->http == NULL || (buf = evbuffer_new()) == NULL ||
	    evbuffer_add(buf, j->chunk, j->chunk_len) != 0) {
		if (j->http != NULL) {
			/* No memory: the worker stops, the answer is cut. */
			atomic_store(&j->cancel, 1);
		}
		if (buf != NULL)
			evbuffer_free(buf);
		files_wake(j);
		return;
	}
	if (!j->started) {
		h = evhttp_request_get_output_headers(j->http);
		snprintf(len, sizeof len, "%" PRIu64, j->len);
		evhttp_add_header(h, "Content-Type", "application/octet-stream");
		evhttp_add_header(h, "Content-Length", len);
		evhttp_send_reply_start(j->http, 200, "OK");
		j->started = 1;
		/* Written while watched from now on: level-triggered. */
		event_free(j->closed);
		j->closed = http_watch_stream(j->http, files_closed, j);
	}
	evhttp_send_reply_chunk_with_cb(j->http, buf, files_chunk_sent, j);
	evbuffer_free(buf);
}

/* A chunk went out to the client: let the worker read the next. */
static void
files_chunk_sent(struct evhttp_connection *evcon, void *arg)
{
	files_wake(arg);
}

/* Wake a worker waiting for its chunk to go out. */
static void
files_wake(struct files_job *j)
{
	pthread_mutex_lock(&j->lock);
	j->sent = 1;
	pthread_cond_signal(&j->cond);
	pthread_mutex_unlock(&j->lock);
}

/* The client of a running job closed its connection: free it. */
static void
files_closed(evutil_socket_t fd, short events, void *arg)
{
	struct files_job	*j = arg;

	if (!http_client_gone(fd, events))
		return;		/* a pipelined request, not a close */
	log_debug("%s: files call %d: client fd %d went away", __func__,
	    (int)j->kind, (int)fd);
	evhttp_connection_free(j->evcon);	/* files_conn_gone runs */
}

/* The connection of a running job is going away: cancel the job. */
static void
files_conn_gone(struct evhttp_connection *evcon, void *arg)
{
	struct files_job	*j = arg;
	struct timespec		 ts;

	atomic_store(&j->cancel, 1);
	files_wake(j);
	/*
	 * A client that closes while a stream is out is seen by evhttp
	 * (it reads again once the head went), which then leaves the
	 * request to its handler, detached: free it.
	 */
	if (j->http != NULL && evhttp_request_get_connection(j->http) == NULL)
		evhttp_request_free(j->http);
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
		/* One deadline for all: 64 stuck calls must not take 64 times. */
		if (files_stop_at.tv_sec == 0) {
			clock_gettime(CLOCK_REALTIME, &files_stop_at);
			files_stop_at.tv_sec += FILES_FETCH_STOP_MS / 1000;
		}
		ts = files_stop_at;
		if (pthread_timedjoin_np(j->thread, NULL, &ts) != 0) {
			/* Stuck (a dead mount): it ends with the process. */
			log_warn("%s: files call %d still running", __func__,
			    (int)j->kind);
			pthread_detach(j->thread);
		}
		j->joined = 1;
	}
}
