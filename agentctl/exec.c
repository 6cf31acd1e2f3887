/*
 * exec.c -- the streaming commands: exec, attach and tail.
 *
 * Output is followed with long-polls (GET ?cursor=N&wait_ms=W, JSON: the
 * chunks keep their stream, so stdout and stderr stay apart).  exec and
 * attach run three threads, each with its own connection:
 *   - the main thread follows the output and ends the process when the
 *     session's output ends (eof);
 *   - the input thread reads agentctl's stdin and POSTs it raw to the
 *     session's stdin (waiting out 429 stdin_backpressure), and watches for
 *     the detach key;
 *   - the signal thread takes SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGWINCH
 *     (blocked everywhere else, read with sigwaitinfo): forwarded (exec),
 *     or a detach (attach); SIGWINCH becomes a resize.
 * Any of them may end the process, through ctl_exit(), which restores the
 * terminal first.
 *
 * agentd has no backpressure on output: what the ring cannot hold is lost.
 * For a filter (cat, gzip -d...) whose output follows its input, the input
 * thread holds stdin back after each POST until the output captured by
 * then (its answer's bytes_out) is written out here but for EXEC_LAG_MAX
 * bytes (exec_lag.written, advanced by the main thread after every
 * window); so a slow stdout slows the input instead of losing output.
 * Output still arrives from the input agentd has queued (up to its
 * --stdin-buffer, 1 MiB) and from the pipes: so when stdin is a pipe (or
 * a large file), exec asks for an EXEC_PIPE_RING ring, which holds all of
 * that whatever the timing: unread output stays under EXEC_LAG_MAX + the
 * stdin queue + the pipes, about 1.5 MiB for a filter whose output is the
 * size of its input (a ring's memory is touched only as output fills it).  A command that produces more output on its own than its
 * ring holds still needs --ring-bytes.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "proto.h"	/* proto_b64_decode */
#include "term.h"

#define EXEC_STDIN_MAX		(128 * 1024)	/* bytes of one stdin POST */
#define EXEC_STDIN_MIN		4096		/* smallest piece after 429s */
#define EXEC_BACKOFF_MAX_MS	100		/* longest wait after a 429 */
#define EXEC_SIGNALS_MAX	3		/* signals forwarded before giving up */
#define EXEC_DETACH_DEFAULT	0x1d		/* Ctrl-] */
#define EXEC_LAG_MAX		(128 * 1024)	/* bytes of unread output that
						   hold stdin back */
#define EXEC_LAG_WAIT_MS	50		/* recheck the lag this often */
#define EXEC_PIPE_RING		(2u << 20)	/* ring bytes asked for when stdin
						   is a pipe (see above) */
#define EXEC_REDRAW_WAIT_MS	500		/* attach: wait this long for a
						   redraw at the other size */

/* One session's output, as this process follows it. */
struct follow {
	const char	*id;
	char		*path;		/* /v1/sessions/ID */
	uint64_t	 cursor;
	int		 merge;		/* every stream to stdout */
	int		 pipe_signal;	/* SIGPIPE the session on EPIPE (exec) */
	int		 eof;
	int		 exited;
	int		 exit_code;
	int		 more;		/* chunks after cursor exist now */
	int		 tty;
	uint64_t	 last_chunk;
	uint64_t	 written_end;	/* output offset after the last chunk out */
	uint8_t		*buf;		/* decoded bytes of one window */
	size_t		 cap;
	/* tail -n: windows are kept here instead of written. */
	int		 collect;
	struct kept	*kept;
	size_t		 nkept;
};

/* A chunk kept by tail -n. */
struct kept {
	int		 fd;
	uint8_t		*data;
	size_t		 len;
};

/* What the input and signal threads need. */
struct exec_ctx {
	const char	*id;
	char		*path;		/* /v1/sessions/ID */
	int		 attach;	/* attach (signals detach) or exec */
	int		 tty;		/* the session has a PTY */
	int		 local_tty;	/* stdin is a terminal in raw mode */
	int		 detach_key;	/* -1: none */
	int		 send_eof;	/* close the session's stdin at our EOF */
};

/* How much output the main thread wrote out, for the input thread. */
static struct {
	pthread_mutex_t	 lock;
	pthread_cond_t	 cond;
	uint64_t	 written;	/* output offset written out up to */
	int		 done;		/* the output ended */
} exec_lag = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

static int	follow_window(struct follow *, json_t *);
static void	follow_poll(struct client *, struct follow *, int wait_ms);
static void	follow_flush(struct follow *, int fd, size_t len);
static void	follow_out_error(struct follow *, int error);
static int	exec_stdin_post(struct client *, struct exec_ctx *,
		    const uint8_t *, size_t, int eof);
static void	*exec_input_main(void *);
static void	*exec_signal_main(void *);
static void	exec_resize(struct client *, struct exec_ctx *);
static uint64_t	exec_resize_to(struct client *, struct exec_ctx *, unsigned,
		    unsigned);
static void	exec_redraw(struct client *, struct exec_ctx *, unsigned,
		    unsigned);
static void	exec_lag_wait(uint64_t bytes_out);
static void	exec_detach(struct exec_ctx *, int code);
static void	exec_threads(struct exec_ctx *, int input);
static void	exec_block_signals(sigset_t *);
static int	exec_parse_key(const char *);
static long long exec_parse_size(const char *);
static int	exec_stdin_streams(void);
static int	exec_create(struct client *, json_t *req, json_t **answer);

/* Write decoded output that piled up for fd. */
static void
follow_flush(struct follow *f, int fd, size_t len)
{
	struct kept	*k;
	int		 error;

	if (len == 0)
		return;
	if (f->collect) {
		f->kept = realloc(f->kept, (f->nkept + 1) * sizeof *f->kept);
		if (f->kept == NULL)
			ctl_fatal("out of memory");
		k = &f->kept[f->nkept++];
		k->fd = fd;
		k->len = len;
		if ((k->data = malloc(len)) == NULL)
			ctl_fatal("out of memory");
		memcpy(k->data, f->buf, len);
		return;
	}
	if ((error = term_write(fd, f->buf, len)) != 0)
		follow_out_error(f, error);
}

/*
 * Our stdout or stderr is gone (EPIPE): stop as a pipeline would.  exec
 * also sends the session SIGPIPE, as its writes would have got locally
 * (`agentctl exec -- yes | head -1` must not leave yes running).
 */
static void
follow_out_error(struct follow *f, int error)
{
	struct client	*c;
	json_t		*j;
	char		*path;
	static const char body[] = "{\"signal\": \"SIGPIPE\"}";

	if (error != -EPIPE)
		ctl_fatal("cannot write output: %s", strerror(-error));
	if (f->pipe_signal) {
		c = ctl_connect();
		path = ctl_session_path(f->id, "/signal");
		ctl_api(c, "POST", path, "application/json", body,
		    sizeof body - 1, CTL_TIMEOUT_MS, &j);
		json_decref(j);
		free(path);
		client_free(c);
	}
	ctl_exit(128 + SIGPIPE);
}

/*
 * Take an answer's session fields and output window: write (or keep) the
 * chunks, advance the cursor.  Returns 0, or -1 when the answer is not a
 * window.
 */
static int
follow_window(struct follow *f, json_t *j)
{
	json_t		*out, *chunk, *ec;
	const char	*stream;
	size_t		 i, n, need, pending = 0;
	uint8_t		*dec;
	int		 fd, pending_fd = -1;
	long long	 dropped, end = -1;

	out = json_object_get(j, "output");
	if (!json_is_array(out) || !json_is_integer(json_object_get(j,
	    "cursor")))
		return (-1);
	dropped = ctl_json_int(j, "dropped_chunks", 0);
	if (dropped > 0)
		ctl_warn("output lost: %lld chunks of session %s were evicted "
		    "from its ring before they were read (a larger ring keeps "
		    "more: exec --ring-bytes)", dropped, f->id);
	json_array_foreach(out, i, chunk) {
		stream = ctl_json_str(chunk, "stream", "stdout");
		fd = !f->merge && strcmp(stream, "stderr") == 0 ?
		    STDERR_FILENO : STDOUT_FILENO;
		if (fd != pending_fd) {
			follow_flush(f, pending_fd, pending);
			pending = 0;
			pending_fd = fd;
		}
		if (ctl_chunk_bytes(chunk, &dec, &n) != 0)
			ctl_fatal("agentd sent bad output in chunk %lld",
			    ctl_json_int(chunk, "id", 0));
		need = pending + n;
		if (need > f->cap) {
			f->cap = need * 2;
			if ((f->buf = realloc(f->buf, f->cap)) == NULL)
				ctl_fatal("out of memory");
		}
		if (n > 0)
			memcpy(f->buf + pending, dec, n);
		free(dec);
		pending += n;
		end = ctl_json_int(chunk, "offset", 0) + (long long)n;
	}
	follow_flush(f, pending_fd, pending);
	if (end >= 0)
		f->written_end = (uint64_t)end;

	f->cursor = (uint64_t)ctl_json_int(j, "cursor", (long long)f->cursor);
	f->eof = ctl_json_bool(j, "eof", 0);
	f->more = ctl_json_bool(j, "more", 0);
	f->tty = ctl_json_bool(j, "tty", f->tty);
	f->last_chunk = (uint64_t)ctl_json_int(j, "last_chunk", 0);
	f->exited = strcmp(ctl_json_str(j, "state", ""), "exited") == 0;
	ec = json_object_get(j, "exit_code");
	if (json_is_integer(ec))
		f->exit_code = (int)json_integer_value(ec);

	/* How far the output is written out, for the input thread. */
	pthread_mutex_lock(&exec_lag.lock);
	exec_lag.written = f->written_end;
	exec_lag.done = f->eof;
	pthread_cond_broadcast(&exec_lag.cond);
	pthread_mutex_unlock(&exec_lag.lock);
	return (0);
}

/* One long-poll for the chunks after the cursor. */
static void
follow_poll(struct client *c, struct follow *f, int wait_ms)
{
	json_t	*j;
	char	*path;
	int	 status;

	if (asprintf(&path, "%s?cursor=%" PRIu64 "&wait_ms=%d&max_bytes=%u",
	    f->path, f->cursor, wait_ms, CTL_WINDOW_BYTES) == -1)
		ctl_fatal("out of memory");
	status = ctl_api(c, "GET", path, NULL, NULL, 0,
	    wait_ms + CTL_POLL_SLACK_MS, &j);
	free(path);
	if (status != 200)
		ctl_api_fail(status, j);
	if (follow_window(f, j) != 0)
		ctl_fatal("agentd's answer has no output window");
	json_decref(j);
}

/* Parse a detach key: "ctrl-]", "^]", "C-]", "none". */
static int
exec_parse_key(const char *s)
{
	if (strcmp(s, "none") == 0)
		return (-1);
	if (strncasecmp(s, "ctrl-", 5) == 0 && strlen(s) == 6)
		return (s[5] == '?' ? 0x7f : (s[5] & 0x1f));
	if ((strncmp(s, "^", 1) == 0 && strlen(s) == 2) ||
	    (strncasecmp(s, "C-", 2) == 0 && strlen(s) == 3))
		return (s[strlen(s) - 1] == '?' ? 0x7f :
		    (s[strlen(s) - 1] & 0x1f));
	return (-2);
}

/* "8M", "64KiB", "1048576" as bytes, or -1. */
static long long
exec_parse_size(const char *s)
{
	char		*end;
	long long	 v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || v < 0)
		return (-1);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (strcmp(end, "") != 0 && strcasecmp(end, "iB") != 0 &&
	    strcasecmp(end, "B") != 0)
		return (-1);
	return (v);
}

/* Wait until the output up to bytes_out (but EXEC_LAG_MAX) is written. */
static void
exec_lag_wait(uint64_t bytes_out)
{
	struct timespec	ts;

	pthread_mutex_lock(&exec_lag.lock);
	while (bytes_out > exec_lag.written + EXEC_LAG_MAX && !exec_lag.done) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += EXEC_LAG_WAIT_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&exec_lag.cond, &exec_lag.lock, &ts);
	}
	pthread_mutex_unlock(&exec_lag.lock);
}

/* Whether stdin brings a stream of data: a pipe, socket or large file. */
static int
exec_stdin_streams(void)
{
	struct stat	st;

	if (fstat(STDIN_FILENO, &st) != 0)
		return (0);
	if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
		return (1);
	return (S_ISREG(st.st_mode) && st.st_size > EXEC_LAG_MAX);
}

/* POST /v1/sessions with req; returns the status, *answer the body. */
static int
exec_create(struct client *c, json_t *req, json_t **answer)
{
	char	*body;
	int	 status;

	if ((body = json_dumps(req, JSON_COMPACT)) == NULL)
		ctl_fatal("bad request (an argument is not valid UTF-8?)");
	status = ctl_api(c, "POST", "/v1/sessions", "application/json", body,
	    strlen(body), CTL_TIMEOUT_MS, answer);
	free(body);
	return (status);
}

/*
 * Write to the session's stdin, in pieces, waiting out backpressure.
 * Returns 0, or -1 when its stdin is gone (the process exited or closed it)
 * or agentd refused.
 */
static int
exec_stdin_post(struct client *c, struct exec_ctx *x, const uint8_t *data,
    size_t len, int eof)
{
	static __thread size_t	 piece = EXEC_STDIN_MAX;
	json_t			*j;
	char			*path;
	size_t			 n;
	uint64_t		 bytes_out;
	int			 status, backoff = 1, last;

	for (;;) {
		n = len < piece ? len : piece;
		last = n == len;
		path = ctl_session_path(x->id, eof && last ?
		    "/stdin?eof=true&max_bytes=0" : "/stdin?max_bytes=0");
		status = ctl_api(c, "POST", path, "application/octet-stream",
		    data, n, CTL_TIMEOUT_MS, &j);
		free(path);
		if (status == 429) {
			/* The process has not read enough yet: wait, smaller. */
			json_decref(j);
			if (piece > EXEC_STDIN_MIN)
				piece /= 2;
			ctl_sleep_ms(backoff);
			backoff = backoff * 2 > EXEC_BACKOFF_MAX_MS ?
			    EXEC_BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		if (status != 200) {
			if (status != 409)	/* 409: exited or stdin closed */
				ctl_warn("stdin: %s", ctl_json_str(
				    json_object_get(j, "error"), "message",
				    "refused"));
			json_decref(j);
			return (-1);
		}
		bytes_out = (uint64_t)ctl_json_int(j, "bytes_out", 0);
		json_decref(j);
		exec_lag_wait(bytes_out);
		backoff = 1;
		if (piece < EXEC_STDIN_MAX)
			piece *= 2;
		data += n;
		len -= n;
		if (len == 0)
			return (0);
	}
}

/* Leave the session running: restore the terminal, say so, exit. */
static void
exec_detach(struct exec_ctx *x, int code)
{
	term_restore();
	dprintf(STDERR_FILENO, "\n[detached from session %s]\n", x->id);
	ctl_exit(code);
}

/* The input thread: our stdin to the session's. */
static void *
exec_input_main(void *arg)
{
	struct exec_ctx	*x = arg;
	struct client	*c = ctl_connect();
	struct pollfd	 pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	uint8_t		*buf, *key;
	size_t		 fill;
	ssize_t		 n;
	int		 eof = 0;

	if ((buf = malloc(EXEC_STDIN_MAX)) == NULL)
		ctl_fatal("out of memory");
	while (!eof) {
		/* Take what is there now, up to one POST's worth. */
		fill = 0;
		do {
			n = read(STDIN_FILENO, buf + fill, EXEC_STDIN_MAX - fill);
			if (n == -1 && errno == EINTR)
				continue;
			if (n <= 0) {
				eof = 1;	/* EOF, or EIO of a hung-up tty */
				break;
			}
			fill += n;
		} while (fill < EXEC_STDIN_MAX && x->detach_key < 0 &&
		    poll(&pfd, 1, 0) == 1 && !(pfd.revents & POLLHUP));
		if (x->detach_key >= 0 &&
		    (key = memchr(buf, x->detach_key, fill)) != NULL) {
			if (key > buf)
				exec_stdin_post(c, x, buf, key - buf, 0);
			exec_detach(x, CTL_EXIT_OK);
		}
		if (eof && !x->send_eof) {
			if (fill > 0)
				exec_stdin_post(c, x, buf, fill, 0);
			break;
		}
		if ((fill > 0 || eof) &&
		    exec_stdin_post(c, x, buf, fill, eof) != 0)
			break;		/* nobody reads it any more */
	}
	free(buf);
	client_free(c);
	return (NULL);
}

/* Size the session's PTY like the local terminal. */
static void
exec_resize(struct client *c, struct exec_ctx *x)
{
	unsigned	 rows, cols;

	if (x->tty && term_size(&rows, &cols) == 0)
		exec_resize_to(c, x, rows, cols);
}

/*
 * Size the session's PTY rows x cols.  Returns the session's last_chunk
 * right after the resize, or 0 when it failed.
 */
static uint64_t
exec_resize_to(struct client *c, struct exec_ctx *x, unsigned rows,
    unsigned cols)
{
	uint64_t	 last = 0;
	json_t		*j;
	char		*path, body[64];
	int		 status;

	snprintf(body, sizeof body, "{\"rows\": %u, \"cols\": %u}", rows, cols);
	path = ctl_session_path(x->id, "/resize");
	status = ctl_api(c, "POST", path, "application/json", body,
	    strlen(body), CTL_TIMEOUT_MS, &j);
	if (status == 200)
		last = (uint64_t)ctl_json_int(j, "last_chunk", 0);
	else if (status != 409)
		ctl_warn("resize: %s", ctl_json_str(json_object_get(j, "error"),
		    "message", "refused"));
	json_decref(j);
	free(path);
	return (last);
}

/*
 * Make a full-screen program draw its screen again when attach finds the
 * session at the terminal's size already (resizing to it would send no
 * SIGWINCH, and the newest chunk alone is not a screen): as dtach does,
 * resize one column narrower and back.  In between, wait (up to
 * EXEC_REDRAW_WAIT_MS) for the program's output, so that it sees two
 * sizes rather than two SIGWINCHs merged into one at its old size.
 */
static void
exec_redraw(struct client *c, struct exec_ctx *x, unsigned rows,
    unsigned cols)
{
	uint64_t	 last;
	json_t		*j = NULL;
	char		*path;

	last = exec_resize_to(c, x, rows, cols > 1 ? cols - 1 : cols + 1);
	if (asprintf(&path, "%s?cursor=%" PRIu64 "&wait_ms=%d&max_bytes=0",
	    x->path, last, EXEC_REDRAW_WAIT_MS) == -1)
		ctl_fatal("out of memory");
	(void)ctl_api(c, "GET", path, NULL, NULL, 0,
	    EXEC_REDRAW_WAIT_MS + CTL_TIMEOUT_MS, &j);
	json_decref(j);
	free(path);
	exec_resize_to(c, x, rows, cols);
}

/* The signals the signal thread takes. */
static void
exec_block_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGQUIT);
	sigaddset(set, SIGWINCH);
	pthread_sigmask(SIG_BLOCK, set, NULL);
}

/* The signal thread. */
static void *
exec_signal_main(void *arg)
{
	struct exec_ctx	*x = arg;
	struct client	*c = ctl_connect();
	sigset_t	 set;
	json_t		*j;
	char		*path, body[64];
	int		 sig, status, forwarded = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGWINCH);
	for (;;) {
		if ((sig = sigwaitinfo(&set, NULL)) == -1)
			continue;
		if (sig == SIGWINCH) {
			exec_resize(c, x);
			continue;
		}
		if (x->attach)
			exec_detach(x, 128 + sig);
		if (++forwarded >= EXEC_SIGNALS_MAX) {
			ctl_warn("giving up after %d signals; session %s may "
			    "still be running", forwarded, x->id);
			ctl_exit(128 + sig);
		}
		snprintf(body, sizeof body, "{\"signal\": %d}", sig);
		path = ctl_session_path(x->id, "/signal");
		status = ctl_api(c, "POST", path, "application/json", body,
		    strlen(body), CTL_TIMEOUT_MS, &j);
		if (status != 200 && status != 409)
			ctl_warn("signal: %s", ctl_json_str(json_object_get(j,
			    "error"), "message", "refused"));
		json_decref(j);
		free(path);
	}
	return (NULL);
}

/* Start the signal thread and, if asked, the input thread. */
static void
exec_threads(struct exec_ctx *x, int input)
{
	pthread_attr_t	attr;
	pthread_t	t;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, exec_signal_main, x) != 0 ||
	    (input && pthread_create(&t, &attr, exec_input_main, x) != 0))
		ctl_fatal("cannot start a thread");
	pthread_attr_destroy(&attr);
}

/* exec [-t] [--id ID] [-e K=V]... [-w DIR] [-u USER] [-n] [--rm] -- CMD... */
int
cmd_exec(int argc, char **argv)
{
	enum { OPT_ID = CTL_OPT_FIRST, OPT_RM, OPT_TIMEOUT, OPT_RING };
	static const struct option	 longopts[] = {
		{ "tty", no_argument, NULL, 't' },
		{ "interactive", no_argument, NULL, 'i' },
		{ "id", required_argument, NULL, OPT_ID },
		{ "env", required_argument, NULL, 'e' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "user", required_argument, NULL, 'u' },
		{ "no-stdin", no_argument, NULL, 'n' },
		{ "rm", no_argument, NULL, OPT_RM },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "ring-bytes", required_argument, NULL, OPT_RING },
		CTL_COMMON_OPTIONS
	};
	struct exec_ctx	 x;
	struct follow	 f;
	struct client	*c;
	sigset_t	 set;
	json_t		*req, *env, *args, *j;
	char		*eq, *end;
	const char	*id = NULL, *cwd = NULL, *user = NULL;
	unsigned	 rows, cols;
	long long	 timeout = -1, ring = -1;
	int		 ch, tty = 0, nostdin = 0, rm = 0, status, i;
	int		 auto_ring = 0;

	if ((req = json_object()) == NULL || (env = json_object()) == NULL ||
	    (args = json_array()) == NULL)
		ctl_fatal("out of memory");
	while ((ch = ctl_getopt(argc, argv, "tie:w:u:n", longopts)) != -1) {
		switch (ch) {
		case 't':
			tty = 1;
			break;
		case 'i':
			break;		/* stdin is always forwarded */
		case OPT_ID:
			id = optarg;
			break;
		case 'e':
			if ((eq = strchr(optarg, '=')) == NULL || eq == optarg)
				ctl_usage(argv[0], "bad -e '%s' (want K=V)",
				    optarg);
			*eq = '\0';
			json_object_set_new(env, optarg, json_string(eq + 1));
			*eq = '=';
			break;
		case 'w':
			cwd = optarg;
			break;
		case 'u':
			user = optarg;
			break;
		case 'n':
			nostdin = 1;
			break;
		case OPT_RM:
			rm = 1;
			break;
		case OPT_TIMEOUT:
			errno = 0;
			timeout = strtoll(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || timeout < 0)
				ctl_usage(argv[0], "bad --timeout '%s' (want "
				    "milliseconds)", optarg);
			break;
		case OPT_RING:
			if ((ring = exec_parse_size(optarg)) < 0)
				ctl_usage(argv[0], "bad --ring-bytes '%s'",
				    optarg);
			break;
		}
	}
	if (optind >= argc)
		ctl_usage(argv[0], "no command given (agentctl exec [options] "
		    "-- CMD [ARG...])");
	for (i = optind; i < argc; i++) {
		if (json_array_append_new(args, json_string(argv[i])) != 0)
			ctl_fatal("argument %d is not valid UTF-8", i - optind);
	}
	json_object_set_new(req, "argv", args);
	json_object_set_new(req, "tty", json_boolean(tty));
	if (tty && term_size(&rows, &cols) == 0) {
		json_object_set_new(req, "rows", json_integer(rows));
		json_object_set_new(req, "cols", json_integer(cols));
	}
	if (json_object_size(env) > 0)
		json_object_set(req, "env", env);
	json_decref(env);
	if (id != NULL)
		json_object_set_new(req, "id", json_string(id));
	if (cwd != NULL)
		json_object_set_new(req, "cwd", json_string(cwd));
	if (user != NULL)
		json_object_set_new(req, "user", json_string(user));
	if (nostdin && !tty)
		json_object_set_new(req, "stdin", json_false());
	if (timeout >= 0)
		json_object_set_new(req, "timeout_ms", json_integer(timeout));
	if (ring < 0 && !nostdin && !tty && exec_stdin_streams()) {
		ring = EXEC_PIPE_RING;
		auto_ring = 1;
	}
	if (ring >= 0)
		json_object_set_new(req, "ring_bytes", json_integer(ring));
	json_object_set_new(req, "max_bytes", json_integer(CTL_WINDOW_BYTES));

	c = ctl_connect();
	status = exec_create(c, req, &j);
	if (auto_ring && (status == 400 || status == 429) &&
	    strstr(ctl_json_str(json_object_get(j, "error"), "message", ""),
	    "ring") != NULL) {
		/* agentd's limits refuse the larger ring: do without. */
		json_decref(j);
		json_object_del(req, "ring_bytes");
		status = exec_create(c, req, &j);
	}
	json_decref(req);
	if (status != 201 && status != 200)
		ctl_api_fail(status, j);

	memset(&f, 0, sizeof f);
	if ((f.id = strdup(ctl_json_str(j, "id", ""))) == NULL)
		ctl_fatal("out of memory");
	f.path = ctl_session_path(f.id, "");
	f.pipe_signal = 1;
	memset(&x, 0, sizeof x);
	x.id = f.id;
	x.path = f.path;
	x.tty = tty;
	x.detach_key = -1;
	x.send_eof = 1;
	if (tty && !nostdin && isatty(STDIN_FILENO)) {
		if (term_raw(STDIN_FILENO) == 0) {
			x.local_tty = 1;
			x.detach_key = EXEC_DETACH_DEFAULT;
		}
	}
	exec_block_signals(&set);
	exec_threads(&x, !nostdin);

	if (follow_window(&f, j) != 0)
		ctl_fatal("agentd's answer has no output window");
	json_decref(j);
	while (!f.eof)
		follow_poll(c, &f, CTL_POLL_WAIT_MS);
	if (rm) {
		status = ctl_api(c, "DELETE", f.path, NULL, NULL, 0,
		    CTL_TIMEOUT_MS, &j);
		if (status != 200 && status != 404)
			ctl_warn("rm: %s", ctl_json_str(json_object_get(j,
			    "error"), "message", "refused"));
		json_decref(j);
	}
	ctl_exit(f.exited ? f.exit_code : CTL_EXIT_ERROR);
}

/* attach [--detach-key KEY] ID */
int
cmd_attach(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "detach-key", required_argument, NULL, 'k' },
		CTL_COMMON_OPTIONS
	};
	struct exec_ctx	 x;
	struct follow	 f;
	struct client	*c;
	sigset_t	 set;
	json_t		*j;
	char		*path;
	unsigned	 rows, cols, srows, scols;
	int		 ch, status, key = EXEC_DETACH_DEFAULT;

	while ((ch = ctl_getopt(argc, argv, "k:", longopts)) != -1) {
		if (ch == 'k' && (key = exec_parse_key(optarg)) == -2)
			ctl_usage(argv[0], "bad detach key '%s' (want ctrl-X, "
			    "^X or none)", optarg);
	}
	if (argc - optind != 1)
		ctl_usage(argv[0], "want one session id");

	memset(&f, 0, sizeof f);
	f.id = argv[optind];
	f.path = ctl_session_path(f.id, "");
	c = ctl_connect();
	if (asprintf(&path, "%s?max_bytes=0", f.path) == -1)
		ctl_fatal("out of memory");
	status = ctl_api(c, "GET", path, NULL, NULL, 0, CTL_TIMEOUT_MS, &j);
	free(path);
	if (status != 200)
		ctl_api_fail(status, j);
	if (strcmp(ctl_json_str(j, "state", ""), "exited") == 0)
		ctl_fatal("session %s has exited (exit code %lld); its output: "
		    "agentctl tail %s", f.id, ctl_json_int(j, "exit_code", -1),
		    f.id);
	f.tty = ctl_json_bool(j, "tty", 0);
	srows = (unsigned)ctl_json_int(j, "rows", 0);
	scols = (unsigned)ctl_json_int(j, "cols", 0);
	f.merge = f.tty;
	f.last_chunk = (uint64_t)ctl_json_int(j, "last_chunk", 0);
	/* From the newest chunk on: the prompt, say, is shown again. */
	f.cursor = f.last_chunk > 0 ? f.last_chunk - 1 : 0;
	json_decref(j);

	memset(&x, 0, sizeof x);
	x.id = f.id;
	x.path = f.path;
	x.attach = 1;
	x.tty = f.tty;
	x.detach_key = key;
	x.send_eof = 0;
	if (f.tty && isatty(STDIN_FILENO)) {
		if (term_raw(STDIN_FILENO) != 0)
			ctl_fatal("cannot put the terminal in raw mode: %s",
			    strerror(errno));
		x.local_tty = 1;
	}
	exec_block_signals(&set);
	if (x.tty && term_size(&rows, &cols) == 0 && rows == srows &&
	    cols == scols)
		exec_redraw(c, &x, rows, cols);
	else
		exec_resize(c, &x);
	exec_threads(&x, 1);
	do
		follow_poll(c, &f, CTL_POLL_WAIT_MS);
	while (!f.eof);
	term_restore();
	dprintf(STDERR_FILENO, "\n[session %s exited with code %d]\n", f.id,
	    f.exit_code);
	ctl_exit(f.exit_code);
}

/* tail [-n LINES] [--no-follow] ID */
int
cmd_tail(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "lines", required_argument, NULL, 'n' },
		{ "no-follow", no_argument, NULL, CTL_OPT_FIRST },
		{ "follow", no_argument, NULL, 'f' },
		CTL_COMMON_OPTIONS
	};
	struct follow	 f;
	struct client	*c;
	struct kept	*k;
	char		*end;
	size_t		 i, start_k = 0, start_off = 0, newlines = 0;
	long		 lines = -1;
	int		 ch, follow = 1, error, found = 0;

	while ((ch = ctl_getopt(argc, argv, "fn:", longopts)) != -1) {
		if (ch == 'n') {
			errno = 0;
			lines = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || lines < 0)
				ctl_usage(argv[0], "bad -n '%s'", optarg);
		} else if (ch == CTL_OPT_FIRST)
			follow = 0;
	}
	if (argc - optind != 1)
		ctl_usage(argv[0], "want one session id");

	memset(&f, 0, sizeof f);
	f.id = argv[optind];
	f.path = ctl_session_path(f.id, "");
	c = ctl_connect();

	/* What the ring holds now: all of it, or kept for -n. */
	f.collect = lines >= 0;
	do
		follow_poll(c, &f, 0);
	while (f.more);
	if (f.collect) {
		/* Find where the last `lines` lines begin, from the end. */
		for (i = f.nkept; i-- > 0 && !found;) {
			k = &f.kept[i];
			for (size_t b = k->len; b-- > 0;) {
				if (k->data[b] != '\n' ||
				    (i == f.nkept - 1 && b == k->len - 1))
					continue;
				if ((long)++newlines > lines - 1 || lines == 0) {
					start_k = i;
					start_off = b + 1;
					found = 1;
					break;
				}
			}
		}
		for (i = start_k; i < f.nkept; i++) {
			k = &f.kept[i];
			if (lines == 0)
				break;
			error = ctl_write_all(k->fd, k->data + (i == start_k ?
			    start_off : 0), k->len - (i == start_k ?
			    start_off : 0));
			if (error != 0)
				follow_out_error(&f, error);
		}
		for (i = 0; i < f.nkept; i++)
			free(f.kept[i].data);
		free(f.kept);
		f.collect = 0;
	}
	while (follow && !f.eof)
		follow_poll(c, &f, CTL_POLL_WAIT_MS);
	client_free(c);
	return (CTL_EXIT_OK);
}
