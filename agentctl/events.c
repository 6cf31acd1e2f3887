/*
 * events.c -- agentctl events: the sandbox's event feed (GET /v1/events),
 * printed once or followed by long-polls.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "ctl.h"

#define EVENTS_OPT_SESSION	CTL_OPT_FIRST
#define EVENTS_OPT_TYPES	(CTL_OPT_FIRST + 1)
#define EVENTS_OPT_CURSOR	(CTL_OPT_FIRST + 2)

static void	events_print(json_t *, int json);
static unsigned long long events_number(const char *cmd, const char *opt,
		    const char *);

/* A decimal option, or a usage error. */
static unsigned long long
events_number(const char *cmd, const char *opt, const char *s)
{
	unsigned long long	 n;
	char			*end;

	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || *s == '\0' || *s == '-')
		ctl_usage(cmd, "bad %s '%s'", opt, s);
	return (n);
}

/* One event: "ID AT TYPE SESSION key=value...", or its JSON line. */
static void
events_print(json_t *ev, int json)
{
	const char	*key;
	json_t		*v;
	char		*s;

	if (json) {
		json_dumpf(ev, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		return;
	}
	printf("%lld  %s  %-15s  %s", ctl_json_int(ev, "id", 0),
	    ctl_json_str(ev, "at", "?"), ctl_json_str(ev, "type", "?"),
	    ctl_json_str(ev, "session", "-"));
	json_object_foreach(ev, key, v) {
		if (strcmp(key, "id") == 0 || strcmp(key, "at") == 0 ||
		    strcmp(key, "type") == 0 || strcmp(key, "session") == 0)
			continue;
		if (json_is_string(v))
			printf("  %s=%s", key, json_string_value(v));
		else if ((s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)) !=
		    NULL) {
			printf("  %s=%s", key, s);
			free(s);
		}
	}
	fputc('\n', stdout);
}

/* events [-f] [-c N] [--session ID] [--types LIST] [--cursor N] [--json] */
int
cmd_events(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "count", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "session", required_argument, NULL, EVENTS_OPT_SESSION },
		{ "types", required_argument, NULL, EVENTS_OPT_TYPES },
		{ "cursor", required_argument, NULL, EVENTS_OPT_CURSOR },
		CTL_COMMON_OPTIONS
	};
	struct client		*c;
	json_t			*j, *ev;
	char			*session = NULL, *types = NULL, *path;
	unsigned long long	 cursor = 0, count = 0, printed = 0, dropped;
	size_t			 i;
	int			 ch, follow = 0, json = 0, status, wait;

	while ((ch = ctl_getopt(argc, argv, "fc:j", longopts)) != -1) {
		switch (ch) {
		case 'f':
			follow = 1;
			break;
		case 'c':
			count = events_number(argv[0], "-c", optarg);
			if (count == 0)
				ctl_usage(argv[0], "-c wants 1 or more");
			break;
		case 'j':
			json = 1;
			break;
		case EVENTS_OPT_SESSION:
			free(session);
			session = ctl_escape(optarg);
			break;
		case EVENTS_OPT_TYPES:
			free(types);
			types = ctl_escape(optarg);
			break;
		case EVENTS_OPT_CURSOR:
			cursor = events_number(argv[0], "--cursor", optarg);
			break;
		}
	}
	if (optind != argc)
		ctl_usage(argv[0], "unexpected argument '%s'", argv[optind]);
	if (count > 0)
		follow = 1;	/* wait for them */

	c = ctl_connect();
	for (;;) {
		wait = follow ? CTL_POLL_WAIT_MS : 0;
		if (asprintf(&path, "/v1/events?cursor=%llu&wait_ms=%d%s%s%s%s",
		    cursor, wait, session != NULL ? "&session=" : "",
		    session != NULL ? session : "", types != NULL ? "&types=" :
		    "", types != NULL ? types : "") == -1)
			ctl_fatal("out of memory");
		status = ctl_api(c, "GET", path, NULL, NULL, 0,
		    wait + CTL_POLL_SLACK_MS, &j);
		free(path);
		if (status != 200)
			ctl_api_fail(status, j);
		if ((dropped = (unsigned long long)ctl_json_int(j,
		    "dropped_events", 0)) > 0)
			ctl_warn("%llu events dropped after %llu (the feed "
			    "holds agentd's --max-events)", dropped, cursor);
		json_array_foreach(json_object_get(j, "events"), i, ev) {
			events_print(ev, json);
			if (count > 0 && ++printed == count)
				break;
		}
		cursor = (unsigned long long)ctl_json_int(j, "cursor", 0);
		json_decref(j);
		fflush(stdout);
		if (!follow || (count > 0 && printed == count))
			break;
	}
	free(session);
	free(types);
	client_free(c);
	return (CTL_EXIT_OK);
}
