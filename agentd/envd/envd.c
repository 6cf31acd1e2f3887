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

#include "compose.h"
#include "config.h"
#include "connect.h"
#include "envd.h"
#include "envfiles.h"
#include "fs.h"
#include "http.h"
#include "httpcore.h"
#include "log.h"
#include "process.h"
#include "proto.h"
#include "pty.h"
#include "sysmetrics.h"
#include "util.h"

#define ENVD_VARS_MAX		4096	/* /init's envVars at most, merged */
#define ENVD_VARS_BYTES_MAX	(1 << 20) /* their NAME=value bytes, merged */

static struct config	*envd_cfg;
static char		*envd_user;	/* /init's defaultUser */
static char		*envd_workdir;	/* /init's defaultWorkdir */
static char		**envd_vars;	/* /init's envVars, "K=V" */
static json_t		*envd_vars_json;
static char		*envd_token;	/* /init's accessToken, if taken */
static char		*envd_none[] = { NULL };

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
	envd_connect_init(cfg->envd_max_message);
	envd_route_register(envd_routes, nitems(envd_routes));
	process_register(base, cfg);
	fs_register(base, cfg);
	envfiles_register(cfg);
	compose_register(cfg);
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

/* The default user's name: /init's, else root (else agentd's own uid). */
const char *
envd_default_user(void)
{
	static char	uid[32];

	if (envd_user != NULL)
		return (envd_user);
	if (geteuid() == 0)
		return ("root");
	snprintf(uid, sizeof uid, "%lu", (unsigned long)geteuid());
	return (uid);
}

/* /init's defaultWorkdir. */
const char *
envd_default_workdir(void)
{
	return (envd_workdir);
}

/* /init's envVars. */
char *const *
envd_env(void)
{
	return (envd_vars != NULL ? envd_vars : envd_none);
}

/* GET /health: 204. */
static void
envd_health(struct http_req *hr, const struct pty_user *u, int authorized)
{
	struct proto_buf	b = { 0 };

	http_reply_raw(hr->req, 204, "text/plain", &b);
}

/* Replace a kept string. */
static void
envd_keep(char **where, const char *v)
{
	free(*where);
	*where = *v != '\0' ? xstrdup(v) : NULL;
}

/* Take /init's envVars; -1 with a message for a bad one. */
static int
envd_take_vars(json_t *vars, char *msg, size_t len)
{
	const char	*k;
	json_t		*v;
	char		**list;
	size_t		 n = 0, bytes = 0;

	if (!json_is_object(vars)) {
		cause_set(msg, len, "envVars must be an object of strings");
		return (-1);
	}
	if (json_object_size(vars) > ENVD_VARS_MAX) {
		cause_set(msg, len, "envVars: more than %d", ENVD_VARS_MAX);
		return (-1);
	}
	json_object_foreach(vars, k, v) {
		if (!json_is_string(v) || *k == '\0' || strchr(k, '=') != NULL) {
			cause_set(msg, len, "envVars: '%.64s' is no NAME with a "
			    "string", k);
			return (-1);
		}
	}
	/* envd merges them into what an earlier /init set: the sum fits. */
	json_object_foreach(envd_vars_json, k, v) {
		if (json_object_get(vars, k) == NULL) {
			n++;
			bytes += strlen(k) + json_string_length(v) + 2;
		}
	}
	json_object_foreach(vars, k, v) {
		n++;
		bytes += strlen(k) + json_string_length(v) + 2;
	}
	if (n > ENVD_VARS_MAX || bytes > ENVD_VARS_BYTES_MAX) {
		cause_set(msg, len, "envVars: more than %d, or more than %d "
		    "bytes, with those set before", ENVD_VARS_MAX,
		    ENVD_VARS_BYTES_MAX);
		return (-1);
	}
	n = 0;
	if (envd_vars_json == NULL)
		envd_vars_json = json_object();
	json_object_update(envd_vars_json, vars);
	list = xcalloc(json_object_size(envd_vars_json) + 1, sizeof *list);
	json_object_foreach(envd_vars_json, k, v)
		xasprintf(&list[n++], "%s=%s", k, json_string_value(v));
	proto_strv_free(envd_vars);
	envd_vars = list;
	return (0);
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
	if (envd_cfg->token != NULL && envd_cfg->token != envd_token) {
		if (!ct_equal(tok, strlen(tok), envd_cfg->token,
		    envd_cfg->token_len))
			log_warn("%s: /init's accessToken differs from "
			    "--token-file's; keeping agentd's", __func__);
		return;
	}
	if (envd_token != NULL)
		explicit_bzero(envd_token, strlen(envd_token));
	free(envd_token);
	envd_token = xstrdup(tok);
	envd_cfg->token = envd_token;
	envd_cfg->token_len = strlen(envd_token);
	httpcore_token(envd_token, envd_cfg->token_len);
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
	    envd_take_vars(v, msg, sizeof msg) != 0) {
		json_decref(o);
		envd_plain_fail(hr, 400, "%s", msg);
		return;
	}
	if (user != NULL)
		envd_keep(&envd_user, user);
	if (wd != NULL)
		envd_keep(&envd_workdir, wd);
	if (tok != NULL)
		envd_take_token(tok);
	json_decref(o);
	log_debug("%s: user %s, workdir %s", __func__, envd_default_user(),
	    envd_workdir != NULL ? envd_workdir : "-");
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

	if (envd_vars_json == NULL)
		proto_buf_append(&b, "{}", 2);
	else {
		if ((s = json_dumps(envd_vars_json, JSON_COMPACT)) == NULL)
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
	free(envd_user);
	free(envd_workdir);
	proto_strv_free(envd_vars);
	json_decref(envd_vars_json);
	envd_user = envd_workdir = NULL;
	envd_vars = NULL;
	envd_vars_json = NULL;
}
