/*
 * term.h -- the local terminal: raw mode that is always undone, and its size.
 *
 * term_raw() saves the terminal's settings and registers their restoration
 * for every way out that can be caught: ctl_exit() (normal ends, errors and
 * the signal thread's exits) and the fatal signals (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGABRT), whose handler only calls write() and tcsetattr()
 * (async-signal-safe) before dying as it would have.  Any thread may call
 * term_restore().
 * The modes are reset with one write(), also from the signal handler.
 */
#ifndef AGENTCTL_TERM_H
#define AGENTCTL_TERM_H

/* Put fd (a terminal) in raw mode.  Returns 0, or -1 with errno. */
int	term_raw(int fd);
/*
 * Undo term_raw() and turn off the modes (alternate screen, mouse, hidden
 * cursor...) that output written by term_write() turned on (idempotent).
 */
void	term_restore(void);
/*
 * Write the session's output to fd: on the local terminal (stdout), under
 * a lock with term_restore(), noting the modes it turns on; nothing once
 * restored.  Returns 0 or -errno.
 */
int	term_write(int fd, const void *buf, size_t len);
/* Whether term_raw() is in effect. */
int	term_is_raw(void);
/* The size of the first of fds 0, 1, 2 that is a terminal; 0 or -1. */
int	term_size(unsigned *rows, unsigned *cols);

#endif /* AGENTCTL_TERM_H */
