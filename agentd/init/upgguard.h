/*
 * upgguard.h -- a live upgrade's way back: the old binary is kept until its
 * successor has taken the state over, and run again if the successor
 * cannot (upgrade.h).
 *
 * The old agentd, just before its execve, opens its own image
 * (/proc/self/exe: the running binary, whatever the path names now) and
 * writes a record to a memfd: that fd, the state's fd, its argv and
 * environment, the fds the state names, and --upgrade-ready-timeout.
 * UPGGUARD_ENV names the record.
 *
 * The successor arms the guard first thing in main() (upgguard_arm): a
 * crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP), an
 * exit(), a fatal(), or no take-over within the timeout (SIGALRM) before
 * upgguard_disarm() makes it roll back: the named fds lose FD_CLOEXEC
 * again, the signal mask is the one it started with, and the old image is
 * fexecve'd with its own argv and environment, the same state and
 * UPGGUARD_BACK_ENV saying why.  That agentd resumes from the state as an
 * upgrade's successor would, counts a failure, not an upgrade, and arms
 * nothing.  Everything a rollback runs was prepared at upgguard_arm():
 * the handlers call only async-signal-safe functions.
 *
 * Not covered: a successor that is not built from this source (it knows
 * no guard), a SIGKILL, and a crash before main().  The state's sessions
 * whose fds a failed successor closed (a session it dropped) are lost.
 */
#ifndef AGENTD_UPGGUARD_H
#define AGENTD_UPGGUARD_H

#include <stddef.h>
#include <stdint.h>

#define UPGGUARD_ENV		"AGENTD_UPGRADE_ROLLBACK"	/* the record */
#define UPGGUARD_BACK_ENV	"AGENTD_UPGRADE_ROLLED_BACK"	/* why */
#define UPGGUARD_MAGIC		"agentd-rollback 1"
#define UPGGUARD_RECORD_MAX	(16u << 20)	/* bytes of a record read */
#define UPGGUARD_WHY_MAX	128		/* bytes of the reason */

/*
 * The old agentd, before its execve: write the record of argv, the
 * environment, statefd, the nkeep fds of keep, and ready_ms.  Returns 0
 * with *imagefd and *recfd (O_CLOEXEC: the caller clears it for the
 * execve, and closes both if the execve fails), or -1 with cause.
 */
int	 upgguard_record(char **argv, int statefd, const int *keep,
	    size_t nkeep, int64_t ready_ms, int *imagefd, int *recfd,
	    char *cause, size_t causelen);
/*
 * First thing in main(): with UPGGUARD_ENV set, read the record and arm
 * (a record that cannot be read is logged: no guard); with
 * UPGGUARD_BACK_ENV set, keep the reason (upgguard_rolled_back()).  Both
 * are taken out of the environment.
 */
void	 upgguard_arm(void);
/* The state is taken over, or refused: disarm, close the old image. */
void	 upgguard_disarm(void);
/* A fatal path: roll back now when armed (returns when not, or failed). */
void	 upgguard_fire(const char *why);
/* After a rollback, why the successor failed; NULL otherwise. */
const char *upgguard_rolled_back(void);

#endif /* AGENTD_UPGGUARD_H */
