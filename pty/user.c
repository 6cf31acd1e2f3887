/*
 * user.c -- the user a session runs as: a name or a uid, looked up in the
 * parent before the spawn (the child may not allocate).
 */

#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "pty.h"
#include "pty_int.h"

#define PTY_PWBUF_START		4096		/* bytes, first getpw*_r buffer */
#define PTY_PWBUF_MAX		(1024 * 1024)	/* bytes, largest getpw*_r buffer */

static int	 uid_parse(const char *, uid_t *);
static int	 user_fill(struct pty_user *, const struct passwd *, char *,
		     size_t, const char *);

/* Parse a numeric uid ("0".."4294967294"); 1 if spec is one. */
static int
uid_parse(const char *spec, uid_t *uid)
{
	unsigned long long	 v;
	char			*end;

	if (*spec < '0' || *spec > '9')
		return 0;
	errno = 0;
	v = strtoull(spec, &end, 10);
	if (*end != '\0' || errno != 0 || v >= (uid_t)-1)
		return 0;
	*uid = (uid_t)v;
	return 1;
}

/* Fill a pty_user from a passwd entry, groups included. */
static int
user_fill(struct pty_user *out, const struct passwd *pw, char *cause,
    size_t causelen, const char *spec)
{
	int	n = PTY_GROUPS_MAX;

	if (strlen(pw->pw_name) >= sizeof out->name) {
		pty_cause(cause, causelen, "user '%s': name too long", spec);
		return -ENAMETOOLONG;
	}
	if (strlen(pw->pw_dir) >= sizeof out->home) {
		pty_cause(cause, causelen, "user '%s': home too long", spec);
		return -ENAMETOOLONG;
	}
	out->uid = pw->pw_uid;
	out->gid = pw->pw_gid;
	strcpy(out->name, pw->pw_name);
	strcpy(out->home, pw->pw_dir);

	/*
	 * The list includes the primary gid.  Beyond PTY_GROUPS_MAX both
	 * libcs return -1 with the first PTY_GROUPS_MAX filled in: keep those.
	 */
	if (getgrouplist(pw->pw_name, pw->pw_gid, out->groups, &n) == -1 ||
	    n > PTY_GROUPS_MAX)
		n = PTY_GROUPS_MAX;
	out->ngroups = n < 0 ? 0 : n;
	return 0;
}

/* Resolve a user by name or numeric uid. */
int
pty_user_lookup(const char *spec, struct pty_user *out, char *cause,
    size_t causelen)
{
	struct passwd	 pw, *res = NULL;
	char		 stackbuf[PTY_PWBUF_START], *buf = stackbuf, *nbuf;
	size_t		 buflen = sizeof stackbuf;
	uid_t		 uid = 0;
	int		 numeric, error;

	if (spec == NULL || *spec == '\0') {
		pty_cause(cause, causelen, "invalid user ''");
		return -EINVAL;
	}
	memset(out, 0, sizeof *out);
	numeric = uid_parse(spec, &uid);
	for (;;) {
		if (numeric)
			error = getpwuid_r(uid, &pw, buf, buflen, &res);
		else
			error = getpwnam_r(spec, &pw, buf, buflen, &res);
		if (error == EINTR)
			continue;
		if (error != ERANGE || buflen >= PTY_PWBUF_MAX)
			break;
		buflen *= 2;
		nbuf = buf == stackbuf ? malloc(buflen) : realloc(buf, buflen);
		if (nbuf == NULL) {
			error = ENOMEM;
			break;
		}
		buf = nbuf;
	}

	/* POSIX lets "not found" be 0, ENOENT, ESRCH, EBADF or EPERM. */
	if (res == NULL && (error == 0 || error == ENOENT || error == ESRCH ||
	    error == EBADF || error == EPERM)) {
		if (buf != stackbuf)
			free(buf);
		if (!numeric) {
			pty_cause(cause, causelen, "unknown user '%s'", spec);
			return -ENOENT;
		}
		out->uid = uid;
		out->gid = (gid_t)uid;
		out->ngroups = 0;
		snprintf(out->name, sizeof out->name, "%lu",
		    (unsigned long)uid);
		strcpy(out->home, "/");
		return 0;
	}
	if (res == NULL) {
		if (buf != stackbuf)
			free(buf);
		pty_cause(cause, causelen, "user '%s': %s: %s", spec,
		    numeric ? "getpwuid" : "getpwnam", strerror(error));
		return -error;
	}
	error = user_fill(out, res, cause, causelen, spec);
	if (buf != stackbuf)
		free(buf);
	return error;
}
