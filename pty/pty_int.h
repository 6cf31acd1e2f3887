/*
 * pty_int.h -- what the files of pty/ share (pty.c, the parent's side of a
 * spawn; child.c, the child's; user.c; kill.c): the child's arguments and
 * report, the fds of a spawn.  Private: nobody else includes it (pty.h is
 * the contract).  Made by split.py from pty.c's top.
 */
#ifndef PTY_INT_H
#define PTY_INT_H

#include <sys/types.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pty.h"

#define PTY_OOM_PATH		"/proc/self/oom_score_adj"

/* The step of the child that failed. */
enum child_stage {
	STAGE_SIGNALS = 1,
	STAGE_SETSID,
	STAGE_FDS,
	STAGE_TTY_OPEN,
	STAGE_TTY_CTTY,
	STAGE_TTY_CHOWN,
	STAGE_DUP,
	STAGE_CLOSE,
	STAGE_SETGROUPS,
	STAGE_SETGID,
	STAGE_SETUID,
	STAGE_CWD,
	STAGE_EXEC,
	STAGE_CGROUP,
	STAGE_OOM,
};

/* What a failing child writes to the report pipe (well under PIPE_BUF). */
struct child_report {
	int	stage;
	int	err;
};

/* The fds of one spawn while it is being set up; -1 where there is none. */
struct spawn_fds {
	int	master;		/* parent: PTY master */
	int	in_r, in_w;	/* stdin pipe, or in_r is /dev/null */
	int	out_r, out_w;	/* stdout pipe */
	int	err_r, err_w;	/* stderr pipe */
	int	rep_r, rep_w;	/* report pipe */
};

/* What the child of a spawn reads; it stays in the parent's frame. */
struct child_args {
	const struct pty_spec	*spec;
	struct spawn_fds	 f;	/* the child's copy */
	const char		*slave;	/* tty: the slave's path */
	const char		*path;	/* the PATH of spec->envp */
	int			 procs;	/* cgroup.procs to join, or -1 */
	int			 oom;	/* write spec->oom_score_adj */
};

/* The kernel's struct sigaction, for rt_sigaction(2) without the libc. */
struct kernel_sigaction {
	void		(*handler)(int);
	unsigned long	  flags;
	void		(*restorer)(void);
	uint64_t	  mask;		/* _NSIG 64: 8 bytes */
};

extern uint64_t	pty_sig_reset;

void	 pty_cause(char *, size_t, const char *, ...)
		     __attribute__((format(printf, 3, 4)));
int	 pty_fd_lift(int *);
int	 pty_child_run(void *) __attribute__((noreturn));

#endif /* PTY_INT_H */
