/*
 * pid1.h -- the duties of agentd as the sandbox's init (PID 1).
 *
 * pid1_early() runs first thing in main, before the configuration is read:
 * on a bare VM (no /proc) it mounts what is missing and gives fds 0-2 a
 * /dev/null.  pid1_setup() applies what the configuration and the kernel
 * command line ask of the machine.  The end is pid1_poweroff(), which never
 * returns: a PID 1 that exits panics the kernel.  Everything here runs on
 * the main thread, before the event loop or after it, except
 * pid1_kill_children(), which the shutdown calls from the loop.
 */
#ifndef AGENTD_PID1_H
#define AGENTD_PID1_H

struct config;

/*
 * Open /dev/null on each of fds 0-2 that is closed, so that no socket or
 * log ends up there.  For any agentd, PID 1 or not; quiet when /dev/null is
 * missing.
 */
void	pid1_stdio(void);

/*
 * pid1_stdio(); then, on a bare VM (no /proc), mount proc, sysfs,
 * devtmpfs, devpts (/dev/ptmx made its link), /dev/shm, /run, /tmp;
 * EBUSY (mounted already) is fine.
 */
void	pid1_early(void);

/* The kernel command line (malloc'd), or NULL. */
char	*pid1_cmdline(void);

/*
 * Ctrl-Alt-Del becomes SIGINT; lo up; the kernel's ip= applied (netcfg.h);
 * the hostname set (--hostname / agentd.hostname=, else ip='s <hostname>);
 * agentd.token= hidden from sessions: a copy of the command line without it
 * is bind-mounted over /proc/cmdline and, on a bare VM, the kernel log that
 * repeats the command line is cleared.  Failures are logged.
 */
void	pid1_setup(const struct config *);

/*
 * The kernel command line without any "key=..." word, words separated by
 * one space, ending in a newline as /proc/cmdline does.  Pure; malloc'd.
 */
char	*pid1_cmdline_strip(const char *cmdline, const char *key);

/*
 * Send sig to every descendant of agentd (sessions, the companion, adopted
 * orphans, and their children).  Returns how many were signalled, or -errno.
 */
int	pid1_kill_children(int sig);

/*
 * Kill everything, reap, sync, unmount what agentd mounted (and, on a bare
 * VM, remount / read-only), then power off or, with reboot, reboot.  In a
 * PID namespace other than the initial one (a container) exit with status
 * instead (0 after a shutdown, 1 after a fatal error: the runtime reads it).
 * Never returns.
 */
void	pid1_poweroff(int reboot, int status) __attribute__((noreturn));

#endif /* AGENTD_PID1_H */
