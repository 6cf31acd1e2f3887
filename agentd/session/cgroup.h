/*
 * cgroup.h -- containment of sessions in cgroup v2: one cgroup per session,
 * its limits, its kill, its OOM and usage; agentd's own protection.
 *
 * The layout, under R, the cgroup agentd finds itself in (/proc/self/cgroup)
 * on the cgroup2 mount at /sys/fs/cgroup (the root as PID 1 of a VM, a
 * delegated subtree in a container), or its parent when that cgroup is
 * named "agentd" (an agentd a live upgrade execve'd is in R/agentd):
 *
 *	R/agentd/	agentd itself, moved there first: a leaf, since a
 *			cgroup with controllers in its subtree_control may
 *			hold no process ("no internal processes");
 *			memory.min and a high cpu.weight
 *	R/sessions/	the sessions' parent: +memory +pids +cpu in its
 *			subtree_control (and in R's)
 *	R/sessions/<n>	one session, n a counter: memory.max (and
 *			memory.swap.max 0), pids.max, cpu.max
 *
 * cgroup_init() refuses anything but a pure cgroup v2 hierarchy agentd may
 * write: /sys/fs/cgroup not cgroup2, a v1 hierarchy in /proc/self/cgroup,
 * or no write access mean containment "process_group" (session.h's process
 * groups, today's behaviour), logged once.  It never writes a cgroup before
 * those checks passed.
 *
 * Everything here runs on the event loop's thread, cgroup_session_fd()'s
 * fd is read by the spawner thread while the loop waits for it.  Functions
 * return 0 or -errno, with a cause where a user should read one.
 */
#ifndef AGENTD_CGROUP_H
#define AGENTD_CGROUP_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#define CGROUP_MOUNT		"/sys/fs/cgroup"
#define CGROUP_SELF_MIN_DEFAULT	(16u << 20)	/* bytes, agentd's memory.min */
#define CGROUP_SELF_WEIGHT_DEFAULT 1000		/* agentd's cpu.weight (the
						   sessions' parent keeps 100) */
#define CGROUP_CPU_PERIOD_US	100000		/* cpu.max's period */
#define CGROUP_MEMORY_MIN_LIMIT	(1u << 20)	/* bytes, smallest memory_bytes */
#define CGROUP_WAIT_EMPTY_MS	2000		/* bound of cgroup_wait_empty()
						   at shutdown */

/* The controllers agentd uses, as bits of cgroup_controllers(). */
#define CGROUP_CTRL_MEMORY	0x1
#define CGROUP_CTRL_PIDS	0x2
#define CGROUP_CTRL_CPU		0x4

struct cgroup;		/* one session's */

/* What cgroup_init() sets up. */
struct cgroup_config {
	const char	*mount;		/* CGROUP_MOUNT; tests give a tmpdir */
	uint64_t	 self_memory_min;	/* bytes, agentd's memory.min */
	uint64_t	 self_cpu_weight;	/* 1..10000, agentd's cpu.weight */
};

/* A session's limits; 0: none. */
struct cgroup_limits {
	uint64_t	 memory_bytes;	/* memory.max, memory.swap.max 0 */
	uint64_t	 pids;		/* pids.max */
	uint64_t	 cpu_percent;	/* cpu.max: 100 is one CPU */
};

/* A session's accounting; -1 where the kernel lacks the file. */
struct cgroup_usage {
	int64_t		 cpu_ms;		/* cpu.stat usage_usec / 1000 */
	int64_t		 memory_peak_bytes;	/* memory.peak */
	int64_t		 pids_peak;		/* pids.peak */
	int64_t		 oom_kills;		/* memory.events oom_kill */
};

/*
 * Detect a writable cgroup v2 hierarchy and set the layout up (above), and
 * set agentd's oom_score_adj to -1000 whatever the containment.  Returns 1
 * with containment "cgroup", 0 with "process_group" (the reason logged
 * once).  Call it once, before any session.
 */
int	 cgroup_init(const struct cgroup_config *);
/* Whether sessions get cgroups: cgroup_init() returned 1. */
int	 cgroup_enabled(void);
/* "cgroup" or "process_group". */
const char *cgroup_containment(void);
/* The controllers enabled for sessions (CGROUP_CTRL_* bits). */
unsigned cgroup_controllers(void);

/*
 * The name of the first limit of l that this hierarchy cannot apply
 * ("memory_bytes", "pids", "cpu_percent"), or NULL when all can be.
 */
const char *cgroup_limit_unavailable(const struct cgroup_limits *l);

/*
 * Make a session's cgroup with limits l.  Returns 0 with *out, or -errno
 * with a cause ("mkdir ...: ..."); *limit names the limit whose file could
 * not be written (else NULL).
 */
int	 cgroup_session_new(const struct cgroup_limits *l, struct cgroup **out,
	    const char **limit, char *cause, size_t causelen);
/* The cgroup's directory fd (O_RDONLY | O_DIRECTORY) for the spawn. */
int	 cgroup_session_fd(const struct cgroup *);
/*
 * Take over the cgroup name (under the sessions' parent) whose directory
 * fd an agentd handed over on an upgrade; its limits are in its files.
 * NULL without containment "cgroup" or for a bad name (fd not taken).
 */
struct cgroup *cgroup_session_adopt(const char *name, int fd);
/* Its name under the sessions' parent, for logs. */
const char *cgroup_session_name(const struct cgroup *);
/*
 * The name (cgroup_session_name()) of the session cgroup pid is in, a
 * cgroup below it too: 0 and name, -ENOENT when none (or no containment
 * "cgroup"), or -errno.  Reads /proc/PID/cgroup.
 */
int	 cgroup_of_pid(pid_t pid, char *name, size_t len);
/*
 * Send sig to every process of the cgroup.  SIGKILL writes cgroup.kill
 * (Linux 5.14), else signals each pid of cgroup.procs, frozen first where
 * cgroup.freeze exists, until none is left (bounded).  Other signals go to
 * each pid through a pidfd, checked to be still in the cgroup after the
 * pidfd was opened (so a reused pid is never signalled).  Returns the
 * processes it reached (1 for cgroup.kill on a populated cgroup) or
 * -errno.
 */
int	 cgroup_session_signal(struct cgroup *, int sig);
/* 1 while the cgroup has a live process (cgroup.events), 0, or -errno. */
int	 cgroup_session_populated(struct cgroup *);
/* Wait, at most ms, until the cgroup is empty (inotify on cgroup.events);
   returns 0 once empty, -ETIMEDOUT, or -errno. */
int	 cgroup_session_wait_empty(struct cgroup *, int ms);
/* Read the accounting into *u. */
void	 cgroup_session_usage(struct cgroup *, struct cgroup_usage *u);
/* Remove the cgroup (if it is empty; else it is left, logged) and free. */
void	 cgroup_session_free(struct cgroup *);
/* Remove the cgroup and free it, unless a process is in it: 0 (another
   failure is logged), or -EBUSY with nothing done. */
int	 cgroup_session_remove(struct cgroup *);

/*
 * Pure logic, shared with the unit tests.
 * cgroup_parse_self: the v2 path of a /proc/PID/cgroup text ("0::/a/b"),
 * -EINVAL when any other line (a v1 hierarchy) is present or none is.
 * cgroup_parse_key: the value of "key N" in a flat-keyed file (cgroup.events,
 * memory.events, cpu.stat), -ENOENT when absent.
 * cgroup_parse_controllers: CGROUP_CTRL_* bits of a cgroup.controllers text.
 * cgroup_cpu_max: cpu.max's text for a cpu_percent ("150000 100000").
 */
int	 cgroup_parse_self(const char *text, char *path, size_t pathlen);
int	 cgroup_parse_key(const char *text, const char *key, uint64_t *val);
unsigned cgroup_parse_controllers(const char *text);
void	 cgroup_cpu_max(uint64_t percent, char *buf, size_t len);

#endif /* AGENTD_CGROUP_H */
