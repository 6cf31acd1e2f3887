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
#include "collapse.h"
#include "config.h"
#include "connect.h"
#include "envd.h"
#include "envfiles.h"
#include "envhost.h"
#include "envnfs.h"
#include "envstate.h"
#include "freeze.h"
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
static struct event_base *envd_base;

static void	envd_health(struct http_req *, const struct pty_user *, int);
static void	envd_init(struct http_req *, const struct pty_user *, int);
static void	envd_envs(struct http_req *, const struct pty_user *, int);
static void	envd_metrics_get(struct http_req *, const struct pty_user *,
		    int);

static struct sysmetrics_cpu envd_cpu_last;	/* GET /metrics' previous */

static const struct envd_route envd_routes[] = {
	{ "/health", EVHTTP_REQ_GET | EVHTTP_REQ_HEAD, ENVD_ROUTE_OPEN,
	  envd_health },
	{ "/init", EVHTTP_REQ_POST, ENVD_ROUTE_SIGNED, envd_init },
	{ "/envs", EVHTTP_REQ_GET, 0, envd_envs },
	{ "/metrics", EVHTTP_REQ_GET, 0, envd_metrics_get },
};

/* Register the services and listen. */
int
envd_start(struct event_base *base, struct config *cfg)
{
	size_t	i;

	envd_cfg = cfg;
	envd_base = base;
	if (cfg->envd_listen[0] == NULL && cfg->envd_vsock_listen[0] == NULL)
		return (0);
	envd_connect_init(cfg->envd_max_message, envstate_user);
	envd_route_register(envd_routes, nitems(envd_routes));
	process_register(base, cfg);
	fs_register(base, cfg);
	envfiles_register(cfg);
	compose_register(cfg);
	freeze_register(base, cfg);
	collapse_register();
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

/* A string field of o: 0 (absent or null: *out NULL), -1 when no string. */
static int
envd_init_str(json_t *o, const char *name, const char **out)
{
	json_t	*v = json_object_get(o, name);

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return (0);
	if (!json_is_string(v) ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return (-1);
	*out = json_string_value(v);
	return (0);
}

/* The NFS mounts made (cause NULL), or not: /init's answer. */
static void
envd_init_mounted(const char *cause, void *arg)
{
	struct http_req	 hr = { .req = arg };
	struct proto_buf b = { 0 };

	if (cause != NULL) {
		envd_plain_fail(&hr, 400, "failed to setup NFS volumes: %s",
		    cause);
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(hr.req),
	    "Cache-Control", "no-store");
	http_reply_raw(hr.req, 204, "text/plain", &b);
}

/*
 * POST /init.  The token first (envd's rules without MMDS: the header's
 * token, else the body's accessToken being agentd's, else none set yet);
 * then every field is checked before any is applied; an /init whose
 * timestamp is older than the newest seen is answered 204 and ignored.
 */
static void
envd_init(struct http_req *hr, const struct pty_user *u, int authorized)
{
	struct proto_buf	 b = { 0 };
	struct pty_user		 pu;
	json_error_t		 jerr;
	json_t			*o, *v, *vars = NULL, *mounts;
	const char		*user, *wd, *tok, *ts, *ca, *ip, *lc;
	char			 msg[256], *norm;
	int64_t			 ns = 0;
	int			 status = 400;

	if (hr->body_len == 0)
		o = json_object();
	else if ((o = json_loadb(hr->body, hr->body_len, 0, &jerr)) == NULL ||
	    !json_is_object(o)) {
		json_decref(o);
		envd_plain_fail(hr, 400, "the body is not a JSON object");
		return;
	}
	/* Every /init let in thaws what a /freeze froze (envd's deferred
	   one), whatever its fields say; one not let in thaws nothing. */
	v = json_object_get(o, "accessToken");
	if (authorized || (json_is_string(v) && ct_equal(json_string_value(v),
	    json_string_length(v), envd_cfg->token, envd_cfg->token_len)))
		freeze_thaw_deferred();
	if (envd_init_str(o, "defaultUser", &user) != 0 ||
	    envd_init_str(o, "defaultWorkdir", &wd) != 0 ||
	    envd_init_str(o, "accessToken", &tok) != 0 ||
	    envd_init_str(o, "timestamp", &ts) != 0 ||
	    envd_init_str(o, "caBundle", &ca) != 0 ||
	    envd_init_str(o, "hyperloopIP", &ip) != 0 ||
	    envd_init_str(o, "lifecycleID", &lc) != 0 ||
	    (lc != NULL && strchr(lc, '\n') != NULL)) {
		cause_set(msg, sizeof msg, "defaultUser, defaultWorkdir, "
		    "accessToken, timestamp, caBundle, hyperloopIP and "
		    "lifecycleID are strings");
		goto fail;
	}
	if (!authorized && (tok == NULL || !ct_equal(tok, strlen(tok),
	    envd_cfg->token, envd_cfg->token_len))) {
		status = 401;
		cause_set(msg, sizeof msg, tok == NULL ? "access token reset "
		    "not authorized" : "access token validation failed");
		goto fail;
	}
	if ((vars = json_object_get(o, "envVars")) != NULL &&
	    json_is_null(vars))
		vars = NULL;
	if (vars != NULL && envstate_check_vars(vars, msg, sizeof msg) != 0)
		goto fail;
	if (user != NULL && *user != '\0' &&
	    pty_user_lookup(user, &pu, msg, sizeof msg) != 0) {
		envd_plain_fail(hr, 400, "defaultUser: %s", msg);
		json_decref(o);
		return;
	}
	if ((mounts = json_object_get(o, "volumeMounts")) != NULL &&
	    json_is_null(mounts))
		mounts = NULL;
	if (mounts != NULL && envnfs_check(mounts, msg, sizeof msg) != 0)
		goto fail;
	if ((ts != NULL && envhost_time_parse(ts, &ns, msg, sizeof msg) != 0) ||
	    (ca != NULL && *ca != '\0' &&
	    envhost_pem_check(ca, msg, sizeof msg) != 0) ||
	    (ip != NULL && envhost_ip_check(ip, msg, sizeof msg) != 0))
		goto fail;
	if (ts != NULL && !envstate_take_timestamp(ns)) {
		log_info("%s: a stale /init (timestamp %s): ignored", __func__,
		    ts);
		goto done;
	}
	if (vars != NULL && envstate_replace_vars(vars, msg, sizeof msg) != 0)
		goto fail;
	*msg = '\0';
	if (ts != NULL && envd_cfg->clock_step &&
	    envhost_clock_set(ns, msg, sizeof msg) != 0)
		log_info("%s: the clock to %s: %s", __func__, ts,
		    *msg != '\0' ? msg : "set");
	if (tok != NULL)
		envd_take_token(tok);
	if (ip != NULL) {
		if (envhost_hosts_set(ip, msg, sizeof msg) != 0)
			log_warn("%s: hyperloopIP: %s", __func__, msg);
		else
			envstate_set_hyperloop(ip);
	}
	if (user != NULL && *user != '\0')
		envstate_set_user(user);
	if (wd != NULL && *wd != '\0')
		envstate_set_workdir(wd);
	if (ca != NULL && *ca != '\0') {
		if (envhost_ca_install(ca, envstate_ca(), &norm, msg,
		    sizeof msg) != 0) {
			free(norm);
			envd_plain_fail(hr, 400, "failed to install CA bundle: "
			    "%s", msg);
			json_decref(o);
			return;
		}
		envstate_set_ca(norm);
		free(norm);
	}
	if (mounts != NULL && envnfs_start(envd_base, mounts, lc,
	    envd_init_mounted, hr->req) == 1) {
		json_decref(o);
		return;		/* answered when mounted, 10 s at most */
	}
done:
	json_decref(o);
	log_debug("%s: user %s, workdir %s", __func__, envstate_user(),
	    envstate_workdir() != NULL ? envstate_workdir() : "-");
	evhttp_add_header(evhttp_request_get_output_headers(hr->req),
	    "Cache-Control", "no-store");
	http_reply_raw(hr->req, 204, "text/plain", &b);
	return;
fail:
	json_decref(o);
	envd_plain_fail(hr, status, "%s", msg);
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
	freeze_free();
	fs_free();
	process_free_all();
	envstate_free();
}
