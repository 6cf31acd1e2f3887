/*
 * fuzz_http.c -- libFuzzer harness for agentd's whole HTTP path: the input's
 * bytes are written, as they are, to a real connection to agentd's evhttp
 * listeners (TCP with a token, or the unix socket), and agentd's own event
 * loop runs until it has answered and the connection is gone.  Everything
 * of agentd/ is linked in but main.c (agentd_start() wires the rest, as for
 * main()) and the files routes.
 *
 * Checked: no crash (ASan, UBSan); no answer with a 5xx status (505
 * aside); every connection is freed once its client is gone (no waiter or
 * fd left); and the sessions table is emptied after each input.
 *
 * Safety: sessions never run anything.  pty/ is replaced below by fake
 * processes: pipes (or a socketpair for a tty) that this harness writes a
 * fixed output into, whose "signals" and exits are simulated and reaped
 * through agentd's own session_reaped().  pty_spawn runs on agentd's
 * spawner threads while the loop goes on: fh_lock (recursive: a reap may
 * signal) guards the fake processes, and their statuses reach agentd on
 * the loop, at each turn.  The files routes (which write and
 * fetch real files) are replaced by a stub that only runs proto/'s parsers
 * of their requests; so is restore.c (which steps the clock and feeds the
 * RNG) by one that only counts.
 *
 * Input: byte 0 picks the transport (bit 0: unix socket) and whether the
 * client half-closes at once (bit 1); the rest goes to the socket.
 * FUZZ_HTTP_SLOW=1 prints the inputs that take over 100 ms.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>

#include "agentd.h"
#include "api.h"
#include "compose.h"
#include "config.h"
#include "envfiles.h"
#include "fs.h"
#include "files.h"
#include "http.h"
#include "log.h"
#include "pause.h"
#include "proto.h"
#include "pty.h"
#include "restore.h"
#include "session.h"
#include "sessions.h"
#include "upgrade.h"
#include "util.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FH_TOKEN		"fuzz"
#define FH_INPUT_MS		2000	/* an input's connection at most */
#define FH_QUIET_TURNS		16	/* idle loop turns before the half-close */
#define FH_ANSWER_MAX		(8u << 20) /* bytes of answers kept */
#define FH_PROCS_MAX		1024
#define FH_FAKE_PID		0x40000000 /* above any pid_max */
#define FH_OUTPUT		"fake output\n"

/* A fake process behind a session. */
struct fh_proc {
	pid_t	 pid;
	int	 out, err, in;	/* our ends: write output, never read input */
	int	 exited;	/* its status is decided */
	int	 status;
	int	 reaped;
};

static struct config	 cfg;
static char		 dir[64], sock_path[128];
static int		 tcp_port;
static struct fh_proc	 procs[FH_PROCS_MAX];
static size_t		 nprocs;
static pid_t		 next_pid = FH_FAKE_PID;
static struct event	*reap_ev;
static struct event	*tick_ev;
static pthread_mutex_t	 fh_lock;	/* procs, nprocs, next_pid */

/* agentd's fatal path: a bug, as far as fuzzing goes. */
static void
fh_fatal(void)
{
	fprintf(stderr, "fuzz_http: fatal\n");
	abort();
}

static void
must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_http: %s\n", what);
		abort();
	}
}

/* ---- pty/, faked ------------------------------------------------------- */

static int	fh_kill(pid_t, int);

static struct fh_proc *
fh_proc_find(pid_t pid)
{
	size_t	i;

	for (i = 0; i < nprocs; i++) {
		if (procs[i].pid == pid)
			return (&procs[i]);
	}
	return (NULL);
}

static void
fh_close(int *fd)
{
	if (*fd != -1)
		close(*fd);
	*fd = -1;
}

/* The process ends with status: its output closes, SIGCHLD comes later. */
static void
fh_proc_exit(struct fh_proc *p, int status)
{
	if (p->exited)
		return;
	p->exited = 1;
	p->status = status;
	fh_close(&p->out);
	fh_close(&p->err);
	fh_close(&p->in);
}

/* "SIGCHLD": hand the decided statuses to agentd. */
static void
fh_reap_cb(evutil_socket_t fd, short events, void *arg)
{
	size_t	i;

	pthread_mutex_lock(&fh_lock);
	for (i = 0; i < nprocs; i++) {
		if (procs[i].exited && !procs[i].reaped) {
			procs[i].reaped = 1;
			session_reaped(procs[i].pid, procs[i].status);
		}
	}
	pthread_mutex_unlock(&fh_lock);
}

int
pty_user_lookup(const char *spec, struct pty_user *out, char *cause,
    size_t causelen)
{
	memset(out, 0, sizeof *out);
	if (spec == NULL || *spec == '\0')
		return (-EINVAL);
	if (strcmp(spec, "root") == 0 || strcmp(spec, "0") == 0) {
		snprintf(out->name, sizeof out->name, "root");
		snprintf(out->home, sizeof out->home, "/root");
		out->ngroups = 1;
		return (0);
	}
	snprintf(cause, causelen, "user '%.64s': no such user", spec);
	return (-ENOENT);
}

/* No child ever execs here: nothing to note about dispositions. */
void
pty_signals_snapshot(void)
{
}

/* The foreground group of a fake terminal: the fake process itself. */
int
pty_kill_foreground(int master, pid_t sid, int sig)
{
	return (pty_kill_group(sid, sig));
}

/*
 * A process that writes FH_OUTPUT (and one line on stderr) and, with one
 * argument, exits 0 at once; with more it runs until a signal ends it.  An
 * argv[0] starting with "/nonexistent" fails as exec would.
 */
static int
fh_spawn(const struct pty_spec *spec, struct pty_proc *proc, char *cause,
    size_t causelen)
{
	struct fh_proc	*p;
	int		 out[2] = { -1, -1 }, err[2] = { -1, -1 };
	int		 in[2] = { -1, -1 }, sv[2];
	int		 fl = O_CLOEXEC | O_NONBLOCK;
	ssize_t		 n;

	proc->pid = -1;
	proc->master = proc->in = proc->out = proc->err = -1;
	if (spec->argv == NULL || spec->argv[0] == NULL || spec->envp == NULL ||
	    (spec->tty && (spec->rows == 0 || spec->cols == 0)))
		return (-EINVAL);
	if (strncmp(spec->argv[0], "/nonexistent", 12) == 0) {
		snprintf(cause, causelen, "exec '%.64s': No such file or "
		    "directory", spec->argv[0]);
		return (-ENOENT);
	}
	if (nprocs == FH_PROCS_MAX) {
		snprintf(cause, causelen, "fork: %s", strerror(EAGAIN));
		return (-EAGAIN);
	}
	p = &procs[nprocs];
	memset(p, 0, sizeof *p);
	p->out = p->err = p->in = -1;
	if (spec->tty) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, 0, sv) == -1)
			return (-errno);
		proc->master = sv[0];
		p->out = sv[1];
	} else {
		if (pipe2(out, fl) == -1 || pipe2(err, fl) == -1 ||
		    (!spec->stdin_null && pipe2(in, fl) == -1)) {
			fh_close(&out[0]);
			fh_close(&out[1]);
			fh_close(&err[0]);
			fh_close(&err[1]);
			return (-EMFILE);
		}
		proc->out = out[0];
		proc->err = err[0];
		proc->in = in[1];
		p->out = out[1];
		p->err = err[1];
		p->in = in[0];
	}
	p->pid = proc->pid = next_pid++;
	nprocs++;
	n = write(p->out, FH_OUTPUT, sizeof FH_OUTPUT - 1);
	if (p->err != -1)
		n = write(p->err, "err\n", 4);
	(void)n;
	if (spec->argv[1] == NULL)
		fh_proc_exit(p, 0);
	return (0);
}

void
pty_close(struct pty_proc *proc)
{
	fh_close(&proc->master);
	fh_close(&proc->in);
	fh_close(&proc->out);
	fh_close(&proc->err);
}

int
pty_resize(int master, unsigned short rows, unsigned short cols)
{
	return (rows == 0 || cols == 0 ? -EINVAL : 0);
}

int
pty_veof(int master)
{
	return (4);
}

/* fh_spawn() under fh_lock: a spawner thread's call. */
int
pty_spawn(const struct pty_spec *spec, struct pty_proc *proc, char *cause,
    size_t causelen)
{
	int	rc;

	pthread_mutex_lock(&fh_lock);
	rc = fh_spawn(spec, proc, cause, causelen);
	pthread_mutex_unlock(&fh_lock);
	return (rc);
}

/* Signals: the ones that kill by default end the fake process. */
int
pty_kill_group(pid_t pgid, int sig)
{
	int	rc;

	if (pgid <= 1)
		return (-EINVAL);
	pthread_mutex_lock(&fh_lock);
	rc = fh_kill(pgid, sig);
	pthread_mutex_unlock(&fh_lock);
	return (rc);
}

/* pty_kill_group() under fh_lock. */
static int
fh_kill(pid_t pgid, int sig)
{
	struct fh_proc	*p;

	if ((p = fh_proc_find(pgid)) == NULL || p->reaped)
		return (-ESRCH);
	switch (sig) {
	case 0:
	case SIGCHLD:
	case SIGCONT:
	case SIGSTOP:
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
	case SIGURG:
	case SIGWINCH:
		break;
	default:
		fh_proc_exit(p, sig);	/* WIFSIGNALED, WTERMSIG == sig */
		break;
	}
	return (0);
}

/*
 * The harness runs in its own PID namespace's /proc as agentd would; the
 * fake pids are in no session there, so a sweep finds each session empty.
 */
int
pty_proc_own(void)
{
	return (1);
}

/* No process runs: a fake pid has no pidfd, and none is signalled. */
int
pty_pidfd_open(pid_t pid)
{
	errno = ESRCH;
	return (-1);
}

/* See pty_pidfd_open(). */
int
pty_pidfd_signal(int pidfd, int sig)
{
	errno = EBADF;
	return (-1);
}

/* A fake session has one group, its leader's: signal each. */
int
pty_kill_sessions(const pid_t *sids, size_t nsids, int sig)
{
	size_t	i;
	int	hit = 0;

	for (i = 0; i < nsids; i++) {
		if (pty_kill_group(sids[i], sig) == 0)
			hit = 1;
	}
	return (hit ? 0 : -ESRCH);
}

/* ---- the files routes, parsers only ------------------------------------ */

/* Parse what a files request carries; answer 200 {} or the error. */
void
files_route(struct http_req *hr)
{
	struct proto_files_query	 q;
	struct proto_stat_req		 st;
	struct proto_fetch		 f;
	struct proto_err		 err;
	struct proto_buf		 b = { 0 };
	int				 rc;

	if (strcmp(hr->path, "/v1/files/stat") == 0) {
		if ((rc = proto_parse_stat(hr->body, hr->body_len, &st,
		    &err)) == 0)
			proto_stat_req_free(&st);
	} else if (strcmp(hr->path, "/v1/files/fetch") == 0) {
		if ((rc = proto_parse_fetch(hr->body, hr->body_len, &f,
		    &err)) == 0)
			proto_fetch_free(&f);
	} else if ((rc = proto_parse_files_query(hr->query, &q, &err)) == 0)
		proto_files_query_free(&q);
	if (rc != 0) {
		must(err.status >= 400 && err.status < 500,
		    "files parser: not a 4xx");
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	proto_buf_append(&b, "{}", 2);
	http_reply(hr->req, 200, &b);
}

/* Nothing to set up: no files call runs here. */
void
files_init(struct event_base *base, const struct config *c)
{
}

/* No files call runs here (for /metrics). */
void
files_running(size_t *calls, size_t *fetches)
{
	*calls = *fetches = 0;
}

/* ---- envd's files services: not here (they need files workers) ------ */

/* No filesystem.Filesystem methods. */
void
fs_register(struct event_base *b, const struct config *c)
{
}

/* Nothing to free. */
void
fs_free(void)
{
}

/* No /files routes. */
void
envfiles_register(const struct config *c)
{
}

/* No /files/compose. */
void
compose_register(const struct config *c)
{
}

/* No compose, no watches: no metrics of theirs. */
void
compose_metrics(struct proto_buf *b)
{
}

/* See compose_metrics(). */
void
fs_metrics(struct proto_buf *b)
{
}

/* ---- restore.c, counting only ------------------------------------------ */

static uint64_t	fh_generation;

/* A restore reported: counted, the clock and the RNG untouched. */
void
restore_resumed(int64_t unix_ms, const uint8_t *entropy, size_t len,
    struct restore_result *r)
{
	(void)unix_ms;
	(void)entropy;
	memset(r, 0, sizeof *r);
	r->generation = ++fh_generation;
	r->by = "platform";
	r->clock = "none";
	snprintf(r->clock_error, sizeof r->clock_error, "the fuzzer's stub");
	r->entropy_bytes = len;
}

/* No sync here: a pause's wait is done on the loop's next turn. */
struct pause_wait {
	struct event	*ev;
	pause_done_fn	 done;
	void		*arg;
};

static struct event_base	*fh_pause_base;

static void
fh_pause_cb(evutil_socket_t fd, short events, void *arg)
{
	struct pause_wait	*w = arg;

	(void)fd;
	(void)events;
	event_free(w->ev);
	w->done(w->arg, 0);
	free(w);
}

void
pause_init(struct event_base *base)
{
	fh_pause_base = base;
}

void
pause_free(void)
{
}

struct pause_wait *
pause_start(pause_done_fn done, void *arg)
{
	struct pause_wait	*w = calloc(1, sizeof *w);
	struct timeval		 now = { 0, 0 };

	if (w == NULL || (w->ev = evtimer_new(fh_pause_base, fh_pause_cb,
	    w)) == NULL)
		abort();
	w->done = done;
	w->arg = arg;
	evtimer_add(w->ev, &now);
	return (w);
}

void
pause_cancel(struct pause_wait *w)
{
	event_free(w->ev);
	free(w);
}

/* Restores counted. */
uint64_t
restore_generation(void)
{
	return (fh_generation);
}

/* agentd_generation. */
void
restore_metrics(struct proto_buf *b)
{
	proto_buf_printf(b, "agentd_generation %llu\n",
	    (unsigned long long)fh_generation);
}

/* An upgrade (upgrade.h) would execve: refused, after the body's checks. */
void
upgrade_route(struct http_req *hr)
{
	json_t	*root = json_loadb(hr->body, hr->body_len, 0, NULL);

	if (root == NULL)
		http_fail(hr->req, 400, "invalid_json", "the fuzzer's stub");
	else
		http_fail(hr->req, 422, "upgrade_rejected", "the fuzzer's stub");
	json_decref(root);
}

/* Upgrades since the boot: none here. */
uint64_t
upgrade_count(void)
{
	return (0);
}

/* agentd_upgrades_total and agentd_upgrade_failures_total. */
void
upgrade_metrics(struct proto_buf *b)
{
	proto_buf_printf(b, "agentd_upgrades_total 0\n"
	    "agentd_upgrade_failures_total 0\n");
}

/* ---- the driver -------------------------------------------------------- */

/* The port of the TCP listener agentd opened on 127.0.0.1:0. */
static int
fh_find_port(void)
{
	struct sockaddr_in	sin;
	socklen_t		len;
	int			fd, on;

	for (fd = 3; fd < 1024; fd++) {
		len = sizeof on;
		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) != 0 ||
		    !on)
			continue;
		len = sizeof sin;
		if (getsockname(fd, (struct sockaddr *)&sin, &len) == 0 &&
		    sin.sin_family == AF_INET)
			return (ntohs(sin.sin_port));
	}
	return (-1);
}

static void
fh_tick_cb(evutil_socket_t fd, short events, void *arg)
{
}

/* One turn of agentd's loop: what is ready, or wait up to us. */
static void
fh_turn(int us)
{
	struct timeval	tv = { 0, us };

	evtimer_add(tick_ev, &tv);
	event_active(reap_ev, EV_TIMEOUT, 0);	/* statuses decided meanwhile */
	event_base_loop(agentd_base, EVLOOP_ONCE);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char			*args[] = { "agentd",
	    "--listen", "127.0.0.1:0", "--socket", sock_path,
	    "--workdir", "/", "--log-level", "error",
	    "--max-body", "64KiB", "--ring-bytes", "64KiB",
	    "--max-ring-bytes", "1MiB", "--max-total-ring-bytes", "16MiB",
	    "--max-sessions", "64", "--stdin-buffer", "64KiB",
	    "--exited-ttl", "1h", "--shutdown-grace", "0",
	    "--max-connections", "100",
	    NULL };

	pthread_mutexattr_t	 ma;

	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&fh_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	signal(SIGPIPE, SIG_IGN);
	fatal_set_hook(fh_fatal);
	snprintf(dir, sizeof dir, "/tmp/fuzz_http.XXXXXX");
	must(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(sock_path, sizeof sock_path, "%s/agentd.sock", dir);
	setenv("AGENTD_TOKEN", FH_TOKEN, 1);
	must(config_load(&cfg, (int)(sizeof args / sizeof args[0]) - 1, args,
	    NULL) == 0, "config_load");
	log_set_level(cfg.log_level);
	agentd_start_ms = clock_mono_ms();
	json_object_seed(1);

	/* main()'s wiring; its observer without the shutdown's part. */
	must(agentd_start(&cfg, sessions_event) == 0, "agentd_start");
	reap_ev = event_new(agentd_base, -1, 0, fh_reap_cb, NULL);
	tick_ev = evtimer_new(agentd_base, fh_tick_cb, NULL);
	tcp_port = fh_find_port();
	must(tcp_port > 0, "no TCP listener");
	return (0);
}

/* Connect to agentd, non-blocking. */
static int
fh_connect(int unix_socket)
{
	struct sockaddr_in	sin;
	struct sockaddr_un	sun;
	int			fd;

	if (unix_socket) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		memset(&sun, 0, sizeof sun);
		sun.sun_family = AF_UNIX;
		snprintf(sun.sun_path, sizeof sun.sun_path, "%s", sock_path);
		must(connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0,
		    "connect unix");
	} else {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		memset(&sin, 0, sizeof sin);
		sin.sin_family = AF_INET;
		sin.sin_port = htons(tcp_port);
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
			fprintf(stderr, "fuzz_http: connect tcp: %s\n",
			    strerror(errno));
			abort();
		}
	}
	must(fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
	return (fd);
}

/*
 * No status line in the answers may be a 5xx, but 505: a request line of
 * another major version (HTTP/2.0) is the client's, answered so.
 */
static void
fh_check_answers(const char *a, size_t len)
{
	size_t	i;

	for (i = 0; i + 12 <= len; i++) {
		if ((i == 0 || a[i - 1] == '\n') &&
		    memcmp(a + i, "HTTP/1.", 7) == 0 && a[i + 8] == ' ' &&
		    a[i + 9] == '5' && memcmp(a + i + 9, "505", 3) != 0) {
			fprintf(stderr, "fuzz_http: answered %.40s\n", a + i);
			abort();
		}
	}
}

/* Empty the sessions table and the fake processes. */
static void
fh_reset(void)
{
	size_t	i;

	sessions_flush_waiters();
	session_remove_all();
	pthread_mutex_lock(&fh_lock);
	for (i = 0; i < nprocs; i++) {
		fh_close(&procs[i].out);
		fh_close(&procs[i].err);
		fh_close(&procs[i].in);
	}
	nprocs = 0;
	pthread_mutex_unlock(&fh_lock);
	must(session_count() == 0, "sessions left");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char	*ans;
	size_t		 anslen = 0, sent = 0;
	int64_t		 deadline;
	ssize_t		 n;
	struct linger	 lg = { 1, 0 };
	int		 fd, shut = 0, quiet = 0, closed = 0, flags, i;
	char		 buf[65536];

	if (size == 0)
		return (0);
	flags = data[0];
	data++;
	size--;
	if (ans == NULL)
		ans = malloc(FH_ANSWER_MAX);
	must(agentd_stats.connections_open == 0, "connections open at start");

	fd = fh_connect(flags & 1);
	deadline = clock_mono_ms() + FH_INPUT_MS;
	while (!closed && clock_mono_ms() < deadline) {
		if (sent < size) {
			n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
			else if (n == -1 && errno != EAGAIN)
				sent = size;	/* agentd closed on us */
		}
		if (sent == size && !shut &&
		    ((flags & 2) || quiet >= FH_QUIET_TURNS)) {
			shutdown(fd, SHUT_WR);
			shut = 1;
		}
		fh_turn(quiet < FH_QUIET_TURNS ? 0 : 1000);
		quiet++;
		while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
			quiet = 0;
			if (anslen + (size_t)n <= FH_ANSWER_MAX) {
				memcpy(ans + anslen, buf, (size_t)n);
				anslen += (size_t)n;
			}
		}
		if (n == 0 || (n == -1 && errno != EAGAIN))
			closed = 1;
	}
	fh_check_answers(ans, anslen);
	/*
	 * Close with a reset: no TIME_WAIT on either side, else hundreds of
	 * thousands of inputs run the loopback out of ephemeral ports.
	 */
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(fd);
	if (getenv("FUZZ_HTTP_SLOW") != NULL &&
	    clock_mono_ms() - (deadline - FH_INPUT_MS) > 100)
		fprintf(stderr, "slow input (%lld ms, closed %d, shut %d): %.*s\n",
		    (long long)(clock_mono_ms() - (deadline - FH_INPUT_MS)),
		    closed, shut, (int)(size < 200 ? size : 200), data);

	/* The client is gone: so must its connection be, waiters and all. */
	deadline = clock_mono_ms() + 1000;
	for (i = 0; agentd_stats.connections_open > 0 &&
	    clock_mono_ms() < deadline; i++)
		fh_turn(i < 16 ? 0 : 1000);
	must(agentd_stats.connections_open == 0,
	    "a connection outlived its client");
	fh_reset();
	for (i = 0; i < 4; i++)
		fh_turn(0);
	return (0);
}
