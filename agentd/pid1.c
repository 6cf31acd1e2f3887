/*
 * pid1.c -- agentd as the init of a sandbox: mounts, console fds, Ctrl-Alt-Del,
 * hostname, loopback, and the power-off at the end.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <net/if.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "netcfg.h"
#include "pid1.h"
#include "util.h"

#define PID1_CMDLINE_MAX	4096	/* bytes of /proc/cmdline read */

/* A filesystem a bare VM lacks. */
struct pid1_mount {
	const char	*source;
	const char	*target;
	const char	*type;
	unsigned long	 flags;
	const char	*data;
	mode_t		 mode;		/* of the mount point */
};

static const struct pid1_mount pid1_mounts[] = {
	{ "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0555 },
	{ "sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, 0555 },
	{ "devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755", 0755 },
	{ "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	  "mode=0620,gid=5,ptmxmode=0666", 0755 },
	{ "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777 },
	{ "tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", 0755 },
	{ "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", 01777 },
};

/* Which of pid1_mounts agentd mounted itself (to unmount at the end). */
static int	pid1_mounted[sizeof pid1_mounts / sizeof pid1_mounts[0]];

static void	pid1_mount_all(void);
static void	pid1_console_fds(void);
static void	pid1_ptmx(void);
static void	pid1_unmount_all(void);

/* Mount what a bare VM lacks; tolerate what is there already. */
static void
pid1_mount_all(void)
{
	const struct pid1_mount	*m;
	size_t			 i;

	for (i = 0; i < nitems(pid1_mounts); i++) {
		m = &pid1_mounts[i];
		if (mkdir(m->target, m->mode) == -1 && errno != EEXIST)
			continue;
		if (mount(m->source, m->target, m->type, m->flags, m->data) == 0)
			pid1_mounted[i] = 1;
		else if (errno != EBUSY)
			log_warn("%s: mount %s: %s", __func__, m->target,
			    strerror(errno));
	}
}

/* /dev/ptmx must be the devpts instance's. */
static void
pid1_ptmx(void)
{
	struct stat	st;

	if (lstat("/dev/ptmx", &st) == 0 && S_ISLNK(st.st_mode))
		return;
	if (access("/dev/pts/ptmx", F_OK) != 0)
		return;
	if (unlink("/dev/ptmx") == -1 && errno != ENOENT)
		return;
	if (symlink("pts/ptmx", "/dev/ptmx") == -1)
		log_warn("%s: symlink /dev/ptmx: %s", __func__, strerror(errno));
}

/* Open /dev/null (or the console) on fds 0-2 where they are closed. */
static void
pid1_console_fds(void)
{
	int	fd;

	for (fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) != -1)
			continue;
		if (open("/dev/null", O_RDWR) != fd) {
			/* Nothing sensible to do: stay quiet. */
			return;
		}
	}
}

/* The first steps of PID 1; the mounts only on a bare VM (no /proc). */
void
pid1_early(void)
{
	pid1_console_fds();	/* before anything can take fds 0-2 */
	if (access("/proc/self", F_OK) == 0)
		return;		/* a container: its runtime mounted all this */
	pid1_mount_all();
	pid1_ptmx();
	pid1_console_fds();	/* again, now that /dev exists */
}

/* Read the kernel command line. */
char *
pid1_cmdline(void)
{
	char	 buf[PID1_CMDLINE_MAX];
	ssize_t	 n;
	int	 fd;

	if ((fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC)) == -1)
		return (NULL);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return (NULL);
	buf[n] = '\0';
	return (xstrdup(buf));
}

/* Apply the configuration to the machine. */
void
pid1_setup(const struct config *cfg)
{
	/* Ctrl-Alt-Del: a SIGINT to us instead of an immediate reboot. */
	if (reboot(RB_DISABLE_CAD) == -1)
		log_warn("%s: RB_DISABLE_CAD: %s", __func__, strerror(errno));
	if (cfg->hostname != NULL &&
	    sethostname(cfg->hostname, strlen(cfg->hostname)) == -1)
		log_warn("%s: sethostname: %s", __func__, strerror(errno));
	netcfg_setup();
}

/* Unmount, in reverse, what agentd mounted; remount / read-only. */
static void
pid1_unmount_all(void)
{
	size_t	i;

	for (i = nitems(pid1_mounts); i > 0; i--) {
		if (pid1_mounted[i - 1] &&
		    umount2(pid1_mounts[i - 1].target, MNT_DETACH) == -1)
			log_debug("%s: umount %s: %s", __func__,
			    pid1_mounts[i - 1].target, strerror(errno));
	}
	mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL);
}

/* The end of the machine. */
void
pid1_poweroff(int reboot_)
{
	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	sync();
	pid1_unmount_all();
	sync();
	log_info("%s: %s", __func__, reboot_ ? "rebooting" : "powering off");
	for (;;) {
		reboot(reboot_ ? RB_AUTOBOOT : RB_POWER_OFF);
		/*
		 * Still here: no CAP_SYS_BOOT, so a container, whose PID 1
		 * ends it by exiting.  (In a VM reboot() does not return; in
		 * a PID namespace it ends the namespace's init.)
		 */
		_exit(0);
	}
}
