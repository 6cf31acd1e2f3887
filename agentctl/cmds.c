/*
 * cmds.c -- the one-request commands: ls, inspect, send, kill, rm, stat, logs.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"

#define CMDS_SEND_RETRY_MS	10000	/* send keeps retrying a 429 this long */

static long long	 cmds_parse_time_ms(const char *);
static void		 cmds_age(long long ms, char *, size_t);
static char		*cmds_command(json_t *argv);
static void		 cmds_print_json(json_t *);
static size_t		 cmds_unescape(const char *, char *);
static void		 cmds_debug_404(const char *, int, json_t *);
static void		 cmds_human(double bytes, char *, size_t);
static char		*cmds_one_session(int, char **, const struct option *,
			    const char *);

/* Milliseconds since the epoch of "2026-12-02T11:00:00.000Z", or -1. */
static long long
cmds_parse_time_ms(const char *s)
{
	struct tm	tm;
	int		ms = 0, n = 0;

	if (s == NULL)
		return (-1);
	memset(&tm, 0, sizeof tm);
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
	    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
		return (-1);
	if (s[n] == '.')
		sscanf(s + n + 1, "%3d", &ms);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return ((long long)timegm(&tm) * 1000 + ms);
}

/* "12s", "5m03s", "2h05m", "3d04h". */
static void
cmds_age(long long ms, char *buf, size_t len)
{
	long long	s = ms < 0 ? 0 : ms / 1000;

	if (s < 60)
		snprintf(buf, len, "%llds", s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm%02llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%lldh%02lldm", s / 3600, s % 3600 / 60);
	else
		snprintf(buf, len, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
}

/* "1.5 MiB" */
static void
cmds_human(double b, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	size_t			 u = 0;

	while (b >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
}

/* argv as a shell would read it back; malloc'd. */
static char *
cmds_command(json_t *argv)
{
	char		*out = NULL;
	size_t		 len = 0, i, j;
	json_t		*v;
	FILE		*f;
	const char	*a;

	if ((f = open_memstream(&out, &len)) == NULL)
		ctl_fatal("out of memory");
	json_array_foreach(argv, i, v) {
		a = json_is_string(v) ? json_string_value(v) : "?";
		if (i > 0)
			fputc(' ', f);
		if (*a != '\0' && strspn(a, "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
		    strlen(a)) {
			fputs(a, f);
			continue;
		}
		fputc('\'', f);
		for (j = 0; a[j] != '\0'; j++) {
			if (a[j] == '\'')
				fputs("'\\''", f);
			else if ((unsigned char)a[j] < 0x20 || a[j] == 0x7f)
				fprintf(f, "\\x%02x", (unsigned char)a[j]);
			else
				fputc(a[j], f);
		}
		fputc('\'', f);
	}
	if (fclose(f) != 0)
		ctl_fatal("out of memory");
	return (out);
}

/* The options (none but the common) and the path of one session id. */
static char *
cmds_one_session(int argc, char **argv, const struct option *longopts,
    const char *suffix)
{
	while (ctl_getopt(argc, argv, "", longopts) != -1)
		;
	if (argc - optind != 1)
		ctl_usage(argv[0], "want one session id");
	return (ctl_session_path(argv[optind], suffix));
}

/* Print JSON, indented. */
static void
cmds_print_json(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
}

/* ls [-q] [--json] */
int
cmd_ls(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		CTL_COMMON_OPTIONS
	};
	struct client	*c;
	json_t		*j, *list, *s;
	char		 age[32], pid[32], exitc[32], **cmds;
	size_t		 i, n, w[7];
	long long	 now, started;
	struct timespec	 ts;
	int		 ch, quiet = 0, json = 0, status;

	while ((ch = ctl_getopt(argc, argv, "qj", longopts)) != -1) {
		if (ch == 'q')
			quiet = 1;
		else if (ch == 'j')
			json = 1;
	}
	if (optind != argc)
		ctl_usage(argv[0], "unexpected argument '%s'", argv[optind]);
	c = ctl_connect();
	status = ctl_api(c, "GET", "/v1/sessions", NULL, NULL, 0,
	    CTL_TIMEOUT_MS, &j);
	if (status != 200)
		ctl_api_fail(status, j);
	if (json) {
		cmds_print_json(j);
		return (CTL_EXIT_OK);
	}
	list = json_object_get(j, "sessions");
	n = json_array_size(list);
	if (quiet) {
		json_array_foreach(list, i, s)
			printf("%s\n", ctl_json_str(s, "id", "?"));
		return (CTL_EXIT_OK);
	}

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	/* Widths: ID PID STATE EXIT TTY AGE OUT */
	w[0] = 2; w[1] = 3; w[2] = 5; w[3] = 4; w[4] = 3; w[5] = 3; w[6] = 3;
	if ((cmds = calloc(n + 1, sizeof *cmds)) == NULL)
		ctl_fatal("out of memory");
	for (i = 0; i < n; i++) {
		s = json_array_get(list, i);
		cmds[i] = cmds_command(json_object_get(s, "argv"));
#define W(k, str) do { if (strlen(str) > w[k]) w[k] = strlen(str); } while (0)
		W(0, ctl_json_str(s, "id", "?"));
		snprintf(pid, sizeof pid, "%lld", ctl_json_int(s, "pid", 0));
		W(1, pid);
		W(2, ctl_json_str(s, "state", "?"));
		snprintf(age, sizeof age, "%llu",
		    (unsigned long long)ctl_json_int(s, "bytes_out", 0));
		W(6, age);
	}
	printf("%-*s  %*s  %-*s  %*s  %-*s  %*s  %*s  %s\n",
	    (int)w[0], "ID", (int)w[1], "PID", (int)w[2], "STATE", (int)w[3],
	    "EXIT", (int)w[4], "TTY", 6, "AGE", (int)w[6], "OUT", "COMMAND");
	for (i = 0; i < n; i++) {
		s = json_array_get(list, i);
		snprintf(pid, sizeof pid, "%lld", ctl_json_int(s, "pid", 0));
		if (json_is_integer(json_object_get(s, "exit_code")))
			snprintf(exitc, sizeof exitc, "%lld",
			    ctl_json_int(s, "exit_code", 0));
		else
			snprintf(exitc, sizeof exitc, "-");
		started = cmds_parse_time_ms(ctl_json_str(s, "started_at",
		    NULL));
		if (started >= 0)
			cmds_age(now - started, age, sizeof age);
		else
			snprintf(age, sizeof age, "?");
		printf("%-*s  %*s  %-*s  %*s  %-*s  %*s  %*llu  %s\n",
		    (int)w[0], ctl_json_str(s, "id", "?"), (int)w[1], pid,
		    (int)w[2], ctl_json_str(s, "state", "?"), (int)w[3], exitc,
		    (int)w[4], ctl_json_bool(s, "tty", 0) ? "yes" : "no", 6, age,
		    (int)w[6], (unsigned long long)ctl_json_int(s, "bytes_out", 0),
		    cmds[i]);
		free(cmds[i]);
	}
	free(cmds);
	json_decref(j);
	client_free(c);
	return (CTL_EXIT_OK);
}

/*
 * ports [-p PORT [--wait MS]] [--json]: the listening sockets (and where
 * a service on loopback is forwarded to); with -p
 * those of PORT, exit 1 when there are none (after waiting up to MS for
 * one, in long-polls of CTL_POLL_WAIT_MS).
 */
int
cmd_ports(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "wait", required_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		CTL_COMMON_OPTIONS
	};
	struct client	*c;
	json_t		*j = NULL, *list, *e, *pid, *sess;
	char		 path[96], *end;
	long		 port = 0, wait = 0, chunk;
	long long	 deadline;
	struct timespec	 ts;
	size_t		 i;
	int		 ch, json = 0, status;

	while ((ch = ctl_getopt(argc, argv, "p:w:j", longopts)) != -1) {
		if (ch == 'p') {
			port = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || port < 1 ||
			    port > 65535)
				ctl_usage(argv[0], "bad --port '%s' (want "
				    "1..65535)", optarg);
		} else if (ch == 'w') {
			wait = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || wait < 0)
				ctl_usage(argv[0], "bad --wait '%s' (want "
				    "milliseconds)", optarg);
		} else if (ch == 'j')
			json = 1;
	}
	if (optind != argc)
		ctl_usage(argv[0], "unexpected argument '%s'", argv[optind]);
	if (wait > 0 && port == 0)
		ctl_usage(argv[0], "--wait needs --port");
	c = ctl_connect();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	deadline = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + wait;
	for (;;) {
		chunk = wait > CTL_POLL_WAIT_MS ? CTL_POLL_WAIT_MS : wait;
		if (port > 0)
			snprintf(path, sizeof path, "/v1/ports?port=%ld&"
			    "wait_ms=%ld", port, chunk);
		else
			snprintf(path, sizeof path, "/v1/ports");
		json_decref(j);
		status = ctl_api(c, "GET", path, NULL, NULL, 0,
		    (int)chunk + CTL_POLL_SLACK_MS, &j);
		if (status != 200)
			ctl_api_fail(status, j);
		list = json_object_get(j, "ports");
		clock_gettime(CLOCK_MONOTONIC, &ts);
		wait = deadline - ((long long)ts.tv_sec * 1000 +
		    ts.tv_nsec / 1000000);
		if (port == 0 || json_array_size(list) > 0 || wait <= 0)
			break;
	}
	if (json)
		cmds_print_json(j);
	else {
		printf("%-5s  %-39s  %5s  %7s  %-20s  %s\n", "PROTO",
		    "ADDRESS", "PORT", "PID", "SESSION", "FORWARDED");
		json_array_foreach(list, i, e) {
			pid = json_object_get(e, "pid");
			sess = json_object_get(e, "session");
			printf("%-5s  %-39s  %5lld  ", ctl_json_str(e,
			    "protocol", "?"), ctl_json_str(e, "address", "?"),
			    ctl_json_int(e, "port", 0));
			if (json_is_integer(pid))
				printf("%7lld  ", (long long)
				    json_integer_value(pid));
			else
				printf("%7s  ", "-");
			printf("%-20s  %s\n", json_is_string(sess) ?
			    json_string_value(sess) : "-", ctl_json_str(
			    json_object_get(e, "forward"), "forwarded_on",
			    "-"));
		}
	}
	status = port > 0 && json_array_size(list) == 0 ? CTL_EXIT_ERROR :
	    CTL_EXIT_OK;
	if (status != CTL_EXIT_OK)
		ctl_warn("nothing listens on port %ld", port);
	json_decref(j);
	client_free(c);
	return (status);
}

/* inspect ID */
int
cmd_inspect(int argc, char **argv)
{
	static const struct option	 longopts[] = { CTL_COMMON_OPTIONS };
	static const char *const	 window[] = { "output", "cursor",
					    "dropped_chunks", "more", "eof" };
	struct client	*c;
	json_t		*j;
	char		*path;
	size_t		 i;
	int		 status;

	path = cmds_one_session(argc, argv, longopts, "?max_bytes=0");
	c = ctl_connect();
	status = ctl_api(c, "GET", path, NULL, NULL, 0, CTL_TIMEOUT_MS, &j);
	if (status != 200)
		ctl_api_fail(status, j);
	for (i = 0; i < sizeof window / sizeof window[0]; i++)
		json_object_del(j, window[i]);
	cmds_print_json(j);
	json_decref(j);
	free(path);
	client_free(c);
	return (CTL_EXIT_OK);
}

/* Interpret C-style escapes of s into out (room for strlen(s)); the length. */
static size_t
cmds_unescape(const char *s, char *out)
{
	size_t	n = 0;
	int	v, k;

	while (*s != '\0') {
		if (*s != '\\' || s[1] == '\0') {
			out[n++] = *s++;
			continue;
		}
		s++;
		switch (*s) {
		case 'n': out[n++] = '\n'; s++; break;
		case 'r': out[n++] = '\r'; s++; break;
		case 't': out[n++] = '\t'; s++; break;
		case 'e': out[n++] = 0x1b; s++; break;
		case 'a': out[n++] = 0x07; s++; break;
		case 'b': out[n++] = 0x08; s++; break;
		case '\\': out[n++] = '\\'; s++; break;
		case 'x':
			s++;
			for (v = 0, k = 0; k < 2 && s[k] != '\0' &&
			    strchr("0123456789abcdefABCDEF", s[k]) != NULL; k++)
				v = v * 16 + (s[k] <= '9' ? s[k] - '0' :
				    (s[k] | 0x20) - 'a' + 10);
			if (k == 0) {
				out[n++] = '\\';
				out[n++] = 'x';
			} else
				out[n++] = (char)v;
			s += k;
			break;
		case '0':
			for (v = 0, k = 1; k < 4 && s[k] >= '0' && s[k] <= '7';
			    k++)
				v = v * 8 + (s[k] - '0');
			out[n++] = (char)v;
			s += k;
			break;
		default:
			out[n++] = '\\';
			out[n++] = *s++;
			break;
		}
	}
	return (n);
}

/* send [-n] [-e] [--eof] ID TEXT... */
int
cmd_send(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "no-newline", no_argument, NULL, 'n' },
		{ "escapes", no_argument, NULL, 'e' },
		{ "eof", no_argument, NULL, CTL_OPT_FIRST },
		CTL_COMMON_OPTIONS
	};
	struct client	*c;
	json_t		*j;
	char		*text, *data, *path;
	size_t		 len = 0, n, i;
	int		 ch, nonl = 0, esc = 0, eof = 0, status, waited = 0;
	int		 backoff = 5;

	while ((ch = ctl_getopt(argc, argv, "ne", longopts)) != -1) {
		if (ch == 'n')
			nonl = 1;
		else if (ch == 'e')
			esc = 1;
		else if (ch == CTL_OPT_FIRST)
			eof = 1;
	}
	if (argc - optind < 1)
		ctl_usage(argv[0], "want a session id and the text");
	if (argc - optind < 2 && !eof)
		ctl_usage(argv[0], "want the text to send after the id");
	for (i = optind + 1; i < (size_t)argc; i++)
		len += strlen(argv[i]) + 1;
	if ((text = calloc(1, len + 1)) == NULL ||
	    (data = malloc(len + 2)) == NULL)
		ctl_fatal("out of memory");
	for (i = optind + 1; i < (size_t)argc; i++) {
		if (i > (size_t)optind + 1)
			strcat(text, " ");
		strcat(text, argv[i]);
	}
	if (esc)
		n = cmds_unescape(text, data);
	else {
		n = strlen(text);
		memcpy(data, text, n);
	}
	if (!nonl && (n == 0 || data[n - 1] != '\n'))
		data[n++] = '\n';

	c = ctl_connect();
	path = ctl_session_path(argv[optind], eof ? "/stdin?eof=true" :
	    "/stdin");
	for (;;) {
		status = ctl_api(c, "POST", path, "application/octet-stream",
		    data, n, CTL_TIMEOUT_MS, &j);
		if (status != 429 || waited > CMDS_SEND_RETRY_MS)
			break;
		/* stdin_backpressure: the process has not read enough yet. */
		json_decref(j);
		ctl_sleep_ms(backoff);
		waited += backoff;
		backoff = backoff * 2 > 200 ? 200 : backoff * 2;
	}
	if (status != 200)
		ctl_api_fail(status, j);
	json_decref(j);
	free(path);
	free(text);
	free(data);
	client_free(c);
	return (CTL_EXIT_OK);
}

/* kill [-f] ID [SIGNAL] */
int
cmd_kill(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		CTL_COMMON_OPTIONS
	};
	struct client	*c;
	const char	*sig = "TERM";
	json_t		*body, *j;
	char		*text, *path;
	int		 ch, status, foreground = 0;

	/* kill(1)'s spelling too: kill -9 ID, kill -KILL ID. */
	if (argc >= 3 && argv[1][0] == '-' && (isdigit((unsigned char)
	    argv[1][1]) || isupper((unsigned char)argv[1][1]))) {
		sig = argv[1] + 1;
		argv[1] = argv[0];
		argc--;
		argv++;
		if (argc != 2)
			ctl_usage(argv[0], "want a session id after the signal");
	}
	while ((ch = ctl_getopt(argc, argv, "f", longopts)) != -1) {
		if (ch == 'f')
			foreground = 1;
	}
	if (argc - optind < 1 || argc - optind > 2)
		ctl_usage(argv[0], "want a session id and maybe a signal");
	if (argc - optind == 2)
		sig = argv[optind + 1];
	if (*sig == '-')
		sig++;			/* kill ID -9, as kill(1) spells it */
	if (*sig != '\0' && strspn(sig, "0123456789") == strlen(sig))
		body = json_pack("{s:i}", "signal", atoi(sig));
	else
		body = json_pack("{s:s}", "signal", sig);
	/* The terminal's foreground job, as its keys would reach it. */
	if (body != NULL && foreground &&
	    json_object_set_new(body, "target", json_string("foreground")) != 0)
		ctl_fatal("out of memory");
	if (body == NULL || (text = json_dumps(body, 0)) == NULL)
		ctl_fatal("out of memory");
	c = ctl_connect();
	path = ctl_session_path(argv[optind], "/signal");
	status = ctl_api(c, "POST", path, "application/json", text,
	    strlen(text), CTL_TIMEOUT_MS, &j);
	if (status != 200)
		ctl_api_fail(status, j);
	json_decref(j);
	json_decref(body);
	free(text);
	free(path);
	client_free(c);
	return (CTL_EXIT_OK);
}

/* rm [--grace MS] ID... */
int
cmd_rm(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "grace", required_argument, NULL, 'g' },
		CTL_COMMON_OPTIONS
	};
	struct client	*c;
	json_t		*j, *err;
	char		*path, suffix[64] = "", *end;
	long		 grace = 2000;
	int		 ch, status, rc = CTL_EXIT_OK, i;

	while ((ch = ctl_getopt(argc, argv, "g:", longopts)) != -1) {
		if (ch == 'g') {
			errno = 0;
			grace = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || grace < 0)
				ctl_usage(argv[0], "bad --grace '%s' (want "
				    "milliseconds)", optarg);
			snprintf(suffix, sizeof suffix, "?grace_ms=%ld", grace);
		}
	}
	if (argc - optind < 1)
		ctl_usage(argv[0], "want at least one session id");
	c = ctl_connect();
	for (i = optind; i < argc; i++) {
		path = ctl_session_path(argv[i], suffix);
		status = ctl_api(c, "DELETE", path, NULL, NULL, 0,
		    CTL_TIMEOUT_MS + (grace > INT32_MAX - CTL_TIMEOUT_MS * 2 ?
		    INT32_MAX - CTL_TIMEOUT_MS * 2 : (int)grace), &j);
		if (status != 200) {
			err = json_object_get(j, "error");
			ctl_warn("%s", ctl_json_str(err, "message",
			    "agentd refused"));
			rc = CTL_EXIT_ERROR;
		}
		json_decref(j);
		free(path);
	}
	client_free(c);
	return (rc);
}

/* A debug endpoint answered 404: say why. */
static void
cmds_debug_404(const char *what, int status, json_t *j)
{
	if (status == 404 && !client_is_unix())
		ctl_fatal("%s is served on agentd's unix socket only, not over "
		    "TCP (%s); run agentctl inside the sandbox, or use -s PATH",
		    what, client_where());
	ctl_api_fail(status, j);
}

/* stat [--json] */
int
cmd_stat(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		CTL_COMMON_OPTIONS
	};
	struct client	*c;
	json_t		*j, *lag, *comp, *list, *s, *ring;
	char		 rss[32], up[32], fds[64];
	size_t		 i, w = 2;
	int		 ch, json = 0, status;

	while ((ch = ctl_getopt(argc, argv, "j", longopts)) != -1) {
		if (ch == 'j')
			json = 1;
	}
	if (optind != argc)
		ctl_usage(argv[0], "unexpected argument '%s'", argv[optind]);
	c = ctl_connect();
	status = ctl_api(c, "GET", "/debug/stat", NULL, NULL, 0,
	    CTL_TIMEOUT_MS, &j);
	if (status != 200)
		cmds_debug_404("stat", status, j);
	if (json) {
		cmds_print_json(j);
		return (CTL_EXIT_OK);
	}
	lag = json_object_get(j, "loop_lag");
	comp = json_object_get(j, "companion");
	list = json_object_get(j, "sessions");
	cmds_age(ctl_json_int(j, "uptime_ms", 0), up, sizeof up);
	if (ctl_json_int(j, "rss_bytes", -1) >= 0)
		cmds_human((double)ctl_json_int(j, "rss_bytes", 0), rss,
		    sizeof rss);
	else
		snprintf(rss, sizeof rss, "?");
	if (ctl_json_int(j, "fd_limit", -1) > 0)
		snprintf(fds, sizeof fds, "%lld (limit %lld)",
		    ctl_json_int(j, "fds", -1), ctl_json_int(j, "fd_limit", 0));
	else
		snprintf(fds, sizeof fds, "%lld", ctl_json_int(j, "fds", -1));
	printf("agentd %s  pid %lld  uptime %s%s\n",
	    ctl_json_str(j, "version", "?"), ctl_json_int(j, "pid", 0), up,
	    ctl_json_bool(j, "stopping", 0) ? "  (shutting down)" : "");
	printf("rss %s  fds %s\n", rss, fds);
	if (ctl_json_int(lag, "samples", 0) == 0)
		printf("loop lag: measuring from now on (a sample every %lld "
		    "ms)\n", ctl_json_int(lag, "interval_ms", 0));
	else
		printf("loop lag: last %.3f ms  max %.3f ms  avg %.3f ms  "
		    "(%lld samples every %lld ms)\n",
		    json_number_value(json_object_get(lag, "last_ms")),
		    json_number_value(json_object_get(lag, "max_ms")),
		    json_number_value(json_object_get(lag, "avg_ms")),
		    ctl_json_int(lag, "samples", 0),
		    ctl_json_int(lag, "interval_ms", 0));
	printf("companion: %s, %lld restarts\n",
	    ctl_json_bool(comp, "running", 0) ? "running" : "not running",
	    ctl_json_int(comp, "restarts", 0));
	printf("connections: %lld open, %lld total; %lld requests\n",
	    ctl_json_int(j, "connections_open", 0),
	    ctl_json_int(j, "connections_total", 0),
	    ctl_json_int(j, "http_requests", 0));
	printf("sessions: %lld running, %lld held, %lld started; rings %lld "
	    "bytes\n", ctl_json_int(j, "sessions_running", 0),
	    ctl_json_int(j, "sessions_total", 0),
	    ctl_json_int(j, "sessions_started", 0),
	    ctl_json_int(j, "ring_bytes_total", 0));
	if (json_array_size(list) == 0) {
		json_decref(j);
		client_free(c);
		return (CTL_EXIT_OK);
	}
	json_array_foreach(list, i, s) {
		if (strlen(ctl_json_str(s, "id", "")) > w)
			w = strlen(ctl_json_str(s, "id", ""));
	}
	printf("\n%-*s  %-7s  %7s  %7s  %10s  %10s  %8s  %8s  %8s  %10s  %10s\n",
	    (int)w, "ID", "STATE", "PID", "READERS", "RING", "HELD", "CHUNKS",
	    "OLDEST", "NEWEST", "DROPPED", "DROPPED_B");
	json_array_foreach(list, i, s) {
		ring = json_object_get(s, "ring");
		printf("%-*s  %-7s  %7lld  %7lld  %10lld  %10lld  %8lld  %8lld  "
		    "%8lld  %10lld  %10lld\n", (int)w,
		    ctl_json_str(s, "id", "?"), ctl_json_str(s, "state", "?"),
		    ctl_json_int(s, "pid", 0), ctl_json_int(s, "readers", 0),
		    ctl_json_int(ring, "capacity", 0),
		    ctl_json_int(ring, "held_bytes", 0),
		    ctl_json_int(ring, "held_chunks", 0),
		    ctl_json_int(ring, "oldest", 0),
		    ctl_json_int(ring, "newest", 0),
		    ctl_json_int(ring, "dropped_chunks", 0),
		    ctl_json_int(ring, "dropped_bytes", 0));
	}
	json_decref(j);
	client_free(c);
	return (CTL_EXIT_OK);
}

/* logs [-n LINES] [--json] */
int
cmd_logs(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "lines", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		CTL_COMMON_OPTIONS
	};
	struct client	*c;
	json_t		*j, *lines, *v;
	char		*end;
	size_t		 i, n, first = 0;
	long		 last = -1;
	int		 ch, json = 0, status;

	while ((ch = ctl_getopt(argc, argv, "n:j", longopts)) != -1) {
		if (ch == 'j')
			json = 1;
		else if (ch == 'n') {
			errno = 0;
			last = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || last < 0)
				ctl_usage(argv[0], "bad -n '%s'", optarg);
		}
	}
	if (optind != argc)
		ctl_usage(argv[0], "unexpected argument '%s'", argv[optind]);
	c = ctl_connect();
	status = ctl_api(c, "GET", "/debug/logs", NULL, NULL, 0,
	    CTL_TIMEOUT_MS, &j);
	if (status != 200)
		cmds_debug_404("logs", status, j);
	if (json) {
		cmds_print_json(j);
		return (CTL_EXIT_OK);
	}
	lines = json_object_get(j, "lines");
	n = json_array_size(lines);
	if (last >= 0 && (size_t)last < n)
		first = n - last;
	for (i = first; i < n; i++) {
		v = json_array_get(lines, i);
		printf("%s\n", json_is_string(v) ? json_string_value(v) : "?");
	}
	json_decref(j);
	client_free(c);
	return (CTL_EXIT_OK);
}

/* cast ID: the session's recording (asciicast v2) to stdout. */
int
cmd_cast(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		CTL_COMMON_OPTIONS
	};
	struct client_resp	 resp;
	struct client		*c;
	json_t			*j;
	char			*path, cause[CLIENT_CAUSE_MAX];
	int			 e;

	path = cmds_one_session(argc, argv, longopts, "/cast");
	c = ctl_connect();
	if (client_request(c, "GET", path, NULL, NULL, 0, CTL_TIMEOUT_MS,
	    &resp, cause, sizeof cause) != 0)
		ctl_fatal("%s", cause);
	if (resp.status != 200) {
		j = json_loadb(resp.body, resp.len, 0, NULL);
		ctl_api_fail(resp.status, j);
	}
	if ((e = ctl_write_all(STDOUT_FILENO, resp.body, resp.len)) != 0)
		ctl_fatal("stdout: %s", strerror(-e));
	client_resp_free(&resp);
	free(path);
	client_free(c);
	return (CTL_EXIT_OK);
}
