/*
 * term.c -- raw mode (as ssh sets it) and its restoration.
 *
 * The session's program also sets modes of the terminal with escape
 * sequences (the alternate screen, application cursor keys, mouse
 * reporting, a hidden cursor...), and undoes them when it ends.  When
 * attach detaches, or the program dies without undoing them, the local
 * terminal would stay so under the user's shell: term_write() notes the
 * modes that the output it writes turns on, and term_restore() turns them
 * off again, as tmux does when a client detaches.
 */
#include <sys/ioctl.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "ctl.h"
#include "term.h"

#define TERM_PARAMS_MAX		16	/* parameters kept of one CSI */
#define TERM_PARAM_MAX		65535	/* a larger parameter is no mode */

/* The modes the output turned on (bits of term_modes), and their undoing. */
enum {
	TERM_M_ALT47 = 1 << 0,	/* ?47h alternate screen */
	TERM_M_ALT1047 = 1 << 1,	/* ?1047h alternate screen */
	TERM_M_ALT1049 = 1 << 2,	/* ?1049h alternate screen, cursor saved */
	TERM_M_CKM = 1 << 3,		/* ?1h application cursor keys */
	TERM_M_HIDDEN = 1 << 4,	/* ?25l cursor hidden */
	TERM_M_MOUSE9 = 1 << 5,	/* ?9h X10 mouse */
	TERM_M_MOUSE1000 = 1 << 6,	/* ?1000h mouse buttons */
	TERM_M_MOUSE1002 = 1 << 7,	/* ?1002h mouse drags */
	TERM_M_MOUSE1003 = 1 << 8,	/* ?1003h all mouse motion */
	TERM_M_FOCUS = 1 << 9,	/* ?1004h focus events */
	TERM_M_MOUSE1005 = 1 << 10,	/* ?1005h UTF-8 mouse */
	TERM_M_MOUSE1006 = 1 << 11,	/* ?1006h SGR mouse */
	TERM_M_MOUSE1015 = 1 << 12,	/* ?1015h urxvt mouse */
	TERM_M_PASTE = 1 << 13,	/* ?2004h bracketed paste */
	TERM_M_KEYPAD = 1 << 14,	/* ESC = application keypad */
	TERM_M_SGR = 1 << 15,		/* CSI m: colours, bold... */
	TERM_M_REGION = 1 << 16,	/* CSI t;b r: a scroll region */
};

/* A DEC private mode: its bit, whether 'l' (not 'h') sets it, its undoing. */
struct term_mode {
	unsigned	 mode;
	unsigned	 bit;
	int		 on_reset;
	const char	*off;
};

/*
 * In the order of undoing: the scroll region (cursor kept), then the main
 * screen last, so that what is printed afterwards lands on it.
 */
static const struct term_mode	term_dec[] = {
	{ 1, TERM_M_CKM, 0, "\033[?1l" },
	{ 25, TERM_M_HIDDEN, 1, "\033[?25h" },
	{ 9, TERM_M_MOUSE9, 0, "\033[?9l" },
	{ 1000, TERM_M_MOUSE1000, 0, "\033[?1000l" },
	{ 1002, TERM_M_MOUSE1002, 0, "\033[?1002l" },
	{ 1003, TERM_M_MOUSE1003, 0, "\033[?1003l" },
	{ 1004, TERM_M_FOCUS, 0, "\033[?1004l" },
	{ 1005, TERM_M_MOUSE1005, 0, "\033[?1005l" },
	{ 1006, TERM_M_MOUSE1006, 0, "\033[?1006l" },
	{ 1015, TERM_M_MOUSE1015, 0, "\033[?1015l" },
	{ 2004, TERM_M_PASTE, 0, "\033[?2004l" },
	{ 47, TERM_M_ALT47, 0, "\033[?47l" },
	{ 1047, TERM_M_ALT1047, 0, "\033[?1047l" },
	{ 1049, TERM_M_ALT1049, 0, "\033[?1049l" },
};

/* Where the scanner of the output is within an escape sequence. */
enum term_state {
	TERM_GROUND,
	TERM_ESC,		/* after ESC */
	TERM_CSI,		/* after ESC [ */
	TERM_PARAMS,		/* in the parameters of a CSI */
	TERM_SKIP,		/* in a CSI of no interest, to its final byte */
};

/* The scanner of the output written to the terminal. */
struct term_scan {
	enum term_state	 state;
	int		 private;	/* the CSI started with '?' */
	unsigned	 params[TERM_PARAMS_MAX];
	size_t		 nparams;
};

static struct termios	term_saved;
static int		term_fd = -1;
static atomic_int	term_raw_on;
static int		term_out = -1;	/* stdout, when a terminal */
static pthread_mutex_t	term_lock = PTHREAD_MUTEX_INITIALIZER;
static struct term_scan	term_scan;	/* under term_lock */
static atomic_uint	term_modes;	/* TERM_M_*, written under term_lock */

static void	term_crash(int);
static void	term_undo(int lock);
static void	term_modes_off(void);
static void	term_track(const unsigned char *, size_t);
static void	term_csi(int final);

/* A fatal signal: restore the terminal, then die of it. */
static void
term_crash(int sig)
{
	term_undo(0);
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
	if (isatty(STDOUT_FILENO))
		term_out = STDOUT_FILENO;
	atomic_store(&term_raw_on, 1);
	if (tcsetattr(fd, TCSADRAIN, &tio) == -1) {
		atomic_store(&term_raw_on, 0);
		return (-1);
	}
	return (0);
}

/* Undo raw mode and the modes the output turned on. */
void
term_restore(void)
{
	term_undo(1);
}

/*
 * Undo raw mode once; lock: wait for a term_write() under way, so that no
 * output follows the undoing (not in a signal handler, which may have
 * interrupted one).
 */
static void
term_undo(int lock)
{
	int	saved = errno;

	if (!atomic_exchange(&term_raw_on, 0)) {
		errno = saved;
		return;
	}
	if (lock)
		pthread_mutex_lock(&term_lock);
	term_modes_off();
	tcsetattr(term_fd, TCSADRAIN, &term_saved);
	if (lock)
		pthread_mutex_unlock(&term_lock);
	errno = saved;
}

/* Write the sequences that turn the noted modes off (async-signal-safe). */
static void
term_modes_off(void)
{
	char		 buf[256];
	size_t		 len = 0, i, n;
	unsigned	 modes = atomic_exchange(&term_modes, 0);

	if (term_out == -1 || modes == 0)
		return;
	/* Save the cursor, reset the region (which homes it), restore it. */
	if (modes & TERM_M_REGION) {
		memcpy(buf + len, "\0337\033[r\0338", 7);
		len += 7;
	}
	if (modes & TERM_M_SGR) {
		memcpy(buf + len, "\033[m", 3);
		len += 3;
	}
	if (modes & TERM_M_KEYPAD) {
		memcpy(buf + len, "\033>", 2);
		len += 2;
	}
	for (i = 0; i < sizeof term_dec / sizeof term_dec[0]; i++) {
		if ((modes & term_dec[i].bit) == 0)
			continue;
		n = strlen(term_dec[i].off);
		memcpy(buf + len, term_dec[i].off, n);
		len += n;
	}
	(void)ctl_write_all(term_out, buf, len);
}

/*
 * Write output of the session to fd; on the terminal, note the modes it
 * turns on.  After term_restore() the terminal gets nothing more.
 */
int
term_write(int fd, const void *buf, size_t len)
{
	int	error = 0;

	if (fd != term_out || term_out == -1)
		return (ctl_write_all(fd, buf, len));
	pthread_mutex_lock(&term_lock);
	if (atomic_load(&term_raw_on)) {
		error = ctl_write_all(fd, buf, len);
		term_track(buf, len);
	}
	pthread_mutex_unlock(&term_lock);
	return (error);
}

/* Follow the escape sequences of output written to the terminal. */
static void
term_track(const unsigned char *p, size_t len)
{
	struct term_scan	*sc = &term_scan;
	unsigned		*v;
	size_t			 i;
	int			 c;

	for (i = 0; i < len; i++) {
		c = p[i];
		if (c == 0x1b) {
			sc->state = TERM_ESC;
			continue;
		}
		switch (sc->state) {
		case TERM_GROUND:
			break;
		case TERM_ESC:
			sc->state = TERM_GROUND;
			if (c == '[') {
				sc->state = TERM_CSI;
				sc->private = 0;
				sc->nparams = 0;
				sc->params[0] = 0;
			} else if (c == '=')
				atomic_fetch_or(&term_modes, TERM_M_KEYPAD);
			else if (c == '>')
				atomic_fetch_and(&term_modes, ~TERM_M_KEYPAD);
			else if (c == 'c')	/* RIS: the terminal's reset */
				atomic_store(&term_modes, 0);
			break;
		case TERM_CSI:
			if (c == '?') {
				sc->private = 1;
				sc->state = TERM_PARAMS;
				break;
			}
			sc->state = TERM_PARAMS;
			/* FALLTHROUGH */
		case TERM_PARAMS:
			v = &sc->params[sc->nparams];
			if (c >= '0' && c <= '9') {
				if (*v <= TERM_PARAM_MAX)
					*v = *v * 10 + (unsigned)(c - '0');
			} else if (c == ';' || c == ':') {
				if (sc->nparams + 1 < TERM_PARAMS_MAX)
					sc->params[++sc->nparams] = 0;
			} else if (c >= 0x40 && c <= 0x7e) {
				sc->nparams++;
				term_csi(c);
				sc->state = TERM_GROUND;
			} else if (c >= 0x20 && c < 0x40)
				sc->state = TERM_SKIP;	/* <=>? or intermediates */
			else if (c == 0x18 || c == 0x1a || c >= 0x7f)
				sc->state = TERM_GROUND;	/* CAN, SUB: cancelled */
			/* Other C0 controls act within a CSI. */
			break;
		case TERM_SKIP:
			if (c >= 0x40 && c <= 0x7e)
				sc->state = TERM_GROUND;
			else if (c == 0x18 || c == 0x1a)
				sc->state = TERM_GROUND;
			break;
		}
	}
}

/* A whole CSI with the final byte final: note the modes it sets. */
static void
term_csi(int final)
{
	struct term_scan	*sc = &term_scan;
	size_t			 i, j;
	int			 on;

	if (!sc->private && final == 'm') {
		for (i = 0; i < sc->nparams && sc->params[i] == 0; i++)
			;
		if (i < sc->nparams)
			atomic_fetch_or(&term_modes, TERM_M_SGR);
		else
			atomic_fetch_and(&term_modes, ~TERM_M_SGR);
		return;
	}
	if (!sc->private && final == 'r') {
		/* No parameters, or 1 and 0 (the whole screen): reset. */
		if (sc->params[0] <= 1 && (sc->nparams < 2 ||
		    sc->params[1] == 0))
			atomic_fetch_and(&term_modes, ~TERM_M_REGION);
		else
			atomic_fetch_or(&term_modes, TERM_M_REGION);
		return;
	}
	if (!sc->private || (final != 'h' && final != 'l'))
		return;
	for (i = 0; i < sc->nparams; i++) {
		for (j = 0; j < sizeof term_dec / sizeof term_dec[0]; j++) {
			if (term_dec[j].mode != sc->params[i])
				continue;
			on = (final == 'h') != term_dec[j].on_reset;
			if (on)
				atomic_fetch_or(&term_modes, term_dec[j].bit);
			else
				atomic_fetch_and(&term_modes, ~term_dec[j].bit);
		}
	}
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
