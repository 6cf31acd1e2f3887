/*
 * envstate.c -- what envd's POST /init set, and its hand-over across a
 * live upgrade (see envstate.h).
 */
#include <sys/types.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "envstate.h"
#include "log.h"
#include "proto.h"
#include "upgstate.h"
#include "util.h"

static char	*envstate_default_user;		/* /init's defaultUser */
static char	*envstate_default_workdir;	/* /init's defaultWorkdir */
static char	**envstate_list;		/* /init's envVars, "K=V" */
static json_t	*envstate_json;			/* the same, an object */
static json_t	*envstate_all;			/* the same and the internal */
static int	 envstate_init_token;		/* the token is /init's */
static char	*envstate_hyperloop_ip;		/* /init's hyperloopIP */
static char	*envstate_ca_pem;		/* the CA installed, normalized */
static int64_t	 envstate_ts = INT64_MIN;	/* the newest timestamp, ns */
static char	*envstate_none[] = { NULL };
static json_t	*(*envstate_proc_source)(void);	/* process.c's records */
static json_t	*envstate_procs;		/* those read back */
static json_t	*envstate_mounts;		/* path: lifecycle */

static void	envstate_keep(char **, const char *);
static void	envstate_rebuild(void);

/* The default user's name: /init's, else root (else agentd's own uid). */
const char *
envstate_user(void)
{
	static char	uid[32];

	if (envstate_default_user != NULL)
		return (envstate_default_user);
	if (geteuid() == 0)
		return ("root");
	snprintf(uid, sizeof uid, "%lu", (unsigned long)geteuid());
	return (uid);
}

/* /init's defaultWorkdir. */
const char *
envstate_workdir(void)
{
	return (envstate_default_workdir);
}

/* /init's envVars as "K=V". */
char *const *
envstate_env(void)
{
	return (envstate_list != NULL ? envstate_list : envstate_none);
}

/* /init's envVars and the internal ones as an object. */
const json_t *
envstate_vars(void)
{
	return (envstate_all);
}

/* The list and the object again: the user's, then the internal ones. */
static void
envstate_rebuild(void)
{
	const char	*k;
	json_t		*v;
	char		**list, *url;
	size_t		 n = 0;

	json_decref(envstate_all);
	envstate_all = NULL;
	if (envstate_json != NULL)
		envstate_all = json_copy(envstate_json);
	if (envstate_hyperloop_ip != NULL) {
		if (envstate_all == NULL)
			envstate_all = json_object();
		xasprintf(&url, "http://%s", envstate_hyperloop_ip);
		json_object_set_new(envstate_all, ENVSTATE_EVENTS_VAR,
		    json_string(url));
		free(url);
	}
	proto_strv_free(envstate_list);
	envstate_list = NULL;
	if (envstate_all == NULL)
		return;
	list = xcalloc(json_object_size(envstate_all) + 1, sizeof *list);
	json_object_foreach(envstate_all, k, v)
		xasprintf(&list[n++], "%s=%s", k, json_string_value(v));
	envstate_list = list;
}

/* Replace a kept string; "" clears it. */
static void
envstate_keep(char **where, const char *v)
{
	free(*where);
	*where = *v != '\0' ? xstrdup(v) : NULL;
}

/* Set the default user. */
void
envstate_set_user(const char *user)
{
	envstate_keep(&envstate_default_user, user);
}

/* Set the default workdir. */
void
envstate_set_workdir(const char *wd)
{
	envstate_keep(&envstate_default_workdir, wd);
}

/* Whether vars can replace the envVars (envstate_replace_vars()'s rules). */
int
envstate_check_vars(json_t *vars, char *cause, size_t len)
{
	const char	*k;
	json_t		*v;
	size_t		 bytes = 0;

	if (!json_is_object(vars)) {
		cause_set(cause, len, "envVars must be an object of strings");
		return (-1);
	}
	json_object_foreach(vars, k, v) {
		if (!json_is_string(v) || *k == '\0' || strchr(k, '=') != NULL ||
		    strlen(json_string_value(v)) != json_string_length(v)) {
			cause_set(cause, len, "envVars: '%.64s' is no NAME with "
			    "a string", k);
			return (-1);
		}
		bytes += strlen(k) + json_string_length(v) + 2;
	}
	if (json_object_size(vars) > ENVSTATE_VARS_MAX ||
	    bytes > ENVSTATE_VARS_BYTES_MAX) {
		cause_set(cause, len, "envVars: more than %d, or more than %d "
		    "bytes", ENVSTATE_VARS_MAX, ENVSTATE_VARS_BYTES_MAX);
		return (-1);
	}
	return (0);
}

/* Replace the envVars of the last /init, within the limits. */
int
envstate_replace_vars(json_t *vars, char *cause, size_t len)
{
	if (envstate_check_vars(vars, cause, len) != 0)
		return (-1);
	/* envd's ReplaceUserVars: the set given is the set, the rest goes. */
	json_decref(envstate_json);
	envstate_json = json_object_size(vars) > 0 ? json_copy(vars) : NULL;
	envstate_rebuild();
	return (0);
}

/* /init's hyperloopIP, or NULL. */
const char *
envstate_hyperloop(void)
{
	return (envstate_hyperloop_ip);
}

/* Set the hyperloop address: E2B_EVENTS_ADDRESS follows it. */
void
envstate_set_hyperloop(const char *ip)
{
	envstate_keep(&envstate_hyperloop_ip, ip);
	envstate_rebuild();
}

/* The CA bundle installed last (normalized), or NULL. */
const char *
envstate_ca(void)
{
	return (envstate_ca_pem);
}

/* Remember the CA bundle installed. */
void
envstate_set_ca(const char *pem)
{
	envstate_keep(&envstate_ca_pem, pem);
}

/* The lifecycle path is mounted for. */
const char *
envstate_mount(const char *path)
{
	return (json_string_value(json_object_get(envstate_mounts, path)));
}

/* Note a mount made, or gone. */
void
envstate_set_mount(const char *path, const char *lifecycle)
{
	if (envstate_mounts == NULL)
		envstate_mounts = json_object();
	if (lifecycle != NULL)
		json_object_set_new(envstate_mounts, path,
		    json_string(lifecycle));
	else
		json_object_del(envstate_mounts, path);
}

/* Take ns as the newest /init's timestamp unless an older one (stale). */
int
envstate_take_timestamp(int64_t ns)
{
	if (ns < envstate_ts)
		return (0);
	envstate_ts = ns;
	return (1);
}

/* Whether agentd's token is /init's. */
int
envstate_token_from_init(void)
{
	return (envstate_init_token);
}

/* Say where agentd's token came from. */
void
envstate_set_token_from_init(int yes)
{
	envstate_init_token = yes != 0;
}

/* Name the function that gives envd's process records. */
void
envstate_set_process_source(json_t *(*fn)(void))
{
	envstate_proc_source = fn;
}

/* The process records read back, once. */
json_t *
envstate_take_processes(void)
{
	json_t	*a = envstate_procs;

	envstate_procs = NULL;
	return (a);
}

/*
 * Write the [envd] section: user, workdir, each var, the token's origin,
 * the hyperloop address, the CA bundle, the newest timestamp, and each
 * process record (one JSON object an item).
 */
void
envstate_save(struct upgstate_w *w)
{
	const char	*k;
	json_t		*v, *procs;
	char		*item;
	size_t		 i;
	int		 len;

	procs = envstate_proc_source != NULL ? envstate_proc_source() : NULL;
	if (envstate_default_user == NULL && envstate_default_workdir == NULL &&
	    envstate_json == NULL && !envstate_init_token &&
	    envstate_hyperloop_ip == NULL && envstate_ca_pem == NULL &&
	    envstate_ts == INT64_MIN && json_array_size(procs) == 0 &&
	    json_object_size(envstate_mounts) == 0) {
		json_decref(procs);
		return;
	}
	upgstate_section(w, "envd");
	json_array_foreach(procs, i, v) {
		if ((item = json_dumps(v, JSON_COMPACT)) == NULL)
			fatal("%s: out of memory", __func__);
		upgstate_put_bytes(w, "process", item, strlen(item));
		free(item);
	}
	json_decref(procs);
	json_object_foreach(envstate_mounts, k, v) {
		len = xasprintf(&item, "%s\n%s", json_string_value(v), k);
		upgstate_put_bytes(w, "mount", item, (size_t)len);
		free(item);
	}
	if (envstate_default_user != NULL)
		upgstate_put_bytes(w, "user", envstate_default_user,
		    strlen(envstate_default_user));
	if (envstate_default_workdir != NULL)
		upgstate_put_bytes(w, "workdir", envstate_default_workdir,
		    strlen(envstate_default_workdir));
	json_object_foreach(envstate_json, k, v) {
		len = xasprintf(&item, "%s=%s", k, json_string_value(v));
		upgstate_put_bytes(w, "var", item, (size_t)len);
		free(item);
	}
	if (envstate_init_token)
		upgstate_put(w, "token-from", "init");
	if (envstate_hyperloop_ip != NULL)
		upgstate_put(w, "hyperloop", "%s", envstate_hyperloop_ip);
	if (envstate_ca_pem != NULL)
		upgstate_put_bytes(w, "ca", envstate_ca_pem,
		    strlen(envstate_ca_pem));
	if (envstate_ts != INT64_MIN) {
		upgstate_put(w, "timestamp", "%" PRId64, envstate_ts);
	}
}

/* Read an [envd] section back. */
void
envstate_load(struct upgstate *r)
{
	const char	*key, *value, *eq;
	json_t		*vars = json_object(), *s;
	char		 cause[128], *end;
	size_t		 len;
	long long	 ts;

	while (upgstate_next(r, &key, &value, &len) == UPGSTATE_ITEM) {
		if (strcmp(key, "user") == 0 && strlen(value) == len)
			envstate_set_user(value);
		else if (strcmp(key, "workdir") == 0 && strlen(value) == len)
			envstate_set_workdir(value);
		else if (strcmp(key, "var") == 0 && strlen(value) == len &&
		    (eq = strchr(value, '=')) != NULL && eq != value &&
		    (s = json_string(eq + 1)) != NULL)
			json_object_setn_new(vars, value, eq - value, s);
		else if (strcmp(key, "token-from") == 0 &&
		    strcmp(value, "init") == 0)
			envstate_init_token = 1;
		else if (strcmp(key, "process") == 0 &&
		    (s = json_loadb(value, len, 0, NULL)) != NULL) {
			if (envstate_procs == NULL)
				envstate_procs = json_array();
			json_array_append_new(envstate_procs, s);
		} else if (strcmp(key, "mount") == 0 && strlen(value) == len &&
		    (eq = strchr(value, '\n')) != NULL && eq[1] == '/') {
			if (envstate_mounts == NULL)
				envstate_mounts = json_object();
			json_object_set_new(envstate_mounts, eq + 1,
			    json_stringn(value, eq - value));
		} else if (strcmp(key, "hyperloop") == 0 && strlen(value) == len)
			envstate_keep(&envstate_hyperloop_ip, value);
		else if (strcmp(key, "ca") == 0 && strlen(value) == len)
			envstate_keep(&envstate_ca_pem, value);
		else if (strcmp(key, "timestamp") == 0 && *value != '\0' &&
		    (ts = strtoll(value, &end, 10), *end == '\0'))
			envstate_ts = ts;
		else
			log_warn("%s: line %zu: ignoring %s", __func__,
			    upgstate_line(r), key);
	}
	upgstate_unread(r);
	if (envstate_replace_vars(vars, cause, sizeof cause) != 0)
		log_warn("%s: ignoring the envVars: %s", __func__, cause);
	json_decref(vars);
	log_debug("%s: user %s, workdir %s, %zu variables, token from %s",
	    __func__, envstate_user(), envstate_default_workdir != NULL ?
	    envstate_default_workdir : "-", json_object_size(envstate_all),
	    envstate_init_token ? "/init" : "the configuration");
}

/* Forget what /init set. */
void
envstate_free(void)
{
	free(envstate_default_user);
	free(envstate_default_workdir);
	proto_strv_free(envstate_list);
	json_decref(envstate_json);
	json_decref(envstate_all);
	json_decref(envstate_procs);
	json_decref(envstate_mounts);
	envstate_procs = envstate_mounts = NULL;
	free(envstate_hyperloop_ip);
	free(envstate_ca_pem);
	envstate_default_user = envstate_default_workdir = NULL;
	envstate_hyperloop_ip = envstate_ca_pem = NULL;
	envstate_list = NULL;
	envstate_json = envstate_all = NULL;
	envstate_init_token = 0;
	envstate_ts = INT64_MIN;
}
