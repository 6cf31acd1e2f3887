/*
 * util.c -- time, statistics, processes and agentd instances for the bench.
 */
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define AGENTD_START_TIMEOUT_US	(10 * 1000 * 1000)	/* first healthz 200 */
#define AGENTD_RETRY_US		20			/* between connects */
#define AGENTD_MAX		8			/* instances at once */

extern char	**environ;

static struct agentd	*running[AGENTD_MAX];

/* Monotonic microseconds. */
double
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Sleep us microseconds. */
void
sleep_us(double us)
{
	struct timespec	ts;

	ts.tv_sec = (time_t)(us / 1e6);
	ts.tv_nsec = (long)((us - ts.tv_sec * 1e6) * 1e3);
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Add a sample. */
void
samples_add(struct samples *s, double v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 256;
		if ((s->v = realloc(s->v, s->cap * sizeof *s->v)) == NULL)
			die("out of memory");
	}
	s->v[s->n++] = v;
	s->sorted = 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The p-th percentile (nearest rank); NAN without samples. */
double
samples_pct(struct samples *s, double p)
{
	size_t	i;

	if (s->n == 0)
		return NAN;
	if (!s->sorted) {
		qsort(s->v, s->n, sizeof *s->v, cmp_double);
		s->sorted = 1;
	}
	i = (size_t)ceil(p / 100.0 * s->n);
	if (i > 0)
		i--;
	if (i >= s->n)
		i = s->n - 1;
	return s->v[i];
}

double
samples_median(struct samples *s)
{
	return samples_pct(s, 50);
}

void
samples_free(struct samples *s)
{
	free(s->v);
	memset(s, 0, sizeof *s);
}

/* A static buffer of a ring, for formatting. */
static char *
fmt_buf(void)
{
	static char	bufs[16][32];
	static int	i;

	return bufs[i++ & 15];
}

const char *
fmt_us(double us)
{
	char	*b = fmt_buf();

	if (isnan(us))
		snprintf(b, 32, "n/a");
	else if (us < 1000)
		snprintf(b, 32, "%.0f µs", us);
	else if (us < 100000)
		snprintf(b, 32, "%.2f ms", us / 1000);
	else
		snprintf(b, 32, "%.0f ms", us / 1000);
	return b;
}

const char *
fmt_kib(double kib)
{
	char	*b = fmt_buf();

	if (isnan(kib))
		snprintf(b, 32, "n/a");
	else if (kib < 10240)
		snprintf(b, 32, "%.1f KiB", kib);
	else
		snprintf(b, 32, "%.1f MiB", kib / 1024);
	return b;
}

const char *
fmt_mbs(double mbs)
{
	char	*b = fmt_buf();

	if (isnan(mbs))
		snprintf(b, 32, "n/a");
	else
		snprintf(b, 32, "%.0f MB/s", mbs);
	return b;
}

const char *
fmt_rate(double per_s)
{
	char	*b = fmt_buf();

	if (isnan(per_s))
		snprintf(b, 32, "n/a");
	else
		snprintf(b, 32, "%.0f req/s", per_s);
	return b;
}

void
die(const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "agentd-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	agentd_stop_all();
	exit(1);
}

/* Progress on stderr: the table alone goes to stdout. */
void
note(const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "  ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
}

/* posix_spawnp with file actions on 0-2. */
static pid_t
spawn_fds(char *const argv[], int in, int out, int err, int close1,
    int close2)
{
	posix_spawn_file_actions_t	fa;
	posix_spawnattr_t		attr;
	sigset_t			none;
	pid_t				pid;
	int				error;

	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	if (in >= 0)
		posix_spawn_file_actions_adddup2(&fa, in, 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out >= 0)
		posix_spawn_file_actions_adddup2(&fa, out, 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (err >= 0)
		posix_spawn_file_actions_adddup2(&fa, err, 2);
	else
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (close1 >= 0)
		posix_spawn_file_actions_addclose(&fa, close1);
	if (close2 >= 0)
		posix_spawn_file_actions_addclose(&fa, close2);
	error = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (error != 0)
		die("spawn %s: %s", argv[0], strerror(error));
	return pid;
}

/* Run argv quietly and wait for it. */
int
run_quiet(char *const argv[])
{
	pid_t	pid = spawn_fds(argv, -1, -1, -1, -1, -1);
	int	status;

	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	return status;
}

/* Run argv with its stdout on a pipe. */
pid_t
spawn_reader(char *const argv[], int *out)
{
	int	p[2];
	pid_t	pid;

	if (pipe2(p, O_CLOEXEC) == -1)
		die("pipe2: %s", strerror(errno));
	pid = spawn_fds(argv, -1, p[1], -1, -1, -1);
	close(p[1]);
	*out = p[0];
	return pid;
}

/* Run argv with stdin and stdout on pipes. */
pid_t
spawn_pipes(char *const argv[], int *in, int *out)
{
	int	pi[2], po[2];
	pid_t	pid;

	if (pipe2(pi, O_CLOEXEC) == -1 || pipe2(po, O_CLOEXEC) == -1)
		die("pipe2: %s", strerror(errno));
	pid = spawn_fds(argv, pi[0], po[1], -1, -1, -1);
	close(pi[0]);
	close(po[1]);
	*in = pi[1];
	*out = po[0];
	return pid;
}

/* Run argv on a new PTY, its controlling terminal, in a new session. */
pid_t
spawn_pty(char *const argv[], int *master)
{
	sigset_t	none;
	pid_t		pid;
	int		m;

	/* forkpty: setsid, TIOCSCTTY and dup2 in the child, as agentd does. */
	pid = forkpty(&m, NULL, NULL, NULL);
	if (pid == -1)
		die("forkpty: %s", strerror(errno));
	if (pid == 0) {
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execvp(argv[0], argv);
		_exit(127);
	}
	fcntl(m, F_SETFD, FD_CLOEXEC);
	*master = m;
	return pid;
}

/* Stop a child: SIGTERM, then SIGKILL after ms. */
void
stop_pid(pid_t pid, int ms)
{
	double	end = now_us() + ms * 1000.0;
	int	status;

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	while (now_us() < end) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return;
		sleep_us(2000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

/* VmRSS in KiB. */
long
rss_kib(pid_t pid)
{
	char	path[64], line[256];
	FILE	*f;
	long	kib = -1;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "VmRSS:", 6) == 0) {
			kib = strtol(line + 6, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kib;
}

/* CPU time (user + system) of a process, seconds; -1 if unknown. */
double
cpu_seconds(pid_t pid)
{
	char			 path[64], buf[1024], *p;
	unsigned long long	 ut, st;
	FILE			*f;
	size_t			 n;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* After "(comm)": state is field 3, utime 14 and stime 15. */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
	    "%llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / sysconf(_SC_CLK_TCK);
}

/*
 * CPU seconds of a process's main thread from /proc/PID/schedstat
 * (nanoseconds, where /proc/PID/stat counts 10 ms ticks); -1 if unknown.
 */
double
cpu_main_seconds(pid_t pid)
{
	char			 path[64];
	unsigned long long	 ns;
	FILE			*f;
	int			 n;

	snprintf(path, sizeof path, "/proc/%ld/schedstat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fscanf(f, "%llu", &ns);
	fclose(f);
	return n == 1 ? ns / 1e9 : -1;
}

/* This process's CPU time (user + system) in seconds. */
double
cpu_self(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

long
file_size(const char *path)
{
	struct stat	st;

	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Bind port 0 on 127.0.0.1 and see what the kernel chose. */
int
free_port(void)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof sin;
	int			fd, port;

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof sin) == -1 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) == -1)
		die("free_port: %s", strerror(errno));
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

/* Whether a command is found in PATH. */
int
in_path(const char *cmd)
{
	const char	*path = getenv("PATH"), *p, *colon;
	char		 buf[1024];

	for (p = path != NULL ? path : "/usr/bin:/bin";; p = colon + 1) {
		colon = strchr(p, ':');
		if (colon == NULL)
			colon = p + strlen(p);
		snprintf(buf, sizeof buf, "%.*s/%s", (int)(colon - p), p, cmd);
		if (access(buf, X_OK) == 0)
			return 1;
		if (*colon == '\0')
			return 0;
	}
}

/* Raise RLIMIT_NOFILE's soft limit to the hard one. */
void
raise_nofile(void)
{
	struct rlimit	rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Remember a started instance in the pid file, for run.sh's cleanup. */
static void
agentd_track(struct agentd *a, int add)
{
	char	path[512];
	FILE	*f;
	int	i;

	for (i = 0; i < AGENTD_MAX; i++) {
		if (add && running[i] == NULL) {
			running[i] = a;
			break;
		}
		if (!add && running[i] == a)
			running[i] = NULL;
	}
	if (add && i == AGENTD_MAX)
		die("too many agentd instances");
	snprintf(path, sizeof path, "%s/agentd.pids", cfg.tmpdir);
	if ((f = fopen(path, "w")) == NULL)
		return;
	for (i = 0; i < AGENTD_MAX; i++) {
		if (running[i] != NULL)
			fprintf(f, "%ld\n", (long)running[i]->pid);
	}
	fclose(f);
}

/* Start an agentd and wait for its first healthz 200. */
int
agentd_start(struct agentd *a, const char *bin, const char *const *extra)
{
	const char	*argv[32];
	char		 listen[64], logpath[512];
	struct conn	 c;
	double		 t0, deadline;
	int		 n = 0, i, logfd, status;
	pid_t		 pid;

	if (getenv("AGENTD_TOKEN") == NULL)
		setenv("AGENTD_TOKEN", cfg.token, 1);

	memset(a, 0, sizeof *a);
	a->port = free_port();
	snprintf(listen, sizeof listen, "127.0.0.1:%d", a->port);
	a->addr.sin_family = AF_INET;
	a->addr.sin_port = htons(a->port);
	a->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	argv[n++] = bin;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--socket";
	argv[n++] = "";
	argv[n++] = "--log-level";
	argv[n++] = "warn";
	for (i = 0; extra != NULL && extra[i] != NULL && n < 30; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	snprintf(logpath, sizeof logpath, "%s/agentd.log", cfg.tmpdir);
	if ((logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
	    0644)) == -1)
		die("%s: %s", logpath, strerror(errno));

	/* posix_spawn, as the baseline /bin/true is spawned. */
	t0 = now_us();
	pid = spawn_fds((char *const *)argv, -1, logfd, logfd, -1, -1);
	close(logfd);
	a->pid = pid;
	agentd_track(a, 1);

	/* Connect until it listens, then one healthz. */
	deadline = t0 + AGENTD_START_TIMEOUT_US;
	for (;;) {
		if (conn_open(&c, &a->addr) == 0) {
			if (conn_do(&c, "GET", "/healthz", NULL, NULL, 0) == 200) {
				a->startup_us = now_us() - t0;
				conn_close(&c);
				return 0;
			}
			conn_close(&c);
		}
		if (waitpid(pid, &status, WNOHANG) == pid) {
			a->pid = 0;
			agentd_track(a, 0);
			fprintf(stderr, "agentd-bench: %s exited at start "
			    "(status %#x); see %s\n", bin, status, logpath);
			return -1;
		}
		if (now_us() > deadline) {
			agentd_stop(a);
			fprintf(stderr, "agentd-bench: %s: no healthz after "
			    "10 s\n", bin);
			return -1;
		}
		sleep_us(AGENTD_RETRY_US);
	}
}

/* Stop an instance (SIGTERM: its shutdown ends every session). */
void
agentd_stop(struct agentd *a)
{
	if (a->pid > 0)
		stop_pid(a->pid, 8000);
	agentd_track(a, 0);
	a->pid = 0;
}

void
agentd_stop_all(void)
{
	int	i;

	for (i = 0; i < AGENTD_MAX; i++) {
		if (running[i] != NULL && running[i]->pid > 0) {
			kill(running[i]->pid, SIGKILL);
			waitpid(running[i]->pid, NULL, 0);
			running[i]->pid = 0;
		}
		running[i] = NULL;
	}
}
