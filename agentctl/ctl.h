/*
 * ctl.h -- agentctl: the commands, and the helpers they share.
 *
 * Exit codes: 0 ok, 1 an error (agentd unreachable, an error answer such as
 * an unknown id), 2 bad usage; exec and attach exit with the session's exit
 * code (128+N when a signal N killed it).
 */
#ifndef AGENTCTL_CTL_H
#define AGENTCTL_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#ifdef AGENTD_VERSION
#define AGENTCTL_VERSION	AGENTD_VERSION
#else
#define AGENTCTL_VERSION	"0"
#endif

#define CTL_EXIT_OK		0
#define CTL_EXIT_ERROR		1
#define CTL_EXIT_USAGE		2

#define CTL_TIMEOUT_MS		60000	/* one plain request, ms */
#define CTL_POLL_WAIT_MS	25000	/* wait_ms of one long-poll, ms */
#define CTL_POLL_SLACK_MS	30000	/* on top of wait_ms for the answer, ms */
#define CTL_WINDOW_BYTES	(1u << 20) /* max_bytes of one output window */

struct client;
struct option;

#define CTL_OPT_URL		0x100	/* --url's getopt value */
#define CTL_OPT_VSOCK		0x101	/* --vsock's */
#define CTL_OPT_FIRST		0x102	/* commands' own long-only options */

/* Long options every command takes, to end its own list with. */
#define CTL_COMMON_OPTIONS \
	{ "socket", required_argument, NULL, 's' }, \
	{ "url", required_argument, NULL, CTL_OPT_URL }, \
	{ "vsock", required_argument, NULL, CTL_OPT_VSOCK }, \
	{ "help", no_argument, NULL, 'h' }, \
	{ NULL, 0, NULL, 0 }

/*
 * getopt_long for a command: shortopts gets "+:hs:" in front (options stop
 * at the first operand); -s, --socket, --url, --vsock and --help are
 * handled here,
 * unknown options and missing arguments are usage errors (exit 2).
 * Returns the next option of the command's own, or -1.
 */
int	ctl_getopt(int argc, char **argv, const char *shortopts,
	    const struct option *);
/* A new client for the endpoint chosen by the options and environment. */
struct client *ctl_connect(void);

/* The commands: argv[0] is the command's name; they return the exit code. */
int	cmd_ls(int, char **);
int	cmd_exec(int, char **);
int	cmd_attach(int, char **);
int	cmd_send(int, char **);
int	cmd_kill(int, char **);
int	cmd_rm(int, char **);
int	cmd_tail(int, char **);
int	cmd_stat(int, char **);
int	cmd_logs(int, char **);
int	cmd_pipe(int, char **);
int	cmd_inspect(int, char **);
int	cmd_upgrade(int, char **);
int	cmd_events(int, char **);
int	cmd_ports(int, char **);
int	cmd_cast(int, char **);

/* Print "agentctl: ..." on stderr. */
void	ctl_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
/* Print "agentctl: ..." and exit 1. */
void	ctl_fatal(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
/* Print "agentctl CMD: ...", a hint to --help, and exit 2. */
void	ctl_usage(const char *cmd, const char *, ...)
	    __attribute__((format(printf, 2, 3), noreturn));
/*
 * Leave the process from any thread: restore the terminal, flush stdout and
 * _exit(code).  The first caller wins; others wait for the end.
 */
void	ctl_exit(int code) __attribute__((noreturn));

/* Write all of buf to fd (EINTR and short writes handled); 0 or -errno. */
int	ctl_write_all(int fd, const void *, size_t);
/* The id percent-encoded for a URL path; malloc'd. */
char	*ctl_escape(const char *);
/* Sleep ms milliseconds. */
void	ctl_sleep_ms(int ms);

/*
 * Send a request to agentd; a transport failure prints the cause and exits
 * 1.  Returns the HTTP status; *json gets the parsed body (NULL when it is
 * not JSON) when json is not NULL.
 */
int	ctl_api(struct client *, const char *method, const char *path,
	    const char *ctype, const void *body, size_t len, int timeout_ms,
	    json_t **json);
/* The "code" of an error answer, or "". */
const char *ctl_err_code(json_t *);
/* Print an error answer's message (with a hint where one helps), exit 1. */
void	ctl_api_fail(int status, json_t *) __attribute__((noreturn));
/* A session's path: /v1/sessions/ID plus suffix (may be ""); malloc'd. */
char	*ctl_session_path(const char *id, const char *suffix);

/* Integer / string / bool members of an object, with defaults. */
long long	 ctl_json_int(json_t *, const char *, long long def);
const char	*ctl_json_str(json_t *, const char *, const char *def);
/* A chunk's bytes from "text" or base64 "data" (malloc'd); -1 if neither. */
int		 ctl_chunk_bytes(json_t *chunk, uint8_t **out, size_t *n);
int		 ctl_json_bool(json_t *, const char *, int def);

#endif /* AGENTCTL_CTL_H */
