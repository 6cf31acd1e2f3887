/*
 * fileio.c -- atomic writes, mkdir -p, and errno as the API's errors.
 */
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/vfs.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "proto.h"
#include "util.h"

#define FILEIO_PROC_MAGIC	0x9fa0	/* statfs f_type of proc */

#define FILEIO_TMP_TRIES	16	/* names tried before giving up */
#define FILEIO_BASE_KEPT	200	/* bytes of the target's name in the temp's */
#define FILEIO_LINKS_MAX	40	/* symlinks followed in one path (Linux's) */
#define FILEIO_REST_MAX		(2 * 4096)	/* bytes of a path being resolved */
#define FILEIO_PARENT		0x1	/* fileio_walk(): stop at the folder */
#define FILEIO_MKDIR		0x2	/* fileio_walk(): make missing folders */

/* openat2(2), Linux 5.6; defined here for older headers and musl. */
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS	0x02
#define RESOLVE_NO_SYMLINKS	0x04
#endif
struct fileio_open_how {
	uint64_t	flags;
	uint64_t	mode;
	uint64_t	resolve;
};

static int	fileio_openat2(const char *, int);
static int	fileio_reopen(int *, const char *, int, const char *,
		    struct proto_err *);
static int	fileio_walk(const char *, int, int, uid_t, char **,
		    struct proto_err *);
static int	fileio_walk_own(const char *, int, int, uid_t, uid_t, gid_t,
		    char **, struct proto_err *);
static int	fileio_inplace_new(int, const char *, uid_t, gid_t,
		    struct proto_err *, const char *);

/* This thread's last walk followed a symlink root does not own. */
static __thread int	fileio_followed_other;
static void	fileio_random_hex(char *, size_t);
static void	fileio_tmp_free(struct fileio_tmp *);

static const struct {
	int		 e;
	const char	*name;
} fileio_errnos[] = {
	{ ENOENT, "ENOENT" }, { EACCES, "EACCES" }, { EPERM, "EPERM" },
	{ ENOTDIR, "ENOTDIR" }, { EISDIR, "EISDIR" }, { ELOOP, "ELOOP" },
	{ ENAMETOOLONG, "ENAMETOOLONG" }, { EIO, "EIO" },
	{ EOVERFLOW, "EOVERFLOW" }, { EROFS, "EROFS" }, { ENOSPC, "ENOSPC" },
	{ EDQUOT, "EDQUOT" }, { EFBIG, "EFBIG" }, { EEXIST, "EEXIST" },
	{ EINVAL, "EINVAL" }, { ENOMEM, "ENOMEM" }, { EBUSY, "EBUSY" },
	{ ESTALE, "ESTALE" }, { ENXIO, "ENXIO" }, { ENODEV, "ENODEV" },
	{ ETXTBSY, "ETXTBSY" }, { EXDEV, "EXDEV" }, { EAGAIN, "EAGAIN" },
	{ EINTR, "EINTR" }, { EBADF, "EBADF" }, { EMFILE, "EMFILE" },
	{ ENFILE, "ENFILE" },
};

/* "ENOENT" for ENOENT; "E<n>" for one without a name here. */
const char *
fileio_errno_name(int e, char buf[16])
{
	size_t	i;

	for (i = 0; i < nitems(fileio_errnos); i++) {
		if (fileio_errnos[i].e == e)
			return (fileio_errnos[i].name);
	}
	snprintf(buf, 16, "E%d", e);
	return (buf);
}

/* Fill err with the answer for errno e while doing what on path. */
int
fileio_fail(struct proto_err *err, int e, const char *what, const char *path)
{
	int		 status;
	const char	*code;

	switch (e) {
	case ENOENT:
	case ENOTDIR:
		status = 404;
		code = "not_found";
		break;
	case EACCES:
	case EPERM:
	case EROFS:
		status = 403;
		code = "permission_denied";
		break;
	case EISDIR:
		status = 409;
		code = "is_a_directory";
		break;
	case ENAMETOOLONG:
	case ELOOP:
		status = 400;
		code = "invalid_request";
		break;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		status = 507;
		code = "insufficient_storage";
		break;
	default:
		status = 500;
		code = "internal_error";
		break;
	}
	return (proto_fail(err, status, code, "%s %.160s: %s", what, path,
	    strerror(e)));
}

/* Fill buf[0..len) with random hex digits (len even), NUL not added. */
static void
fileio_random_hex(char *buf, size_t len)
{
	static const char	 digits[] = "0123456789abcdef";
	static atomic_uint	 counter;
	unsigned char		 r[16];
	struct timespec		 ts;
	unsigned long		 v;
	size_t			 i, n = len / 2;

	if (n > sizeof r)
		n = sizeof r;
	if (getrandom(r, n, GRND_NONBLOCK) != (ssize_t)n) {
		/* Early boot: unique enough, with O_EXCL and retries. */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		v = (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 20) ^
		    atomic_fetch_add(&counter, 1);
		for (i = 0; i < n; i++) {
			v = v * 6364136223846793005UL + 1442695040888963407UL;
			r[i] = (unsigned char)(v >> 33);
		}
	}
	for (i = 0; i < n; i++) {
		buf[2 * i] = digits[r[i] >> 4];
		buf[2 * i + 1] = digits[r[i] & 0xf];
	}
}

/*
 * openat2() of path with no symlink followed at all (nor magic link):
 * the fd, or -1 with errno (ELOOP: a symlink is on the way; ENOSYS and
 * the like: no openat2 here).
 */
static int
fileio_openat2(const char *path, int flags)
{
#ifdef SYS_openat2
	struct fileio_open_how	how;

	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	return ((int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how));
#else
	(void)path;
	(void)flags;
	errno = ENOSYS;
	return (-1);
#endif
}

/*
 * Open name under the directory *fd with flags, and put the new fd in place
 * of *fd (closed either way).  0, or -1 with errno, *fd -1 and err.
 */
static int
fileio_reopen(int *fd, const char *name, int flags, const char *path,
    struct proto_err *err)
{
	int	nfd, e;

	nfd = openat(*fd, name, flags | O_CLOEXEC);
	e = errno;
	if (nfd == -1)
		fileio_fail(err, e, "open", path);
	close(*fd);
	*fd = nfd;
	errno = e;
	return (nfd == -1 ? -1 : 0);
}

/*
 * Resolve path one component at a time from "/", each opened with O_PATH
 * and O_NOFOLLOW, so that no name is looked up twice.  A symlink is
 * followed (by its text, never as a magic link) only when root or owner
 * owns it; any other is refused (403).  With FILEIO_PARENT the last
 * component is left alone: the result is the folder's O_PATH fd and *base
 * its name (malloc'd); with FILEIO_MKDIR missing folders are made on the
 * way (mode FILEIO_DIR_MODE).  Otherwise the last component is opened
 * with flags (plus O_NOFOLLOW: a trusted symlink there was followed
 * already).  The fd, or -1 with err.
 */
static int
fileio_walk(const char *path, int how, int flags, uid_t owner, char **base,
    struct proto_err *err)
{
	return (fileio_walk_own(path, how, flags, owner, (uid_t)-1, (gid_t)-1,
	    base, err));
}

/* fileio_walk(), the folders it makes given to uid:gid (-1: left). */
static int
fileio_walk_own(const char *path, int how, int flags, uid_t owner, uid_t uid,
    gid_t gid, char **base, struct proto_err *err)
{
	struct stat	 st;
	char		*rest, *comp, *next, *target = NULL, *tmp;
	size_t		 clen;
	ssize_t		 n;
	int		 fd, nfd, links = 0, last, e = 0;

	fd = -1;
	fileio_followed_other = 0;
	if ((rest = strdup(path)) == NULL)
		goto oom;
	comp = rest;
	if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
		fileio_fail(err, e = errno, "open", "/");
		goto fail;
	}
	for (;;) {
		comp += strspn(comp, "/");
		clen = strcspn(comp, "/");
		next = comp + clen;
		next += strspn(next, "/");
		last = *next == '\0';
		if (clen == 0 || (clen == 1 && comp[0] == '.' && !last)) {
			if (clen == 0 && (how & FILEIO_PARENT)) {
				/* "/" or "/a/": no name to create. */
				if ((*base = strdup("")) == NULL)
					goto oom;
				break;
			}
			if (clen == 0) {
				if (fileio_reopen(&fd, ".", flags, path,
				    err) == -1) {
					e = errno;
					goto fail;
				}
				break;
			}
			comp = next;
			continue;
		}
		comp[clen] = '\0';
		if (last && (how & FILEIO_PARENT)) {
			if ((*base = strdup(comp)) == NULL)
				goto oom;
			break;
		}
		nfd = openat(fd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (nfd == -1 && errno == ENOENT && !last &&
		    (how & FILEIO_MKDIR)) {
			if (mkdirat(fd, comp, FILEIO_DIR_MODE) == 0) {
				/* envd's EnsureDirs: the user's folder. */
				if ((uid != (uid_t)-1 || gid != (gid_t)-1) &&
				    fchownat(fd, comp, uid, gid,
				    AT_SYMLINK_NOFOLLOW) == -1) {
					fileio_fail(err, e = errno, "chown",
					    path);
					goto fail;
				}
			} else if (errno != EEXIST) {
				fileio_fail(err, e = errno, "mkdir", path);
				goto fail;
			}
			nfd = openat(fd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd == -1 || fstat(nfd, &st) == -1) {
			e = errno;
			if (nfd != -1)
				close(nfd);
			fileio_fail(err, e, "open", path);
			goto fail;
		}
		if (S_ISLNK(st.st_mode)) {
			if (st.st_uid != 0 && st.st_uid != owner) {
				close(nfd);
				e = EACCES;
				proto_fail(err, 403, "permission_denied", "%.160s: "
				    "a symlink owned by uid %lu is on the way (only "
				    "root's and uid %lu's are followed)", path,
				    (unsigned long)st.st_uid,
				    (unsigned long)owner);
				goto fail;
			}
			if (st.st_uid != 0)
				fileio_followed_other = 1;
			if (++links > FILEIO_LINKS_MAX) {
				close(nfd);
				fileio_fail(err, e = ELOOP, "open", path);
				goto fail;
			}
			if ((target = malloc(FILEIO_REST_MAX)) == NULL) {
				close(nfd);
				goto oom;
			}
			n = readlinkat(nfd, "", target, FILEIO_REST_MAX - 1);
			e = errno;
			close(nfd);
			if (n <= 0) {
				fileio_fail(err, e = n == 0 ? ENOENT : e,
				    "readlink", path);
				goto fail;
			}
			if ((size_t)n + 1 + strlen(next) + 1 > FILEIO_REST_MAX) {
				fileio_fail(err, e = ENAMETOOLONG, "open", path);
				goto fail;
			}
			target[n] = '\0';
			if (asprintf(&tmp, "%s/%s", target, next) == -1)
				goto oom;
			if (target[0] == '/') {
				close(fd);
				fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				if (fd == -1) {
					fileio_fail(err, e = errno, "open", "/");
					goto fail;
				}
			}
			free(target);
			target = NULL;
			free(rest);
			comp = rest = tmp;
			continue;
		}
		if (last) {
			close(nfd);
			/* O_NOFOLLOW: a symlink swapped in now is refused. */
			if (fileio_reopen(&fd, comp, flags | O_NOFOLLOW, path,
			    err) == -1) {
				e = errno;
				goto fail;
			}
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			close(nfd);
			fileio_fail(err, e = ENOTDIR, "open", path);
			goto fail;
		}
		close(fd);
		fd = nfd;
		comp = next;
	}
	free(rest);
	return (fd);
oom:
	e = ENOMEM;
	proto_fail(err, 503, "out_of_memory", "no memory to resolve %.160s; "
	    "try again later", path);
fail:
	if (fd != -1)
		close(fd);
	free(target);
	free(rest);
	errno = e;
	return (-1);
}

/* Open path for reading without following an untrusted symlink. */
int
fileio_open(const char *path, int flags, uid_t owner, struct proto_err *err)
{
	int	fd;

	int	e;

	fileio_followed_other = 0;
	if ((fd = fileio_openat2(path, flags)) != -1)
		return (fd);
	e = errno;
	if (e != ELOOP && e != ENOSYS && e != EINVAL && e != E2BIG &&
	    e != EPERM) {
		fileio_fail(err, e, "open", path);
		errno = e;
		return (-1);
	}
	return (fileio_walk(path, 0, flags, owner, NULL, err));
}

/* The folder of path as an O_PATH fd, and the last component. */
int
fileio_parent(const char *path, int mkdir_p, uid_t owner, char **base,
    struct proto_err *err)
{
	*base = NULL;
	return (fileio_walk(path, FILEIO_PARENT | (mkdir_p ? FILEIO_MKDIR : 0),
	    0, owner, base, err));
}

/* The folder of path, the folders made given to uid:gid. */
int
fileio_parent_own(const char *path, uid_t owner, uid_t uid, gid_t gid,
    char **base, struct proto_err *err)
{
	*base = NULL;
	return (fileio_walk_own(path, FILEIO_PARENT | FILEIO_MKDIR, 0, owner,
	    uid, gid, base, err));
}

/* Whether this thread's last resolution followed a non-root symlink. */
int
fileio_followed(void)
{
	return (fileio_followed_other);
}

/*
 * Create base in dfd for fileio_open_inplace(), given to uid:gid (-1:
 * left) unless it is theirs already: a watcher sees CREATE, and CHMOD only
 * when it changed hands (as envd's).  The fd, or -1 with err (errno
 * EEXIST: the name came meanwhile).
 */
static int
fileio_inplace_new(int dfd, const char *base, uid_t uid, gid_t gid,
    struct proto_err *err, const char *path)
{
	struct stat	st;
	int		fd, e;

	fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_NOCTTY | O_CLOEXEC, FILEIO_MODE_DEFAULT);
	if (fd == -1) {
		e = errno;
		if (e != EEXIST)
			fileio_fail(err, e, "create", path);
		errno = e;
		return (-1);
	}
	if (uid != (uid_t)-1 && (fstat(fd, &st) == -1 || st.st_uid != uid ||
	    st.st_gid != gid) && fchown(fd, uid, gid) == -1) {
		e = errno;
		close(fd);
		unlinkat(dfd, base, 0);
		return (fileio_fail(err, e, "chown", path));
	}
	return (fd);
}

/* Open path to be written in place, as envd's upload does; see fileio.h. */
int
fileio_open_inplace(const char *path, uid_t owner, uid_t uid, gid_t gid,
    int give, int *created, struct proto_err *err)
{
	struct stat	 st, fst;
	char		*base = NULL;
	int		 dfd, fd = -1, tries;
	mode_t		 strip;

	*created = 0;
	if ((dfd = fileio_walk_own(path, FILEIO_PARENT | FILEIO_MKDIR, 0,
	    owner, give ? uid : (uid_t)-1, give ? gid : (gid_t)-1, &base,
	    err)) == -1)
		return (-1);
	if (*base == '\0') {
		proto_fail(err, 400, "invalid_request", "path is a directory: "
		    "%.160s", path);
		goto out;
	}
	for (tries = 0; tries < 2 && fd == -1; tries++) {
		if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == -1) {
			if (errno != ENOENT) {
				fileio_fail(err, errno, "stat", path);
				goto out;
			}
			fd = fileio_inplace_new(dfd, base, give ? uid :
			    (uid_t)-1, gid, err, path);
			if (fd != -1)
				*created = 1;
			else if (errno != EEXIST)
				goto out;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			proto_fail(err, 400, "invalid_request", "path is a "
			    "directory: %.160s", path);
			goto out;
		}
		/* A trusted symlink is written through (never created). */
		fd = S_ISLNK(st.st_mode) ? fileio_walk(path, 0, O_WRONLY |
		    O_NOCTTY | O_NONBLOCK, owner, NULL, err) : openat(dfd, base,
		    O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (fd == -1) {
			if (!S_ISLNK(st.st_mode))
				fileio_fail(err, errno, "open", path);
			goto out;
		}
	}
	if (fd == -1 || fstat(fd, &fst) == -1) {
		fileio_fail(err, fd == -1 ? EAGAIN : errno, "open", path);
		goto out;
	}
	if (!S_ISREG(fst.st_mode)) {
		proto_fail(err, 400, "invalid_request", "%.160s is not a "
		    "regular file", path);
		goto fail;
	}
	if (*created)
		goto out;
	/* The file replaced: one hard link, or the acting user's. */
	if (fileio_links_ok(&fst, uid, path, err) != 0)
		goto fail;
	if (fst.st_uid != uid) {
		/* envd gives it to the user; it keeps none of the bits. */
		if (give && fchown(fd, uid, gid) == -1) {
			fileio_fail(err, errno, "chown", path);
			goto fail;
		}
		strip = fst.st_mode & (S_ISUID | S_ISGID | S_IWGRP | S_IWOTH);
		if (strip != 0 && fchmod(fd, fst.st_mode & 07777 & ~strip) == -1 &&
		    (give || errno != EPERM)) {
			fileio_fail(err, errno, "chmod", path);
			goto fail;
		}
	}
	if (ftruncate(fd, 0) == -1) {
		fileio_fail(err, errno, "truncate", path);
		goto fail;
	}
	goto out;
fail:
	close(fd);
	fd = -1;
out:
	close(dfd);
	free(base);
	return (fd);
}

/* Free what t holds (not the temporary file). */
static void
fileio_tmp_free(struct fileio_tmp *t)
{
	if (t->fd != -1)
		close(t->fd);
	if (t->dfd != -1)
		close(t->dfd);
	t->fd = t->dfd = -1;
	free(t->path);
	free(t->tmp);
	free(t->base);
	t->path = t->tmp = t->base = NULL;
}

/* Create the temporary file beside path. */
int
fileio_tmp_open(const char *path, int mkdir_p, uid_t owner,
    struct fileio_tmp *t, struct proto_err *err)
{
	struct stat	 st;
	const char	*slash;
	char		 hex[17];
	int		 i, e;

	memset(t, 0, sizeof *t);
	t->fd = t->dfd = -1;
	slash = strrchr(path, '/');
	if (slash == NULL || slash[1] == '\0' || strcmp(slash + 1, ".") == 0 ||
	    strcmp(slash + 1, "..") == 0)
		return (proto_fail(err, 400, "invalid_request",
		    "path: '%.160s' names a folder, not a file", path));
	if ((t->dfd = fileio_parent(path, mkdir_p, owner, &t->base, err)) == -1) {
		if (err->status == 404 && !mkdir_p)
			proto_fail(err, 404, "not_found", "no folder for "
			    "%.160s (mkdir=true makes it)", path);
		return (-1);
	}
	if (fstatat(t->dfd, t->base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(st.st_mode)) {
		proto_fail(err, 409, "is_a_directory", "%.160s is a directory",
		    path);
		goto fail;
	}
	if ((t->path = strdup(path)) == NULL)
		goto oom;
	hex[16] = '\0';
	for (i = 0; i < FILEIO_TMP_TRIES; i++) {
		fileio_random_hex(hex, 16);
		free(t->tmp);
		t->tmp = NULL;
		if ((strlen(t->base) <= FILEIO_BASE_KEPT ?
		    asprintf(&t->tmp, ".%s.%s.agentd-tmp", t->base, hex) :
		    asprintf(&t->tmp, ".%s.agentd-tmp", hex)) == -1) {
			t->tmp = NULL;
			goto oom;
		}
		t->fd = openat(t->dfd, t->tmp, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
		if (t->fd != -1)
			return (0);
		if (errno != EEXIST)
			break;
	}
	e = errno;
	fileio_fail(err, e, "create a file beside", path);
	goto fail;
oom:
	proto_fail(err, 503, "out_of_memory", "no memory to write %.160s; "
	    "try again later", path);
fail:
	fileio_tmp_free(t);
	return (-1);
}

/* Write all of buf. */
int
fileio_tmp_write(struct fileio_tmp *t, const void *buf, size_t len,
    struct proto_err *err)
{
	const char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		n = write(t->fd, p, len > (1u << 30) ? (1u << 30) : len);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return (fileio_fail(err, errno, "write", t->path));
		}
		p += n;
		len -= (size_t)n;
	}
	return (0);
}

/* fchmod, fsync, close, rename, fsync the folder. */
int
fileio_tmp_commit(struct fileio_tmp *t, mode_t mode, struct proto_err *err)
{
	int	dfd, fd = t->fd;

	t->fd = -1;
	if (fchmod(fd, mode & 07777) == -1) {
		fileio_fail(err, errno, "chmod", t->path);
		close(fd);
		goto fail;
	}
	if (fsync(fd) == -1) {
		fileio_fail(err, errno, "fsync", t->path);
		close(fd);
		goto fail;
	}
	if (close(fd) == -1 && errno != EINTR) {
		fileio_fail(err, errno, "close", t->path);
		goto fail;
	}
	if (renameat(t->dfd, t->tmp, t->dfd, t->base) == -1) {
		fileio_fail(err, errno, "rename onto", t->path);
		goto fail;
	}
	/* The rename itself is durable once the folder is. */
	if ((dfd = openat(t->dfd, ".", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) != -1) {
		fsync(dfd);
		close(dfd);
	}
	fileio_tmp_free(t);
	return (0);
fail:
	unlinkat(t->dfd, t->tmp, 0);
	fileio_tmp_free(t);
	return (-1);
}

/* Whether fd is a /proc file of our own process; see fileio.h. */
int
fileio_own_proc(int fd)
{
	struct statfs	 sfs;
	char		 link[64], path[PATH_MAX], task[96];
	const char	*p, *end;
	unsigned long	 n;
	ssize_t		 len;

	if (fstatfs(fd, &sfs) == -1 || sfs.f_type != FILEIO_PROC_MAGIC)
		return (0);
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if ((len = readlink(link, path, sizeof path - 1)) <= 0)
		return (1);	/* cannot tell: refuse */
	path[len] = '\0';
	/* Each all-digit component: our pid, or a thread of ours. */
	for (p = path; *p != '\0'; p = end) {
		while (*p == '/')
			p++;
		for (end = p; *end != '\0' && *end != '/'; end++)
			;
		if (end == p || strspn(p, "0123456789") != (size_t)(end - p) ||
		    end - p > 10)
			continue;
		n = strtoul(p, NULL, 10);
		if (n == (unsigned long)getpid())
			return (1);
		snprintf(task, sizeof task, "/proc/%ld/task/%lu",
		    (long)getpid(), n);
		if (access(task, F_OK) == 0)
			return (1);
	}
	return (0);
}

/* A file of several hard links must be owner's; see fileio.h. */
int
fileio_links_ok(const struct stat *st, uid_t owner, const char *path,
    struct proto_err *err)
{
	if (st->st_nlink <= 1 || st->st_uid == owner)
		return (0);
	return (proto_fail(err, 403, "permission_denied", "%.160s has %lu "
	    "hard links and belongs to uid %lu, not to uid %lu that this call "
	    "acts as", path, (unsigned long)st->st_nlink,
	    (unsigned long)st->st_uid, (unsigned long)owner));
}

/*
 * A file of several hard links must be reached through a folder that only
 * its owner or root can have put a link in; see fileio.h.
 */
int
fileio_link_folder_ok(int fd, const struct stat *st, uid_t owner,
    const char *path, struct proto_err *err)
{
	struct stat	 dst, lst;
	char		 proc[64], *real = NULL, *base = NULL;
	const char	*at = path;
	ssize_t		 n;
	int		 dfd, rc = -1;

	if (st->st_nlink <= 1)
		return (0);
	/* The name it was opened by, past a trusted symlink at the end. */
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	if ((real = malloc(PATH_MAX)) != NULL &&
	    (n = readlink(proc, real, PATH_MAX - 1)) > 0 && real[0] == '/') {
		real[n] = '\0';
		at = real;
	}
	if ((dfd = fileio_parent(at, 0, owner, &base, err)) == -1) {
		free(real);
		return (-1);
	}
	if (fstat(dfd, &dst) == -1 || fstatat(dfd, base, &lst,
	    AT_SYMLINK_NOFOLLOW) == -1)
		fileio_fail(err, errno, "stat", path);
	else if (lst.st_dev != st->st_dev || lst.st_ino != st->st_ino)
		proto_fail(err, 403, "permission_denied", "%.160s has %lu hard "
		    "links and its name changed meanwhile", path,
		    (unsigned long)st->st_nlink);
	else if ((dst.st_uid != st->st_uid && dst.st_uid != 0) ||
	    (dst.st_mode & (S_IWGRP | S_IWOTH)) != 0)
		proto_fail(err, 403, "permission_denied", "%.160s has %lu hard "
		    "links and its folder belongs to uid %lu (mode %04o), "
		    "where the file belongs to uid %lu: another user may have "
		    "linked it there", path, (unsigned long)st->st_nlink,
		    (unsigned long)dst.st_uid,
		    (unsigned)(dst.st_mode & 07777),
		    (unsigned long)st->st_uid);
	else
		rc = 0;
	free(real);
	free(base);
	close(dfd);
	return (rc);
}

/* Remove the temporary file and free t. */
void
fileio_tmp_abort(struct fileio_tmp *t)
{
	if (t->tmp != NULL && t->dfd != -1)
		unlinkat(t->dfd, t->tmp, 0);
	fileio_tmp_free(t);
}
