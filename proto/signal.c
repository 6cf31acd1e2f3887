/*
 * signal.c -- signal names and numbers, both ways, from one constant table.
 */
#include <signal.h>
#include <stddef.h>
#include <string.h>

#include "proto.h"

static int	proto_signal_digits(const char *);

struct proto_signame {
	const char	*name;		/* with "SIG" */
	int		 signo;
};

/* Canonical names first: proto_signal_name() returns the first match. */
static const struct proto_signame proto_signames[] = {
	{ "SIGHUP", SIGHUP },
	{ "SIGINT", SIGINT },
	{ "SIGQUIT", SIGQUIT },
	{ "SIGILL", SIGILL },
	{ "SIGTRAP", SIGTRAP },
	{ "SIGABRT", SIGABRT },
	{ "SIGBUS", SIGBUS },
	{ "SIGFPE", SIGFPE },
	{ "SIGKILL", SIGKILL },
	{ "SIGUSR1", SIGUSR1 },
	{ "SIGSEGV", SIGSEGV },
	{ "SIGUSR2", SIGUSR2 },
	{ "SIGPIPE", SIGPIPE },
	{ "SIGALRM", SIGALRM },
	{ "SIGTERM", SIGTERM },
#ifdef SIGSTKFLT
	{ "SIGSTKFLT", SIGSTKFLT },
#endif
	{ "SIGCHLD", SIGCHLD },
	{ "SIGCONT", SIGCONT },
	{ "SIGSTOP", SIGSTOP },
	{ "SIGTSTP", SIGTSTP },
	{ "SIGTTIN", SIGTTIN },
	{ "SIGTTOU", SIGTTOU },
	{ "SIGURG", SIGURG },
	{ "SIGXCPU", SIGXCPU },
	{ "SIGXFSZ", SIGXFSZ },
	{ "SIGVTALRM", SIGVTALRM },
	{ "SIGPROF", SIGPROF },
	{ "SIGWINCH", SIGWINCH },
	{ "SIGIO", SIGIO },
#ifdef SIGPWR
	{ "SIGPWR", SIGPWR },
#endif
	{ "SIGSYS", SIGSYS },
	/* Aliases, accepted by name only. */
	{ "SIGIOT", SIGABRT },
	{ "SIGPOLL", SIGIO },
	{ "SIGCLD", SIGCHLD },
};
#define PROTO_NSIGNAMES (sizeof proto_signames / sizeof proto_signames[0])

/* "SIGKILL" for 9; NULL for a number with no name. */
const char *
proto_signal_name(int signo)
{
	size_t	i;

	if (signo <= 0)
		return (NULL);
	for (i = 0; i < PROTO_NSIGNAMES; i++) {
		if (proto_signames[i].signo == signo)
			return (proto_signames[i].name);
	}
	return (NULL);
}

/* A decimal signal number 1..PROTO_SIGNAL_MAX, or -1. */
static int
proto_signal_digits(const char *s)
{
	int	n = 0;
	size_t	i;

	if (s[0] == '\0')
		return (-1);
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9' || i >= 3)
			return (-1);
		n = n * 10 + (s[i] - '0');
	}
	if (n < 1 || n > PROTO_SIGNAL_MAX)
		return (-1);
	return (n);
}

/* 9 for "SIGKILL", "KILL", "9" or "SIG9"; -1 when unknown. */
int
proto_signal_number(const char *s)
{
	size_t	i;

	if (s == NULL)
		return (-1);
	if (s[0] >= '0' && s[0] <= '9')
		return (proto_signal_digits(s));
	if (strncmp(s, "SIG", 3) == 0) {
		s += 3;
		if (s[0] >= '0' && s[0] <= '9')
			return (proto_signal_digits(s));
	}
	/* s is now the name without "SIG". */
	for (i = 0; i < PROTO_NSIGNAMES; i++) {
		if (strcmp(s, proto_signames[i].name + 3) == 0)
			return (proto_signames[i].signo);
	}
	return (-1);
}
