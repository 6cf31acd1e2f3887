/*
 * sysmetrics.h -- envd's GET /metrics: the sandbox's CPU, memory and disk as
 * envd reports them to E2B's orchestrator (its JSON Metrics: ts, cpu_count,
 * cpu_used_pct, mem_total_mib, mem_used_mib, mem_total, mem_used,
 * mem_cache, disk_used, disk_total), computed with gopsutil's formulas from
 * /proc/stat, /proc/meminfo and statvfs("/").  A leaf: envd.c serves it.
 * agentd's own Prometheus /metrics stays on its API listeners.
 */
#ifndef AGENTD_SYSMETRICS_H
#define AGENTD_SYSMETRICS_H

#include <stddef.h>
#include <stdint.h>

struct proto_buf;

/* One reading of /proc/stat's "cpu" line, in clock ticks. */
struct sysmetrics_cpu {
	uint64_t	total;		/* all fields but guest and guest_nice */
	uint64_t	busy;		/* total less idle and iowait */
	unsigned	count;		/* the "cpuN" lines: online CPUs */
};

/* What /proc/meminfo gives, in bytes (gopsutil's VirtualMemory). */
struct sysmetrics_mem {
	uint64_t	total;		/* MemTotal */
	uint64_t	used;		/* MemTotal - MemAvailable */
	uint64_t	cache;		/* Cached + SReclaimable */
};

/* Parse /proc/stat's text into c; -1 if it has no "cpu " line. */
int	sysmetrics_parse_stat(const char *text, struct sysmetrics_cpu *c);
/* Parse /proc/meminfo's text into m; -1 without MemTotal. */
int	sysmetrics_parse_meminfo(const char *text, struct sysmetrics_mem *m);
/*
 * The busy share between two readings in percent, 0..100, rounded to two
 * decimals as envd rounds it; 0 when nothing ran.
 */
double	sysmetrics_cpu_pct(const struct sysmetrics_cpu *before,
	    const struct sysmetrics_cpu *now);
/*
 * envd's Metrics as one JSON line appended to out, cpu_used_pct since *last
 * (zeroes: since boot), which is then set to this reading.  -1 if
 * /proc/stat, /proc/meminfo or statvfs("/") fails, and nothing appended.
 */
int	sysmetrics_render(struct sysmetrics_cpu *last, struct proto_buf *out);

#endif /* AGENTD_SYSMETRICS_H */
