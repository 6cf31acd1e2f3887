/*
 * pty_helper.c -- a child for the pty unit tests that reports, exactly, the
 * state it was started in.  One word picks what it prints:
 *
 *   fds	the open fds, but the one reading /proc/self/fd ("0 1 2")
 *   sig	the SigBlk and SigIgn lines of /proc/self/status
 *   ids	pid, sid, pgid, terminal foreground pgid, tty, ctty check
 *   creds	uid, euid, gid, egid and supplementary groups
 *   ttyuid	the owner of the terminal on fd 0
 *   winch	"ready R C", then after a SIGWINCH "winch R C"
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define HELPER_FDS_MAX		1024	/* fds listed at most */
#define HELPER_GROUPS_MAX	256	/* groups listed at most */
#define HELPER_ALARM		20	/* seconds before the helper gives up */

static int	 cmd_fds(void);
static int	 cmd_sig(void);
static int	 cmd_ids(void);
static int	 cmd_creds(void);
static int	 cmd_ttyuid(void);
static int	 cmd_winch(void);
static int	 int_cmp(const void *, const void *);
static void	 on_winch(int);

static volatile sig_atomic_t	 got_winch;

/* Order ints ascending for qsort. */
static int
int_cmp(const void *a, const void *b)
{
	int	x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Print the open fds, without the directory stream's own. */
static int
cmd_fds(void)
{
	DIR		*d;
	struct dirent	*de;
	int		 fds[HELPER_FDS_MAX], n = 0, i, self;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return 1;
	self = dirfd(d);
	while ((de = readdir(d)) != NULL && n < HELPER_FDS_MAX) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if (atoi(de->d_name) != self)
			fds[n++] = atoi(de->d_name);
	}
	closedir(d);
	qsort(fds, (size_t)n, sizeof fds[0], int_cmp);
	for (i = 0; i < n; i++)
		printf("%s%d", i ? " " : "", fds[i]);
	printf("\n");
	return 0;
}

/* Print the blocked and ignored signal masks. */
static int
cmd_sig(void)
{
	FILE	*f;
	char	 line[256];

	if ((f = fopen("/proc/self/status", "r")) == NULL)
		return 1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "SigBlk:", 7) == 0 ||
		    strncmp(line, "SigIgn:", 7) == 0)
			fputs(line, stdout);
	}
	fclose(f);
	return 0;
}

/*
 * Print the session, group and controlling terminal facts.  ctty=1 when the
 * terminal on fd 0 is the controlling terminal: the tty_nr of
 * /proc/self/stat is its device, and TIOCGSID (which fails for a terminal
 * that is not ours) names our session.
 */
static int
cmd_ids(void)
{
	struct stat	 st;
	const char	*name = ttyname(STDIN_FILENO);
	char		 buf[1024], *p;
	unsigned long	 nr = 0;
	unsigned int	 maj, min;
	ssize_t		 n;
	int		 fd, same = 0;

	if ((fd = open("/proc/self/stat", O_RDONLY)) == -1)
		return 1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	/* After "pid (comm)": state ppid pgrp session tty_nr. */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 1, " %*c %*d %*d %*d %lu", &nr) != 1)
		return 1;
	maj = (unsigned int)((nr >> 8) & 0xfff);
	min = (unsigned int)((nr & 0xff) | ((nr >> 12) & 0xfff00));
	if (nr != 0 && fstat(STDIN_FILENO, &st) == 0 &&
	    major(st.st_rdev) == maj && minor(st.st_rdev) == min &&
	    tcgetsid(STDIN_FILENO) == getsid(0))
		same = 1;
	printf("pid=%ld sid=%ld pgid=%ld tpgid=%ld ctty=%d tty=%s\n",
	    (long)getpid(), (long)getsid(0), (long)getpgrp(),
	    (long)tcgetpgrp(STDIN_FILENO), same, name ? name : "none");
	return 0;
}

/* Print the credentials. */
static int
cmd_creds(void)
{
	gid_t	groups[HELPER_GROUPS_MAX];
	int	n, i;

	if ((n = getgroups(HELPER_GROUPS_MAX, groups)) == -1)
		return 1;
	qsort(groups, (size_t)n, sizeof groups[0], int_cmp);
	printf("uid=%ld euid=%ld gid=%ld egid=%ld groups=", (long)getuid(),
	    (long)geteuid(), (long)getgid(), (long)getegid());
	for (i = 0; i < n; i++)
		printf("%s%ld", i ? "," : "", (long)groups[i]);
	printf("\n");
	return 0;
}

/* Print the owner of the terminal. */
static int
cmd_ttyuid(void)
{
	struct stat	st;

	if (fstat(STDIN_FILENO, &st) == -1)
		return 1;
	printf("ttyuid=%ld\n", (long)st.st_uid);
	return 0;
}

/* Note a SIGWINCH. */
static void
on_winch(int sig)
{
	(void)sig;
	got_winch = 1;
}

/* Print the size, wait for SIGWINCH, print the new size. */
static int
cmd_winch(void)
{
	struct sigaction	sa;
	struct winsize		ws;
	sigset_t		block, wait;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_winch;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGWINCH, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGWINCH);
	sigprocmask(SIG_BLOCK, &block, &wait);
	sigdelset(&wait, SIGWINCH);

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == -1)
		return 1;
	printf("ready %u %u\n", ws.ws_row, ws.ws_col);
	fflush(stdout);
	while (!got_winch)
		sigsuspend(&wait);
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == -1)
		return 1;
	printf("winch %u %u\n", ws.ws_row, ws.ws_col);
	return 0;
}

/* Run the command named by argv[1]. */
int
main(int argc, char **argv)
{
	alarm(HELPER_ALARM);
	if (argc < 2)
		return 2;
	if (strcmp(argv[1], "fds") == 0)
		return cmd_fds();
	if (strcmp(argv[1], "sig") == 0)
		return cmd_sig();
	if (strcmp(argv[1], "ids") == 0)
		return cmd_ids();
	if (strcmp(argv[1], "creds") == 0)
		return cmd_creds();
	if (strcmp(argv[1], "ttyuid") == 0)
		return cmd_ttyuid();
	if (strcmp(argv[1], "winch") == 0)
		return cmd_winch();
	return 2;
}
