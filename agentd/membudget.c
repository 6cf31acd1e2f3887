/*
 * membudget.c -- budgets that fit the machine (see membudget.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "membudget.h"

#define MEMBUDGET_FILE_MAX	65536	/* bytes of a file read */
#define MEMBUDGET_LIMIT_MAX	64	/* bytes of a limit file read */

static int	 membudget_read(const char *path, char *buf, size_t size);
static uint64_t	 membudget_walk(const char *mnt, const char *path,
		    const char *file);

/* A share of mem, between the floor and cap. */
uint64_t
membudget_share(uint64_t mem, unsigned share, uint64_t cap)
{
	uint64_t	n;

	if (mem == 0 || share == 0)
		return (cap);
	n = mem / share;
	if (n < MEMBUDGET_FLOOR)
		n = MEMBUDGET_FLOOR;
	return (n < cap ? n : cap);
}

/* MemTotal in bytes. */
uint64_t
membudget_meminfo(const char *text)
{
	const char		*p;
	unsigned long long	 kb;

	if (text == NULL)
		return (0);
	for (p = text; p != NULL && *p != '\0'; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (sscanf(p, "MemTotal: %llu kB", &kb) == 1)
			return ((uint64_t)kb * 1024);
	}
	return (0);
}

/* A limit file's bytes; 0 for "max", nonsense or none. */
uint64_t
membudget_limit(const char *text)
{
	unsigned long long	 n;
	char			*end;

	if (text == NULL || *text < '0' || *text > '9')
		return (0);
	errno = 0;
	n = strtoull(text, &end, 10);
	if (errno != 0 || (*end != '\0' && *end != '\n'))
		return (0);
	return ((uint64_t)n);
}

/* The v2 or v1 memory cgroup path of /proc/self/cgroup. */
int
membudget_cgroup_path(const char *text, int v1, char *out, size_t outlen)
{
	const char	*line, *c1, *c2, *end, *ctl;
	size_t		 len;

	for (line = text; line != NULL && *line != '\0'; line = end) {
		end = strchr(line, '\n');
		len = end != NULL ? (size_t)(end - line) : strlen(line);
		if (end != NULL)
			end++;
		if ((c1 = memchr(line, ':', len)) == NULL ||
		    (c2 = memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line))) ==
		    NULL)
			continue;
		if (!v1) {
			if (c1 - line != 1 || line[0] != '0' || c2 != c1 + 1)
				continue;
		} else {
			/* The controllers, comma-separated: memory among them. */
			for (ctl = c1 + 1; ctl < c2; ctl += strcspn(ctl, ",:") + 1) {
				if ((size_t)(c2 - ctl) >= 6 &&
				    strncmp(ctl, "memory", 6) == 0 &&
				    (ctl[6] == ',' || ctl[6] == ':'))
					break;
			}
			if (ctl >= c2)
				continue;
		}
		len -= (size_t)(c2 + 1 - line);
		if (len == 0 || c2[1] != '/' || len >= outlen)
			return (-1);
		memcpy(out, c2 + 1, len);
		out[len] = '\0';
		return (0);
	}
	return (-1);
}

/* The cgroup2 (or v1 memory) mount point of /proc/self/mountinfo. */
int
membudget_mount(const char *text, int v1, char *out, size_t outlen)
{
	const char	*line, *end, *sep;
	char		 mnt[4096], fstype[64], opts[1024];
	size_t		 len;

	for (line = text; line != NULL && *line != '\0'; line = end) {
		end = strchr(line, '\n');
		len = end != NULL ? (size_t)(end - line) : strlen(line);
		if (end != NULL)
			end++;
		/* id parent maj:min root MOUNT opts [optional...] - TYPE SRC SUPER */
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		if ((sep = strstr(line, " - ")) == NULL || sep > line + len)
			continue;
		opts[0] = '\0';
		if (sscanf(sep + 3, "%63s %*s %1023s", fstype, opts) < 1)
			continue;
		if (!v1 ? strcmp(fstype, "cgroup2") != 0 :
		    strcmp(fstype, "cgroup") != 0 || (strstr(opts, ",memory") ==
		    NULL && strncmp(opts, "memory", 6) != 0))
			continue;
		if (strlen(mnt) >= outlen)
			return (-1);
		strcpy(out, mnt);
		return (0);
	}
	return (-1);
}

/* A small file's text into buf (NUL-terminated, cut at size - 1).  0 or -1. */
static int
membudget_read(const char *path, char *buf, size_t size)
{
	ssize_t	 n;
	size_t	 len = 0;
	int	 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (-1);
	while (len < size - 1 &&
	    (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return (0);
}

/*
 * The smallest limit of file in path's cgroup and those above it under
 * mount mnt, or 0 for none.
 */
static uint64_t
membudget_walk(const char *mnt, const char *path, const char *file)
{
	char		 dir[4096], full[8300], *slash;
	char		 text[MEMBUDGET_LIMIT_MAX];
	uint64_t	 min = 0, v;
	int		 depth;

	if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
		return (0);
	for (depth = 0; depth < MEMBUDGET_DEPTH; depth++) {
		snprintf(full, sizeof full, "%s%s/%s", mnt,
		    strcmp(dir, "/") == 0 ? "" : dir, file);
		if (membudget_read(full, text, sizeof text) == 0) {
			v = membudget_limit(text);
			if (v > 0 && (min == 0 || v < min))
				min = v;
		}
		if (strcmp(dir, "/") == 0 || (slash = strrchr(dir, '/')) == NULL)
			break;
		if (slash == dir)
			dir[1] = '\0';
		else
			*slash = '\0';
	}
	return (min);
}

/*
 * The memory agentd may use.  One buffer for the files read whole (the
 * cgroup paths are taken from /proc/self/cgroup before /proc/self/mountinfo
 * takes its place): a start reads them once, and each malloc of it costs
 * an mmap and its page faults with musl.
 */
uint64_t
membudget_memory(void)
{
	char		*buf, mnt[4096], path[2][4096];
	uint64_t	 mem = 0, lim;
	int		 v1, have[2] = { 0, 0 };

	if ((buf = malloc(MEMBUDGET_FILE_MAX)) == NULL)
		return (0);
	if (membudget_read("/proc/meminfo", buf, MEMBUDGET_FILE_MAX) == 0)
		mem = membudget_meminfo(buf);
	if (membudget_read("/proc/self/cgroup", buf, MEMBUDGET_FILE_MAX) == 0) {
		for (v1 = 0; v1 <= 1; v1++)
			have[v1] = membudget_cgroup_path(buf, v1, path[v1],
			    sizeof path[v1]) == 0;
	}
	if ((have[0] || have[1]) && membudget_read("/proc/self/mountinfo", buf,
	    MEMBUDGET_FILE_MAX) == 0) {
		for (v1 = 0; v1 <= 1; v1++) {
			if (!have[v1] || membudget_mount(buf, v1, mnt,
			    sizeof mnt) != 0)
				continue;
			lim = membudget_walk(mnt, path[v1], v1 ?
			    "memory.limit_in_bytes" : "memory.max");
			/* v1's "none" is a huge number: a real one counts. */
			if (lim > 0 && (mem == 0 || lim < mem))
				mem = lim;
		}
	}
	free(buf);
	return (mem);
}

/* Fit the budgets not given to the machine. */
void
membudget_apply(struct config *cfg)
{
	uint64_t	mem;

	if (cfg->fit == 0)
		return;
	mem = membudget_memory();
	cfg->fit_memory = mem;
	if (cfg->fit & CONFIG_FIT_ANSWERS)
		cfg->max_answer_bytes = membudget_share(mem,
		    MEMBUDGET_ANSWERS_SHARE, CONFIG_MAX_ANSWER_BYTES_DEFAULT);
	if (cfg->fit & CONFIG_FIT_RINGS)
		cfg->max_total_ring_bytes = membudget_share(mem,
		    MEMBUDGET_RINGS_SHARE, CONFIG_MAX_TOTAL_RING_DEFAULT);
	if (cfg->fit & CONFIG_FIT_SESSION)
		cfg->max_session_bytes = membudget_share(mem,
		    MEMBUDGET_SESSION_SHARE, CONFIG_MAX_SESSION_BYTES_DEFAULT);
	log_debug("%s: %" PRIu64 " bytes of memory: answers %" PRIu64
	    ", rings %" PRIu64 ", session bytes %" PRIu64, __func__, mem,
	    cfg->max_answer_bytes, cfg->max_total_ring_bytes,
	    cfg->max_session_bytes);
}
