/*
 * envnfs.c -- envd's volumeMounts as kernel NFSv3 mounts (see envnfs.h).
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "envnfs.h"
#include "envstate.h"
#include "log.h"
#include "util.h"

#ifndef SYS_close_range
#define SYS_close_range	436
#endif
#define ENVNFS_NFS_MAGIC	0x6969	/* statfs' f_type of NFS */

/* The mounts under way: one child for one /init. */
struct envnfs_job {
	pid_t		 pid;
	int		 fd;		/* the child's report */
	struct event	*ev;		/* fd readable */
	struct event	*timer;		/* the 10 s bound */
	envnfs_done_fn	 done;		/* NULL once answered */
	void		*arg;
	char		*lifecycle;
	json_t		*todo;		/* the mounts started */
	char		 report[1024];
	size_t		 len;
};

static struct envnfs_job	*envnfs_busy;

static int	envnfs_point(const char *);
static void	envnfs_child(json_t *, int) __attribute__((noreturn));
static void	envnfs_read(evutil_socket_t, short, void *);
static void	envnfs_timeout(evutil_socket_t, short, void *);
static void	envnfs_answer(struct envnfs_job *, const char *);
static void	envnfs_free(struct envnfs_job *);

/* Check volumeMounts. */
int
envnfs_check(json_t *mounts, char *cause, size_t len)
{
	json_t		*m, *t, *p;
	const char	*target, *colon;
	char		 host[64];
	unsigned char	 a[16];
	size_t		 i;

	if (!json_is_array(mounts) || json_array_size(mounts) >
	    ENVNFS_MOUNTS_MAX) {
		cause_set(cause, len, "volumeMounts: an array of at most %d "
		    "{nfs_target, path}", ENVNFS_MOUNTS_MAX);
		return (-1);
	}
	json_array_foreach(mounts, i, m) {
		t = json_object_get(m, "nfs_target");
		p = json_object_get(m, "path");
		if (!json_is_string(t) || !json_is_string(p)) {
			cause_set(cause, len, "volumeMounts[%zu]: nfs_target and "
			    "path are required strings", i);
			return (-1);
		}
		target = json_string_value(t);
		colon = strchr(target, ':');
		if (colon == NULL || colon[1] != '/' || colon - target >=
		    (int)sizeof host) {
			cause_set(cause, len, "volumeMounts[%zu]: nfs_target "
			    "'%.64s' is no IP:/path", i, target);
			return (-1);
		}
		snprintf(host, sizeof host, "%.*s", (int)(colon - target),
		    target);
		if (inet_pton(AF_INET, host, a) != 1) {
			cause_set(cause, len, "volumeMounts[%zu]: nfs_target's "
			    "host '%s' is no IPv4 address (the kernel's mount "
			    "takes an address, no name)", i, host);
			return (-1);
		}
		if (json_string_value(p)[0] != '/' ||
		    strlen(json_string_value(p)) != json_string_length(p) ||
		    strlen(json_string_value(p)) >= 4096) {
			cause_set(cause, len, "volumeMounts[%zu]: path must be "
			    "absolute", i);
			return (-1);
		}
	}
	return (0);
}

/* Start the mounts that the lifecycle asks for. */
int
envnfs_start(struct event_base *base, json_t *mounts, const char *lifecycle,
    envnfs_done_fn done, void *arg)
{
	struct envnfs_job	*j;
	struct timeval		 tv;
	json_t			*m, *todo;
	const char		*path, *was;
	size_t			 i;
	int			 fds[2];

	if (lifecycle == NULL)
		lifecycle = "";
	if (envnfs_busy != NULL) {
		log_debug("%s: NFS volumes already mounting", __func__);
		return (0);
	}
	todo = json_array();
	json_array_foreach(mounts, i, m) {
		path = json_string_value(json_object_get(m, "path"));
		/* envd's shouldRemountNFS: not mounted, or another lifecycle. */
		if ((was = envstate_mount(path)) != NULL &&
		    strcmp(was, lifecycle) == 0)
			continue;
		/* Only a mount of ours is ever taken off, as envd's. */
		m = json_copy(m);
		json_object_set_new(m, "ours", json_boolean(was != NULL));
		json_array_append_new(todo, m);
	}
	if (json_array_size(todo) == 0) {
		json_decref(todo);
		return (0);
	}
	if (pipe2(fds, O_CLOEXEC) == -1) {
		json_decref(todo);
		done(strerror(errno), arg);
		return (1);
	}
	j = xcalloc(1, sizeof *j);
	j->done = done;
	j->arg = arg;
	j->todo = todo;
	j->lifecycle = xstrdup(lifecycle);
	if ((j->pid = fork()) == -1) {
		close(fds[0]);
		close(fds[1]);
		envnfs_answer(j, strerror(errno));
		envnfs_free(j);
		return (1);
	}
	if (j->pid == 0) {
		close(fds[0]);
		envnfs_child(todo, fds[1]);
	}
	close(fds[1]);
	j->fd = fds[0];
	fd_nonblock_cloexec(j->fd);
	j->ev = event_new(base, j->fd, EV_READ | EV_PERSIST, envnfs_read, j);
	j->timer = evtimer_new(base, envnfs_timeout, j);
	if (j->ev == NULL || j->timer == NULL)
		fatal("%s: out of memory", __func__);
	event_add(j->ev, NULL);
	evtimer_add(j->timer, timeval_ms(&tv, ENVNFS_TIMEOUT_MS));
	envnfs_busy = j;
	log_debug("%s: pid %ld mounts %zu volumes for lifecycle '%s'",
	    __func__, (long)j->pid, json_array_size(todo), lifecycle);
	return (1);
}

/*
 * The child's mount point: path walked from / as root without following
 * any symlink (a user's link never points a mount, or the unmount of a
 * mount of ours, elsewhere), the folders missing made.  An O_PATH fd of
 * it, or -1 with errno.
 */
static int
envnfs_point(const char *path)
{
	char	 comp[256];
	const char *p = path, *end;
	size_t	 len;
	int	 dfd, nfd;

	if ((dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
		return (-1);
	for (; *p != '\0'; p = end) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		end = strchr(p, '/');
		len = end != NULL ? (size_t)(end - p) : strlen(p);
		if (end == NULL)
			end = p + len;
		if (len >= sizeof comp) {
			close(dfd);
			errno = ENAMETOOLONG;
			return (-1);
		}
		memcpy(comp, p, len);
		comp[len] = '\0';
		if (mkdirat(dfd, comp, 0755) == -1 && errno != EEXIST) {
			close(dfd);
			return (-1);
		}
		nfd = openat(dfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		close(dfd);
		if (nfd == -1)
			return (-1);	/* ENOTDIR, ELOOP: no symlink */
		dfd = nfd;
	}
	return (dfd);
}

/*
 * The child: each mount point made, a mount of ours there taken off
 * (forced, else lazily), the NFS mount made, all through an fd of the
 * point; "i\n" for each one made, "i errno step\n" for the first that
 * fails.  Async-signal-safe calls only.
 */
static void
envnfs_child(json_t *todo, int fd)
{
	json_t		*m;
	const char	*target, *path;
	char		 data[512], host[64], line[64], at[64];
	struct statfs	 sf;
	size_t		 i;
	int		 n, pfd;

	/* Hold none of agentd's fds (listeners, sessions') while it waits. */
	if (fd != 3) {
		if (dup2(fd, 3) == -1)
			_exit(2);
		fd = 3;
	}
	(void)syscall(SYS_close_range, 4U, ~0U, 0U);
	json_array_foreach(todo, i, m) {
		target = json_string_value(json_object_get(m, "nfs_target"));
		path = json_string_value(json_object_get(m, "path"));
		snprintf(host, sizeof host, "%.*s",
		    (int)(strchr(target, ':') - target), target);
		if ((pfd = envnfs_point(path)) == -1) {
			n = snprintf(line, sizeof line, "%zu %d mkdir\n", i,
			    errno);
			goto fail;
		}
		snprintf(at, sizeof at, "/proc/self/fd/%d", pfd);
		if (json_is_true(json_object_get(m, "ours")) &&
		    fstatfs(pfd, &sf) == 0 && sf.f_type == ENVNFS_NFS_MAGIC &&
		    umount2(at, MNT_FORCE) == -1 && errno != EINVAL &&
		    umount2(at, MNT_DETACH) == -1 && errno != EINVAL) {
			n = snprintf(line, sizeof line, "%zu %d umount\n", i,
			    errno);
			goto fail;
		}
		/* Unmounted: the point is the folder under it again. */
		close(pfd);
		if ((pfd = envnfs_point(path)) == -1) {
			n = snprintf(line, sizeof line, "%zu %d mkdir\n", i,
			    errno);
			goto fail;
		}
		snprintf(at, sizeof at, "/proc/self/fd/%d", pfd);
		snprintf(data, sizeof data, "%s,addr=%s", ENVNFS_OPTIONS, host);
		if (mount(target, at, "nfs", MS_SYNCHRONOUS, data) == -1) {
			n = snprintf(line, sizeof line, "%zu %d mount\n", i,
			    errno);
			goto fail;
		}
		close(pfd);
		n = snprintf(line, sizeof line, "%zu\n", i);
		if (write(fd, line, (size_t)n) != n)
			_exit(1);
	}
	_exit(0);
fail:
	_exit(write(fd, line, (size_t)n) == n ? 1 : 2);
}

/* The child's report: each mount made is kept; its end answers. */
static void
envnfs_read(evutil_socket_t fd, short events, void *arg)
{
	struct envnfs_job	*j = arg;
	const char		*path;
	char			*line, *nl, cause[512], step[16];
	ssize_t			 n;
	size_t			 i;
	int			 err, fields;

	n = read(fd, j->report + j->len, sizeof j->report - 1 - j->len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		j->len += (size_t)n;
		j->report[j->len] = '\0';
		if (j->len < sizeof j->report - 1)
			return;
	}
	/* EOF: the child is gone (or about to be). */
	(void)waitpid(j->pid, NULL, 0);
	if (j->done == NULL) {		/* answered at the timeout */
		envnfs_free(j);
		return;
	}
	*cause = '\0';
	for (line = j->report; (nl = strchr(line, '\n')) != NULL;
	    line = nl + 1) {
		*nl = '\0';
		*step = '\0';
		fields = sscanf(line, "%zu %d %15s", &i, &err, step);
		if (fields < 1 || fields == 2 || i >= json_array_size(j->todo))
			continue;
		path = json_string_value(json_object_get(json_array_get(
		    j->todo, i), "path"));
		if (fields == 1) {
			envstate_set_mount(path, j->lifecycle);
			continue;
		}
		envstate_set_mount(path, NULL);
		snprintf(cause, sizeof cause, "failed to %s NFS at \"%s\": %s",
		    strcmp(step, "umount") == 0 ? "unmount stale" : "mount",
		    path, strerror(err));
	}
	if (*cause == '\0' && j->len == 0)
		snprintf(cause, sizeof cause, "the mount process failed");
	envnfs_answer(j, *cause != '\0' ? cause : NULL);
	envnfs_free(j);
}

/* Past envd's 10 s: the child is killed, the answer is the timeout. */
static void
envnfs_timeout(evutil_socket_t fd, short events, void *arg)
{
	struct envnfs_job	*j = arg;

	log_warn("%s: the NFS mounts took over %d ms: killing pid %ld",
	    __func__, ENVNFS_TIMEOUT_MS, (long)j->pid);
	kill(j->pid, SIGKILL);
	envnfs_answer(j, "failed to mount NFS: context deadline exceeded");
	/* Its end (EOF) reaps it and frees the job. */
}

/* Answer once. */
static void
envnfs_answer(struct envnfs_job *j, const char *cause)
{
	envnfs_done_fn	done = j->done;

	if (done == NULL)
		return;
	j->done = NULL;
	if (envnfs_busy == j)
		envnfs_busy = NULL;
	done(cause, j->arg);
}

/* Free a job whose child is gone. */
static void
envnfs_free(struct envnfs_job *j)
{
	if (envnfs_busy == j)
		envnfs_busy = NULL;
	if (j->ev != NULL)
		event_free(j->ev);
	if (j->timer != NULL)
		event_free(j->timer);
	if (j->fd > 0)
		close(j->fd);
	json_decref(j->todo);
	free(j->lifecycle);
	free(j);
}
