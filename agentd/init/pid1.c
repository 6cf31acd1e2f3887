/*
 * pid1.c -- agentd as the init of a sandbox: mounts, console fds, Ctrl-Alt-Del,
 * the network and hostname from the kernel command line, the token hidden
 * from sessions, and the power-off at the end.
 *
 * "Bare" means agentd found no /proc: it is the init of a VM (or of a bare
 * machine) and mounted the basic filesystems itself.  Otherwise a container
 * runtime (or an init script that exec'd agentd) did.  Whether the end is a
 * reboot(2) or an exit does not follow from that, but from the PID namespace:
 * only the initial one has a kernel to power off.
 */
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "kmod.h"
#include "log.h"
#include "netcfg.h"
#include "pid1.h"
#include "util.h"

#define PID1_CMDLINE_MAX	4096	/* bytes of /proc/cmdline read */
#define PID1_CMDLINE_COPY	"/run/agentd.cmdline"	/* the sanitized copy */
#define PID1_TOKEN_KEY		"agentd.token"
#define PID1_INIT_PIDNS_INO	0xeffffffcu	/* PROC_PID_INIT_INO, Linux 3.8 */
#define PID1_SYSLOG_CLEAR	5	/* SYSLOG_ACTION_CLEAR of klogctl(2) */
#define PID1_SYSLOG_SIZE	10	/* SYSLOG_ACTION_SIZE_BUFFER */
#define PID1_BOOTARGS		"/sys/firmware/devicetree/base/chosen/bootargs"
#define PID1_BOOTARGS_COPY	"/run/agentd.bootargs"	/* its sanitized copy */
#define PID1_KMSG_RECORD	900	/* bytes of one record written to flush */
#define PID1_KMSG_BURST		10	/* records per open (the kernel's ratelimit) */
#define PID1_KMSG_FLUSH_MAX	(64 << 20)	/* bytes written at most */
#define PID1_KMSG_READ		8192	/* bytes of one record read */

/* A filesystem a bare VM lacks. */
struct pid1_mount {
	const char	*source;
	const char	*target;
	const char	*type;
	unsigned long	 flags;
	const char	*data;
	mode_t		 mode;		/* of the mount point */
};

/* One process of /proc, for pid1_kill_children(). */
struct pid1_proc {
	pid_t			pid;
	pid_t			ppid;
	unsigned long long	start;	/* starttime: tells a reused pid apart */
	int			mine;	/* agentd's descendant */
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
	/* After /sys: cgroup.c's hierarchy (its sessions' cgroups). */
	{ "cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV |
	  MS_NOEXEC, "nsdelegate", 0555 },
};

/* Which of pid1_mounts agentd mounted itself (to unmount at the end). */
static int	pid1_mounted[sizeof pid1_mounts / sizeof pid1_mounts[0]];
static int	pid1_bare;	/* no /proc at start: agentd mounted it all */

static void	pid1_mount_all(void);
static void	pid1_ptmx(void);
static void	pid1_network(const struct config *, const char *);
static void	pid1_hide_token(const char *);
static int	pid1_bind_text(const char *, size_t, const char *,
		    const char *);
static int	pid1_kmsg_holds(const char *);
static void	pid1_kmsg_scrub(const char *);
static int	pid1_initial_pidns(void);
static void	pid1_protect_links(void);
static void	pid1_vsock(const struct config *);
static int	pid1_proc_stat(pid_t, pid_t *, unsigned long long *);
static int	pid1_proc_cmp(const void *, const void *);
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

/* Open /dev/null on fds 0-2 where they are closed. */
void
pid1_stdio(void)
{
	int	fd, nfd;

	for (fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			continue;
		/* The lowest free fd is this one: 0..fd-1 are open. */
		if ((nfd = open("/dev/null", O_RDWR)) == -1)
			return;		/* no /dev yet: stay quiet */
		if (nfd != fd) {
			close(nfd);
			return;
		}
	}
}

/* The first steps of PID 1; the mounts only on a bare VM (no /proc). */
void
pid1_early(void)
{
	pid1_stdio();		/* before anything can take fds 0-2 */
	if (access("/proc/self", F_OK) == 0)
		return;		/* a container: its runtime mounted all this */
	pid1_bare = 1;
	pid1_mount_all();
	pid1_ptmx();
	pid1_stdio();		/* again, now that /dev exists */
}

/*
 * Read the kernel command line: only where it is agentd's, on a bare VM or
 * in the initial PID namespace.  A container's /proc/cmdline is the host's
 * kernel's: its agentd.* and ip= are not for this sandbox.
 * AGENTD_READ_KERNEL_CMDLINE=1 reads it anyway (tests stand a namespace in
 * for a VM that way).
 */
char *
pid1_cmdline(void)
{
	char		 buf[PID1_CMDLINE_MAX];
	const char	*force = getenv("AGENTD_READ_KERNEL_CMDLINE");
	ssize_t		 n;
	int		 fd;

	if (!pid1_bare && !pid1_initial_pidns() &&
	    (force == NULL || strcmp(force, "1") != 0))
		return (NULL);
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
	char	*cmdline;

	/* Ctrl-Alt-Del: a SIGINT to us instead of an immediate reboot. */
	if (reboot(RB_DISABLE_CAD) == -1) {
		/* In a PID namespace: EINVAL, and no keyboard anyway. */
		if (errno == EINVAL || errno == EPERM)
			log_debug("%s: RB_DISABLE_CAD: %s", __func__,
			    strerror(errno));
		else
			log_warn("%s: RB_DISABLE_CAD: %s", __func__,
			    strerror(errno));
	}
	pid1_protect_links();
	pid1_vsock(cfg);
	cmdline = pid1_cmdline();
	pid1_network(cfg, cmdline);
	if (cmdline != NULL)
		pid1_hide_token(cmdline);
	free(cmdline);
}

/*
 * With --vsock-listen or --envd-vsock-listen, the vsock modules: the core, the virtio transport
 * (the guest's side of vhost-vsock, Firecracker's and Cloud Hypervisor's
 * vsock) and vsock_loopback (CID 1: agentctl --vsock 1:PORT inside the VM),
 * each when shipped (initramfs/build.sh ships them) and not built in.  A
 * bare VM has no modprobe to answer the kernel's request for the family.
 */
static void
pid1_vsock(const struct config *cfg)
{
	static const char *const	 mods[] = {
		"vsock", "vmw_vsock_virtio_transport", "vsock_loopback", NULL
	};
	int				 n;

	if ((cfg->vsock_listen[0] == NULL &&
	    cfg->envd_vsock_listen[0] == NULL) || !pid1_initial_pidns())
		return;
	if ((n = kmod_load_names(NULL, mods)) < 0)
		log_debug("%s: no modules.dep: %s", __func__, strerror(-n));
	else
		log_info("%s: %d vsock modules loaded", __func__, n);
}

/*
 * fs.protected_hardlinks and fs.protected_symlinks, which a distribution's
 * sysctl.d sets and a bare kernel leaves at 0: else a user may hard-link a
 * root-only file into its folder (where root's files calls may read it),
 * or plant a symlink in /tmp for root to follow.  Only as the machine's
 * init: the settings are global, and a container's would be the host's.
 */
static void
pid1_protect_links(void)
{
	static const char *const	 knobs[] = {
		"/proc/sys/fs/protected_hardlinks",
		"/proc/sys/fs/protected_symlinks",
	};
	size_t				 i;
	int				 fd;

	if (!pid1_initial_pidns()) {
		log_debug("%s: not the machine's init: links left as set",
		    __func__);
		return;
	}
	for (i = 0; i < nitems(knobs); i++) {
		if ((fd = open(knobs[i], O_WRONLY | O_CLOEXEC)) == -1 ||
		    write(fd, "1\n", 2) != 2)
			log_warn("%s: %s: %s", __func__, knobs[i],
			    strerror(errno));
		if (fd != -1)
			close(fd);
	}
}

/* lo up; ip= applied; the hostname from the configuration, else ip=. */
static void
pid1_network(const struct config *cfg, const char *cmdline)
{
	struct netcfg_ip	 ip;
	const char		*host = cfg->hostname;
	char			 cause[NETCFG_CAUSE_MAX], *v = NULL;
	int			 rc = 1;

	netcfg_lo_up();
	memset(&ip, 0, sizeof ip);
	if (cmdline != NULL && (v = config_cmdline_get(cmdline, "ip")) != NULL) {
		rc = netcfg_parse_ip(v, &ip, cause, sizeof cause);
		if (rc < 0)
			log_warn("%s: %s", __func__, cause);
		else if (rc == 0)
			netcfg_apply(&ip);
		free(v);
	}
	if ((host == NULL || *host == '\0') && rc >= 0 && ip.hostname[0] != '\0')
		host = ip.hostname;
	if (host != NULL && *host != '\0') {
		if (sethostname(host, strlen(host)) == -1)
			log_warn("%s: sethostname: %s", __func__,
			    strerror(errno));
		else
			log_info("%s: hostname %s", __func__, host);
	}
}

/* The command line without any KEY=... word; malloc'd. */
char *
pid1_cmdline_strip(const char *cmdline, const char *key)
{
	const char	*p = cmdline, *start;
	size_t		 klen = strlen(key), n = 0, wlen;
	char		*out;

	out = xmalloc(strlen(cmdline) + 2);
	while ((start = cmdline_next(&p, &wlen)) != NULL) {
		if (wlen > klen && strncmp(start, key, klen) == 0 &&
		    start[klen] == '=')
			continue;
		if (n > 0)
			out[n++] = ' ';
		memcpy(out + n, start, (size_t)(p - start));
		n += (size_t)(p - start);
	}
	out[n++] = '\n';
	out[n] = '\0';
	return (out);
}

/*
 * Put text over path with a read-only bind mount: from a file in /run, or
 * else from a memfd.  Returns 0 or -errno.
 */
static int
pid1_bind_text(const char *text, size_t len, const char *path,
    const char *copy)
{
	char	 fdpath[64];
	int	 fd, error = 0;

	(void)unlink(copy);
	fd = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0444);
	if (fd != -1) {
		if (write(fd, text, len) != (ssize_t)len || fsync(fd) == -1)
			error = -errno;
		close(fd);
		if (error == 0 && mount(copy, path, NULL, MS_BIND, NULL) == 0)
			goto ro;
		(void)unlink(copy);
	}
	/* /run is missing or read-only: a memfd serves as well. */
	if ((fd = memfd_create("agentd.cmdline", MFD_CLOEXEC)) == -1)
		return (-errno);
	if (write(fd, text, len) != (ssize_t)len || fchmod(fd, 0444) == -1) {
		error = -errno;
		close(fd);
		return (error);
	}
	snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
	if (mount(fdpath, path, NULL, MS_BIND, NULL) == -1) {
		error = -errno;
		close(fd);
		return (error);
	}
	close(fd);
ro:
	if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY |
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == -1)
		log_debug("%s: remount %s read-only: %s", __func__, path,
		    strerror(errno));
	return (0);
}

/* Whether a record of the kernel's log (/dev/kmsg) holds text; -1: unreadable. */
static int
pid1_kmsg_holds(const char *text)
{
	char	*rec;
	ssize_t	 n;
	int	 fd, found = 0;

	if ((fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1)
		return (-1);
	rec = xmalloc(PID1_KMSG_READ + 1);
	for (;;) {
		n = read(fd, rec, PID1_KMSG_READ);
		if (n == -1 && (errno == EINTR || errno == EPIPE))
			continue;	/* EPIPE: records overwritten meanwhile */
		if (n <= 0)
			break;		/* EAGAIN: the end */
		rec[n] = '\0';
		if (strstr(rec, text) != NULL) {
			found = 1;
			break;
		}
	}
	free(rec);
	close(fd);
	return (found);
}

/*
 * The kernel's log starts with the command line ("Command line: ...",
 * "Kernel command line: ...").  SYSLOG_ACTION_CLEAR hides it from dmesg
 * and syslog(2) only: /dev/kmsg serves every record still in the ring.
 * So push those records out: write debug records (level 7: not on the
 * console) to /dev/kmsg, twice the ring's size at most, until no record
 * holds the token.  The boot messages before go with it.
 */
static void
pid1_kmsg_scrub(const char *token)
{
	char	 rec[PID1_KMSG_RECORD + 1];
	size_t	 written = 0, limit;
	int	 size, fd = -1, n = 0, len;

	if (pid1_kmsg_holds(token) != 1)
		return;
	if ((size = klogctl(PID1_SYSLOG_SIZE, NULL, 0)) <= 0)
		size = 1 << 20;
	limit = 2 * (size_t)size < PID1_KMSG_FLUSH_MAX ? 2 * (size_t)size :
	    PID1_KMSG_FLUSH_MAX;
	while (written < limit) {
		/* The kernel drops writes past a burst per open file. */
		if (fd == -1 || ++n % PID1_KMSG_BURST == 0) {
			if (fd != -1)
				close(fd);
			if ((fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC)) == -1)
				break;
		}
		/* A header, then dots: records of PID1_KMSG_RECORD bytes. */
		len = snprintf(rec, sizeof rec, "<7>agentd: flushing the boot "
		    "log, which held %s (%zu/%zu) ", PID1_TOKEN_KEY, written,
		    limit);
		if (len < 0 || len > PID1_KMSG_RECORD)
			len = 0;
		memset(rec + len, '.', PID1_KMSG_RECORD - (size_t)len);
		if (write(fd, rec, PID1_KMSG_RECORD) == -1)
			break;
		written += PID1_KMSG_RECORD;
		/* Check now and then: the ring may be smaller than it says. */
		if (n % 256 == 255 && pid1_kmsg_holds(token) == 0)
			break;
	}
	if (fd != -1)
		close(fd);
	if (pid1_kmsg_holds(token) != 0)
		log_warn("%s: the kernel log still holds %s", __func__,
		    PID1_TOKEN_KEY);
	else
		log_info("%s: kernel log flushed (%zu bytes): it held %s",
		    __func__, written, PID1_TOKEN_KEY);
}

/*
 * agentd.token= on the kernel command line: sessions must not read it in
 * /proc/cmdline nor the devicetree's bootargs (a sanitized copy is
 * bind-mounted over each), nor, where the kernel is agentd's (a bare VM,
 * the initial PID namespace), in the kernel's log, which starts with the
 * command line (cleared for dmesg, flushed out of /dev/kmsg).  A root
 * session can still undo the mounts or read agentd's memory: this keeps
 * the token out of sight, it is not a boundary; the token file is better.
 */
static void
pid1_hide_token(const char *cmdline)
{
	char	*token, *clean;
	int	 error;

	if ((token = config_cmdline_get(cmdline, PID1_TOKEN_KEY)) == NULL)
		return;
	clean = pid1_cmdline_strip(cmdline, PID1_TOKEN_KEY);
	if ((error = pid1_bind_text(clean, strlen(clean), "/proc/cmdline",
	    PID1_CMDLINE_COPY)) != 0)
		log_warn("%s: cannot hide %s in /proc/cmdline: %s", __func__,
		    PID1_TOKEN_KEY, strerror(-error));
	else
		log_info("%s: %s hidden from /proc/cmdline", __func__,
		    PID1_TOKEN_KEY);
	/* The devicetree's copy (arm64, riscv): a string with its NUL. */
	clean[strcspn(clean, "\n")] = '\0';
	if (access(PID1_BOOTARGS, F_OK) == 0 && (error = pid1_bind_text(clean,
	    strlen(clean) + 1, PID1_BOOTARGS, PID1_BOOTARGS_COPY)) != 0)
		log_warn("%s: cannot hide %s in %s: %s", __func__,
		    PID1_TOKEN_KEY, PID1_BOOTARGS, strerror(-error));
	free(clean);
	if (pid1_bare || pid1_initial_pidns()) {
		if (klogctl(PID1_SYSLOG_CLEAR, NULL, 0) == -1)
			log_warn("%s: clearing the kernel log: %s", __func__,
			    strerror(errno));
		if (*token != '\0')
			pid1_kmsg_scrub(token);
	}
	explicit_bzero(token, strlen(token));
	free(token);
}

/* ppid and start time of pid from /proc; -1 when it is gone. */
static int
pid1_proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start)
{
	char		 buf[512], *end;
	const char	*p, *q;

	/* "pid (comm) state ppid ... starttime": fields 4 and 22. */
	if ((p = proc_stat_skip(proc_stat(pid, buf, sizeof buf), 1)) == NULL ||
	    (q = proc_stat_skip(p, 22 - 4)) == NULL)
		return (-1);
	*ppid = (pid_t)strtol(p, &end, 10);
	if (end == p)
		return (-1);
	*start = strtoull(q, &end, 10);
	return (end == q ? -1 : 0);
}

/* Order of pid1_proc by pid, for bsearch. */
static int
pid1_proc_cmp(const void *a, const void *b)
{
	pid_t	x = ((const struct pid1_proc *)a)->pid;
	pid_t	y = ((const struct pid1_proc *)b)->pid;

	return (x < y ? -1 : x > y);
}

/*
 * Send sig to every descendant of agentd: its children (orphans adopted as a
 * subreaper too) and theirs, so that a daemon's own children see SIGTERM
 * with it instead of the SIGKILL after the grace, once adopted.  A child's
 * pid is ours until we reap it; a deeper one is checked again (the same
 * start time) just before the kill, so a reused pid is not signalled.
 */
int
pid1_kill_children(int sig)
{
	struct pid1_proc	*v = NULL, key, *parent;
	struct dirent		*d;
	DIR			*proc;
	pid_t			 self = getpid(), ppid;
	unsigned long long	 start;
	size_t			 n = 0, cap = 0, i;
	int			 count = 0, more;

	if ((proc = opendir("/proc")) == NULL)
		return (-errno);
	while ((d = readdir(proc)) != NULL) {
		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		key.pid = (pid_t)strtol(d->d_name, NULL, 10);
		if (key.pid == self ||
		    pid1_proc_stat(key.pid, &key.ppid, &key.start) != 0)
			continue;
		if (n == cap) {
			cap = cap == 0 ? 256 : cap * 2;
			v = xrealloc(v, cap * sizeof *v);
		}
		key.mine = key.ppid == self;
		v[n++] = key;
	}
	closedir(proc);
	if (n == 0)
		return (0);
	qsort(v, n, sizeof *v, pid1_proc_cmp);
	/* Mark the descendants, one generation a pass. */
	do {
		more = 0;
		for (i = 0; i < n; i++) {
			if (v[i].mine)
				continue;
			key.pid = v[i].ppid;
			parent = bsearch(&key, v, n, sizeof *v, pid1_proc_cmp);
			if (parent != NULL && parent->mine)
				v[i].mine = more = 1;
		}
	} while (more);
	for (i = 0; i < n; i++) {
		if (!v[i].mine)
			continue;
		/* Its parent may be dead by now (killed above): by its start. */
		if (v[i].ppid != self && (pid1_proc_stat(v[i].pid, &ppid,
		    &start) != 0 || start != v[i].start))
			continue;
		if (kill(v[i].pid, sig) == 0)
			count++;
	}
	free(v);
	return (count);
}

/* Whether agentd runs in the initial PID namespace (a machine's init). */
static int
pid1_initial_pidns(void)
{
	struct stat	st;

	if (stat("/proc/self/ns/pid", &st) == -1)
		return (1);	/* no /proc: a machine, surely */
	return (st.st_ino == PID1_INIT_PIDNS_INO);
}

/*
 * Unmount, in reverse, what agentd mounted; on a bare machine remount /
 * read-only too.  Never in a container: its / shares the superblock with the
 * host's, and a remount would change the host's.
 */
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
	if (pid1_bare && mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY,
	    NULL) == -1)
		log_debug("%s: remount / read-only: %s", __func__,
		    strerror(errno));
}

/* The end of the machine, or of the container. */
void
pid1_poweroff(int reboot_, int status)
{
	int	initial = pid1_initial_pidns();

	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	sync();
	pid1_unmount_all();
	sync();
	if (!initial) {
		/*
		 * A container's init: its end is an exit, which its runtime
		 * reads.  (reboot(2) would end the namespace with SIGINT or
		 * SIGHUP as the status instead.)
		 */
		log_info("%s: exiting %d (PID 1 of a container)", __func__,
		    status);
		_exit(status);
	}
	log_info("%s: %s", __func__, reboot_ ? "rebooting" : "powering off");
	for (;;) {
		reboot(reboot_ ? RB_AUTOBOOT : RB_POWER_OFF);
		/* Still here: no CAP_SYS_BOOT.  Nothing else can end us. */
		log_error("%s: reboot: %s", __func__, strerror(errno));
		_exit(0);
	}
}
