/*
 * cgroup.c -- containment of sessions in cgroup v2; see cgroup.h for the
 * layout.  The kernel's Documentation/admin-guide/cgroup-v2.rst is the
 * reference: cgroup.kill (5.14), cgroup.events' "populated" (watched with
 * inotify), the no-internal-processes rule, memory.events' oom_kill.
 */
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "pty.h"
#include "util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC	0x63677270
#endif

#define CGROUP_FILE_MAX		4096	/* bytes read of a small cgroup file */
#define CGROUP_PROCS_MAX	(1u << 20)	/* bytes of cgroup.procs read */
#define CGROUP_KILL_ROUNDS	64	/* signal rounds without cgroup.kill */
#define CGROUP_SELF_DIR		"agentd"
#define CGROUP_SESSIONS_DIR	"sessions"

struct cgroup {
	int		 fd;		/* the directory */
	char		 name[24];	/* under the sessions' parent */
	char		*path;		/* absolute, for inotify */
};

static int	 cgroup_on;		/* containment "cgroup" */
static unsigned	 cgroup_ctrl;		/* CGROUP_CTRL_* enabled for sessions */
static int	 cgroup_parent = -1;	/* R/sessions */
static char	*cgroup_parent_path;
static const char *cgroup_parent_rel;	/* the same, as /proc/PID/cgroup
					   names it (under the mount) */
static uint64_t	 cgroup_next = 1;	/* the next session cgroup's number */

static int	 cgroup_read(int dirfd, const char *file, char *buf, size_t len);
static int	 cgroup_write(int dirfd, const char *file, const char *text);
static int	 cgroup_detect(const struct cgroup_config *, char *root,
		    size_t rootlen, char *why, size_t whylen);
static int	 cgroup_setup(const struct cgroup_config *, const char *root,
		    char *why, size_t whylen);
static void	 cgroup_oom_self(void);
static int	 cgroup_pids(struct cgroup *, pid_t **out, size_t *n);
static int	 cgroup_pid_in(const pid_t *, size_t, pid_t);
static int	 cgroup_signal_each(struct cgroup *, int sig);
static int64_t	 cgroup_read_key(int dirfd, const char *file, const char *key);
static int64_t	 cgroup_read_u64(int dirfd, const char *file);
static void	 cgroup_release(struct cgroup *);

/* Read a small file of a cgroup directory, NUL-terminated; bytes or -errno. */
static int
cgroup_read(int dirfd, const char *file, char *buf, size_t len)
{
	ssize_t	n;
	size_t	got = 0;
	int	fd, error = 0;

	if ((fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC)) == -1)
		return (-errno);
	while (got < len - 1) {
		if ((n = read(fd, buf + got, len - 1 - got)) == -1) {
			if (errno == EINTR)
				continue;
			error = -errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return (error != 0 ? error : (int)got);
}

/* Write text to a file of a cgroup directory in one write(2); 0 or -errno. */
static int
cgroup_write(int dirfd, const char *file, const char *text)
{
	size_t	len = strlen(text);
	ssize_t	n;
	int	fd, error = 0;

	if ((fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC)) == -1)
		return (-errno);
	if ((n = write(fd, text, len)) == -1)
		error = -errno;
	else if ((size_t)n != len)
		error = -EIO;
	close(fd);
	return (error);
}

/* The v2 path of a /proc/PID/cgroup text; see cgroup.h. */
int
cgroup_parse_self(const char *text, char *path, size_t pathlen)
{
	const char	*p = text, *end;
	size_t		 len;
	int		 found = 0;

	for (; *p != '\0'; p = *end == '\n' ? end + 1 : end) {
		end = strchr(p, '\n');
		if (end == NULL)
			end = p + strlen(p);
		if (end == p)
			continue;
		if (strncmp(p, "0::", 3) != 0 || found)
			return (-EINVAL);	/* a v1 hierarchy, or two */
		len = (size_t)(end - p - 3);
		if (len == 0 || p[3] != '/' || len >= pathlen)
			return (-EINVAL);
		memcpy(path, p + 3, len);
		path[len] = '\0';
		found = 1;
	}
	return (found ? 0 : -EINVAL);
}

/* The value of "key N" in a flat-keyed file; see cgroup.h. */
int
cgroup_parse_key(const char *text, const char *key, uint64_t *val)
{
	const char	*p = text;
	char		*end;
	size_t		 klen = strlen(key);
	unsigned long long v;

	while (*p != '\0') {
		if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
			errno = 0;
			v = strtoull(p + klen + 1, &end, 10);
			if (end == p + klen + 1 || errno != 0 ||
			    (*end != '\n' && *end != '\0'))
				return (-EINVAL);
			*val = v;
			return (0);
		}
		if ((p = strchr(p, '\n')) == NULL)
			break;
		p++;
	}
	return (-ENOENT);
}

/* The CGROUP_CTRL_* bits of a cgroup.controllers text. */
unsigned
cgroup_parse_controllers(const char *text)
{
	static const struct {
		const char	*name;
		unsigned	 bit;
	} known[] = {
		{ "memory", CGROUP_CTRL_MEMORY },
		{ "pids", CGROUP_CTRL_PIDS },
		{ "cpu", CGROUP_CTRL_CPU },
	};
	const char	*p = text;
	unsigned	 bits = 0;
	size_t		 len, i;

	for (;;) {
		while (*p == ' ' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		len = strcspn(p, " \n");
		for (i = 0; i < nitems(known); i++) {
			if (strlen(known[i].name) == len &&
			    strncmp(p, known[i].name, len) == 0)
				bits |= known[i].bit;
		}
		p += len;
	}
	return (bits);
}

/* cpu.max's text for a share of CPUs in percent (100: one CPU). */
void
cgroup_cpu_max(uint64_t percent, char *buf, size_t len)
{
	uint64_t	quota;

	if (percent == 0) {
		snprintf(buf, len, "max %u", CGROUP_CPU_PERIOD_US);
		return;
	}
	quota = percent > UINT64_MAX / CGROUP_CPU_PERIOD_US ? UINT64_MAX :
	    percent * CGROUP_CPU_PERIOD_US / 100;
	if (quota < 1000)
		quota = 1000;	/* the kernel's smallest quota, 1 ms */
	snprintf(buf, len, "%" PRIu64 " %u", quota, CGROUP_CPU_PERIOD_US);
}

/*
 * Whether a writable cgroup v2 hierarchy is ours: cfg->mount is cgroup2,
 * /proc/self/cgroup names only a v2 path, and its directory is writable.
 * Fills root; 0, or -1 with why.
 */
static int
cgroup_detect(const struct cgroup_config *cfg, char *root, size_t rootlen,
    char *why, size_t whylen)
{
	struct statfs	 sf;
	char		 buf[CGROUP_FILE_MAX], path[PATH_MAX], *p;
	int		 fd, n;

	if (statfs(cfg->mount, &sf) == -1) {
		cause_set(why, whylen, "%s: %s", cfg->mount, strerror(errno));
		return (-1);
	}
	if ((unsigned long)sf.f_type != CGROUP2_SUPER_MAGIC) {
		cause_set(why, whylen, "%s is not a cgroup2 mount", cfg->mount);
		return (-1);
	}
	if ((fd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) ==
	    -1) {
		cause_set(why, whylen, "/proc/self: %s", strerror(errno));
		return (-1);
	}
	n = cgroup_read(fd, "cgroup", buf, sizeof buf);
	close(fd);
	if (n < 0 || cgroup_parse_self(buf, path, sizeof path) != 0) {
		cause_set(why, whylen, "/proc/self/cgroup is not a pure v2 "
		    "hierarchy");
		return (-1);
	}
	/* In R/agentd already (an upgrade's execve): R is the parent. */
	if ((p = strrchr(path, '/')) != NULL &&
	    strcmp(p + 1, CGROUP_SELF_DIR) == 0)
		p == path ? (void)(p[1] = '\0') : (void)(*p = '\0');
	if ((size_t)snprintf(root, rootlen, "%s%s", cfg->mount,
	    strcmp(path, "/") == 0 ? "" : path) >= rootlen) {
		cause_set(why, whylen, "cgroup path too long");
		return (-1);
	}
	if (access(root, W_OK) == -1) {
		cause_set(why, whylen, "%s: %s", root, strerror(errno));
		return (-1);
	}
	return (0);
}

/*
 * Build the layout under root: move agentd into root/agentd, enable the
 * controllers for root/sessions and its children, protect agentd.  0, or -1
 * with why (agentd is then left where it ended up; nothing else changed).
 */
static int
cgroup_setup(const struct cgroup_config *cfg, const char *root, char *why,
    size_t whylen)
{
	char		 buf[CGROUP_FILE_MAX], text[64];
	unsigned	 avail;
	int		 rootfd, selffd = -1, error;

	if ((rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		cause_set(why, whylen, "%s: %s", root, strerror(errno));
		return (-1);
	}
	if ((mkdirat(rootfd, CGROUP_SELF_DIR, 0755) == -1 && errno != EEXIST) ||
	    (mkdirat(rootfd, CGROUP_SESSIONS_DIR, 0755) == -1 &&
	    errno != EEXIST)) {
		cause_set(why, whylen, "mkdir in %s: %s", root,
		    strerror(errno));
		goto fail;
	}
	if ((selffd = openat(rootfd, CGROUP_SELF_DIR, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1 || (cgroup_parent = openat(rootfd,
	    CGROUP_SESSIONS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		cause_set(why, whylen, "open in %s: %s", root, strerror(errno));
		goto fail;
	}
	/* The whole process, every thread: agentd leaves root first. */
	snprintf(text, sizeof text, "%ld", (long)getpid());
	if ((error = cgroup_write(selffd, "cgroup.procs", text)) != 0) {
		cause_set(why, whylen, "%s/%s/cgroup.procs: %s", root,
		    CGROUP_SELF_DIR, strerror(-error));
		goto fail;
	}
	xasprintf(&cgroup_parent_path, "%s/%s", root, CGROUP_SESSIONS_DIR);
	cgroup_parent_rel = cgroup_parent_path + strlen(cfg->mount);

	/* The controllers root has, enabled down to the sessions. */
	avail = cgroup_read(rootfd, "cgroup.controllers", buf, sizeof buf) < 0 ?
	    0 : cgroup_parse_controllers(buf);
	snprintf(text, sizeof text, "%s%s%s",
	    avail & CGROUP_CTRL_MEMORY ? "+memory " : "",
	    avail & CGROUP_CTRL_PIDS ? "+pids " : "",
	    avail & CGROUP_CTRL_CPU ? "+cpu" : "");
	if (avail != 0 &&
	    ((error = cgroup_write(rootfd, "cgroup.subtree_control",
	    text)) != 0 || (error = cgroup_write(cgroup_parent,
	    "cgroup.subtree_control", text)) != 0))
		log_warn("%s: enabling '%s' under %s: %s (other processes in "
		    "it?); sessions get no limits", __func__, text, root,
		    strerror(-error));
	cgroup_ctrl = cgroup_read(cgroup_parent, "cgroup.subtree_control", buf,
	    sizeof buf) < 0 ? 0 : cgroup_parse_controllers(buf);

	if (cgroup_ctrl & CGROUP_CTRL_MEMORY) {
		snprintf(text, sizeof text, "%" PRIu64, cfg->self_memory_min);
		if ((error = cgroup_write(selffd, "memory.min", text)) != 0)
			log_warn("%s: memory.min %s: %s", __func__, text,
			    strerror(-error));
	}
	if (cgroup_ctrl & CGROUP_CTRL_CPU) {
		snprintf(text, sizeof text, "%" PRIu64, cfg->self_cpu_weight);
		if ((error = cgroup_write(selffd, "cpu.weight", text)) != 0)
			log_warn("%s: cpu.weight %s: %s", __func__, text,
			    strerror(-error));
	}
	close(selffd);
	close(rootfd);
	return (0);

fail:
	if (selffd != -1)
		close(selffd);
	if (cgroup_parent != -1)
		close(cgroup_parent);
	cgroup_parent = -1;
	close(rootfd);
	return (-1);
}

/* agentd is the OOM killer's last choice (needs CAP_SYS_RESOURCE). */
static void
cgroup_oom_self(void)
{
	int	fd;

	if ((fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC)) ==
	    -1 || write(fd, "-1000", 5) != 5)
		log_info("%s: oom_score_adj -1000: %s (a session that may "
		    "not go lower keeps ours)", __func__, strerror(errno));
	if (fd != -1)
		close(fd);
}

/* Detect and set up; see cgroup.h. */
int
cgroup_init(const struct cgroup_config *cfg)
{
	char	root[PATH_MAX], why[256];

	cgroup_oom_self();
	if (cgroup_detect(cfg, root, sizeof root, why, sizeof why) != 0 ||
	    cgroup_setup(cfg, root, why, sizeof why) != 0) {
		log_info("%s: containment process_group: %s", __func__, why);
		cgroup_on = 0;
		return (0);
	}
	cgroup_on = 1;
	log_info("%s: containment cgroup under %s, controllers%s%s%s%s",
	    __func__, root, cgroup_ctrl & CGROUP_CTRL_MEMORY ? " memory" : "",
	    cgroup_ctrl & CGROUP_CTRL_PIDS ? " pids" : "",
	    cgroup_ctrl & CGROUP_CTRL_CPU ? " cpu" : "",
	    cgroup_ctrl == 0 ? " none" : "");
	return (1);
}

/* Whether sessions get cgroups. */
int
cgroup_enabled(void)
{
	return (cgroup_on);
}

/* "cgroup" or "process_group". */
const char *
cgroup_containment(void)
{
	return (cgroup_on ? "cgroup" : "process_group");
}

/* The controllers enabled for sessions. */
unsigned
cgroup_controllers(void)
{
	return (cgroup_on ? cgroup_ctrl : 0);
}

/* The first limit this hierarchy cannot apply, or NULL. */
const char *
cgroup_limit_unavailable(const struct cgroup_limits *l)
{
	unsigned	c = cgroup_controllers();

	if (l->memory_bytes > 0 && !(c & CGROUP_CTRL_MEMORY))
		return ("memory_bytes");
	if (l->pids > 0 && !(c & CGROUP_CTRL_PIDS))
		return ("pids");
	if (l->cpu_percent > 0 && !(c & CGROUP_CTRL_CPU))
		return ("cpu_percent");
	return (NULL);
}

/* Make a session's cgroup; see cgroup.h. */
int
cgroup_session_new(const struct cgroup_limits *l, struct cgroup **out,
    const char **limit, char *cause, size_t causelen)
{
	struct cgroup	*cg;
	char		 text[64];
	int		 error = 0;

	*out = NULL;
	*limit = NULL;
	if (!cgroup_on) {
		cause_set(cause, causelen, "no cgroup containment");
		return (-ENOTSUP);
	}
	cg = xcalloc(1, sizeof *cg);
	cg->fd = -1;
	do
		snprintf(cg->name, sizeof cg->name, "%" PRIu64, cgroup_next++);
	while (mkdirat(cgroup_parent, cg->name, 0755) == -1 &&
	    errno == EEXIST);
	if ((cg->fd = openat(cgroup_parent, cg->name, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1) {
		error = -errno;
		cause_set(cause, causelen, "cgroup %s/%s: %s",
		    cgroup_parent_path, cg->name, strerror(-error));
		unlinkat(cgroup_parent, cg->name, AT_REMOVEDIR);
		free(cg);
		return (error);
	}
	xasprintf(&cg->path, "%s/%s", cgroup_parent_path, cg->name);

	if (l->memory_bytes > 0) {
		snprintf(text, sizeof text, "%" PRIu64, l->memory_bytes);
		if ((error = cgroup_write(cg->fd, "memory.max", text)) != 0) {
			*limit = "memory_bytes";
			goto fail;
		}
		/* Without swap accounting (no file) there is no swap to cap. */
		if ((error = cgroup_write(cg->fd, "memory.swap.max", "0")) !=
		    0 && error != -ENOENT) {
			*limit = "memory_bytes";
			goto fail;
		}
		error = 0;
	}
	if (l->pids > 0) {
		snprintf(text, sizeof text, "%" PRIu64, l->pids);
		if ((error = cgroup_write(cg->fd, "pids.max", text)) != 0) {
			*limit = "pids";
			goto fail;
		}
	}
	if (l->cpu_percent > 0) {
		cgroup_cpu_max(l->cpu_percent, text, sizeof text);
		if ((error = cgroup_write(cg->fd, "cpu.max", text)) != 0) {
			*limit = "cpu_percent";
			goto fail;
		}
	}
	*out = cg;
	return (0);

fail:
	cause_set(cause, causelen, "cgroup %s: %s: %s", cg->path, *limit,
	    strerror(-error));
	cgroup_session_free(cg);
	return (error);
}

/* Take over a session's cgroup from an agentd before an upgrade. */
struct cgroup *
cgroup_session_adopt(const char *name, int fd)
{
	struct cgroup	*cg;
	uint64_t	 n;
	char		*end;

	if (!cgroup_on || name[0] == '\0' || strlen(name) >= sizeof cg->name ||
	    strchr(name, '/') != NULL || fd < 0)
		return (NULL);
	cg = xcalloc(1, sizeof *cg);
	cg->fd = fd;
	snprintf(cg->name, sizeof cg->name, "%s", name);
	xasprintf(&cg->path, "%s/%s", cgroup_parent_path, cg->name);
	n = strtoull(name, &end, 10);
	if (*end == '\0' && n >= cgroup_next)
		cgroup_next = n + 1;
	return (cg);
}

/* The directory fd, for clone3's CLONE_INTO_CGROUP. */
int
cgroup_session_fd(const struct cgroup *cg)
{
	return (cg->fd);
}

/* The name under the sessions' parent. */
const char *
cgroup_session_name(const struct cgroup *cg)
{
	return (cg->name);
}

/*
 * The name of the session cgroup pid is in (or under): 0 and name,
 * -ENOENT when pid is in none, or -errno.
 */
int
cgroup_of_pid(pid_t pid, char *name, size_t len)
{
	char		 file[64], text[CGROUP_FILE_MAX], path[CGROUP_FILE_MAX];
	const char	*p;
	size_t		 plen, n;
	int		 error;

	if (!cgroup_on)
		return (-ENOENT);
	snprintf(file, sizeof file, "/proc/%ld/cgroup", (long)pid);
	if ((error = cgroup_read(AT_FDCWD, file, text, sizeof text)) < 0)
		return (error);
	if ((error = cgroup_parse_self(text, path, sizeof path)) != 0)
		return (error);
	plen = strlen(cgroup_parent_rel);
	if (strncmp(path, cgroup_parent_rel, plen) != 0 || path[plen] != '/')
		return (-ENOENT);
	p = path + plen + 1;
	if ((n = strcspn(p, "/")) == 0 || n >= len)
		return (-ENOENT);
	memcpy(name, p, n);
	name[n] = '\0';
	return (0);
}

/* The pids of cgroup.procs, malloc'd into *out; 0 or -errno. */
static int
cgroup_pids(struct cgroup *cg, pid_t **out, size_t *n)
{
	char		*buf, *p, *end;
	size_t		 cap = 0;
	long		 v;
	int		 got;

	*out = NULL;
	*n = 0;
	buf = xmalloc(CGROUP_PROCS_MAX);
	if ((got = cgroup_read(cg->fd, "cgroup.procs", buf,
	    CGROUP_PROCS_MAX)) < 0) {
		free(buf);
		return (got);
	}
	for (p = buf; *p != '\0'; p = end) {
		while (*p == '\n')
			p++;
		if (*p == '\0')
			break;
		v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (v <= 1)
			continue;	/* never 1, never all */
		if (*n == cap) {
			cap = cap == 0 ? 16 : cap * 2;
			*out = xrealloc(*out, cap * sizeof **out);
		}
		(*out)[(*n)++] = (pid_t)v;
	}
	free(buf);
	return (0);
}

/* Whether pid is among pids[0..n). */
static int
cgroup_pid_in(const pid_t *pids, size_t n, pid_t pid)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (pids[i] == pid)
			return (1);
	}
	return (0);
}

/*
 * One round: a pidfd for each pid of cgroup.procs, then a second read; a
 * pid still listed names the process its pidfd holds (or one that died:
 * ESRCH), so only members are signalled.  Without pidfds (Linux < 5.3),
 * kill(2).  Returns the processes signalled, or -errno.
 */
static int
cgroup_signal_each(struct cgroup *cg, int sig)
{
	pid_t	*pids, *again;
	size_t	 n, m, i;
	int	*fds, error, hit = 0;

	if ((error = cgroup_pids(cg, &pids, &n)) != 0)
		return (error);
	if (n == 0)
		return (0);
	fds = xcalloc(n, sizeof *fds);
	for (i = 0; i < n; i++) {
		if ((fds[i] = pty_pidfd_open(pids[i])) == -1)
			fds[i] = -errno;
	}
	if ((error = cgroup_pids(cg, &again, &m)) != 0)
		m = 0;
	for (i = 0; i < n; i++) {
		if (!cgroup_pid_in(again, m, pids[i]))
			;
		else if (fds[i] >= 0) {
			if (pty_pidfd_signal(fds[i], sig) == 0)
				hit++;
		} else if (fds[i] == -ENOSYS) {
			if (kill(pids[i], sig) == 0)
				hit++;
		}
		if (fds[i] >= 0)
			close(fds[i]);
	}
	free(fds);
	free(pids);
	free(again);
	return (hit);
}

/* Send sig to every process of the cgroup; see cgroup.h. */
int
cgroup_session_signal(struct cgroup *cg, int sig)
{
	int	error, n, round, frozen = 0, total = 0;

	if (sig != SIGKILL)
		return (cgroup_signal_each(cg, sig));
	if (cgroup_session_populated(cg) == 0)
		return (0);
	if ((error = cgroup_write(cg->fd, "cgroup.kill", "1")) == 0)
		return (1);
	if (error != -ENOENT)
		log_debug("%s: %s cgroup.kill: %s", __func__, cg->name,
		    strerror(-error));
	/* Linux < 5.14: frozen, nothing forks between the rounds. */
	frozen = cgroup_write(cg->fd, "cgroup.freeze", "1") == 0;
	for (round = 0; round < CGROUP_KILL_ROUNDS; round++) {
		if ((n = cgroup_signal_each(cg, SIGKILL)) <= 0)
			break;
		total += n;
	}
	if (frozen)
		cgroup_write(cg->fd, "cgroup.freeze", "0");
	return (total);
}

/* Whether the cgroup has a live process. */
int
cgroup_session_populated(struct cgroup *cg)
{
	char		buf[CGROUP_FILE_MAX];
	uint64_t	v;
	int		error;

	if ((error = cgroup_read(cg->fd, "cgroup.events", buf,
	    sizeof buf)) < 0)
		return (error);
	if ((error = cgroup_parse_key(buf, "populated", &v)) != 0)
		return (error);
	return (v != 0);
}

/* Wait until the cgroup is empty: cgroup.events is modified on a change. */
int
cgroup_session_wait_empty(struct cgroup *cg, int ms)
{
	struct pollfd	 pfd;
	char		 buf[4096], *file;
	int64_t		 end = clock_mono_ms() + ms, left;
	int		 ifd, p, error;

	if ((p = cgroup_session_populated(cg)) <= 0)
		return (p);
	if ((ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) == -1)
		return (-errno);
	xasprintf(&file, "%s/cgroup.events", cg->path);
	if (inotify_add_watch(ifd, file, IN_MODIFY) == -1) {
		error = -errno;
		goto out;
	}
	pfd.fd = ifd;
	pfd.events = POLLIN;
	for (;;) {
		if ((p = cgroup_session_populated(cg)) <= 0) {
			error = p;
			break;
		}
		if ((left = end - clock_mono_ms()) <= 0) {
			error = -ETIMEDOUT;
			break;
		}
		if (poll(&pfd, 1, (int)left) > 0)
			while (read(ifd, buf, sizeof buf) > 0)
				;
	}
out:
	free(file);
	close(ifd);
	return (error);
}

/* A flat-keyed file's key, or -1. */
static int64_t
cgroup_read_key(int dirfd, const char *file, const char *key)
{
	char		buf[CGROUP_FILE_MAX];
	uint64_t	v;

	if (cgroup_read(dirfd, file, buf, sizeof buf) < 0 ||
	    cgroup_parse_key(buf, key, &v) != 0 || v > INT64_MAX)
		return (-1);
	return ((int64_t)v);
}

/* A one-number file, or -1. */
static int64_t
cgroup_read_u64(int dirfd, const char *file)
{
	char			 buf[64], *end;
	unsigned long long	 v;

	if (cgroup_read(dirfd, file, buf, sizeof buf) <= 0)
		return (-1);
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (end == buf || errno != 0 || v > INT64_MAX)
		return (-1);
	return ((int64_t)v);
}

/* Read the accounting. */
void
cgroup_session_usage(struct cgroup *cg, struct cgroup_usage *u)
{
	int64_t	usec;

	usec = cgroup_read_key(cg->fd, "cpu.stat", "usage_usec");
	u->cpu_ms = usec < 0 ? -1 : usec / 1000;
	u->memory_peak_bytes = cgroup_read_u64(cg->fd, "memory.peak");
	u->pids_peak = cgroup_read_u64(cg->fd, "pids.peak");
	u->oom_kills = cgroup_read_key(cg->fd, "memory.events", "oom_kill");
}

/* Remove the cgroup unless a process is in it; see cgroup.h. */
int
cgroup_session_remove(struct cgroup *cg)
{
	if (unlinkat(cgroup_parent, cg->name, AT_REMOVEDIR) == -1) {
		if (errno == EBUSY)
			return (-EBUSY);
		log_warn("%s: rmdir %s: %s", __func__,
		    cg->path != NULL ? cg->path : cg->name, strerror(errno));
	}
	cgroup_release(cg);
	return (0);
}

/* Remove the cgroup if empty, and free. */
void
cgroup_session_free(struct cgroup *cg)
{
	if (cg == NULL || cgroup_session_remove(cg) == 0)
		return;
	log_warn("%s: rmdir %s: %s", __func__,
	    cg->path != NULL ? cg->path : cg->name, strerror(EBUSY));
	cgroup_release(cg);
}

/* Free a session cgroup's memory and fd (its directory stays). */
static void
cgroup_release(struct cgroup *cg)
{
	if (cg->fd != -1)
		close(cg->fd);
	free(cg->path);
	free(cg);
}
