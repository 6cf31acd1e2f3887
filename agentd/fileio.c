/*
 * fileio.c -- atomic writes, mkdir -p, and errno as the API's errors.
 */
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "proto.h"
#include "util.h"

#define FILEIO_TMP_TRIES	16	/* names tried before giving up */
#define FILEIO_BASE_KEPT	200	/* bytes of the target's name in the temp's */

static int	fileio_mkdirs(const char *, struct proto_err *);
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

/* mkdir -p dir, mode FILEIO_DIR_MODE. */
static int
fileio_mkdirs(const char *dir, struct proto_err *err)
{
	char	*p, *s = xstrdup(dir);
	int	 last;

	for (p = s + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		last = *p == '\0';
		*p = '\0';
		if (mkdir(s, FILEIO_DIR_MODE) == -1 && errno != EEXIST) {
			fileio_fail(err, errno, "mkdir", s);
			free(s);
			return (-1);
		}
		if (last)
			break;
		*p = '/';
	}
	free(s);
	return (0);
}

/* Free what t holds (not the temporary file). */
static void
fileio_tmp_free(struct fileio_tmp *t)
{
	if (t->fd != -1)
		close(t->fd);
	t->fd = -1;
	free(t->path);
	free(t->tmp);
	free(t->dir);
	t->path = t->tmp = t->dir = NULL;
}

/* Create the temporary file beside path. */
int
fileio_tmp_open(const char *path, int mkdir_p, struct fileio_tmp *t,
    struct proto_err *err)
{
	const char	*slash, *base;
	struct stat	 st;
	char		 hex[17];
	size_t		 dlen;
	int		 i, e;

	memset(t, 0, sizeof *t);
	t->fd = -1;
	slash = strrchr(path, '/');
	base = slash + 1;
	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return (proto_fail(err, 400, "invalid_request",
		    "path: '%.160s' names a folder, not a file", path));
	if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return (proto_fail(err, 409, "is_a_directory",
		    "%.160s is a directory", path));
	dlen = slash == path ? 1 : (size_t)(slash - path);
	t->dir = xmalloc(dlen + 1);
	memcpy(t->dir, path, dlen);
	t->dir[dlen] = '\0';
	if (mkdir_p && fileio_mkdirs(t->dir, err) != 0)
		goto fail;
	t->path = xstrdup(path);
	hex[16] = '\0';
	for (i = 0; i < FILEIO_TMP_TRIES; i++) {
		fileio_random_hex(hex, 16);
		free(t->tmp);
		t->tmp = NULL;
		if (strlen(base) <= FILEIO_BASE_KEPT)
			xasprintf(&t->tmp, "%s/.%s.%s.agentd-tmp",
			    dlen == 1 ? "" : t->dir, base, hex);
		else
			xasprintf(&t->tmp, "%s/.%s.agentd-tmp",
			    dlen == 1 ? "" : t->dir, hex);
		t->fd = open(t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
		    O_NOCTTY, 0600);
		if (t->fd != -1)
			return (0);
		if (errno != EEXIST)
			break;
	}
	e = errno;
	if ((e == ENOENT || e == ENOTDIR) && stat(t->dir, &st) == -1)
		proto_fail(err, 404, "not_found", "no folder %.160s%s",
		    t->dir, mkdir_p ? "" : " (mkdir=true makes it)");
	else
		fileio_fail(err, e, "create a file in", t->dir);
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
	if (rename(t->tmp, t->path) == -1) {
		fileio_fail(err, errno, "rename onto", t->path);
		goto fail;
	}
	/* The rename itself is durable once the folder is. */
	if ((dfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		fsync(dfd);
		close(dfd);
	}
	fileio_tmp_free(t);
	return (0);
fail:
	unlink(t->tmp);
	fileio_tmp_free(t);
	return (-1);
}

/* Remove the temporary file and free t. */
void
fileio_tmp_abort(struct fileio_tmp *t)
{
	if (t->tmp != NULL)
		unlink(t->tmp);
	fileio_tmp_free(t);
}
