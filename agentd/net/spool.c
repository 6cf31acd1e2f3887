/*
 * spool.c -- request bodies on disk (see spool.h).
 */
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "log.h"
#include "spool.h"
#include "util.h"

#define SPOOL_IOV	16	/* chains written at once */

/* An unlinked file being filled. */
struct spool {
	int		 fd;
	uint64_t	 size;
};

static int	spool_fail(int *, int, char *, size_t, const char *);

/* Fill a failure from errno e: 507 when the disk is full. */
static int
spool_fail(int *status, int e, char *cause, size_t causelen, const char *what)
{
	*status = e == ENOSPC || e == EDQUOT ? 507 : 503;
	snprintf(cause, causelen, "%s the upload's spool file: %s%s", what,
	    strerror(e), *status == 507 ? " (--envd-spool-dir is full)" : "");
	return (-1);
}

/* Open a spool in dir. */
struct spool *
spool_open(const char *dir, uint64_t expect, int *status, char *cause,
    size_t causelen)
{
	struct spool	*s;
	struct statvfs	 sv;
	char		*path;
	int		 fd, e;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd == -1 && (errno == EOPNOTSUPP || errno == EISDIR ||
	    errno == EINVAL)) {
		/* No O_TMPFILE there: a named file, unlinked at once. */
		xasprintf(&path, "%s/agentd-spool.XXXXXX", dir);
		if ((fd = mkostemp(path, O_CLOEXEC)) != -1)
			unlink(path);
		free(path);
	}
	if (fd == -1) {
		spool_fail(status, errno, cause, causelen, "cannot create");
		return (NULL);
	}
	if (expect > 0 && fstatvfs(fd, &sv) == 0 &&
	    (uint64_t)sv.f_bavail * sv.f_frsize < expect) {
		e = ENOSPC;
		close(fd);
		*status = 507;
		snprintf(cause, causelen, "%llu bytes do not fit in "
		    "--envd-spool-dir (%llu bytes free): %s",
		    (unsigned long long)expect, (unsigned long long)sv.f_bavail *
		    sv.f_frsize, strerror(e));
		return (NULL);
	}
	s = xcalloc(1, sizeof *s);
	s->fd = fd;
	log_debug("%s: fd %d in %s", __func__, fd, dir);
	return (s);
}

/* Append len bytes. */
int
spool_write(struct spool *s, const void *data, size_t len, int *status,
    char *cause, size_t causelen)
{
	const char	*p = data;
	ssize_t		 n;

	while (len > 0) {
		if ((n = write(s->fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return (spool_fail(status, errno, cause, causelen,
			    "cannot write"));
		}
		p += n;
		len -= (size_t)n;
		s->size += (uint64_t)n;
	}
	return (0);
}

/* Move the first len bytes of buf to the spool. */
int
spool_write_buffer(struct spool *s, struct evbuffer *buf, size_t len,
    int *status, char *cause, size_t causelen)
{
	struct evbuffer_iovec	 v[SPOOL_IOV];
	struct iovec		 iov[SPOOL_IOV];
	ssize_t			 n;
	size_t			 left;
	int			 nv, i;

	while (len > 0) {
		nv = evbuffer_peek(buf, (ev_ssize_t)len, NULL, v, SPOOL_IOV);
		if (nv > SPOOL_IOV)
			nv = SPOOL_IOV;
		if (nv <= 0)
			break;
		/* The last chain may go on past len. */
		for (i = 0, left = len; i < nv && left > 0; i++) {
			iov[i].iov_base = v[i].iov_base;
			iov[i].iov_len = v[i].iov_len < left ? v[i].iov_len :
			    left;
			left -= iov[i].iov_len;
		}
		nv = i;
		n = writev(s->fd, iov, nv);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return (spool_fail(status, errno, cause, causelen,
			    "cannot write"));
		}
		if ((size_t)n > len)
			fatal("%s: wrote past the request", __func__);
		evbuffer_drain(buf, (size_t)n);
		len -= (size_t)n;
		s->size += (uint64_t)n;
	}
	return (0);
}

/* Bytes written so far. */
uint64_t
spool_size(const struct spool *s)
{
	return (s->size);
}

/* Map the spool's bytes. */
int
spool_map(struct spool *s, char **map, size_t *len, char *cause,
    size_t causelen)
{
	void	*p;

	*map = NULL;
	*len = 0;
	if (s->size == 0)
		return (0);
	if (s->size > SIZE_MAX) {
		snprintf(cause, causelen, "the upload is too large to map");
		return (-1);
	}
	p = mmap(NULL, (size_t)s->size, PROT_READ | PROT_WRITE, MAP_PRIVATE,
	    s->fd, 0);
	if (p == MAP_FAILED) {
		snprintf(cause, causelen, "cannot map the upload's spool "
		    "file: %s", strerror(errno));
		return (-1);
	}
	*map = p;
	*len = (size_t)s->size;
	return (0);
}

/* Undo spool_map(). */
void
spool_unmap(char *map, size_t len)
{
	if (map != NULL)
		munmap(map, len);
}

/* Close the file and free the spool. */
void
spool_free(struct spool *s)
{
	if (s == NULL)
		return;
	log_debug("%s: fd %d, %llu bytes", __func__, s->fd,
	    (unsigned long long)s->size);
	close(s->fd);
	free(s);
}
