/*
 * main.c -- agentctl: options, help and the choice of command.
 *
 * agentctl debugs a sandbox through agentd's API: over the unix socket
 * (-s PATH, AGENTD_SOCKET, default /run/agentd.sock), or over TCP with
 * AGENTD_URL and AGENTD_TOKEN.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"

/* A command and its entry point. */
struct ctl_command {
	const char	*name;
	int		(*fn)(int, char **);
};

static const struct ctl_command ctl_commands[] = {
	{ "ls",		cmd_ls },
	{ "list",	cmd_ls },
	{ "ps",		cmd_ls },
	{ "exec",	cmd_exec },
	{ "run",	cmd_exec },
	{ "attach",	cmd_attach },
	{ "send",	cmd_send },
	{ "kill",	cmd_kill },
	{ "rm",		cmd_rm },
	{ "tail",	cmd_tail },
	{ "inspect",	cmd_inspect },
	{ "cast",	cmd_cast },
	{ "ports",	cmd_ports },
	{ "stat",	cmd_stat },
	{ "logs",	cmd_logs },
	{ "events",	cmd_events },
	{ "pipe",	cmd_pipe },
	{ "upgrade",	cmd_upgrade },
};

static const char ctl_help[] =
"usage: agentctl [-s PATH | --vsock CID:PORT | --url URL] COMMAND [ARGS...]\n"
"\n"
"Debug a sandbox through agentd: over its unix socket (the default), or over\n"
"TCP for remote debugging (AGENTD_URL, AGENTD_TOKEN).\n"
"\n"
"Commands:\n"
"  ls [-q] [--json]\n"
"        List the sessions as a table: ID PID STATE EXIT TTY AGE OUT COMMAND\n"
"        (OUT: output bytes captured; EXIT: '-' while running).\n"
"        -q: ids only; --json: agentd's answer as it is.\n"
"  exec [-t] [--id ID] [-e K=V]... [-w DIR] [-u USER] [-n] [--rm]\n"
"       [--timeout MS] [--ring-bytes N] [--] CMD [ARG...]\n"
"        Run CMD (no shell; use sh -c '...' for one) in a new session, like\n"
"        `docker exec`: its stdout goes to stdout and its stderr to stderr as\n"
"        they come; agentctl's stdin is forwarded to it (raw bytes, so\n"
"        `tar c . | agentctl exec -- tar x -C /dst` works), end of input\n"
"        included; agentctl exits with the session's exit code (128+N when\n"
"        signal N killed it).  SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to\n"
"        agentctl are passed on to the session (the third one gives up).\n"
"        -t, --tty          run on a PTY sized like the local terminal (24x80\n"
"                           when there is none); when stdin is a terminal it\n"
"                           is put in raw mode (Ctrl-] detaches, leaving the\n"
"                           session running) and its size is followed\n"
"        --id ID            the session's id ([A-Za-z0-9._-], default: agentd's)\n"
"        -e, --env K=V      add an environment variable (repeatable)\n"
"        -w, --workdir DIR  working directory (default: agentd's --workdir)\n"
"        -u, --user USER    run as USER (name or uid)\n"
"        -n, --no-stdin     do not forward stdin (the command gets /dev/null)\n"
"        --rm               remove the session once it has ended\n"
"        --timeout MS       agentd kills the command after MS milliseconds\n"
"        --ring-bytes N     the session's output ring (e.g. 8M; default\n"
"                           agentd's --ring-bytes): output that outruns the\n"
"                           ring is lost, and agentctl says so on stderr\n"
"  attach [--detach-key KEY] ID\n"
"        Connect the terminal to a running session: raw mode, keystrokes to\n"
"        its stdin, its output from its newest chunk on, the session resized\n"
"        to the terminal (and again on every SIGWINCH).  Ctrl-] (or KEY:\n"
"        ctrl-X, ^X or none) detaches and leaves the session running.  The\n"
"        terminal is restored however agentctl ends.  Exits 0 on detach, or\n"
"        with the session's exit code when it ends.\n"
"  send [-n] [-e] [--eof] ID TEXT...\n"
"        Write TEXT (arguments joined by spaces) to the session's stdin,\n"
"        followed by a newline unless TEXT ends with one.  -n: no newline;\n"
"        -e: interpret \\n \\r \\t \\e \\a \\0 \\\\ \\xHH (send -ne ID '\\x03' is\n"
"        Ctrl-C on a PTY); --eof: then close stdin (a PTY gets its EOF\n"
"        character).\n"
"  kill [-f] ID [SIGNAL]   (also: kill -SIGNAL ID)\n"
"        Send SIGNAL (default TERM; 9, KILL and SIGKILL all work) to the\n"
"        session's process group.  -f, --foreground: to the foreground job\n"
"        of the session's terminal instead, as its keys would (kill -f ID\n"
"        INT under an interactive shell stops the running command, not\n"
"        the shell, which puts each job in a group of its own).\n"
"  rm [--grace MS] ID...\n"
"        Remove sessions; a running one gets SIGTERM (and SIGHUP on a PTY),\n"
"        then SIGKILL after MS milliseconds (default 2000).\n"
"  tail [-f] [-n LINES] [--no-follow] ID\n"
"        Print the output the session still holds (the last LINES lines with\n"
"        -n), then follow it like `tail -f` until the session's output ends.\n"
"        stdout and stderr go to their own streams (-f: the default).\n"
"  inspect ID\n"
"        Print the session object (JSON).\n"
"  cast ID\n"
"        Print the session's output as an asciicast v2 recording (asciinema's\n"
"        format: the times it was read, its resizes), e.g. > ID.cast.\n"
"  ports [-p PORT [--wait MS]] [--json]\n"
"        The listening TCP and bound UDP sockets: PROTO ADDRESS PORT PID\n"
"        SESSION FORWARDED ('-': none; FORWARDED: where a service on\n"
"        loopback is reached from outside).  -p: only PORT's, and exit 1\n"
"        when nothing is on it; --wait MS: wait up to MS for something to\n"
"        listen there\n"
"        (`agentctl ports -p 8000 --wait 30000 && curl localhost:8000`).\n"
"  stat [--json]\n"
"        agentd's figures: pid, uptime, open fds, RSS, event-loop lag,\n"
"        companion restarts, connections, and per session its output ring\n"
"        (held bytes and chunks, oldest and newest chunk id, dropped chunks\n"
"        and bytes) and readers (requests waiting on it).  Unix socket only.\n"
"  logs [-n LINES] [--json]\n"
"        agentd's recent log lines, kept in memory.  Unix socket only.\n"
"  events [-f] [-c N] [--session ID] [--types T1,T2] [--cursor N] [--json]\n"
"        The sandbox's events (session.created, session.exited,\n"
"        session.removed, port.opened, ...), one a line: ID AT TYPE SESSION\n"
"        and their fields.  -f: then wait for more, until interrupted;\n"
"        -c N: exit after N events, waiting for them (events -c 1\n"
"        --session build --types session.exited waits for build's exit);\n"
"        --session, --types: only those; --cursor N: after event N;\n"
"        --json: each event's JSON object on its line.\n"
"  pipe\n"
"        Raw bytes: stdin to a new connection to agentd, its bytes to\n"
"        stdout, until agentd closes it (send Connection: close) or stdout\n"
"        fails; nothing is added (no token).  For HTTP by hand, as socat:\n"
"        printf 'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\n"
"Connection:\n"
"        close\\r\\n\\r\\n' | agentctl --vsock 1:49984 pipe\n"
"  upgrade [--sha256 HEX] PATH\n"
"        Replace agentd by the binary at PATH in its own pid, sessions and\n"
"        connections kept (POST /v1/sandbox/upgrade); waits until the new\n"
"        agentd answers.  --sha256: refuse a binary of another digest.\n"
"\n"
"Options (before or after the command):\n"
"  -s, --socket PATH  agentd's unix socket (default $AGENTD_SOCKET, else\n"
"                     /run/agentd.sock); wins over AGENTD_URL\n"
"  --vsock CID:PORT   talk to agentd's --vsock-listen PORT over AF_VSOCK;\n"
"                     CID 1 or local: this machine (vsock_loopback), 2 or\n"
"                     host: the host; wins over --url\n"
"  --url URL          talk TCP to http://HOST[:PORT] (default port 49984)\n"
"  -h, --help         this text\n"
"  -V, --version      agentctl's version\n"
"\n"
"Environment:\n"
"  AGENTD_SOCKET  the unix socket, when -s is not given\n"
"  AGENTD_VSOCK   CID:PORT: use vsock instead of the socket (wins over\n"
"                 AGENTD_URL)\n"
"  AGENTD_URL     http://HOST[:PORT]: use TCP instead of the socket\n"
"  AGENTD_TOKEN   the bearer token sent over TCP and vsock\n"
"\n"
"Exit status: 0 ok; 1 an error (agentd unreachable, unknown id, an error\n"
"answer: its message is printed); 2 bad usage; exec and attach: the\n"
"session's exit code.\n"
"\n"
"Examples:\n"
"  agentctl ls\n"
"  agentctl exec -- make -C /work test\n"
"  tar c -C src . | agentctl exec -- tar x -C /dst\n"
"  agentctl exec -t --id shell -- /bin/bash\n"
"  agentctl attach shell\n"
"  agentctl send shell 'uptime'\n"
"  agentctl tail -n 20 build\n"
"  agentctl kill build INT; agentctl rm build\n"
"  agentctl stat; agentctl logs -n 50\n"
"  agentctl events -f --types session.exited\n"
"  AGENTD_URL=http://10.0.0.2:49984 AGENTD_TOKEN=... agentctl ls\n";

static const char	*ctl_socket;	/* -s */
static const char	*ctl_url;	/* --url */
static const char	*ctl_vsock;	/* --vsock */
static int		 ctl_targeted;

/* getopt_long with the common options handled. */
int
ctl_getopt(int argc, char **argv, const char *shortopts,
    const struct option *longopts)
{
	char	opts[64];
	int	ch;

	snprintf(opts, sizeof opts, "+:hs:%s", shortopts);
	opterr = 0;
	for (;;) {
		ch = getopt_long(argc, argv, opts, longopts, NULL);
		switch (ch) {
		case 's':
			ctl_socket = optarg;
			continue;
		case CTL_OPT_URL:
			ctl_url = optarg;
			continue;
		case CTL_OPT_VSOCK:
			ctl_vsock = optarg;
			continue;
		case 'h':
			fputs(ctl_help, stdout);
			ctl_exit(CTL_EXIT_OK);
		case ':':
			ctl_usage(argv[0], "option '%s' needs an argument",
			    argv[optind - 1]);
		case '?':
			if (optopt != 0)
				ctl_usage(argv[0], "unknown option '-%c'",
				    optopt);
			ctl_usage(argv[0], "unknown option '%s'",
			    argv[optind - 1]);
		}
		return (ch);
	}
}

/* A client for the endpoint the options and environment chose. */
struct client *
ctl_connect(void)
{
	const char	*path, *url = NULL, *vsock;
	char		 cause[CLIENT_CAUSE_MAX];

	/* -s, --vsock, --url, then AGENTD_VSOCK, AGENTD_URL, AGENTD_SOCKET. */
	vsock = ctl_vsock;
	if (vsock == NULL && ctl_url == NULL && (vsock =
	    getenv("AGENTD_VSOCK")) != NULL && *vsock == '\0')
		vsock = NULL;
	if (!ctl_targeted && ctl_socket == NULL && vsock != NULL) {
		if (client_target_vsock(vsock, getenv("AGENTD_TOKEN"), cause,
		    sizeof cause) != 0)
			ctl_fatal("%s", cause);
		ctl_targeted = 1;
	}
	if (!ctl_targeted) {
		path = ctl_socket;
		if (path == NULL) {
			url = ctl_url;
			if (url == NULL && (url = getenv("AGENTD_URL")) != NULL &&
			    *url == '\0')
				url = NULL;
			if ((path = getenv("AGENTD_SOCKET")) == NULL ||
			    *path == '\0')
				path = CLIENT_DEFAULT_SOCKET;
		}
		if (client_target(path, url, getenv("AGENTD_TOKEN"), cause,
		    sizeof cause) != 0)
			ctl_fatal("%s", cause);
		ctl_targeted = 1;
	}
	return (client_new());
}

int
main(int argc, char **argv)
{
	const char	*arg;
	size_t		 i;
	int		 n;

	/* Sockets use MSG_NOSIGNAL; a closed stdout is an EPIPE to handle. */
	signal(SIGPIPE, SIG_IGN);

	for (n = 1; n < argc && argv[n][0] == '-'; n++) {
		arg = argv[n];
		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			fputs(ctl_help, stdout);
			ctl_exit(CTL_EXIT_OK);
		} else if (strcmp(arg, "-V") == 0 ||
		    strcmp(arg, "--version") == 0) {
			printf("agentctl %s\n", AGENTCTL_VERSION);
			ctl_exit(CTL_EXIT_OK);
		} else if (strcmp(arg, "-s") == 0 ||
		    strcmp(arg, "--socket") == 0 || strcmp(arg, "--url") == 0 ||
		    strcmp(arg, "--vsock") == 0) {
			if (n + 1 >= argc)
				ctl_usage(NULL, "%s needs an argument", arg);
			if (arg[1] == 's' || strcmp(arg, "--socket") == 0)
				ctl_socket = argv[++n];
			else if (strcmp(arg, "--vsock") == 0)
				ctl_vsock = argv[++n];
			else
				ctl_url = argv[++n];
		} else if (strncmp(arg, "--vsock=", 8) == 0)
			ctl_vsock = arg + 8;
		else if (strncmp(arg, "--socket=", 9) == 0)
			ctl_socket = arg + 9;
		else if (strncmp(arg, "--url=", 6) == 0)
			ctl_url = arg + 6;
		else if (strncmp(arg, "-s", 2) == 0)
			ctl_socket = arg + 2;
		else
			ctl_usage(NULL, "unknown option '%s'", arg);
	}
	if (n >= argc)
		ctl_usage(NULL, "no command given");
	if (strcmp(argv[n], "help") == 0) {
		fputs(ctl_help, stdout);
		ctl_exit(CTL_EXIT_OK);
	}
	for (i = 0; i < sizeof ctl_commands / sizeof ctl_commands[0]; i++) {
		if (strcmp(argv[n], ctl_commands[i].name) == 0)
			ctl_exit(ctl_commands[i].fn(argc - n, argv + n));
	}
	ctl_usage(NULL, "unknown command '%s'", argv[n]);
}
