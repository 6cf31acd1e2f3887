/*
 * upgrade.c -- live upgrade of agentd in its own pid (see upgrade.h): the
 * call and its checks, the hand-over and the execve, and the successor's
 * resume.
 */
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <mbedtls/sha256.h>

#include "companion.h"
#include "config.h"
#include "envstate.h"
#include "events.h"
#include "evring.h"
#include "hold.h"
#include "http.h"
#include "log.h"
#include "outq.h"
#include "restore.h"
#include "session.h"
#include "stats.h"
#include "sessionsave.h"
#include "stop.h"
#include "upgguard.h"
#include "upgrade.h"
#include "upgstate.h"
#include "util.h"

#define UPGRADE_DRAIN_STEP_MS	5	/* the drain looks this often */
#define UPGRADE_VERSION_MAX	64	/* bytes of a version string */
#define UPGRADE_LISTENERS_MAX	64	/* listeners handed over */
#define UPGRADE_EVENTS_READ	256	/* events copied per read */

/* The new binary's --upgrade-check under way (one at a time). */
struct upgrade_check {
	struct evhttp_request	*req;
	struct hold		*hold;		/* UPGRADE_CHECK_MS; the client */
	char			*path;
	pid_t			 pid;		/* -1 once its status is in */
	int			 status;
	int			 fd;		/* its stdout, -1 at EOF */
	struct event		*ev;
	char			 out[UPGRADE_CHECK_OUT_MAX + 1];
	size_t			 got;
};

static char		**upgrade_argv;
static struct event_base	 *upgrade_base;		/* the loop */
static struct config	 *upgrade_cfg;
static int64_t		 *upgrade_start_ms;	/* main's: the uptime's start */
static struct upgrade_check *check;
static void		(*upgrade_flush)(void);
static uint64_t		  upgrades;		/* since the boot */
static uint64_t		  failures;		/* since the boot */
static uint64_t		  rollbacks;		/* since the boot */
static char		 *upgrade_path;		/* the hand-over's binary */
static char		  to_version[UPGRADE_VERSION_MAX];
static char		  from_version[UPGRADE_VERSION_MAX]; /* successor */
static struct event	 *drain_ev;
static int64_t		  drain_end_ms;
static struct upgstate	 *state;		/* the successor's, read */
static int		  state_fd = -1;
static uint64_t		  state_generation;

static int	upgrade_verify(const char *, const char *, char *, size_t);
static int	upgrade_folders_ok(const char *, char *, size_t);
static int	upgrade_check_spawn(const char *, pid_t *, int *, char *,
		    size_t);
static int	upgrade_check_verdict(const struct upgrade_check *, char *,
		    size_t);
static void	upgrade_check_read_cb(evutil_socket_t, short, void *);
static void	upgrade_check_done(struct upgrade_check *);
static void	upgrade_check_deadline(void *);
static void	upgrade_check_gone(void *);
static void	upgrade_check_free(struct upgrade_check *);
static void	upgrade_check_start(struct evhttp_request *, const char *);
static void	upgrade_drain_cb(evutil_socket_t, short, void *);
static void	upgrade_handover(void);
static int	upgrade_save(int *, size_t *, int *, int *, char *, size_t);
static void	upgrade_save_events(struct upgstate_w *);
static void	upgrade_cloexec(const int *, size_t, int);
static void	upgrade_load_events(struct upgstate *);
static void	upgrade_load_companion(struct upgstate *, struct config *,
		    int *);
static void	upgrade_reject(struct evhttp_request *, const char *);
static void	upgrade_rescue(void);
static void	upgrade_listener_done(const char *, int);

/* --upgrade-check: print the state format this binary reads. */
int
upgrade_check_mode(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], UPGRADE_CHECK_FLAG) != 0)
		return (0);
	printf("%s %d\nversion %s\n", UPGSTATE_MAGIC, UPGSTATE_VERSION,
	    AGENTD_VERSION);
	fflush(stdout);
	return (1);
}

/* Keep argv for the execve, and the hook that answers long-polls. */
void
upgrade_init(char **argv, int64_t *start_ms, void (*flush)(void))
{
	upgrade_argv = argv;
	upgrade_start_ms = start_ms;
	upgrade_flush = flush;
}

/* Upgrades since the boot. */
uint64_t
upgrade_count(void)
{
	return (upgrades);
}

/* The counters of /metrics. */
void
upgrade_metrics(struct proto_buf *b)
{
	proto_buf_printf(b, "# TYPE agentd_upgrades_total counter\n"
	    "agentd_upgrades_total %" PRIu64 "\n"
	    "# TYPE agentd_upgrade_failures_total counter\n"
	    "agentd_upgrade_failures_total %" PRIu64 "\n"
	    "# TYPE agentd_upgrade_rollbacks_total counter\n"
	    "agentd_upgrade_rollbacks_total %" PRIu64 "\n", upgrades, failures,
	    rollbacks);
}

/* Answer 422 upgrade_rejected, counted. */
static void
upgrade_reject(struct evhttp_request *req, const char *cause)
{
	failures++;
	log_warn("%s: rejected: %s", __func__, cause);
	http_fail(req, 422, "upgrade_rejected", "%s", cause);
}

/*
 * Start path --upgrade-check on pipes, stdin /dev/null: 0 with *pid and
 * *fd (its stdout), or -1 with cause.  It is the main thread's child: the
 * reaper hands its status to upgrade_reaped().
 */
static int
upgrade_check_spawn(const char *path, pid_t *pid, int *fd, char *cause,
    size_t len)
{
	extern char	**environ;
	char		 *argv[] = { (char *)path, (char *)UPGRADE_CHECK_FLAG,
			    NULL };
	sigset_t	  none;
	int		  p[2], devnull;

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == -1) {
		snprintf(cause, len, "pipe: %s", strerror(errno));
		return (-1);
	}
	sigemptyset(&none);
	if ((*pid = fork()) == -1) {
		snprintf(cause, len, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return (-1);
	}
	if (*pid == 0) {
		/* Async-signal-safe calls only: other threads may hold locks. */
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(p[1], 1);
		if ((devnull = open("/dev/null", O_RDONLY)) != -1)
			dup2(devnull, 0);
		execve(path, argv, environ);
		_exit(127);
	}
	close(p[1]);
	*fd = p[0];
	return (0);
}

/*
 * The check ended: 0 when it exited 0 and printed the format this agentd
 * writes (its version into to_version), else -1 with cause.
 */
static int
upgrade_check_verdict(const struct upgrade_check *c, char *cause,
    size_t len)
{
	char		 want[64];
	const char	*out = c->out, *v, *nl;
	int		 status = c->status;

	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFSIGNALED(status))
			snprintf(cause, len, "%s %s: killed by signal %d",
			    c->path, UPGRADE_CHECK_FLAG, WTERMSIG(status));
		else
			snprintf(cause, len, "%s %s: exit status %d%s",
			    c->path, UPGRADE_CHECK_FLAG, WEXITSTATUS(status),
			    WEXITSTATUS(status) == 127 ? " (cannot run it)" :
			    "");
		return (-1);
	}
	snprintf(want, sizeof want, "%s %d\n", UPGSTATE_MAGIC,
	    UPGSTATE_VERSION);
	if (strncmp(out, want, strlen(want)) != 0) {
		snprintf(cause, len, "%s %s: reads state format \"%.*s\", "
		    "not \"%.*s\"", c->path, UPGRADE_CHECK_FLAG,
		    (int)strcspn(out, "\n"), out, (int)strlen(want) - 1, want);
		return (-1);
	}
	v = out + strlen(want);
	if (strncmp(v, "version ", 8) != 0 ||
	    (nl = strchr(v + 8, '\n')) == NULL || nl - (v + 8) <= 0 ||
	    nl - (v + 8) >= UPGRADE_VERSION_MAX) {
		snprintf(cause, len, "%s %s: no version", c->path,
		    UPGRADE_CHECK_FLAG);
		return (-1);
	}
	snprintf(to_version, sizeof to_version, "%.*s", (int)(nl - (v + 8)),
	    v + 8);
	return (0);
}

/* The check's output is readable: keep it, until its end. */
static void
upgrade_check_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct upgrade_check	*c = arg;
	ssize_t			 n;

	for (;;) {
		n = read(c->fd, c->out + c->got, UPGRADE_CHECK_OUT_MAX -
		    c->got);
		if (n > 0 && (c->got += (size_t)n) < UPGRADE_CHECK_OUT_MAX)
			continue;
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return;
		break;		/* EOF, an error, or enough */
	}
	c->out[c->got] = '\0';
	event_free(c->ev);
	c->ev = NULL;
	close(c->fd);
	c->fd = -1;
	upgrade_check_done(c);
}

/* The check's status came in (the reaper); 0 when pid was the check's. */
int
upgrade_reaped(pid_t pid, int status)
{
	struct upgrade_check	*c = check;

	if (c == NULL || c->pid != pid)
		return (-1);
	c->pid = -1;
	c->status = status;
	upgrade_check_done(c);
	return (0);
}

/* Once the check's output ended and its status is in: answer, go on. */
static void
upgrade_check_done(struct upgrade_check *c)
{
	struct proto_buf	 b = { 0 };
	struct evhttp_request	*req = c->req;
	char			 cause[UPGSTATE_CAUSE_MAX + PATH_MAX];

	if (c->fd != -1 || c->pid != -1)
		return;
	if (upgrade_check_verdict(c, cause, sizeof cause) != 0) {
		upgrade_check_free(c);
		upgrade_reject(req, cause);
		return;
	}
	if (agentd_stopping()) {
		upgrade_check_free(c);
		upgrade_reject(req, "agentd is shutting down");
		return;
	}
	log_info("%s: %s (version %s) checked; handing over", __func__,
	    c->path, to_version);
	upgrade_path = xstrdup(c->path);
	upgrade_check_free(c);
	proto_buf_printf(&b, "{\"from_version\": ");
	proto_buf_json_string(&b, AGENTD_VERSION, strlen(AGENTD_VERSION));
	proto_buf_printf(&b, ", \"to_version\": ");
	proto_buf_json_string(&b, to_version, strlen(to_version));
	proto_buf_printf(&b, "}");
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Connection", "close");
	http_reply(req, 202, &b);
	upgrade_handover();
}

/* The check did not end in time: SIGKILL (the reaper takes it), 422. */
static void
upgrade_check_deadline(void *arg)
{
	struct upgrade_check	*c = arg;
	struct evhttp_request	*req = c->req;
	char			 cause[UPGSTATE_CAUSE_MAX + PATH_MAX];

	snprintf(cause, sizeof cause, "%s %s did not end within %d ms",
	    c->path, UPGRADE_CHECK_FLAG, UPGRADE_CHECK_MS);
	upgrade_check_free(c);
	upgrade_reject(req, cause);
}

/* The client left: the check is given up. */
static void
upgrade_check_gone(void *arg)
{
	log_info("%s: the client left; check given up", __func__);
	failures++;
	upgrade_check_free(arg);
}

/* Free the check; a child still running gets SIGKILL (the reaper's). */
static void
upgrade_check_free(struct upgrade_check *c)
{
	if (c->pid != -1)
		kill(c->pid, SIGKILL);
	if (c->ev != NULL)
		event_free(c->ev);
	if (c->fd != -1)
		close(c->fd);
	if (c->hold != NULL)
		hold_free(c->hold);
	free(c->path);
	free(c);
	check = NULL;
}

/* The shutdown: a check under way is answered 503. */
void
upgrade_stop(void)
{
	struct evhttp_request	*req;

	if (check == NULL)
		return;
	req = check->req;
	upgrade_check_free(check);
	http_fail(req, 503, "shutting_down", "agentd is shutting down");
}

/* Start the check of path; the request is answered when it ends. */
static void
upgrade_check_start(struct evhttp_request *req, const char *path)
{
	static const struct hold_ops	 ops = { upgrade_check_deadline,
					    upgrade_check_gone };
	struct upgrade_check		*c;
	char				 cause[UPGSTATE_CAUSE_MAX + PATH_MAX];

	c = xcalloc(1, sizeof *c);
	c->req = req;
	c->fd = -1;
	c->path = xstrdup(path);
	if (upgrade_check_spawn(path, &c->pid, &c->fd, cause,
	    sizeof cause) != 0) {
		c->pid = -1;
		upgrade_check_free(c);
		upgrade_reject(req, cause);
		return;
	}
	check = c;
	if ((c->ev = event_new(upgrade_base, c->fd, EV_READ | EV_PERSIST,
	    upgrade_check_read_cb, c)) == NULL || event_add(c->ev, NULL) != 0)
		fatal("%s: out of memory", __func__);
	c->hold = hold_new(req, UPGRADE_CHECK_MS, &ops, c);
}

/*
 * Whether no user but root (or agentd's) can swap what path names between
 * its checks and the execve: each folder above it belongs to root or to
 * agentd's user, and is not writable by group or others unless sticky (a
 * sticky folder's entries are renamed only by their owner).  0, or -1
 * with cause.
 */
static int
upgrade_folders_ok(const char *path, char *cause, size_t len)
{
	struct stat	 st;
	char		 dir[PATH_MAX];
	char		*slash;

	if (strlen(path) >= sizeof dir) {
		snprintf(cause, len, "path too long");
		return (-1);
	}
	strcpy(dir, path);
	while ((slash = strrchr(dir, '/')) != NULL) {
		if (slash == dir)
			slash[1] = '\0';	/* "/" itself */
		else
			*slash = '\0';
		if (stat(dir, &st) == -1) {
			snprintf(cause, len, "%s: %s", dir, strerror(errno));
			return (-1);
		}
		if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
		    ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
		    (st.st_mode & S_ISVTX) == 0)) {
			snprintf(cause, len, "%s: a folder another user can "
			    "write (mode %04o, uid %lu): the binary could be "
			    "swapped", dir, (unsigned)(st.st_mode & 07777),
			    (unsigned long)st.st_uid);
			return (-1);
		}
		if (strcmp(dir, "/") == 0)
			break;
	}
	return (0);
}

/*
 * Check the new binary: a regular executable file nobody but root (or
 * agentd's user) can write, in folders nobody else can write, its SHA-256
 * when given, its check run.
 */
static int
upgrade_verify(const char *path, const char *sha, char *cause, size_t len)
{
	struct stat	 st;
	uint8_t		 digest[32];
	char		 hex[65];
	void		*map;
	int		 fd, i;

	if (upgrade_folders_ok(path, cause, len) != 0)
		return (-1);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(fd, &st) == -1) {
		snprintf(cause, len, "%s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		return (-1);
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & S_IXUSR) == 0) {
		snprintf(cause, len, "%s: not a regular executable file", path);
		goto fail;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 ||
	    (st.st_uid != 0 && st.st_uid != geteuid())) {
		snprintf(cause, len, "%s: writable by a user other than root "
		    "(mode %04o, uid %lu)", path, (unsigned)(st.st_mode & 07777),
		    (unsigned long)st.st_uid);
		goto fail;
	}
	if (sha != NULL) {
		map = st.st_size > 0 ? mmap(NULL, (size_t)st.st_size,
		    PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
		if (map == MAP_FAILED) {
			snprintf(cause, len, "%s: mmap: %s", path,
			    strerror(errno));
			goto fail;
		}
		mbedtls_sha256_ret(map != NULL ? map : (void *)"",
		    (size_t)st.st_size, digest, 0);
		if (map != NULL)
			munmap(map, (size_t)st.st_size);
		for (i = 0; i < 32; i++)
			snprintf(hex + 2 * i, 3, "%02x", digest[i]);
		if (strcasecmp(hex, sha) != 0) {
			snprintf(cause, len, "%s: sha256 is %s, not %s", path,
			    hex, sha);
			goto fail;
		}
	}
	close(fd);
	return (0);
fail:
	close(fd);
	return (-1);
}

/* POST /v1/sandbox/upgrade {"path", "sha256"}. */
void
upgrade_route(struct http_req *hr)
{
	json_error_t		 jerr;
	json_t			*root, *jp, *js;
	const char		*path, *sha = NULL;
	char			 cause[UPGSTATE_CAUSE_MAX + PATH_MAX];
	char			 real[PATH_MAX];
	size_t			 i;

	if ((root = json_loadb(hr->body, hr->body_len, JSON_REJECT_DUPLICATES,
	    &jerr)) == NULL) {
		http_fail(hr->req, 400, "invalid_json", "line %d: %s",
		    jerr.line, jerr.text);
		return;
	}
	jp = json_object_get(root, "path");
	js = json_object_get(root, "sha256");
	if (!json_is_object(root) || !json_is_string(jp) ||
	    (path = json_string_value(jp))[0] != '/' ||
	    strlen(path) >= PATH_MAX) {
		http_fail(hr->req, 400, "invalid_request", "'path' must be an "
		    "absolute path");
		json_decref(root);
		return;
	}
	if (js != NULL && !json_is_null(js)) {
		if (!json_is_string(js) ||
		    strlen(sha = json_string_value(js)) != 64)
			goto badsha;
		for (i = 0; i < 64; i++) {
			if (!isxdigit((unsigned char)sha[i]))
				goto badsha;
		}
	}
	if (upgrade_path != NULL || check != NULL) {
		upgrade_reject(hr->req, "an upgrade is under way");
		goto out;
	}
	if (agentd_stopping()) {
		upgrade_reject(hr->req, "agentd is shutting down");
		goto out;
	}
	if (session_count_starting() > 0) {
		upgrade_reject(hr->req, "sessions are starting; try again");
		goto out;
	}
	if (upgrade_argv == NULL) {
		upgrade_reject(hr->req, "this agentd cannot execve itself");
		goto out;
	}
	/*
	 * The path with no symlink left: its folders are the ones checked,
	 * and it is what the check runs and the execve takes.
	 */
	if (realpath(path, real) == NULL) {
		snprintf(cause, sizeof cause, "%s: %s", path, strerror(errno));
		upgrade_reject(hr->req, cause);
		goto out;
	}
	if (upgrade_verify(real, sha, cause, sizeof cause) != 0) {
		upgrade_reject(hr->req, cause);
		goto out;
	}
	upgrade_check_start(hr->req, real);
	goto out;
badsha:
	http_fail(hr->req, 400, "invalid_request", "'sha256' must be 64 hex "
	    "digits");
out:
	json_decref(root);
}

/*
 * Begin the hand-over: pause accepting, answer the long-polls, and let
 * the answers out before the state is taken (upgrade_drain_cb).
 */
static void
upgrade_handover(void)
{
	struct timeval	tv;

	http_accept_pause(1);
	if (upgrade_flush != NULL)
		upgrade_flush();
	drain_end_ms = clock_mono_ms() + UPGRADE_DRAIN_MS;
	if (drain_ev == NULL && (drain_ev = evtimer_new(upgrade_base,
	    upgrade_drain_cb, NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	evtimer_add(drain_ev, timeval_ms(&tv, 0));
}

/* Set (on) or clear FD_CLOEXEC on n fds. */
static void
upgrade_cloexec(const int *fds, size_t n, int on)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (fds[i] >= 0)
			fcntl(fds[i], F_SETFD, on ? FD_CLOEXEC : 0);
	}
}

/* The answers went out (or the drain is over): save, execve. */
static void
upgrade_drain_cb(evutil_socket_t fd, short events, void *arg)
{
	extern char	**environ;
	struct timeval	  tv;
	static int	  keep[UPGRADE_KEEP_MAX];
	size_t		  nkeep = 0;
	char		  cause[UPGSTATE_CAUSE_MAX], num[16];
	int		  textfd, blobfd, imagefd, recfd, error;

	if ((outq_bytes() > 0 || session_count_starting() > 0) &&
	    clock_mono_ms() < drain_end_ms) {
		evtimer_add(drain_ev, timeval_ms(&tv, UPGRADE_DRAIN_STEP_MS));
		return;
	}
	if (agentd_stopping()) {
		/* A shutdown began meanwhile: it wins; no accepting again. */
		log_info("%s: shutting down: upgrade given up", __func__);
		failures++;
		free(upgrade_path);
		upgrade_path = NULL;
		return;
	}
	session_create_cancel_all();	/* a spawn would die half-way */
	if (upgrade_save(keep, &nkeep, &textfd, &blobfd, cause,
	    sizeof cause) != 0) {
		log_error("%s: cannot save the state: %s; carrying on",
		    __func__, cause);
		goto fail;
	}
	keep[nkeep++] = textfd;
	keep[nkeep++] = blobfd;
	/* The way back, should the new agentd not take over (upgguard.h). */
	if (upgguard_record(upgrade_argv, textfd, keep, nkeep,
	    upgrade_cfg->upgrade_ready_ms, &imagefd, &recfd, cause,
	    sizeof cause) != 0) {
		log_error("%s: no way back (%s); carrying on", __func__, cause);
		close(textfd);
		close(blobfd);
		goto fail;
	}
	keep[nkeep++] = imagefd;
	keep[nkeep++] = recfd;
	snprintf(num, sizeof num, "%d", recfd);
	setenv(UPGGUARD_ENV, num, 1);
	snprintf(num, sizeof num, "%d", textfd);
	setenv(UPGRADE_ENV, num, 1);
	log_info("%s: execve %s (pid %ld, %zu fds kept)", __func__,
	    upgrade_path, (long)getpid(), nkeep);
	upgrade_cloexec(keep, nkeep, 0);
	execve(upgrade_path, upgrade_argv, environ);
	error = errno;
	upgrade_cloexec(keep, nkeep, 1);
	unsetenv(UPGRADE_ENV);
	unsetenv(UPGGUARD_ENV);
	close(textfd);
	close(blobfd);
	close(imagefd);
	close(recfd);
	log_error("%s: execve %s: %s; carrying on", __func__, upgrade_path,
	    strerror(error));
fail:
	failures++;
	free(upgrade_path);
	upgrade_path = NULL;
	http_accept_pause(0);
}

/* Write the event feed: its counters and each event held. */
static void
upgrade_save_events(struct upgstate_w *w)
{
	static struct evring_event	 out[UPGRADE_EVENTS_READ];
	struct evring			*r = events_evring();
	struct evring_result		 res;
	struct evring_stats		 st;
	uint64_t			 cursor = 0;
	size_t				 i;

	if (r == NULL)
		return;
	evring_stats(r, &st);
	upgstate_section(w, "events");
	upgstate_put(w, "newest", "%" PRIu64, st.newest);
	upgstate_put(w, "dropped", "%" PRIu64, st.dropped);
	for (;;) {
		if (evring_read(r, cursor, NULL, out, nitems(out), &res) != 0 ||
		    res.n == 0)
			break;
		for (i = 0; i < res.n; i++)
			upgstate_put(w, "event", "%" PRIu64 " %s %s %.*s",
			    out[i].id, out[i].type, out[i].session != NULL ?
			    out[i].session : "-", (int)out[i].json_len,
			    out[i].json);
		cursor = out[res.n - 1].id;
	}
}

/* Write the whole state; the fds to keep open. */
static int
upgrade_save(int *keep, size_t *nkeep, int *textfd, int *blobfd,
    char *cause, size_t len)
{
	struct upgstate_w	*w;
	const char		*names[UPGRADE_LISTENERS_MAX];
	int			 fds[UPGRADE_LISTENERS_MAX], cfds[2];
	size_t			 n, i;
	pid_t			 cpid;

	if ((w = upgstate_writer(cause, len)) == NULL)
		return (-1);
	upgstate_put(w, "from-version", "%s", AGENTD_VERSION);
	upgstate_put(w, "upgrades", "%" PRIu64, upgrades);
	upgstate_put(w, "failures", "%" PRIu64, failures);
	upgstate_put(w, "rollbacks", "%" PRIu64, rollbacks);
	upgstate_put(w, "to-version", "%s", to_version);
	upgstate_put(w, "generation", "%" PRIu64, restore_generation());
	upgstate_put(w, "start-ms", "%" PRId64, *upgrade_start_ms);
	upgstate_put(w, "sessions-started", "%" PRIu64,
	    agentd_stats.sessions_started);
	upgstate_put(w, "output-bytes", "%" PRIu64, agentd_stats.output_bytes);
	upgstate_put(w, "zombies-reaped", "%" PRIu64,
	    agentd_stats.zombies_reaped);
	if (upgrade_cfg->token != NULL)
		upgstate_put_bytes(w, "token", upgrade_cfg->token,
		    upgrade_cfg->token_len);
	n = http_listener_fds(fds, names, nitems(fds));
	for (i = 0; i < n; i++) {
		upgstate_section(w, "listener");
		upgstate_put_bytes(w, "name", names[i], strlen(names[i]));
		upgstate_put(w, "fd", "%d", fds[i]);
		keep[(*nkeep)++] = fds[i];
	}
	if ((cpid = companion_handover(cfds)) > 0) {
		upgstate_section(w, "companion");
		upgstate_put(w, "pid", "%ld", (long)cpid);
		upgstate_put(w, "out", "%d %d", cfds[0], cfds[1]);
		keep[(*nkeep)++] = cfds[0];
		keep[(*nkeep)++] = cfds[1];
	}
	upgrade_save_events(w);
	envstate_save(w);	/* what envd's /init set */
	/* Room for the state's two fds, the old image and the record. */
	if (session_save_all(w, keep, nkeep, UPGRADE_KEEP_MAX - 4) < 0) {
		snprintf(cause, len, "more than %d fds to keep",
		    UPGRADE_KEEP_MAX);
		upgstate_writer_free(w);
		return (-1);
	}
	return (upgstate_finish(w, textfd, blobfd, cause, len));
}

/*
 * The state was refused: take over at least the listening sockets the old
 * agentd left open (without FD_CLOEXEC), named as http.c names them, so
 * that binding again does not fail on the addresses they hold (as PID 1
 * that would be fatal); close every other fd it left open (ring memfds,
 * sessions' PTYs and pipes, cgroup folders), which nobody will read now:
 * the memfds would pin their RAM, and the sessions get their hang-up.
 */
static void
upgrade_rescue(void)
{
	struct sockaddr_storage	 ss;
	struct sockaddr_in	*sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_un	*sun = (struct sockaddr_un *)&ss;
	struct sockaddr_vm	*svm = (struct sockaddr_vm *)&ss;
	struct dirent		*d;
	socklen_t		 len, olen;
	DIR			*dir;
	char			 addr[INET6_ADDRSTRLEN], name[PATH_MAX + 64];
	int			 fd, on, flags;
	size_t			 closed = 0;

	if ((dir = opendir("/proc/self/fd")) == NULL)
		return;
	while ((d = readdir(dir)) != NULL) {
		if ((fd = atoi(d->d_name)) < 3 || fd == dirfd(dir) ||
		    (flags = fcntl(fd, F_GETFD)) == -1 || (flags & FD_CLOEXEC))
			continue;
		olen = sizeof on;
		len = sizeof ss;
		memset(&ss, 0, sizeof ss);
		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen) != 0 ||
		    !on || getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
			close(fd);
			closed++;
			continue;
		}
		if (ss.ss_family == AF_INET &&
		    inet_ntop(AF_INET, &sin->sin_addr, addr, sizeof addr))
			snprintf(name, sizeof name, "%s:%u", addr,
			    ntohs(sin->sin_port));
		else if (ss.ss_family == AF_INET6 &&
		    inet_ntop(AF_INET6, &sin6->sin6_addr, addr, sizeof addr))
			snprintf(name, sizeof name, "[%s]:%u", addr,
			    ntohs(sin6->sin6_port));
		else if (ss.ss_family == AF_UNIX && sun->sun_path[0] != '\0')
			snprintf(name, sizeof name, "%.*s",
			    (int)sizeof sun->sun_path, sun->sun_path);
		else if (ss.ss_family == AF_VSOCK)
			snprintf(name, sizeof name, "vsock:*:%u",
			    svm->svm_port);
		else {
			close(fd);
			closed++;
			continue;
		}
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		log_warn("%s: taking over listener %s (fd %d)", __func__, name,
		    fd);
		http_inherit(name, fd);
	}
	closedir(dir);
	if (closed > 0)
		log_warn("%s: closed %zu fds the old agentd handed over",
		    __func__, closed);
}

/* A [listener] section read: hand its fd to http under its name. */
static void
upgrade_listener_done(const char *name, int fd)
{
	if (name[0] != '\0' && fd != -1)
		http_inherit(name, fd);
	else
		log_warn("upgrade_resume_early: ignoring a listener without "
		    "name or fd");
}

/* The successor, before it listens: the state, its token, listeners. */
void
upgrade_resume_early(struct config *cfg)
{
	const char	*env = getenv(UPGRADE_ENV), *key, *value;
	char		 cause[UPGSTATE_CAUSE_MAX], name[PATH_MAX];
	int64_t		 fd;
	uint64_t	 u;
	size_t		 len;
	int		 kind, section = 0, lfd = -1;

	if (env == NULL)
		return;
	if (upgstate_i64(env, &fd) != 0 || fd < 3 || fd > INT32_MAX) {
		log_error("%s: %s=%s: no fd; starting afresh", __func__,
		    UPGRADE_ENV, env);
		unsetenv(UPGRADE_ENV);
		return;
	}
	unsetenv(UPGRADE_ENV);
	state_fd = (int)fd;
	fcntl(state_fd, F_SETFD, FD_CLOEXEC);
	if ((state = upgstate_open(state_fd, cause, sizeof cause)) == NULL) {
		log_error("%s: the state is refused (%s); starting afresh",
		    __func__, cause);
		upgguard_disarm();	/* the old agentd could not read it either */
		close(state_fd);
		state_fd = -1;
		upgrade_rescue();
		return;
	}
	fcntl(upgstate_blob_fd(state), F_SETFD, FD_CLOEXEC);
	upgrades = upgguard_rolled_back() == NULL;
	name[0] = '\0';
	while ((kind = upgstate_next(state, &key, &value, &len)) !=
	    UPGSTATE_END) {
		if (kind == UPGSTATE_SECTION) {
			/* The end of a [listener]: hand it to http, once. */
			if (section == 1)
				upgrade_listener_done(name, lfd);
			section = strcmp(key, "listener") == 0 ? 1 : 2;
			name[0] = '\0';
			lfd = -1;
			continue;
		}
		if (section == 1) {
			if (strcmp(key, "name") == 0 && len < sizeof name)
				snprintf(name, sizeof name, "%s", value);
			else if (strcmp(key, "fd") == 0 &&
			    upgstate_i64(value, &fd) == 0 && fd > 2 &&
			    fd <= INT32_MAX && fcntl((int)fd, F_SETFD,
			    FD_CLOEXEC) == 0)
				lfd = (int)fd;
			else
				log_warn("%s: ignoring listener %s=%s",
				    __func__, key, value);
			continue;
		}
		if (section != 0)
			continue;	/* upgrade_resume()'s */
		if (strcmp(key, "token") == 0) {
			if (cfg->token != NULL) {
				explicit_bzero(cfg->token, cfg->token_len);
				free(cfg->token);
			}
			cfg->token = xmalloc(len + 1);
			memcpy(cfg->token, value, len + 1);
			cfg->token_len = len;
		} else if (strcmp(key, "from-version") == 0)
			snprintf(from_version, sizeof from_version, "%s",
			    value);
		else if (strcmp(key, "upgrades") == 0 &&
		    upgstate_u64(value, &u) == 0)
			upgrades = u + (upgguard_rolled_back() == NULL);
		else if (strcmp(key, "failures") == 0 &&
		    upgstate_u64(value, &u) == 0)
			failures = u + (upgguard_rolled_back() != NULL);
		else if (strcmp(key, "rollbacks") == 0 &&
		    upgstate_u64(value, &u) == 0)
			rollbacks = u + (upgguard_rolled_back() != NULL);
		else if (strcmp(key, "to-version") == 0)
			snprintf(to_version, sizeof to_version, "%s", value);
		else if (strcmp(key, "start-ms") == 0 &&
		    upgstate_i64(value, &fd) == 0)
			*upgrade_start_ms = fd;	/* CLOCK_MONOTONIC's: uptime */
		else if (strcmp(key, "generation") == 0 &&
		    upgstate_u64(value, &u) == 0)
			state_generation = u;
		else if (strcmp(key, "sessions-started") == 0 &&
		    upgstate_u64(value, &u) == 0)
			agentd_stats.sessions_started = u;
		else if (strcmp(key, "output-bytes") == 0 &&
		    upgstate_u64(value, &u) == 0)
			agentd_stats.output_bytes = u;
		else if (strcmp(key, "zombies-reaped") == 0 &&
		    upgstate_u64(value, &u) == 0)
			agentd_stats.zombies_reaped = u;
		else
			log_warn("%s: line %zu: ignoring %s", __func__,
			    upgstate_line(state), key);
	}
	if (section == 1)
		upgrade_listener_done(name, lfd);
}

/* The [events] section: the feed's ids, drops and events. */
static void
upgrade_load_events(struct upgstate *r)
{
	struct evring	*ring = events_evring();
	const char	*key, *value, *p;
	char		 type[EVRING_TYPE_MAX + 1], sess[PROTO_ID_MAX + 2];
	uint64_t	 newest = 0, dropped = 0, id, want = 0;
	size_t		 len;
	int		 n, resumed = 0;

	while (upgstate_next(r, &key, &value, &len) == UPGSTATE_ITEM) {
		if (strcmp(key, "newest") == 0 &&
		    upgstate_u64(value, &newest) == 0)
			continue;
		if (strcmp(key, "dropped") == 0 &&
		    upgstate_u64(value, &dropped) == 0)
			continue;
		if (strcmp(key, "event") != 0 || sscanf(value, "%" SCNu64
		    " %64s %65s %n", &id, type, sess, &n) != 3 || id == 0 ||
		    (want != 0 && id != want) || ring == NULL) {
			log_warn("%s: line %zu: ignoring %s", __func__,
			    upgstate_line(r), key);
			continue;
		}
		if (!resumed && evring_resume(ring, id - 1, dropped) != 0)
			log_warn("%s: the feed has events already: the ids "
			    "handed over are not kept", __func__);
		resumed = 1;
		p = value + n;
		evring_push(ring, type, strcmp(sess, "-") == 0 ? NULL : sess,
		    xstrdup(p), strlen(p));
		want = id + 1;
	}
	if (!resumed && ring != NULL && evring_resume(ring, newest,
	    dropped) != 0)
		log_warn("%s: the feed has events already: its ids go on from "
		    "them", __func__);
	upgstate_unread(r);
}

/* The [companion] section: supervise the one that runs. */
static void
upgrade_load_companion(struct upgstate *r, struct config *cfg, int *adopted)
{
	const char	*key, *value;
	size_t		 len;
	int64_t		 pid = -1;
	int		 out = -1, err = -1;

	while (upgstate_next(r, &key, &value, &len) == UPGSTATE_ITEM) {
		if (strcmp(key, "pid") == 0 && upgstate_i64(value, &pid) == 0)
			continue;
		if (strcmp(key, "out") == 0 && sscanf(value, "%d %d", &out,
		    &err) == 2)
			continue;
		log_warn("%s: ignoring %s", __func__, key);
	}
	upgstate_unread(r);
	if (out >= 0 && fcntl(out, F_SETFD, FD_CLOEXEC) == -1)
		out = -1;
	if (err >= 0 && fcntl(err, F_SETFD, FD_CLOEXEC) == -1)
		err = -1;
	if (pid <= 1 || cfg->companion == NULL || *adopted) {
		log_warn("%s: ignoring the companion (pid %lld)", __func__,
		    (long long)pid);
		if (out >= 0)
			close(out);
		if (err >= 0)
			close(err);
		return;
	}
	companion_adopt(upgrade_base, cfg->companion, (pid_t)pid, out, err);
	*adopted = 1;
}

/* The successor, listening: the feed, the sessions, the companion. */
int
upgrade_resume(struct event_base *base, struct config *cfg)
{
	struct session_load	*sl;
	const char		*key, *value;
	size_t			 len, nsessions = 0, dropped = 0;
	int			 kind, adopted = 0;

	upgrade_base = base;
	upgrade_cfg = cfg;
	http_inherit_done();
	if (state == NULL) {
		upgguard_disarm();
		return (0);
	}
	restore_generation_set(state_generation);
	upgstate_rewind(state);
	while ((kind = upgstate_next(state, &key, &value, &len)) !=
	    UPGSTATE_END) {
		if (kind != UPGSTATE_SECTION)
			continue;	/* read by upgrade_resume_early() */
		if (strcmp(key, "events") == 0)
			upgrade_load_events(state);
		else if (strcmp(key, "companion") == 0)
			upgrade_load_companion(state, cfg, &adopted);
		else if (strcmp(key, "envd") == 0)
			envstate_load(state);
		else if (strcmp(key, "session") == 0) {
			sl = session_load_begin();
			while (upgstate_next(state, &key, &value, &len) ==
			    UPGSTATE_ITEM)
				session_load_item(sl, state, key, value, len);
			upgstate_unread(state);
			if (session_load_end(sl, state) == 0)
				nsessions++;
			else
				dropped++;
		} else if (strcmp(key, "listener") != 0)
			log_warn("%s: ignoring section [%s]", __func__, key);
	}
	/* Taken over: the old image and the state go. */
	upgguard_disarm();
	upgstate_close(state);
	state = NULL;
	close(state_fd);
	state_fd = -1;
	if (upgguard_rolled_back() != NULL) {
		log_error("%s: the new agentd (%s) did not take over (%s): "
		    "agentd %s again, %zu sessions restored, %zu dropped",
		    __func__, to_version, upgguard_rolled_back(),
		    AGENTD_VERSION, nsessions, dropped);
		events_post("sandbox.upgrade_failed", NULL, json_pack(
		    "{ssssss}", "from_version", AGENTD_VERSION, "to_version",
		    to_version, "reason", upgguard_rolled_back()));
		return (adopted);
	}
	log_info("%s: upgraded from %s to %s: %zu sessions restored, %zu "
	    "dropped", __func__, from_version, AGENTD_VERSION, nsessions,
	    dropped);
	events_post("sandbox.upgraded", NULL, json_pack("{ssss}",
	    "from_version", from_version, "to_version", AGENTD_VERSION));
	return (adopted);
}
