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
struct stat;

#define FILEIO_MODE_DEFAULT	0644	/* a written file's mode when not given */
#define FILEIO_DIR_MODE		0755	/* folders made by mkdir=true */

/* A temporary file on its way to becoming path. */
struct fileio_tmp {
	int	 fd;			/* -1 when closed */
	int	 dfd;			/* the target's folder (O_PATH), or -1 */
	char	*path;			/* the target, malloc'd */
	char	*base;			/* its name in dfd, malloc'd */
	char	*tmp;			/* the temporary file's name, malloc'd */
};

/*
 * Paths are resolved without trusting a less privileged user: from "/",
 * one component at a time (openat2 with RESOLVE_NO_SYMLINKS first, where
 * the kernel has it; else O_PATH|O_NOFOLLOW per component), a symlink is
 * followed (by its text; never a magic link such as /proc/PID/fd/N) only
 * when root or owner owns it.  Any other symlink on the way answers 403
 * permission_denied.  owner is the uid the operation acts as (the request's
 * user, or agentd's).
 *
 * Open path (flags as for open(2); O_NOFOLLOW is implied for the last
 * component once trusted symlinks are followed): the fd, or -1 with err.
 */
int	fileio_open(const char *path, int flags, uid_t owner,
	    struct proto_err *);
/*
 * The folder of path as an O_PATH fd (made first, mode FILEIO_DIR_MODE,
 * when mkdir is set), and *base its last component (malloc'd; "" when path
 * ends in '/').  The fd, or -1 with err.
 */
int	fileio_parent(const char *path, int mkdir, uid_t owner, char **base,
	    struct proto_err *);

/*
 * fileio_parent() with mkdir, the folders it makes given to uid:gid (envd's
 * permissions.EnsureDirs).
 */
int	fileio_parent_own(const char *path, uid_t owner, uid_t uid, gid_t gid,
	    char **base, struct proto_err *);
/*
 * Whether the last resolution on this thread followed a symlink that root
 * does not own (so the user it trusted could have sent it elsewhere).
 */
int	fileio_followed(void);
/*
 * Open path to be written in place (envd's O_WRONLY|O_CREATE|O_TRUNC), the
 * folders made first (given to uid:gid when give), resolved as
 * fileio_parent() does; a trusted symlink at the end is written through.
 * A new file (*created set) is mode FILEIO_MODE_DEFAULT less the umask
 * and, when give, uid:gid's (a watcher sees CREATE, CHMOD only when it
 * changed hands, then the writes).  An existing one must pass fileio_links_ok() for uid;
 * when it is not uid's it is given to uid:gid (give) and loses its
 * set-id and group/other write bits either way; then it is truncated.
 * A folder there is 400.  The fd (O_WRONLY), or -1 with err.
 */
int	fileio_open_inplace(const char *path, uid_t owner, uid_t uid, gid_t gid,
	    int give, int *created, struct proto_err *);
/*
 * Create a temporary file (O_CREAT|O_EXCL, mode 0600, a random name
 * starting with '.' and ending in ".agentd-tmp") in the folder of path,
 * making the folders first when mkdir is set (mode FILEIO_DIR_MODE).
 * Refuses a path that is an existing folder (409 is_a_directory) or ends
 * in '/'.  The folders are resolved as fileio_parent() does.  0 with t filled, or -1 with err (t then needs no cleanup).
 */
int	fileio_tmp_open(const char *path, int mkdir, uid_t owner,
	    struct fileio_tmp *t, struct proto_err *);
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
/*
 * Whether a file may be read or replaced by a call acting as owner: one
 * with more than one hard link must belong to owner (a link another user
 * made to a file it could not read would else pass it on).  0, or -1 with
 * err (403 permission_denied).
 */
int	fileio_links_ok(const struct stat *, uid_t owner, const char *path,
	    struct proto_err *);
/*
 * Whether a file of more than one hard link, st, open as fd (path, as
 * owner), may be read: the folder of the name it was opened by (its
 * /proc/self/fd link, so past a trusted symlink at the end; else path),
 * resolved again as fileio_parent() does, must still hold it under that
 * name, belong to the file's owner or to root, and be writable by neither
 * group nor others.  Else another user may have linked there a file it
 * cannot read (where fs.protected_hardlinks is 0), for a call acting as the
 * file's owner, root included, to pass on.  0 (one link: always), or -1
 * with err (403 permission_denied).
 */
int	fileio_link_folder_ok(int fd, const struct stat *, uid_t owner,
	    const char *path, struct proto_err *);
/*
 * Whether fd is a /proc file of agentd's own process (/proc/PID/..., of
 * its pid or of one of its threads' ids, wherever the proc file system is
 * mounted): the kernel lets every thread of a process read its own maps,
 * mem or environ, whatever the thread's credentials, so a call acting as
 * another user must refuse them itself.
 */
int	fileio_own_proc(int fd);
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
