/*
 * fileio.h -- the file system side of the files endpoints: atomic writes
 * (a temporary file beside the target, fsync, rename, fsync of the folder),
 * mkdir -p, and errno turned into the API's errors.
 *
 * Used by the event loop (PUT) and by fetch workers: no shared state but
 * an atomic counter (temporary names) and errno, which is per thread.  Not
 * safe: an allocation failure takes fatal()'s path (util.h), which runs
 * agentd's panic on the caller's thread.  Every function that fails fills
 * a struct proto_err with the answer to give and returns -1.
 */
#ifndef AGENTD_FILEIO_H
#define AGENTD_FILEIO_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

struct proto_err;

#define FILEIO_MODE_DEFAULT	0644	/* a written file's mode when not given */
#define FILEIO_DIR_MODE		0755	/* folders made by mkdir=true */

/* A temporary file on its way to becoming path. */
struct fileio_tmp {
	int	 fd;			/* -1 when closed */
	char	*path;			/* the target, malloc'd */
	char	*tmp;			/* the temporary file, malloc'd */
	char	*dir;			/* the target's folder, malloc'd */
};

/*
 * Create a temporary file (O_CREAT|O_EXCL, mode 0600, a random name
 * starting with '.' and ending in ".agentd-tmp") in the folder of path,
 * making the folders first when mkdir is set (mode FILEIO_DIR_MODE).
 * Refuses a path that is an existing folder (409 is_a_directory) or ends
 * in '/'.  0 with t filled, or -1 with err (t then needs no cleanup).
 */
int	fileio_tmp_open(const char *path, int mkdir, struct fileio_tmp *t,
	    struct proto_err *);
/* Write all of buf to the temporary file; 0 or -1 with err. */
int	fileio_tmp_write(struct fileio_tmp *, const void *, size_t,
	    struct proto_err *);
/*
 * Set the mode (fchmod: the umask does not apply), fsync, close, rename
 * over the target (a symlink at the target is replaced, not followed), and
 * fsync the folder.  0, or -1 with err and the temporary file removed.
 * Either way t is freed.
 */
int	fileio_tmp_commit(struct fileio_tmp *, mode_t mode, struct proto_err *);
/* Remove the temporary file and free t (any time after a good open). */
void	fileio_tmp_abort(struct fileio_tmp *);

/*
 * Fill err with the answer for errno e while doing what on path, and
 * return -1: ENOENT and ENOTDIR 404 not_found; EACCES, EPERM and EROFS
 * 403 permission_denied; EISDIR 409 is_a_directory; ENAMETOOLONG and
 * ELOOP 400 invalid_request; ENOSPC, EDQUOT and EFBIG 507
 * insufficient_storage; anything else 500 internal_error.
 */
int	fileio_fail(struct proto_err *, int e, const char *what,
	    const char *path);

/* "ENOENT" for ENOENT and so on; "E<n>" for one without a name here. */
const char *fileio_errno_name(int e, char buf[16]);

#endif /* AGENTD_FILEIO_H */
