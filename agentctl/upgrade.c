/*
 * upgrade.c -- agentctl upgrade [--sha256 HEX] PATH: POST
 * /v1/sandbox/upgrade, then wait for the successor to answer /healthz.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "client.h"
#include "ctl.h"

#define UPGRADE_WAIT_MS		20000	/* the successor answers by then */
#define UPGRADE_POLL_MS		20	/* /healthz asked this often */

/* upgrade [--sha256 HEX] PATH */
int
cmd_upgrade(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "sha256", required_argument, NULL, CTL_OPT_FIRST },
		CTL_COMMON_OPTIONS
	};
	struct client	*c;
	json_t		*req, *j = NULL, *h = NULL;
	const char	*sha = NULL;
	char		 path[PATH_MAX], *body;
	long long	 before, pid;
	int		 ch, status, waited;

	while ((ch = ctl_getopt(argc, argv, "", longopts)) != -1) {
		if (ch == CTL_OPT_FIRST)
			sha = optarg;
	}
	if (argc - optind != 1)
		ctl_usage(argv[0], "want the new agentd's path");
	/* agentd resolves nothing: the path is absolute, as agentd sees it. */
	if (argv[optind][0] == '/')
		snprintf(path, sizeof path, "%s", argv[optind]);
	else if (realpath(argv[optind], path) == NULL)
		ctl_fatal("%s: %s", argv[optind], strerror(errno));
	c = ctl_connect();
	status = ctl_api(c, "GET", "/healthz", NULL, NULL, 0, CTL_TIMEOUT_MS,
	    &h);
	before = ctl_json_int(h, "upgrades", 0);
	pid = ctl_json_int(h, "pid", 0);
	json_decref(h);
	req = json_pack("{ss}", "path", path);
	if (sha != NULL)
		json_object_set_new(req, "sha256", json_string(sha));
	if (req == NULL || (body = json_dumps(req, JSON_COMPACT)) == NULL)
		ctl_fatal("out of memory");
	json_decref(req);
	status = ctl_api(c, "POST", "/v1/sandbox/upgrade", "application/json",
	    body, strlen(body), CTL_TIMEOUT_MS, &j);
	free(body);
	if (status != 202)
		ctl_api_fail(status, j);
	printf("upgrading agentd %s to %s (pid %lld)\n",
	    ctl_json_str(j, "from_version", "?"),
	    ctl_json_str(j, "to_version", "?"), pid);
	json_decref(j);
	client_free(c);
	for (waited = 0; waited < UPGRADE_WAIT_MS; waited += UPGRADE_POLL_MS) {
		ctl_sleep_ms(UPGRADE_POLL_MS);
		c = ctl_connect();
		h = NULL;
		status = ctl_api(c, "GET", "/healthz", NULL, NULL, 0,
		    CTL_TIMEOUT_MS, &h);
		client_free(c);
		if (status == 200 && ctl_json_int(h, "upgrades", 0) > before) {
			printf("upgraded: agentd %s, pid %lld, %lld upgrades "
			    "since boot\n", ctl_json_str(h, "version", "?"),
			    ctl_json_int(h, "pid", 0),
			    ctl_json_int(h, "upgrades", 0));
			json_decref(h);
			return (CTL_EXIT_OK);
		}
		json_decref(h);
	}
	ctl_warn("agentd did not report the upgrade within %d ms (the "
	    "hand-over may have failed: see its log)", UPGRADE_WAIT_MS);
	return (CTL_EXIT_ERROR);
}
