/*
 * sysmetrics.c -- envd's GET /metrics (see sysmetrics.h).
 */
#include <sys/statvfs.h>
#include <sys/types.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "sysmetrics.h"
#include "util.h"

#define SYSMETRICS_FILE_MAX	(256 << 10)	/* bytes of a /proc file read */

static char	*sysmetrics_read(const char *path);

/*
 * /proc/stat's "cpu" line: user nice system idle iowait irq softirq steal
 * guest guest_nice.  The kernel counts guest time in user and nice too, so
 * gopsutil takes it out of the total; busy is what is neither idle nor
 * iowait.
 */
int
sysmetrics_parse_stat(const char *text, struct sysmetrics_cpu *c)
{
	unsigned long long	 v[10] = { 0 };
	const char		*p;
	int			 i, n;

	memset(c, 0, sizeof *c);
	if (strncmp(text, "cpu ", 4) != 0)
		return (-1);
	n = sscanf(text + 4, "%llu %llu %llu %llu %llu %llu %llu %llu %llu "
	    "%llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
	    &v[8], &v[9]);
	if (n < 4)
		return (-1);
	for (i = 0; i < 8; i++)
		c->total += v[i];
	c->busy = c->total - v[3] - v[4];
	for (p = strchr(text, '\n'); p != NULL; p = strchr(p + 1, '\n')) {
		if (strncmp(p + 1, "cpu", 3) == 0 && p[4] >= '0' && p[4] <= '9')
			c->count++;
	}
	return (0);
}

/* A meminfo value in bytes ("Name:   123 kB"), or 0 with *found clear. */
static uint64_t
sysmetrics_field(const char *text, const char *name, int *found)
{
	const char		*p;
	size_t			 len = strlen(name);
	unsigned long long	 kb;

	for (p = text; p != NULL; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncmp(p, name, len) == 0 && p[len] == ':' &&
		    sscanf(p + len + 1, "%llu", &kb) == 1) {
			*found = 1;
			return ((uint64_t)kb * 1024);
		}
	}
	*found = 0;
	return (0);
}

/*
 * gopsutil's VirtualMemory: used is total less MemAvailable (before Linux
 * 3.14, less cache and free), cache is Cached with SReclaimable.
 */
int
sysmetrics_parse_meminfo(const char *text, struct sysmetrics_mem *m)
{
	uint64_t	avail, free_;
	int		found, has_avail;

	memset(m, 0, sizeof *m);
	m->total = sysmetrics_field(text, "MemTotal", &found);
	if (!found)
		return (-1);
	m->cache = sysmetrics_field(text, "Cached", &found) +
	    sysmetrics_field(text, "SReclaimable", &found);
	free_ = sysmetrics_field(text, "MemFree", &found);
	avail = sysmetrics_field(text, "MemAvailable", &has_avail);
	if (!has_avail)
		avail = m->cache + free_;
	m->used = avail < m->total ? m->total - avail : 0;
	return (0);
}

/* gopsutil's calculateBusy, rounded as envd's GetMetrics rounds it. */
double
sysmetrics_cpu_pct(const struct sysmetrics_cpu *before,
    const struct sysmetrics_cpu *now)
{
	double	pct;

	if (now->busy <= before->busy)
		return (0);
	if (now->total <= before->total)
		return (100);
	pct = (double)(now->busy - before->busy) /
	    (double)(now->total - before->total) * 100;
	if (pct > 100)
		pct = 100;
	return ((double)(uint64_t)(pct * 100 + 0.5) / 100);
}

/* A small /proc file, NUL-terminated; NULL if it cannot be read. */
static char *
sysmetrics_read(const char *path)
{
	char	*buf;
	size_t	 n;
	int	 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (NULL);
	buf = xmalloc(SYSMETRICS_FILE_MAX);
	n = fd_read_full(fd, buf, SYSMETRICS_FILE_MAX - 1);
	close(fd);
	buf[n] = '\0';
	return (buf);
}

/*
 * envd's Metrics as JSON into out, cpu_used_pct since *last (then set to
 * now).  -1 if /proc/stat, /proc/meminfo or statvfs("/") fails.
 */
int
sysmetrics_render(struct sysmetrics_cpu *last, struct proto_buf *out)
{
	struct sysmetrics_cpu	 cpu;
	struct sysmetrics_mem	 mem;
	struct statvfs		 vfs;
	char			*st, *mi, pct[32], *end;
	uint64_t		 total, avail;
	int			 ok;

	st = sysmetrics_read("/proc/stat");
	mi = sysmetrics_read("/proc/meminfo");
	ok = st != NULL && mi != NULL && sysmetrics_parse_stat(st, &cpu) == 0 &&
	    sysmetrics_parse_meminfo(mi, &mem) == 0 && statvfs("/", &vfs) == 0;
	free(st);
	free(mi);
	if (!ok)
		return (-1);
	/* Go prints a float32 in its shortest form: 12.5, 0, 100. */
	snprintf(pct, sizeof pct, "%.2f", sysmetrics_cpu_pct(last, &cpu));
	end = pct + strlen(pct);
	while (end[-1] == '0')
		*--end = '\0';
	if (end[-1] == '.')
		end[-1] = '\0';
	*last = cpu;
	total = (uint64_t)vfs.f_blocks * vfs.f_bsize;
	avail = (uint64_t)vfs.f_bavail * vfs.f_bsize;
	proto_buf_printf(out, "{\"ts\":%lld,\"cpu_count\":%u,"
	    "\"cpu_used_pct\":%s,\"mem_total_mib\":%" PRIu64 ","
	    "\"mem_used_mib\":%" PRIu64 ",\"mem_total\":%" PRIu64 ","
	    "\"mem_used\":%" PRIu64 ",\"mem_cache\":%" PRIu64 ","
	    "\"disk_used\":%" PRIu64 ",\"disk_total\":%" PRIu64 "}\n",
	    (long long)time(NULL), cpu.count, pct, mem.total >> 20,
	    mem.used >> 20, mem.total, mem.used, mem.cache, total - avail, total);
	return (0);
}
