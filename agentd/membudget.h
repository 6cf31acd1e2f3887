/*
 * membudget.h -- budgets that fit the machine: the memory agentd may use
 * (MemTotal, or less: the memory.max of agentd's cgroup or of one above
 * it, cgroup v2, or the v1 memory controller's memory.limit_in_bytes, read
 * only), and the shares of it that --max-answer-bytes,
 * --max-total-ring-bytes and --max-session-bytes default to when not
 * given: answers 1/8, rings 1/4, session bytes 1/16, each at most its
 * fixed default.
 *
 * The parsers and the share are pure functions, for the unit tests.
 */
#ifndef AGENTD_MEMBUDGET_H
#define AGENTD_MEMBUDGET_H

#include <stddef.h>
#include <stdint.h>

struct config;

#define MEMBUDGET_ANSWERS_SHARE	8	/* --max-answer-bytes: 1/8 */
#define MEMBUDGET_RINGS_SHARE	4	/* --max-total-ring-bytes: 1/4 */
#define MEMBUDGET_SESSION_SHARE	16	/* --max-session-bytes: 1/16 */
#define MEMBUDGET_FLOOR		(1u << 20) /* bytes: no budget below */
#define MEMBUDGET_DEPTH		64	/* cgroup levels looked at */

/* mem / share, at least MEMBUDGET_FLOOR, at most cap (mem 0: cap). */
uint64_t membudget_share(uint64_t mem, unsigned share, uint64_t cap);

/* MemTotal of /proc/meminfo's text in bytes, or 0. */
uint64_t membudget_meminfo(const char *text);
/* A memory.max or memory.limit_in_bytes: the bytes, or 0 for "max". */
uint64_t membudget_limit(const char *text);
/*
 * The cgroup path of /proc/self/cgroup's text: of the v2 hierarchy
 * ("0::/path") when v1 is 0, else of the v1 memory controller
 * ("N:...memory...:/path"), into out; 0, or -1 when it has none.
 */
int	 membudget_cgroup_path(const char *text, int v1, char *out,
	    size_t outlen);
/*
 * The mount point of /proc/self/mountinfo's text: of cgroup2 when v1 is
 * 0, else of the v1 cgroup with the memory controller, into out; 0 or -1.
 */
int	 membudget_mount(const char *text, int v1, char *out, size_t outlen);

/* The memory agentd may use, in bytes (0: unknown). */
uint64_t membudget_memory(void);

/*
 * Set the budgets of cfg that were not given (cfg->fit) to their shares
 * of membudget_memory(), and cfg->fit_memory to it.
 */
void	 membudget_apply(struct config *cfg);

#endif /* AGENTD_MEMBUDGET_H */
