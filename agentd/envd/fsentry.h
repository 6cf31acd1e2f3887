/*
 * fsentry.h -- envd's EntryInfo (filesystem.proto) as proto-JSON, and the
 * path rules of envd's ExpandAndResolve.
 *
 * Pure but for the file system calls: used on files workers (which act as
 * the call's user), so nothing here logs or touches the loop.  Allocation
 * failures take fatal()'s path (util.h).
 */
#ifndef AGENTD_FSENTRY_H
#define AGENTD_FSENTRY_H

#include <sys/types.h>

#include <jansson.h>

struct stat;

/*
 * A path as envd takes it: "" is workdir (when set), "~" and "~/x" are in
 * home, a relative path is joined to home and cleaned ("a/../b" -> home/b),
 * an absolute one is kept as it is.  "~user" is refused.  A malloc'd path,
 * or NULL with cause filled.
 */
char	*fsentry_resolve(const char *in, const char *home, const char *workdir,
	    char *cause, size_t causelen);

/*
 * Go's os.FileMode.String() of a st_mode ("-rw-r--r--", "drwxr-xr-x",
 * "Lrwxrwxrwx", "dtrwxrwxrwt" is "dtrwxrwxrwx"): what envd puts in
 * EntryInfo.permissions.  buf holds at least FSENTRY_PERM_MAX bytes.
 */
#define FSENTRY_PERM_MAX	32
const char *fsentry_perm(mode_t, char *buf);

/* A google.protobuf.Timestamp as proto-JSON (RFC 3339, UTC, 0/3/6/9 digits). */
#define FSENTRY_TIME_MAX	48
const char *fsentry_time(time_t sec, long nsec, char *buf);

/*
 * The EntryInfo of a struct stat already taken (lstat: a symlink is not
 * followed, but its target's type and mode are reported as envd does, and
 * symlinkTarget is the target resolved as realpath(3) would) of base in
 * the folder dfd ("": dfd itself), path being what the answer calls it.
 * A file or folder's `metadata` (its user.e2b.* xattrs) is read from base
 * opened again (O_PATH, no symlink followed) only while it is the inode
 * of st: nothing can send the read elsewhere.  A new object.
 */
json_t	*fsentry_from_stat_at(int dfd, const char *base,
	    const struct stat *, const char *name, const char *path);
/* The same, path opened again from the root (AT_FDCWD). */
json_t	*fsentry_from_stat(const struct stat *, const char *name,
	    const char *path);

/*
 * File metadata as envd keeps it: each key as the xattr user.e2b.<key>.
 * An upload's keys and values are printable US-ASCII, a key 1 to
 * FSENTRY_META_KEY_MAX bytes, all of them at most FSENTRY_META_MAX bytes
 * counting the prefix of each name (envd's limits).
 */
#define FSENTRY_META_PREFIX	"user.e2b."
#define FSENTRY_META_KEY_MAX	246	/* 255, less the prefix */
#define FSENTRY_META_MAX	4096	/* bytes of names and values */
/*
 * Add key and value to *total and check them: 0, or -1 with cause.
 */
int	fsentry_meta_check(const char *key, const char *value, size_t *total,
	    char *cause, size_t causelen);
/*
 * The metadata of the file fd (O_PATH too: read through /proc/self/fd) as
 * an object of strings; NULL when none (or no xattrs there).  Values of
 * more than FSENTRY_META_MAX bytes, or that are not UTF-8, are left out.
 */
json_t	*fsentry_meta_read(int fd);
/*
 * Make meta (an object of strings, or NULL: none) the whole metadata of
 * the file fd: user.e2b.* names meta lacks are removed.  0 (also when the
 * file system has no user xattrs: nothing is kept), or -errno.
 */
int	fsentry_meta_write(int fd, json_t *meta);

/*
 * A JSON string of a name or path (file names are bytes): as it is when
 * UTF-8, else with each byte that is not UTF-8 as U+FFFD, as Go's JSON
 * does.  Never NULL.
 */
json_t	*fsentry_string(const char *);

#endif /* AGENTD_FSENTRY_H */
