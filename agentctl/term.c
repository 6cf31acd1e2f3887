/*
 * term.c -- raw mode (as ssh sets it) and its restoration.
 */
#include <sys/ioctl.h>

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "term.h"

static struct termios	term_saved;
static int		term_fd = -1;
static atomic_int	term_raw_on;

static void	term_crash(int);

/* A fatal signal: restore the terminal, then die of it. */
static void
term_crash(int sig)
{
	term_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Put fd in raw mode. */
int
term_raw(int fd)
{
	static const int	 fatal_sigs[] = { SIGSEGV, SIGBUS, SIGFPE,
				    SIGILL, SIGABRT };
	struct sigaction	 sa;
	struct termios		 tio;
	size_t			 i;

	if (tcgetattr(fd, &term_saved) == -1)
		return (-1);
	tio = term_saved;
	tio.c_iflag |= IGNPAR;
	tio.c_iflag &= ~(ISTRIP | INLCR | IGNCR | ICRNL | IXON | IXANY | IXOFF);
	tio.c_lflag &= ~(ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHONL | IEXTEN);
	tio.c_oflag &= ~OPOST;
	tio.c_cc[VMIN] = 1;
	tio.c_cc[VTIME] = 0;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = term_crash;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESETHAND;
	for (i = 0; i < sizeof fatal_sigs / sizeof fatal_sigs[0]; i++)
		sigaction(fatal_sigs[i], &sa, NULL);

	term_fd = fd;
	atomic_store(&term_raw_on, 1);
	if (tcsetattr(fd, TCSADRAIN, &tio) == -1) {
		atomic_store(&term_raw_on, 0);
		return (-1);
	}
	return (0);
}

/* Undo raw mode. */
void
term_restore(void)
{
	int	saved = errno;

	if (atomic_exchange(&term_raw_on, 0))
		tcsetattr(term_fd, TCSADRAIN, &term_saved);
	errno = saved;
}

/* Whether raw mode is on. */
int
term_is_raw(void)
{
	return (atomic_load(&term_raw_on));
}

/* The local terminal's size. */
int
term_size(unsigned *rows, unsigned *cols)
{
	struct winsize	ws;
	int		fd;

	for (fd = 0; fd <= 2; fd++) {
		if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 &&
		    ws.ws_col > 0) {
			*rows = ws.ws_row;
			*cols = ws.ws_col;
			return (0);
		}
	}
	return (-1);
}
