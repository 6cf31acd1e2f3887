/*
 * envhost.c -- the trust store, /etc/hosts and the clock as envd's POST
 * /init sets them (see envhost.h).
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "envhost.h"
#include "util.h"

#define ENVHOST_BEGIN	"-----BEGIN CERTIFICATE-----"
#define ENVHOST_END	"-----END CERTIFICATE-----"

static char	*envhost_read(const char *, char *, size_t);
static int	 envhost_write(const char *, const char *, size_t, char *,
		    size_t);
static int	 envhost_write_inplace(const char *, const char *, size_t);
static int	 envhost_put(int, const char *, size_t);
static void	 envhost_mkdirs(const char *);
static void	 envhost_cut(char *, const char *);
static int	 envhost_num(const char **, int, int, int, int *);

/* Whether pem is PEM certificates and whitespace only. */
int
envhost_pem_check(const char *pem, char *cause, size_t len)
{
	const char	*p = pem, *end;
	size_t		 n = 0, b64;

	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0')
			break;
		if (strncmp(p, ENVHOST_BEGIN, strlen(ENVHOST_BEGIN)) != 0)
			goto bad;
		p += strlen(ENVHOST_BEGIN);
		if ((end = strstr(p, ENVHOST_END)) == NULL)
			goto bad;
		for (b64 = 0; p < end; p++) {
			if (isalnum((unsigned char)*p) || *p == '+' ||
			    *p == '/' || *p == '=')
				b64++;
			else if (!isspace((unsigned char)*p))
				goto bad;
		}
		if (b64 == 0 || b64 % 4 != 0)
			goto bad;
		p = end + strlen(ENVHOST_END);
		n++;
	}
	if (n > 0)
		return (0);
bad:
	cause_set(cause, len, "caBundle: not PEM certificates (certificate "
	    "%zu)", n + 1);
	return (-1);
}

/* Whether ip is an address. */
int
envhost_ip_check(const char *ip, char *cause, size_t len)
{
	unsigned char	a[16];

	if (inet_pton(AF_INET, ip, a) == 1 || inet_pton(AF_INET6, ip, a) == 1)
		return (0);
	cause_set(cause, len, "hyperloopIP: '%.64s' is no IP address", ip);
	return (-1);
}

/* n digits at *p between lo and hi, then the separator sep (or none). */
static int
envhost_num(const char **p, int n, int lo, int hi, int *out)
{
	int	v = 0;

	for (; n > 0; n--, (*p)++) {
		if (!isdigit((unsigned char)**p))
			return (-1);
		v = v * 10 + (**p - '0');
	}
	*out = v;
	return (v < lo || v > hi ? -1 : 0);
}

/* RFC 3339 to ns since the epoch. */
int
envhost_time_parse(const char *s, int64_t *ns, char *cause, size_t len)
{
	struct tm	 tm = { 0 };
	const char	*p = s;
	int64_t		 frac = 0, scale = 1000000000;
	int		 y, off = 0, oh, om;
	time_t		 t;

	if (envhost_num(&p, 4, 0, 9999, &y) != 0 || *p++ != '-' ||
	    envhost_num(&p, 2, 1, 12, &tm.tm_mon) != 0 || *p++ != '-' ||
	    envhost_num(&p, 2, 1, 31, &tm.tm_mday) != 0 ||
	    (*p != 'T' && *p != 't') || *++p == '\0' ||
	    envhost_num(&p, 2, 0, 23, &tm.tm_hour) != 0 || *p++ != ':' ||
	    envhost_num(&p, 2, 0, 59, &tm.tm_min) != 0 || *p++ != ':' ||
	    envhost_num(&p, 2, 0, 60, &tm.tm_sec) != 0)
		goto bad;
	if (*p == '.') {
		if (!isdigit((unsigned char)*++p))
			goto bad;
		for (; isdigit((unsigned char)*p); p++) {
			if (scale > 1) {
				scale /= 10;
				frac += (*p - '0') * scale;
			}
		}
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-') {
		off = *p++ == '-' ? -1 : 1;
		if (envhost_num(&p, 2, 0, 23, &oh) != 0 || *p++ != ':' ||
		    envhost_num(&p, 2, 0, 59, &om) != 0)
			goto bad;
		off *= oh * 3600 + om * 60;
	} else
		goto bad;
	if (*p != '\0')
		goto bad;
	tm.tm_year = y - 1900;
	tm.tm_mon--;
	if ((t = timegm(&tm)) == (time_t)-1 && y != 1969)
		goto bad;
	*ns = ((int64_t)t - off) * 1000000000 + frac;
	return (0);
bad:
	cause_set(cause, len, "timestamp: '%.40s' is no RFC 3339 time", s);
	return (-1);
}

/* A whole file of at most ENVHOST_FILE_MAX bytes; "" when there is none. */
static char *
envhost_read(const char *path, char *cause, size_t len)
{
	struct stat	 st = { 0 };
	char		*buf;
	ssize_t		 n;
	size_t		 got = 0;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return (xstrdup(""));
		cause_set(cause, len, "%s: %s", path, strerror(errno));
		return (NULL);
	}
	if (fstat(fd, &st) == -1 || st.st_size > ENVHOST_FILE_MAX) {
		cause_set(cause, len, "%s: %s", path, st.st_size >
		    ENVHOST_FILE_MAX ? "larger than 64 MiB" : strerror(errno));
		close(fd);
		return (NULL);
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size &&
	    (n = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return (buf);
}

/* mkdir -p the folder of path. */
static void
envhost_mkdirs(const char *path)
{
	char	*d = xstrdup(path), *p;

	for (p = d + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		(void)mkdir(d, 0755);
		*p = '/';
	}
	free(d);
}

/* Write path aside (mode 0644) and rename it in place. */
static int
envhost_write(const char *path, const char *data, size_t n, char *cause,
    size_t len)
{
	char	*tmp;
	int	 fd;

	envhost_mkdirs(path);
	xasprintf(&tmp, "%s.agentd-XXXXXX", path);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1) {
		cause_set(cause, len, "%s: %s", tmp, strerror(errno));
		free(tmp);
		return (-1);
	}
	if (fchmod(fd, 0644) == -1 || envhost_put(fd, data, n) == -1) {
		cause_set(cause, len, "%s: %s", path, strerror(errno));
		close(fd);
		goto fail;
	}
	if (close(fd) == -1) {		/* the fd is gone either way */
		cause_set(cause, len, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (rename(tmp, path) == -1) {
		/* A bind-mounted file (a container's /etc/hosts): in place. */
		if ((errno != EBUSY && errno != EXDEV) ||
		    envhost_write_inplace(path, data, n) == -1) {
			cause_set(cause, len, "%s: %s", path, strerror(errno));
			goto fail;
		}
		unlink(tmp);
	}
	free(tmp);
	return (0);
fail:
	unlink(tmp);
	free(tmp);
	return (-1);
}

/* Write all n bytes of data to fd and sync it; -1 with errno. */
static int
envhost_put(int fd, const char *data, size_t n)
{
	ssize_t	w = 0;
	size_t	done = 0;

	while (done < n && (w = write(fd, data + done, n - done)) > 0)
		done += (size_t)w;
	if (done < n) {
		if (w >= 0)
			errno = EIO;
		return (-1);
	}
	return (fsync(fd));
}

/* Write path over itself (it cannot be renamed over); -1 with errno. */
static int
envhost_write_inplace(const char *path, const char *data, size_t n)
{
	int	fd, e;

	if ((fd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC)) ==
	    -1)
		return (-1);
	if (envhost_put(fd, data, n) == -1) {
		e = errno;
		close(fd);
		errno = e;
		return (-1);
	}
	return (close(fd));
}

/* Take every copy of what out of s. */
static void
envhost_cut(char *s, const char *what)
{
	size_t	 n = strlen(what);
	char	*p;

	while (n > 0 && (p = strstr(s, what)) != NULL)
		memmove(p, p + n, strlen(p + n) + 1);
}

/* The CA bundle into the trust store, the previous one out. */
int
envhost_ca_install(const char *pem, const char *prev, char **out,
    char *cause, size_t len)
{
	char	*norm, *bundle, *all;
	size_t	 n = strlen(pem);
	int	 rc;

	while (n > 0 && pem[n - 1] == '\n')
		n--;
	xasprintf(&norm, "%.*s\n", (int)n, pem);
	*out = norm;
	if (prev != NULL && strcmp(prev, norm) == 0)
		return (0);
	if ((bundle = envhost_read(ENVHOST_CA_BUNDLE, cause, len)) == NULL)
		return (-1);
	if (prev != NULL)
		envhost_cut(bundle, prev);
	envhost_cut(bundle, norm);
	n = strlen(bundle);
	xasprintf(&all, "%s%s%s", bundle, n > 0 && bundle[n - 1] != '\n' ?
	    "\n" : "", norm);
	free(bundle);
	rc = envhost_write(ENVHOST_CA_BUNDLE, all, strlen(all), cause, len);
	free(all);
	if (rc == 0)
		rc = envhost_write(ENVHOST_CA_EXTRA, norm, strlen(norm), cause,
		    len);
	return (rc);
}

/* events.e2b.local at ip in /etc/hosts. */
int
envhost_hosts_set(const char *ip, char *cause, size_t len)
{
	char	*old, *line, *next, *hash, *tok, *sv, *keep, *out = NULL;
	size_t	 n = 0, cap = 0;
	int	 rc, hit, names;
	FILE	*f;

	if ((old = envhost_read(ENVHOST_HOSTS, cause, len)) == NULL)
		return (-1);
	if ((f = open_memstream(&out, &cap)) == NULL)
		fatal("%s: out of memory", __func__);
	for (line = old; *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		else
			next = line + strlen(line);
		hash = strchr(line, '#');
		keep = xstrdup(line);
		if (hash != NULL)
			keep[hash - line] = '\0';
		hit = names = 0;
		for (tok = strtok_r(keep, " \t", &sv); tok != NULL;
		    tok = strtok_r(NULL, " \t", &sv)) {
			if (tok != keep && strcasecmp(tok,
			    ENVHOST_EVENTS_HOST) == 0)
				hit = 1;
			else if (tok != keep)
				names++;
		}
		free(keep);
		if (!hit) {
			fprintf(f, "%s\n", line);
			continue;
		}
		if (names == 0)
			continue;	/* its only name: the line goes */
		keep = xstrdup(line);	/* the others stay, the comment too */
		tok = strtok_r(keep, " \t", &sv);
		fprintf(f, "%s", tok);
		while ((tok = strtok_r(NULL, " \t", &sv)) != NULL) {
			if (*tok == '#') {
				fprintf(f, " %s", tok);
				hash = keep;	/* past the comment: all stays */
			} else if (hash == keep ||
			    strcasecmp(tok, ENVHOST_EVENTS_HOST) != 0)
				fprintf(f, " %s", tok);
		}
		fputc('\n', f);
		free(keep);
	}
	fprintf(f, "%s\t%s\n", ip, ENVHOST_EVENTS_HOST);
	if (fclose(f) != 0)
		fatal("%s: out of memory", __func__);
	n = strlen(out);
	rc = 0;
	if (strcmp(out, old) != 0)
		rc = envhost_write(ENVHOST_HOSTS, out, n, cause, len);
	free(out);
	free(old);
	return (rc);
}

/* Step the clock to ns when it is out of envd's bounds. */
int
envhost_clock_set(int64_t ns, char *cause, size_t len)
{
	struct timespec	ts;
	int64_t		now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (now >= ns - ENVHOST_PAST_NS && now <= ns + ENVHOST_FUTURE_NS)
		return (0);
	ts.tv_sec = ns / 1000000000;
	ts.tv_nsec = ns % 1000000000;
	if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += 1000000000;
	}
	if (clock_settime(CLOCK_REALTIME, &ts) == -1) {
		cause_set(cause, len, "clock_settime: %s", strerror(errno));
		return (-1);
	}
	return (1);
}
