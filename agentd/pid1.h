/*
 * pid1.h -- the duties of agentd as the sandbox's init (PID 1).
 *
 * pid1_early() runs first thing in main, before the configuration is read:
 * on a bare VM it mounts what is missing and gives fds 0-2 a /dev/null.
 * pid1_setup() applies what the configuration asks of the machine.  The end
 * is pid1_poweroff(), which never returns: a PID 1 that exits panics the
 * kernel.
 */
#ifndef AGENTD_PID1_H
#define AGENTD_PID1_H

struct config;

/* Mount proc, sysfs, devtmpfs, devpts, /dev/shm, /run, /tmp when missing. */
void	pid1_early(void);

/* The kernel command line (malloc'd), or NULL. */
char	*pid1_cmdline(void);

/*
 * Ctrl-Alt-Del becomes SIGINT, hostname, loopback up, and the kernel's
 * ip=CLIENT::GW:MASK::IFACE:off applied; the token hidden from sessions.
 */
void	pid1_setup(const struct config *);

/* Kill everything, sync, unmount, and power off or reboot.  Never returns. */
void	pid1_poweroff(int reboot) __attribute__((noreturn));

#endif /* AGENTD_PID1_H */
