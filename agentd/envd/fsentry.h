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
 * The EntryInfo of name in the folder dfd (lstat: a symlink is not
 * followed, but its target's type and mode are reported as envd does, and
 * symlinkTarget is the target resolved as realpath(3) would), path being
 * what the answer calls it.  A new object, or NULL with errno.
 */
json_t	*fsentry_build(int dfd, const char *name, const char *path);
/* The same from a struct stat already taken (lstat) of path. */
json_t	*fsentry_from_stat(const struct stat *, const char *name,
	    const char *path);

/*
 * A JSON string of a name or path (file names are bytes): as it is when
 * UTF-8, else with each byte that is not UTF-8 as U+FFFD, as Go's JSON
 * does.  Never NULL.
 */
json_t	*fsentry_string(const char *);

#endif /* AGENTD_FSENTRY_H */
