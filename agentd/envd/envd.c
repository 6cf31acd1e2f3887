/*
 * envd.c -- the envd listeners' wiring and plain routes: GET /health,
 * POST /init, GET /envs (see envd.h).
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/http.h>
#include <jansson.h>

#include "config.h"
#include "connect.h"
#include "envd.h"
#include "envfiles.h"
#include "envstate.h"
#include "fs.h"
#include "http.h"
#include "httpcore.h"
#include "log.h"
#include "process.h"
#include "proto.h"
#include "pty.h"
#include "sysmetrics.h"
#include "util.h"

static struct config	*envd_cfg;

static void	envd_health(struct http_req *, const struct pty_user *, int);
static void	envd_init(struct http_req *, const struct pty_user *, int);
static void	envd_envs(struct http_req *, const struct pty_user *, int);
static void	envd_metrics_get(struct http_req *, const struct pty_user *,
		    int);

static struct sysmetrics_cpu envd_cpu_last;	/* GET /metrics' previous */

static const struct envd_route envd_routes[] = {
	{ "/health", EVHTTP_REQ_GET | EVHTTP_REQ_HEAD, ENVD_ROUTE_OPEN,
	  envd_health },
	{ "/init", EVHTTP_REQ_POST, 0, envd_init },
	{ "/envs", EVHTTP_REQ_GET, 0, envd_envs },
	{ "/metrics", EVHTTP_REQ_GET, 0, envd_metrics_get },
};

/* Register the services and listen. */
int
envd_start(struct event_base *base, struct config *cfg)
{
	size_t	i;

	envd_cfg = cfg;
	if (cfg->envd_listen[0] == NULL && cfg->envd_vsock_listen[0] == NULL)
		return (0);
	envd_connect_init(cfg->envd_max_message, envstate_user);
	envd_route_register(envd_routes, nitems(envd_routes));
	process_register(base, cfg);
	fs_register(base, cfg);
	envfiles_register(cfg);
	for (i = 0; cfg->envd_listen[i] != NULL; i++) {
		if (http_listen_routes(cfg->envd_listen[i], envd_route) != 0)
			return (-1);
	}
	for (i = 0; cfg->envd_vsock_listen[i] != NULL; i++) {
		if (http_listen_routes_vsock(cfg->envd_vsock_listen[i],
		    envd_route) != 0)
			return (-1);
	}
	return (0);
}

/* GET /health: 204. */
static void
envd_health(struct http_req *hr, const struct pty_user *u, int authorized)
{
	struct proto_buf	b = { 0 };

	http_reply_raw(hr->req, 204, "text/plain", &b);
}

/*
 * /init's accessToken: agentd's token when it has none (on every listener
 * from now on); the same token again is fine; another one replaces a token
 * /init set, but never --token-file's.
 */
static void
envd_take_token(const char *tok)
{
	if (*tok == '\0')
		return;
	if (envd_cfg->token != NULL && !envstate_token_from_init()) {
		if (!ct_equal(tok, strlen(tok), envd_cfg->token,
		    envd_cfg->token_len))
			log_warn("%s: /init's accessToken differs from "
			    "--token-file's; keeping agentd's", __func__);
		return;
	}
	if (envd_cfg->token != NULL) {
		explicit_bzero(envd_cfg->token, envd_cfg->token_len);
		free(envd_cfg->token);
	}
	envd_cfg->token = xstrdup(tok);
	envd_cfg->token_len = strlen(tok);
	httpcore_token(envd_cfg->token, envd_cfg->token_len);
	envstate_set_token_from_init(1);
	log_info("%s: the token of /init is agentd's now", __func__);
}

/* POST /init */
static void
envd_init(struct http_req *hr, const struct pty_user *u, int authorized)
{
	struct proto_buf	 b = { 0 };
	struct pty_user		 pu;
	json_error_t		 jerr;
	json_t			*o, *v;
	const char		*user = NULL, *wd = NULL, *tok = NULL;
	char			 msg[256];

	if (hr->body_len == 0)
		o = json_object();
	else if ((o = json_loadb(hr->body, hr->body_len, 0, &jerr)) == NULL ||
	    !json_is_object(o)) {
		json_decref(o);
		envd_plain_fail(hr, 400, "the body is not a JSON object");
		return;
	}
	if ((v = json_object_get(o, "defaultUser")) != NULL &&
	    !json_is_null(v)) {
		if (!json_is_string(v))
			goto bad;
		user = json_string_value(v);
		if (*user != '\0' && pty_user_lookup(user, &pu, msg,
		    sizeof msg) != 0) {
			json_decref(o);
			envd_plain_fail(hr, 400, "defaultUser: %s", msg);
			return;
		}
	}
	if ((v = json_object_get(o, "defaultWorkdir")) != NULL &&
	    !json_is_null(v)) {
		if (!json_is_string(v))
			goto bad;
		wd = json_string_value(v);
	}
	if ((v = json_object_get(o, "accessToken")) != NULL &&
	    !json_is_null(v)) {
		if (!json_is_string(v))
			goto bad;
		tok = json_string_value(v);
	}
	if ((v = json_object_get(o, "envVars")) != NULL && !json_is_null(v) &&
	    envstate_merge_vars(v, msg, sizeof msg) != 0) {
		json_decref(o);
		envd_plain_fail(hr, 400, "%s", msg);
		return;
	}
	if (user != NULL)
		envstate_set_user(user);
	if (wd != NULL)
		envstate_set_workdir(wd);
	if (tok != NULL)
		envd_take_token(tok);
	json_decref(o);
	log_debug("%s: user %s, workdir %s", __func__, envstate_user(),
	    envstate_workdir() != NULL ? envstate_workdir() : "-");
	http_reply_raw(hr->req, 204, "text/plain", &b);
	return;
bad:
	json_decref(o);
	envd_plain_fail(hr, 400, "defaultUser, defaultWorkdir and accessToken "
	    "are strings");
}

/* GET /envs */
static void
envd_envs(struct http_req *hr, const struct pty_user *u, int authorized)
{
	struct proto_buf	 b = { 0 };
	char			*s;

	if (envstate_vars() == NULL)
		proto_buf_append(&b, "{}", 2);
	else {
		if ((s = json_dumps(envstate_vars(), JSON_COMPACT)) == NULL)
			fatal("%s: out of memory", __func__);
		proto_buf_append(&b, s, strlen(s));
		free(s);
	}
	http_reply_raw(hr->req, 200, "application/json", &b);
}

/* GET /metrics: the sandbox's CPU, memory and disk (sysmetrics.h). */
static void
envd_metrics_get(struct http_req *hr, const struct pty_user *u,
    int authorized)
{
	struct proto_buf	b = { 0 };

	if (sysmetrics_render(&envd_cpu_last, &b) != 0) {
		log_warn("%s: /proc/stat, /proc/meminfo or statvfs(\"/\") "
		    "failed", __func__);
		envd_plain_fail(hr, 500, "the metrics cannot be read");
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(hr->req),
	    "Cache-Control", "no-store");
	http_reply_raw(hr->req, 200, "application/json", &b);
}

/* The session observer's part. */
void
envd_session_event(struct session *s, int events)
{
	process_session_event(s, events);
}

/* Free what /init kept, and the processes' records. */
void
envd_free(void)
{
	fs_free();
	process_free_all();
	envstate_free();
}
