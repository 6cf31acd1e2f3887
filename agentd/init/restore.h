/*
 * restore.h -- the VM was snapshotted and restored (or paused and resumed):
 * seeing it, fixing up the clock and the RNG, letting go of connections
 * whose peers are gone, and counting generations.
 *
 * A restore is seen by agentd itself (vmgenid's NEW_VMGENID uevent, Linux
 * 6.8 and later; /dev/rtc0 moving away from CLOCK_REALTIME, checked every
 * --rtc-interval) or reported by the platform (restore_resumed(), POST
 * /v1/sandbox/resumed).  Signals within --restore-window of running time
 * (CLOCK_MONOTONIC, which stands still while the VM is stopped) of the
 * first are that one restore: generation grows once.
 *
 * On a restore: CLOCK_REALTIME is stepped (to unix_ms when given, else by
 * the RTC's move, unless --clock-step 0), the entropy given is fed to the
 * kernel (RNDADDENTROPY) and the kernel's CRNG reseeded (RNDRESEEDCRNG),
 * and the TCP connections from before get keepalive probes for a while
 * (conn_probe()): under a new VMM process their peers are gone, and the
 * first probe is answered by a reset.
 *
 * Event loop thread only.
 */
#ifndef AGENTD_RESTORE_H
#define AGENTD_RESTORE_H

#include <stddef.h>
#include <stdint.h>

struct config;
struct event_base;
struct proto_buf;

#define RESTORE_PROBE_COUNT	3	/* keepalive probes unanswered: gone */
#define RESTORE_ERROR_MAX	128	/* bytes of a restore_result's error */

/* What one restore (or one report of it) did. */
struct restore_result {
	uint64_t	 generation;	/* after it */
	int		 same;		/* within the window of one seen before */
	const char	*by;		/* "vmgenid", "rtc", "platform" */
	const char	*clock;		/* "unix_ms", "rtc", "none" */
	int64_t		 clock_step_ms;	/* > 0: the clock moved forward */
	char		 clock_error[RESTORE_ERROR_MAX]; /* "": none */
	size_t		 entropy_bytes;	/* fed to the kernel */
	char		 entropy_error[RESTORE_ERROR_MAX]; /* "": none */
	size_t		 probed;	/* connections given keepalive */
};

/*
 * Start seeing restores on base with cfg's settings (cfg outlives it): the
 * uevent socket and the RTC timer, each when the machine has it (logged at
 * debug when not).  Never fails.
 */
void	 restore_start(struct event_base *, const struct config *);
/* Stop and free everything (after the loop). */
void	 restore_free(void);

/* Restores counted since the start (0: none). */
uint64_t restore_generation(void);
/* Set it (an upgrade hands it over to the successor). */
void	 restore_generation_set(uint64_t);

/*
 * The platform reports a restore: unix_ms (-1: not given) and entropy (len
 * 0: none; the caller's, not kept).  Fills r; failures to step the clock or
 * to feed the RNG are in r's errors (the restore still counts).
 */
void	 restore_resumed(int64_t unix_ms, const uint8_t *entropy, size_t len,
	    struct restore_result *r);

/* Append agentd_generation to a /metrics answer. */
void	 restore_metrics(struct proto_buf *);

#endif /* AGENTD_RESTORE_H */
