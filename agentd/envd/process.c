/*
 * process.c -- envd's process.Process on agentd's sessions (process.h).
 *
 * A process is a session and a small record beside it: its pid, tag and
 * ProcessConfig (for List), its end once it came, and the streams of Start
 * and Connect that follow it.  A stream pulls the session's output from
 * its ring after its cursor, as sse.c's do: a slow client costs at most
 * --sse-buffer, the rest waits in the ring (a gap skips what the ring
 * dropped).  A record is kept 30 s after its end (envd's window for a
 * Connect that comes late) and while a stream still follows it.
 */
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>

#include "config.h"
#include "connect.h"
#include "envstate.h"
#include "http.h"
#include "log.h"
#include "process.h"
#include "proto.h"
#include "pty.h"
#include "ringbuf.h"
#include "session.h"
#include "util.h"

#define PROCESS_ENDED_KEEP_MS	30000	/* a Connect after the end sees it */
#define PROCESS_READ_CHUNKS	64	/* chunks read from a ring at a time */
#define PROCESS_READ_BYTES	(256 * 1024) /* bytes read at a time */
#define PROCESS_KEEPALIVE_MAX_S	3600	/* Keepalive-Ping-Interval at most */
#define PROCESS_ARGS_MAX	4096	/* args of a ProcessConfig */
#define PROCESS_ENVS_MAX	4096	/* envs of a ProcessConfig */
#define PROCESS_TAG_MAX		256	/* bytes of a tag */
#define PROCESS_EVENT_SLACK	64	/* bytes of a data event besides data */
#define PROCESS_PIECE_MAX	(64 * 1024) /* bytes of output in one event */

struct pstream;

/* A process: a session and what envd says of it. */
struct process {
	TAILQ_ENTRY(process)	 entry;
	struct session		*s;		/* NULL once removed */
	pid_t			 pid;
	char			*tag;
	json_t			*config;	/* ProcessConfig, for List */
	int			 ended;		/* its end is known */
	int			 exit_code;	/* -1 when signalled */
	int			 signo;
	int			 timed_out;
	int64_t			 ended_ms;	/* monotonic */
	TAILQ_HEAD(, pstream)	 streams;
};
TAILQ_HEAD(processes, process);

/* A stream of Start or Connect. */
struct pstream {
	TAILQ_ENTRY(pstream)	 entry;
	struct process		*p;
	struct envd_stream	*st;
	struct event		*ka;		/* keepalive, or NULL */
	uint64_t		 cursor;	/* the last chunk sent */
	int			 started;	/* start sent */
	int			 replay;	/* output before it too (Start) */
};

/* A Start waiting for its spawn. */
struct pstart {
	struct envd_call	*call;
	struct event		*closed;	/* the client's close, or NULL */
	char			*tag;
	json_t			*config;
	int64_t			 keepalive_s;
};

static struct processes		 processes = TAILQ_HEAD_INITIALIZER(processes);
static const struct config	*process_cfg;
static struct event_base	*process_base;
static uint8_t			*process_buf;
static size_t			 process_buf_len;
static struct ring_chunk	 process_chunks[PROCESS_READ_CHUNKS];

static void	process_start(struct envd_call *, json_t *);
static void	process_connect(struct envd_call *, json_t *);
static void	process_list(struct envd_call *, json_t *);
static void	process_send_input(struct envd_call *, json_t *);
static void	process_close_stdin(struct envd_call *, json_t *);
static void	process_send_signal(struct envd_call *, json_t *);
static void	process_update(struct envd_call *, json_t *);
static void	process_stream_input(struct envd_call *, json_t *);
static void	process_started(struct session *, const struct proto_err *,
		    void *);
static void	process_start_closed(evutil_socket_t, short, void *);
static void	process_start_gone(struct evhttp_connection *, void *);
static void	process_follow(struct envd_call *, struct process *,
		    int64_t keepalive_s, int replay);
static json_t	*process_event(const char *, json_t *);
static int	process_data(struct envd_stream *, const char *,
		    const struct ring_chunk *);
static void	process_pull(struct envd_stream *, void *);
static void	process_gone(void *);
static void	process_keepalive(evutil_socket_t, short, void *);
static void	process_stream_free(struct pstream *);
static void	process_end_event(struct pstream *);
static void	process_sweep(void);
static struct process *process_select(json_t *, int ended_too,
		    struct envd_err *);
static int64_t	process_keepalive_s(struct envd_call *);

static const struct envd_method process_methods[] = {
	{ "process.Process/Start", ENVD_STREAM, process_start },
	{ "process.Process/Connect", ENVD_STREAM, process_connect },
	{ "process.Process/List", ENVD_UNARY, process_list },
	{ "process.Process/SendInput", ENVD_UNARY, process_send_input },
	{ "process.Process/CloseStdin", ENVD_UNARY, process_close_stdin },
	{ "process.Process/SendSignal", ENVD_UNARY, process_send_signal },
	{ "process.Process/Update", ENVD_UNARY, process_update },
	{ "process.Process/StreamInput", ENVD_UNARY, process_stream_input },
};

/* Go's names of the signals (os.ProcessState.String()). */
static const char *const process_signames[] = {
	NULL, "hangup", "interrupt", "quit", "illegal instruction",
	"trace/breakpoint trap", "aborted", "bus error",
	"floating point exception", "killed", "user defined signal 1",
	"segmentation fault", "user defined signal 2", "broken pipe",
	"alarm clock", "terminated", "stack fault", "child exited",
	"continued", "stopped (signal)", "stopped", "stopped (tty input)",
	"stopped (tty output)", "urgent I/O condition",
	"CPU time limit exceeded", "file size limit exceeded",
	"virtual timer expired", "profiling timer expired", "window changed",
	"I/O possible", "power failure", "bad system call",
};

/* Register the methods. */
void
process_register(struct event_base *base, const struct config *cfg)
{
	process_base = base;
	process_cfg = cfg;
	envd_register(process_methods, nitems(process_methods));
}

/* A running process, or NULL. */
static int
process_running(const struct process *p)
{
	return (p->s != NULL && !p->ended);
}

/* Free records ended over 30 s ago that no stream follows. */
static void
process_sweep(void)
{
	struct process	*p, *next;
	int64_t		 now = clock_mono_ms();

	for (p = TAILQ_FIRST(&processes); p != NULL; p = next) {
		next = TAILQ_NEXT(p, entry);
		if ((p->ended || p->s == NULL) && TAILQ_EMPTY(&p->streams) &&
		    (p->s == NULL || now - p->ended_ms >= PROCESS_ENDED_KEEP_MS)) {
			TAILQ_REMOVE(&processes, p, entry);
			free(p->tag);
			json_decref(p->config);
			free(p);
		}
	}
}

/*
 * The process a ProcessSelector names (a pid or a tag): running ones, and
 * with ended_too those that ended within 30 s.  NULL with not_found.
 */
static struct process *
process_select(json_t *msg, int ended_too, struct envd_err *err)
{
	struct process	*p;
	json_t		*sel;
	const char	*tag = NULL;
	uint32_t	 pid = 0;
	int		 havepid, havetag;

	process_sweep();
	if (envd_json_object(msg, "process", &sel, err) != 1) {
		if (err->code == ENVD_OK)
			envd_fail(err, ENVD_INVALID_ARGUMENT, "process: a "
			    "selector (pid or tag) is required");
		return (NULL);
	}
	if ((havepid = envd_json_u32(sel, "pid", &pid, err)) < 0 ||
	    (havetag = envd_json_string(sel, "tag", &tag, err)) < 0)
		return (NULL);
	if (havepid == havetag) {
		envd_fail(err, ENVD_INVALID_ARGUMENT, "process: one of pid and "
		    "tag is required");
		return (NULL);
	}
	TAILQ_FOREACH(p, &processes, entry) {
		if (!process_running(p) && (!ended_too || p->s == NULL ||
		    clock_mono_ms() - p->ended_ms >= PROCESS_ENDED_KEEP_MS))
			continue;
		if (havepid ? p->pid == (pid_t)pid :
		    (p->tag != NULL && strcmp(p->tag, tag) == 0))
			return (p);
	}
	if (havepid)
		envd_fail(err, ENVD_NOT_FOUND, "process with pid %u not found",
		    pid);
	else
		envd_fail(err, ENVD_NOT_FOUND, "process with tag %s not found",
		    tag);
	return (NULL);
}

/* Keepalive-Ping-Interval in seconds, 0 when none. */
static int64_t
process_keepalive_s(struct envd_call *call)
{
	const char	*v = envd_call_header(call, "Keepalive-Ping-Interval");
	char		*end;
	long		 n;

	if (v == NULL)
		return (0);
	n = strtol(v, &end, 10);
	if (*v == '\0' || *end != '\0' || n <= 0)
		return (0);
	return (n > PROCESS_KEEPALIVE_MAX_S ? PROCESS_KEEPALIVE_MAX_S : n);
}

/* The cwd of a Start: "~" expanded, "" the default; must be a directory. */
static char *
process_cwd(const char *cwd, const struct pty_user *u, struct envd_err *err)
{
	struct stat	 st;
	char		*path;

	if (cwd == NULL || *cwd == '\0')
		cwd = envstate_workdir() != NULL ? envstate_workdir() :
		    u->home;
	if (cwd[0] == '~' && (cwd[1] == '\0' || cwd[1] == '/'))
		xasprintf(&path, "%s%s", u->home, cwd + 1);
	else if (cwd[0] != '/')
		xasprintf(&path, "%s/%s", u->home, cwd);
	else
		path = xstrdup(cwd);
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		envd_fail(err, ENVD_INVALID_ARGUMENT, "cwd '%s' does not exist "
		    "or is no directory", path);
		free(path);
		return (NULL);
	}
	return (path);
}

/* Fill a create from a StartRequest; -1 with err. */
static int
process_create(struct envd_call *call, json_t *msg, struct proto_create *pc,
    const char **tag, struct envd_err *err)
{
	const struct pty_user	*u = envd_call_user(call);
	json_t			*proc, *args = NULL, *envs = NULL, *pty, *size;
	json_t			*v;
	const char		*cmd = NULL, *cwd = NULL, *k;
	char *const		*base = envstate_env();
	size_t			 i, n, nb;
	uint32_t		 cols = 0, rows = 0;
	int			 stdin_open = 1, r;

	memset(pc, 0, sizeof *pc);
	if ((r = envd_json_object(msg, "process", &proc, err)) <= 0) {
		if (r == 0)
			envd_fail(err, ENVD_INVALID_ARGUMENT, "process is "
			    "required");
		return (-1);
	}
	if (envd_json_string(proc, "cmd", &cmd, err) < 0 ||
	    envd_json_array(proc, "args", &args, err) < 0 ||
	    envd_json_object(proc, "envs", &envs, err) < 0 ||
	    envd_json_string(proc, "cwd", &cwd, err) < 0 ||
	    envd_json_string(msg, "tag", tag, err) < 0 ||
	    envd_json_bool(msg, "stdin", &stdin_open, err) < 0)
		return (-1);
	if (cmd == NULL || *cmd == '\0')
		return (envd_fail(err, ENVD_INVALID_ARGUMENT, "process.cmd is "
		    "required"));
	if (*tag != NULL && strlen(*tag) > PROCESS_TAG_MAX)
		return (envd_fail(err, ENVD_INVALID_ARGUMENT, "tag: longer "
		    "than %d bytes", PROCESS_TAG_MAX));
	n = args != NULL ? json_array_size(args) : 0;
	if (n > PROCESS_ARGS_MAX || (envs != NULL &&
	    json_object_size(envs) > PROCESS_ENVS_MAX))
		return (envd_fail(err, ENVD_INVALID_ARGUMENT, "more than %d "
		    "args or envs", PROCESS_ARGS_MAX));
	pc->argv = xcalloc(n + 2, sizeof *pc->argv);
	pc->argv[0] = xstrdup(cmd);
	for (i = 0; i < n; i++) {
		v = json_array_get(args, i);
		if (!json_is_string(v) || strlen(json_string_value(v)) !=
		    json_string_length(v))
			return (envd_fail(err, ENVD_INVALID_ARGUMENT,
			    "process.args[%zu]: want a string", i));
		pc->argv[i + 1] = xstrdup(json_string_value(v));
	}
	/* The base (--env), then /init's envVars, then the request's. */
	for (nb = 0; base[nb] != NULL; nb++)
		;
	pc->env = xcalloc(nb + (envs != NULL ? json_object_size(envs) : 0) +
	    1, sizeof *pc->env);
	for (i = 0; i < nb; i++)
		pc->env[i] = xstrdup(base[i]);
	if (envs != NULL) {
		json_object_foreach(envs, k, v) {
			if (!json_is_string(v) || *k == '\0' ||
			    strchr(k, '=') != NULL)
				return (envd_fail(err, ENVD_INVALID_ARGUMENT,
				    "process.envs: '%.64s' is no NAME with a "
				    "string", k));
			xasprintf(&pc->env[i++], "%s=%s", k,
			    json_string_value(v));
		}
	}
	if ((pc->cwd = process_cwd(cwd, u, err)) == NULL)
		return (-1);
	pc->user = xstrdup(u->name);
	if ((r = envd_json_object(msg, "pty", &pty, err)) < 0)
		return (-1);
	if (r == 1) {
		pc->tty = 1;
		if (envd_json_object(pty, "size", &size, err) < 0 ||
		    (size != NULL && (envd_json_u32(size, "cols", &cols,
		    err) < 0 || envd_json_u32(size, "rows", &rows, err) < 0)))
			return (-1);
		if (cols > 65535 || rows > 65535)
			return (envd_fail(err, ENVD_INVALID_ARGUMENT, "pty.size: "
			    "cols and rows are 1..65535"));
		pc->cols = cols > 0 ? cols : PROTO_COLS_DEFAULT;
		pc->rows = rows > 0 ? rows : PROTO_ROWS_DEFAULT;
	}
	pc->stdin_open = pc->tty || stdin_open;
	pc->stdin_given = 1;
	pc->profile = PROTO_PROFILE_DEFAULT;
	pc->timeout_ms = envd_call_timeout_ms(call);
	pc->max_bytes = PROTO_MAX_BYTES_DEFAULT;
	pc->max_bytes_stdout = pc->max_bytes_stderr = PROTO_MAX_BYTES_UNSET;
	pc->ring_bytes = process_cfg->ring_bytes;
	return (0);
}

/* Start: a session, then a stream that follows it. */
static void
process_start(struct envd_call *call, json_t *msg)
{
	struct proto_create	 pc;
	struct proto_err	 perr;
	struct envd_err		 err = { 0 };
	struct session		*exists;
	struct evhttp_request	*req;
	struct pstart		*ps;
	json_t			*proc = NULL;
	const char		*tag = NULL;

	process_sweep();
	if (process_create(call, msg, &pc, &tag, &err) != 0) {
		proto_create_free(&pc);
		envd_reply_error(call, &err);
		return;
	}
	ps = xcalloc(1, sizeof *ps);
	ps->call = call;
	ps->tag = tag != NULL ? xstrdup(tag) : NULL;
	envd_json_object(msg, "process", &proc, &err);
	ps->config = json_deep_copy(proc);
	ps->keepalive_s = process_keepalive_s(call);
	if (session_create(&pc, process_started, ps, &exists, &perr) != 0) {
		proto_create_free(&pc);
		process_started(NULL, &perr, ps);
		return;
	}
	proto_create_free(&pc);
	/* evhttp stops reading while a request is out: watch for the close. */
	req = envd_call_req(call)->req;
	ps->closed = http_watch_client(req, process_start_closed, ps);
	evhttp_connection_set_closecb(evhttp_request_get_connection(req),
	    process_start_gone, ps);
}

/* A spawning Start's client closed (or sent more): free its connection. */
static void
process_start_closed(evutil_socket_t fd, short events, void *arg)
{
	struct pstart	*ps = arg;

	if (!http_client_gone(fd, events))
		return;
	log_debug("%s: client fd %d went away", __func__, (int)fd);
	evhttp_connection_free(evhttp_request_get_connection(
	    envd_call_req(ps->call)->req));	/* process_start_gone() ran */
}

/* The connection of a spawning Start is going away: give the spawn up. */
static void
process_start_gone(struct evhttp_connection *evcon, void *arg)
{
	struct pstart	*ps = arg;

	session_create_cancel(ps);
	event_free(ps->closed);
	envd_call_drop(ps->call);
	free(ps->tag);
	json_decref(ps->config);
	free(ps);
}

/* A Start's spawn ended: follow the session, or fail. */
static void
process_started(struct session *s, const struct proto_err *perr, void *arg)
{
	struct pstart		*ps = arg;
	struct process		*p;
	struct proto_session	 v;
	struct evhttp_request	*req = envd_call_req(ps->call)->req;
	int			 code;

	if (ps->closed != NULL) {
		event_free(ps->closed);
		evhttp_connection_set_closecb(evhttp_request_get_connection(req),
		    NULL, NULL);
	}
	if (s == NULL) {
		switch (perr->status) {
		case 429:
			code = ENVD_RESOURCE_EXHAUSTED;
			break;
		case 503:
			code = ENVD_UNAVAILABLE;
			break;
		case 504:
			code = ENVD_DEADLINE_EXCEEDED;
			break;
		default:
			code = ENVD_INTERNAL;
		}
		envd_reply_fail(ps->call, code, "error starting process: %s",
		    perr->message);
		free(ps->tag);
		json_decref(ps->config);
		free(ps);
		return;
	}
	session_view(s, &v);
	p = xcalloc(1, sizeof *p);
	p->s = s;
	p->pid = (pid_t)v.pid;
	p->tag = ps->tag;
	p->config = ps->config;
	TAILQ_INIT(&p->streams);
	TAILQ_INSERT_TAIL(&processes, p, entry);
	session_set_tag(s, p->tag);
	if (session_exited(s))	/* before its record: note the end now */
		process_session_event(s, SESSION_EV_EXITED);
	log_debug("%s: pid %ld, session %s", __func__, (long)p->pid,
	    session_id(s));
	process_follow(ps->call, p, ps->keepalive_s, 1);
	free(ps);
}

/* Open a stream that follows p (replay: its output from the start). */
static void
process_follow(struct envd_call *call, struct process *p, int64_t keepalive_s,
    int replay)
{
	struct pstream	*ps;
	struct timeval	 tv;

	ps = xcalloc(1, sizeof *ps);
	ps->p = p;
	ps->replay = replay;
	if (!replay && p->s != NULL)
		ps->cursor = ring_newest(session_ring(p->s));
	TAILQ_INSERT_TAIL(&p->streams, ps, entry);
	if (p->s != NULL)
		session_watch(p->s, 1);
	if (keepalive_s > 0) {
		ps->ka = event_new(process_base, -1, EV_PERSIST,
		    process_keepalive, ps);
		if (ps->ka == NULL)
			fatal("%s: out of memory", __func__);
		evtimer_add(ps->ka, timeval_ms(&tv, keepalive_s * 1000));
	}
	ps->st = envd_stream_open(call, process_pull, process_gone, ps);
	envd_stream_kick(ps->st);
}

/* A ProcessEvent message: {"event": {name: value}}. */
static json_t *
process_event(const char *name, json_t *value)
{
	json_t	*o = json_object(), *e = json_object();

	envd_json_set_new(e, name, value);
	envd_json_set_new(o, "event", e);
	return (o);
}

/*
 * A chunk as data events, each within --envd-max-message (base64 and the
 * event's keys: 4/3 of the bytes and PROCESS_EVENT_SLACK); -1 when the
 * stream ended.
 */
static int
process_data(struct envd_stream *st, const char *name,
    const struct ring_chunk *c)
{
	size_t	piece, off;
	json_t	*o;

	/* config.c keeps --envd-max-message >= 1024: never 0 or less. */
	piece = process_cfg->envd_max_message > PROCESS_EVENT_SLACK + 4 ?
	    (process_cfg->envd_max_message - PROCESS_EVENT_SLACK) / 4 * 3 : 3;
	if (piece > PROCESS_PIECE_MAX)
		piece = PROCESS_PIECE_MAX;
	for (off = 0; off < c->len; off += piece) {
		o = json_object();
		envd_json_set_bytes(o, name, c->data + off, c->len - off < piece ?
		    c->len - off : piece);
		if (envd_stream_send(st, process_event("data", o)) != 0)
			return (-1);
	}
	return (0);
}

/* Send the start, the output after the cursor, and the end. */
static void
process_pull(struct envd_stream *st, void *arg)
{
	struct pstream		*ps = arg;
	struct process		*p = ps->p;
	struct ring		*r;
	struct ring_read_result	 res;
	json_t			*o;
	size_t			 i, need;
	static const char *const names[] = { "pty", "stdout", "stderr" };

	if (!ps->started) {
		o = json_object();
		envd_json_set_u32(o, "pid", (uint32_t)p->pid);
		ps->started = 1;
		if (envd_stream_send(st, process_event("start", o)) != 0) {
			process_stream_free(ps);
			return;
		}
	}
	if (p->s != NULL && (ps->replay || !p->ended)) {
		r = session_ring(p->s);
		need = ring_chunk_max(r) > PROCESS_READ_BYTES ?
		    ring_chunk_max(r) : PROCESS_READ_BYTES;
		if (process_buf_len < need) {
			free(process_buf);
			process_buf = xmalloc(need);
			process_buf_len = need;
		}
		while (envd_stream_room(st)) {
			if (ring_read(r, ps->cursor, process_buf,
			    process_buf_len, PROCESS_READ_BYTES,
			    process_chunks, nitems(process_chunks), &res) != 0)
				break;
			ps->cursor += res.dropped;
			for (i = 0; i < res.nchunks; i++) {
				if (process_data(st, names[
				    process_chunks[i].stream % 3],
				    &process_chunks[i]) != 0) {
					process_stream_free(ps);
					return;
				}
				ps->cursor = process_chunks[i].id;
			}
			if (res.nchunks == 0 && !res.more)
				break;
		}
		if (!p->ended || ps->cursor != ring_newest(r))
			return;
	} else if (!p->ended && p->s != NULL)
		return;
	if (envd_stream_room(st))
		process_end_event(ps);
}

/* The end event, the end of the stream, and the stream's record freed. */
static void
process_end_event(struct pstream *ps)
{
	struct process	*p = ps->p;
	struct envd_err	 err;
	json_t		*o = json_object();
	char		 status[64];
	const char	*name;

	if (!p->ended) {	/* removed through agentd's API before its end */
		envd_fail(&err, ENVD_UNKNOWN, "the process's session was "
		    "removed");
		envd_stream_end(ps->st, &err);
		process_stream_free(ps);
		return;
	}
	if (p->signo > 0) {
		name = p->signo < (int)nitems(process_signames) ?
		    process_signames[p->signo] : NULL;
		if (name != NULL)
			snprintf(status, sizeof status, "signal: %s", name);
		else
			snprintf(status, sizeof status, "signal: signal %d",
			    p->signo);
	} else
		snprintf(status, sizeof status, "exit status %d", p->exit_code);
	envd_json_set_i32(o, "exitCode", p->exit_code);
	envd_json_set_bool(o, "exited", p->signo == 0);
	envd_json_set_string(o, "status", status);
	if (p->exit_code != 0)
		envd_json_set_string(o, "error", status);
	if (envd_stream_send(ps->st, process_event("end", o)) != 0) {
		process_stream_free(ps);
		return;
	}
	if (p->timed_out) {
		envd_fail(&err, ENVD_DEADLINE_EXCEEDED, "the process ran past "
		    "Connect-Timeout-Ms and was killed");
		envd_stream_end(ps->st, &err);
	} else
		envd_stream_end(ps->st, NULL);
	process_stream_free(ps);
}

/* A keepalive event. */
static void
process_keepalive(evutil_socket_t fd, short events, void *arg)
{
	struct pstream	*ps = arg;

	if (!ps->started || !envd_stream_room(ps->st))
		return;
	if (envd_stream_send(ps->st, process_event("keepalive",
	    json_object())) != 0)
		process_stream_free(ps);
	else
		envd_stream_kick(ps->st);	/* hands it to the connection */
}

/* Free a stream's record (its stream ended or went away). */
static void
process_stream_free(struct pstream *ps)
{
	TAILQ_REMOVE(&ps->p->streams, ps, entry);
	if (ps->p->s != NULL)
		session_watch(ps->p->s, 0);
	if (ps->ka != NULL)
		event_free(ps->ka);
	free(ps);
}

/* The client went away: the process runs on. */
static void
process_gone(void *arg)
{
	process_stream_free(arg);
}

/* Connect: follow a running process (or one that ended within 30 s). */
static void
process_connect(struct envd_call *call, json_t *msg)
{
	struct envd_err	 err = { 0 };
	struct process	*p;

	if ((p = process_select(msg, 1, &err)) == NULL) {
		envd_reply_error(call, &err);
		return;
	}
	process_follow(call, p, process_keepalive_s(call), 0);
}

/* List: the running processes. */
static void
process_list(struct envd_call *call, json_t *msg)
{
	struct process	*p;
	json_t		*o = json_object(), *a = json_array(), *info;

	process_sweep();
	TAILQ_FOREACH(p, &processes, entry) {
		if (!process_running(p))
			continue;
		info = json_object();
		envd_json_set_new(info, "config", json_deep_copy(p->config));
		envd_json_set_u32(info, "pid", (uint32_t)p->pid);
		envd_json_set_string(info, "tag", p->tag);
		if (json_array_append_new(a, info) != 0)
			fatal("%s: out of memory", __func__);
	}
	envd_json_set_new(o, "processes", a);
	envd_reply(call, o);
}

/* Connect's code for a session's error. */
static int
process_code(const struct proto_err *perr)
{
	if (perr->status == 429)
		return (ENVD_RESOURCE_EXHAUSTED);
	if (perr->status == 409)
		return (ENVD_FAILED_PRECONDITION);
	return (ENVD_INTERNAL);
}

/* SendInput: stdin or pty bytes. */
static void
process_send_input(struct envd_call *call, json_t *msg)
{
	struct envd_err		 err = { 0 };
	struct proto_err	 perr;
	struct process		*p;
	json_t			*in;
	uint8_t			*data = NULL;
	size_t			 len = 0;
	int			 r;

	if ((p = process_select(msg, 0, &err)) == NULL)
		goto fail;
	if ((r = envd_json_object(msg, "input", &in, &err)) < 0)
		goto fail;
	if (r == 1 && (r = envd_json_bytes(in, "stdin", &data, &len,
	    &err)) == 0)
		r = envd_json_bytes(in, "pty", &data, &len, &err);
	if (r < 0)
		goto fail;
	if (len > 0 && session_write_stdin(p->s, data, len, 0, &perr) < 0) {
		free(data);
		envd_reply_fail(call, process_code(&perr), "error writing to "
		    "process: %s", perr.message);
		return;
	}
	free(data);
	envd_reply(call, json_object());
	return;
fail:
	envd_reply_error(call, &err);
}

/* CloseStdin: EOF on a pipe's stdin. */
static void
process_close_stdin(struct envd_call *call, json_t *msg)
{
	struct envd_err		 err = { 0 };
	struct proto_err	 perr;
	struct proto_session	 v;
	struct process		*p;

	if ((p = process_select(msg, 0, &err)) == NULL) {
		envd_reply_error(call, &err);
		return;
	}
	session_view(p->s, &v);
	if (v.tty) {
		envd_reply_fail(call, ENVD_FAILED_PRECONDITION, "cannot close "
		    "stdin of a PTY process: send Ctrl+D (0x04) instead");
		return;
	}
	if (session_write_stdin(p->s, NULL, 0, 1, &perr) < 0) {
		envd_reply_fail(call, process_code(&perr), "error closing "
		    "stdin: %s", perr.message);
		return;
	}
	envd_reply(call, json_object());
}

/* SendSignal: SIGTERM or SIGKILL, to every process of the session. */
static void
process_send_signal(struct envd_call *call, json_t *msg)
{
	static const char *const names[] = { "SIGNAL_UNSPECIFIED",
	    "SIGNAL_SIGTERM", "SIGNAL_SIGKILL" };
	static const int values[] = { 0, SIGTERM, SIGKILL };
	struct envd_err		 err = { 0 };
	struct proto_err	 perr;
	struct process		*p;
	int			 sig = 0;

	if ((p = process_select(msg, 0, &err)) == NULL ||
	    envd_json_enum(msg, "signal", names, values, nitems(names), &sig,
	    &err) < 0) {
		envd_reply_error(call, &err);
		return;
	}
	if (sig != SIGTERM && sig != SIGKILL) {
		envd_reply_fail(call, ENVD_INVALID_ARGUMENT, "invalid signal: "
		    "SIGNAL_SIGTERM or SIGNAL_SIGKILL");
		return;
	}
	if (session_signal_all_of(p->s, sig, &perr) != 0) {
		envd_reply_fail(call, process_code(&perr), "error sending "
		    "signal: %s", perr.message);
		return;
	}
	envd_reply(call, json_object());
}

/* Update: a PTY's size. */
static void
process_update(struct envd_call *call, json_t *msg)
{
	struct envd_err		 err = { 0 };
	struct proto_err	 perr;
	struct process		*p;
	json_t			*pty, *size = NULL;
	uint32_t		 cols = 0, rows = 0;

	if ((p = process_select(msg, 0, &err)) == NULL ||
	    envd_json_object(msg, "pty", &pty, &err) < 0 ||
	    (pty != NULL && envd_json_object(pty, "size", &size, &err) < 0) ||
	    (size != NULL && (envd_json_u32(size, "cols", &cols, &err) < 0 ||
	    envd_json_u32(size, "rows", &rows, &err) < 0))) {
		envd_reply_error(call, &err);
		return;
	}
	if (size == NULL) {
		envd_reply(call, json_object());
		return;
	}
	if (cols == 0 || rows == 0 || cols > 65535 || rows > 65535) {
		envd_reply_fail(call, ENVD_INVALID_ARGUMENT, "pty.size: cols "
		    "and rows are 1..65535");
		return;
	}
	if (session_resize(p->s, rows, cols, &perr) != 0) {
		envd_reply_fail(call, process_code(&perr), "error resizing "
		    "pty: %s", perr.message);
		return;
	}
	envd_reply(call, json_object());
}

/* StreamInput: a client stream, which HTTP/1.1 cannot carry. */
static void
process_stream_input(struct envd_call *call, json_t *msg)
{
	envd_reply_fail(call, ENVD_UNIMPLEMENTED, "process.Process/StreamInput "
	    "is a client stream, which agentd does not serve over HTTP/1.1: "
	    "use SendInput");
}

/* Free every record (their sessions are removed, their streams ended). */
void
process_free_all(void)
{
	struct process	*p;
	struct pstream	*ps;
	struct envd_err	 err;

	while ((p = TAILQ_FIRST(&processes)) != NULL) {
		while ((ps = TAILQ_FIRST(&p->streams)) != NULL) {
			p->s = NULL;
			envd_fail(&err, ENVD_UNAVAILABLE, "agentd is shutting "
			    "down");
			envd_stream_end(ps->st, &err);
			process_stream_free(ps);
		}
		TAILQ_REMOVE(&processes, p, entry);
		free(p->tag);
		json_decref(p->config);
		free(p);
	}
	free(process_buf);
	process_buf = NULL;
	process_buf_len = 0;
}

/* The session observer's part: note ends, feed or end the streams. */
void
process_session_event(struct session *s, int events)
{
	struct proto_session	 v;
	struct process		*p;
	struct pstream		*ps, *next;

	TAILQ_FOREACH(p, &processes, entry) {
		if (p->s == s)
			break;
	}
	if (p == NULL)
		return;
	if ((events & SESSION_EV_EXITED) && !p->ended) {
		session_view(s, &v);
		p->ended = 1;
		p->signo = v.signo;
		p->exit_code = v.signo > 0 ? -1 : v.exit_code;
		p->timed_out = v.timed_out;
		p->ended_ms = clock_mono_ms();
	}
	if (events & SESSION_EV_REMOVED) {
		if (!p->ended)
			p->ended_ms = clock_mono_ms();
		for (ps = TAILQ_FIRST(&p->streams); ps != NULL; ps = next) {
			next = TAILQ_NEXT(ps, entry);
			session_watch(s, 0);
		}
		p->s = NULL;
		/* What the ring held is gone with it: end every stream. */
		for (ps = TAILQ_FIRST(&p->streams); ps != NULL; ps = next) {
			next = TAILQ_NEXT(ps, entry);
			ps->replay = 0;
			process_end_event(ps);
		}
		return;
	}
	for (ps = TAILQ_FIRST(&p->streams); ps != NULL; ps = next) {
		next = TAILQ_NEXT(ps, entry);
		envd_stream_kick(ps->st);
	}
}
