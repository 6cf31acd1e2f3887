/*
 * fsentry.c -- envd's EntryInfo and path rules (see fsentry.h).
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/xattr.h>

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

#ifndef XATTR_NAME_MAX
#define XATTR_NAME_MAX	255	/* <linux/limits.h>; musl's <limits.h> has none */
#endif

#define FSENTRY_NAME_BUF	1024	/* bytes for getpwuid_r's strings */
#define FSENTRY_XLIST_MAX	65536	/* bytes of a file's xattr names read */

static void	fsentry_clean(char *);
static void	fsentry_owner(uid_t, gid_t, char *, char *, size_t);
static int	fsentry_meta_ascii(const char *);
static json_t	*fsentry_entry(const struct stat *, const char *,
		    const char *);

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

/* Whether a metadata key or value is printable US-ASCII. */
static int
fsentry_meta_ascii(const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s < 0x20 || *s > 0x7e)
			return (0);
	}
	return (1);
}

/* Check one key and value of an upload's metadata; see fsentry.h. */
int
fsentry_meta_check(const char *key, const char *value, size_t *total,
    char *cause, size_t causelen)
{
	size_t	klen = strlen(key);

	if (klen == 0 || klen > FSENTRY_META_KEY_MAX)
		snprintf(cause, causelen, "metadata key of %zu bytes (1..%d)",
		    klen, FSENTRY_META_KEY_MAX);
	else if (!fsentry_meta_ascii(key) || !fsentry_meta_ascii(value))
		snprintf(cause, causelen, "metadata key or value of %.64s is "
		    "not printable US-ASCII", key);
	else if ((*total += sizeof FSENTRY_META_PREFIX - 1 + klen +
	    strlen(value)) > FSENTRY_META_MAX)
		snprintf(cause, causelen, "metadata of more than %d bytes",
		    FSENTRY_META_MAX);
	else
		return (0);
	return (-1);
}

/* The metadata of the file fd (any fd, O_PATH too): an object or NULL. */
json_t *
fsentry_meta_read(int fd)
{
	json_t		*o = NULL, *v;
	char		 proc[64], *names, *n, val[FSENTRY_META_MAX + 1];
	const char	*key;
	ssize_t		 len, vlen;

	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	if ((len = listxattr(proc, NULL, 0)) <= 0)
		return (NULL);
	if (len > FSENTRY_XLIST_MAX)
		len = FSENTRY_XLIST_MAX;
	names = xmalloc((size_t)len + 1);
	if ((len = listxattr(proc, names, (size_t)len)) <= 0) {
		free(names);
		return (NULL);
	}
	names[len] = '\0';
	for (n = names; n < names + len; n += strlen(n) + 1) {
		if (strncmp(n, FSENTRY_META_PREFIX,
		    sizeof FSENTRY_META_PREFIX - 1) != 0)
			continue;
		key = n + sizeof FSENTRY_META_PREFIX - 1;
		/* Set by other means: only what a proto string may hold. */
		if ((vlen = getxattr(proc, n, val, sizeof val - 1)) < 0 ||
		    memchr(val, '\0', (size_t)vlen) != NULL)
			continue;
		val[vlen] = '\0';
		if ((v = json_string(val)) == NULL)
			continue;
		if (o == NULL)
			o = json_object();
		json_object_set_new(o, key, v);	/* a key not UTF-8: left out */
	}
	free(names);
	if (o != NULL && json_object_size(o) == 0) {
		json_decref(o);
		o = NULL;
	}
	return (o);
}

/* Replace the metadata of the file fd (open, not O_PATH); see fsentry.h. */
int
fsentry_meta_write(int fd, json_t *meta)
{
	json_t		*v;
	char		 name[XATTR_NAME_MAX + 1], *names = NULL, *n;
	const char	*key;
	ssize_t		 len;
	int		 e = 0;

	if ((len = flistxattr(fd, NULL, 0)) > 0) {
		if (len > FSENTRY_XLIST_MAX)
			len = FSENTRY_XLIST_MAX;
		names = xmalloc((size_t)len + 1);
		if ((len = flistxattr(fd, names, (size_t)len)) < 0)
			len = 0;
		names[len] = '\0';
		for (n = names; n < names + len; n += strlen(n) + 1) {
			if (strncmp(n, FSENTRY_META_PREFIX,
			    sizeof FSENTRY_META_PREFIX - 1) == 0 &&
			    (meta == NULL || json_object_get(meta, n +
			    sizeof FSENTRY_META_PREFIX - 1) == NULL) &&
			    fremovexattr(fd, n) == -1 && errno != ENODATA) {
				e = errno;
				break;
			}
		}
		free(names);
	} else if (len == -1 && errno != ENOTSUP)
		return (-errno);
	if (e != 0)
		return (e == ENOTSUP ? 0 : -e);
	json_object_foreach(meta, key, v) {
		snprintf(name, sizeof name, "%s%s", FSENTRY_META_PREFIX, key);
		if (fsetxattr(fd, name, json_string_value(v),
		    strlen(json_string_value(v)), 0) == -1)
			return (errno == ENOTSUP ? 0 : -errno);
	}
	return (0);
}

/* Build an EntryInfo from an lstat of path, no metadata. */
static json_t *
fsentry_entry(const struct stat *st, const char *name, const char *path)
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

/*
 * Build an EntryInfo from an lstat of base in dfd (path), with the
 * metadata of a file or folder that is still that inode.
 */
json_t *
fsentry_from_stat_at(int dfd, const char *base, const struct stat *st,
    const char *name, const char *path)
{
	struct stat	 fst;
	json_t		*o, *meta = NULL;
	int		 fd;

	o = fsentry_entry(st, name, path);
	if ((S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) &&
	    (fd = openat(dfd, *base != '\0' ? base : ".", O_PATH |
	    O_NOFOLLOW | O_CLOEXEC)) != -1) {
		if (fstat(fd, &fst) == 0 && fst.st_dev == st->st_dev &&
		    fst.st_ino == st->st_ino)
			meta = fsentry_meta_read(fd);
		close(fd);
	}
	if (meta != NULL)
		json_object_set_new(o, "metadata", meta);
	return (o);
}

/* The same, the file found again by path. */
json_t *
fsentry_from_stat(const struct stat *st, const char *name, const char *path)
{
	return (fsentry_from_stat_at(AT_FDCWD, path, st, name, path));
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
