/*
 * fsentry.c -- envd's EntryInfo and path rules (see fsentry.h).
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fsentry.h"
#include "proto.h"
#include "util.h"

#define FSENTRY_NAME_BUF	1024	/* bytes for getpwuid_r's strings */

static void	fsentry_clean(char *);
static void	fsentry_owner(uid_t, gid_t, char *, char *, size_t);

/* Resolve a request's path as envd's ExpandAndResolve does. */
char *
fsentry_resolve(const char *in, const char *home, const char *workdir,
    char *cause, size_t causelen)
{
	char	*out;

	if (in == NULL || *in == '\0')
		in = workdir != NULL ? workdir : "";
	if (in[0] == '~') {
		if (in[1] != '\0' && in[1] != '/') {
			snprintf(cause, causelen, "cannot expand user-specific "
			    "home dir in %.128s", in);
			return (NULL);
		}
		in++;
	} else if (in[0] == '/')
		return (xstrdup(in));
	if (home == NULL || *home == '\0')
		home = "/";
	if (xasprintf(&out, "%s/%s", home, in) == -1)
		return (NULL);
	fsentry_clean(out);
	return (out);
}

/* Clean an absolute path lexically, as Go's filepath.Clean. */
static void
fsentry_clean(char *p)
{
	char	*r = p, *w = p, *seg;
	size_t	 len;

	/* p starts with '/'; w writes the result. */
	*w++ = '/';
	while (*r != '\0') {
		while (*r == '/')
			r++;
		if (*r == '\0')
			break;
		seg = r;
		len = strcspn(r, "/");
		r += len;
		if (len == 1 && seg[0] == '.')
			continue;
		if (len == 2 && seg[0] == '.' && seg[1] == '.') {
			if (w > p + 1) {
				w--;			/* the '/' after the last */
				while (w > p + 1 && w[-1] != '/')
					w--;
			}
			continue;
		}
		if (w > p + 1 && w[-1] != '/')
			*w++ = '/';
		memmove(w, seg, len);
		w += len;
	}
	if (w > p + 1 && w[-1] == '/')
		w--;
	*w = '\0';
}

/* Go's FileMode.String() of st_mode. */
const char *
fsentry_perm(mode_t m, char *buf)
{
	static const char	 rwx[] = "rwxrwxrwx";
	char			*w = buf;
	int			 i;

	/* Go's letters in order: "dalTLDpSugct?" (a, l, T, ? never here). */
	if (S_ISDIR(m))
		*w++ = 'd';
	if (S_ISLNK(m))
		*w++ = 'L';
	if (S_ISBLK(m) || S_ISCHR(m))
		*w++ = 'D';
	if (S_ISFIFO(m))
		*w++ = 'p';
	if (S_ISSOCK(m))
		*w++ = 'S';
	if (m & S_ISUID)
		*w++ = 'u';
	if (m & S_ISGID)
		*w++ = 'g';
	if (S_ISCHR(m))
		*w++ = 'c';
	if (m & S_ISVTX)
		*w++ = 't';
	if (w == buf)
		*w++ = '-';
	for (i = 0; i < 9; i++)
		*w++ = (m & (1u << (8 - i))) ? rwx[i] : '-';
	*w = '\0';
	return (buf);
}

/* A Timestamp as protojson writes it. */
const char *
fsentry_time(time_t sec, long nsec, char *buf)
{
	struct tm	tm;
	size_t		n;

	gmtime_r(&sec, &tm);
	n = strftime(buf, FSENTRY_TIME_MAX, "%Y-%m-%dT%H:%M:%S", &tm);
	if (nsec == 0)
		snprintf(buf + n, FSENTRY_TIME_MAX - n, "Z");
	else if (nsec % 1000000 == 0)
		snprintf(buf + n, FSENTRY_TIME_MAX - n, ".%03ldZ",
		    nsec / 1000000);
	else if (nsec % 1000 == 0)
		snprintf(buf + n, FSENTRY_TIME_MAX - n, ".%06ldZ", nsec / 1000);
	else
		snprintf(buf + n, FSENTRY_TIME_MAX - n, ".%09ldZ", nsec);
	return (buf);
}

/* The names of uid and gid, or their numbers when they have none. */
static void
fsentry_owner(uid_t uid, gid_t gid, char *user, char *group, size_t len)
{
	struct passwd	 pw, *pwp = NULL;
	struct group	 gr, *grp = NULL;
	char		 buf[FSENTRY_NAME_BUF];

	if (getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp != NULL)
		snprintf(user, len, "%s", pw.pw_name);
	else
		snprintf(user, len, "%lu", (unsigned long)uid);
	if (getgrgid_r(gid, &gr, buf, sizeof buf, &grp) == 0 && grp != NULL)
		snprintf(group, len, "%s", gr.gr_name);
	else
		snprintf(group, len, "%lu", (unsigned long)gid);
}

/* Build an EntryInfo from an lstat of path. */
json_t *
fsentry_from_stat(const struct stat *st, const char *name, const char *path)
{
	struct stat	 tst;
	json_t		*o;
	char		 perm[FSENTRY_PERM_MAX], tm[FSENTRY_TIME_MAX];
	char		 user[64], group[64], size[32], *target = NULL;
	mode_t		 m = st->st_mode;
	const char	*type = NULL;

	if (S_ISLNK(m)) {
		/* envd: the target's type and mode; the path if unresolved. */
		target = realpath(path, NULL);
		if (target != NULL && stat(target, &tst) == 0)
			m = tst.st_mode;
		else
			m = 0;
		if (target == NULL)
			target = xstrdup(path);
	}
	if (S_ISREG(m))
		type = "FILE_TYPE_FILE";
	else if (S_ISDIR(m))
		type = "FILE_TYPE_DIRECTORY";
	fsentry_owner(st->st_uid, st->st_gid, user, group, sizeof user);
	snprintf(size, sizeof size, "%lld", (long long)st->st_size);
	o = json_object();
	json_object_set_new(o, "name", fsentry_string(name));
	if (type != NULL)
		json_object_set_new(o, "type", json_string(type));
	json_object_set_new(o, "path", fsentry_string(path));
	if (st->st_size != 0)
		json_object_set_new(o, "size", json_string(size));
	if ((m & 0777) != 0)
		json_object_set_new(o, "mode", json_integer(m & 0777));
	json_object_set_new(o, "permissions",
	    json_string(fsentry_perm(st->st_mode, perm)));
	json_object_set_new(o, "owner", json_string(user));
	json_object_set_new(o, "group", json_string(group));
	if (st->st_mtim.tv_sec != 0 || st->st_mtim.tv_nsec != 0)
		json_object_set_new(o, "modifiedTime", json_string(fsentry_time(
		    st->st_mtim.tv_sec, st->st_mtim.tv_nsec, tm)));
	if (target != NULL) {
		json_object_set_new(o, "symlinkTarget",
		    fsentry_string(target));
		free(target);
	}
	return (o);
}

/* Build the EntryInfo of name in dfd. */
json_t *
fsentry_build(int dfd, const char *name, const char *path)
{
	struct stat	st;

	if (fstatat(dfd, *name == '\0' ? "" : name, &st, AT_SYMLINK_NOFOLLOW |
	    (*name == '\0' ? AT_EMPTY_PATH : 0)) == -1)
		return (NULL);
	return (fsentry_from_stat(&st, name, path));
}

/* A JSON string of s; bytes that are not UTF-8 become U+FFFD. */
json_t *
fsentry_string(const char *s)
{
	const uint8_t	*p = (const uint8_t *)s;
	size_t		 n = strlen(s), i, k, o = 0;
	char		*buf;
	json_t		*v;

	if ((v = json_string(s)) != NULL)
		return (v);
	buf = xmalloc(n * 3 + 1);
	for (i = 0; i < n; i += k) {
		if ((k = proto_utf8_len(p + i, n - i)) == 0) {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			k = 1;
		} else {
			memcpy(buf + o, p + i, k);
			o += k;
		}
	}
	if ((v = json_stringn(buf, o)) == NULL)
		fatal("%s: out of memory", __func__);
	free(buf);
	return (v);
}
