/*
 * envstate.c -- what envd's POST /init set, and its hand-over across a
 * live upgrade (see envstate.h).
 */
#include <sys/types.h>

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
static int	 envstate_init_token;		/* the token is /init's */
static char	*envstate_none[] = { NULL };

static void	envstate_keep(char **, const char *);

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

/* /init's envVars as an object. */
const json_t *
envstate_vars(void)
{
	return (envstate_json);
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

/* Merge envVars into those set before, within the limits. */
int
envstate_merge_vars(json_t *vars, char *cause, size_t len)
{
	const char	*k;
	json_t		*v;
	char		**list;
	size_t		 n = 0, bytes = 0;

	if (!json_is_object(vars)) {
		cause_set(cause, len, "envVars must be an object of strings");
		return (-1);
	}
	if (json_object_size(vars) > ENVSTATE_VARS_MAX) {
		cause_set(cause, len, "envVars: more than %d",
		    ENVSTATE_VARS_MAX);
		return (-1);
	}
	json_object_foreach(vars, k, v) {
		if (!json_is_string(v) || *k == '\0' || strchr(k, '=') != NULL) {
			cause_set(cause, len, "envVars: '%.64s' is no NAME with "
			    "a string", k);
			return (-1);
		}
	}
	/* envd merges them into what an earlier /init set: the sum fits. */
	json_object_foreach(envstate_json, k, v) {
		if (json_object_get(vars, k) == NULL) {
			n++;
			bytes += strlen(k) + json_string_length(v) + 2;
		}
	}
	json_object_foreach(vars, k, v) {
		n++;
		bytes += strlen(k) + json_string_length(v) + 2;
	}
	if (n > ENVSTATE_VARS_MAX || bytes > ENVSTATE_VARS_BYTES_MAX) {
		cause_set(cause, len, "envVars: more than %d, or more than %d "
		    "bytes, with those set before", ENVSTATE_VARS_MAX,
		    ENVSTATE_VARS_BYTES_MAX);
		return (-1);
	}
	n = 0;
	if (envstate_json == NULL)
		envstate_json = json_object();
	json_object_update(envstate_json, vars);
	list = xcalloc(json_object_size(envstate_json) + 1, sizeof *list);
	json_object_foreach(envstate_json, k, v)
		xasprintf(&list[n++], "%s=%s", k, json_string_value(v));
	proto_strv_free(envstate_list);
	envstate_list = list;
	return (0);
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

/* Write the [envd] section: user, workdir, each var, the token's origin. */
void
envstate_save(struct upgstate_w *w)
{
	const char	*k;
	json_t		*v;
	char		*item;
	int		 len;

	if (envstate_default_user == NULL && envstate_default_workdir == NULL &&
	    envstate_json == NULL && !envstate_init_token)
		return;
	upgstate_section(w, "envd");
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
}

/* Read an [envd] section back. */
void
envstate_load(struct upgstate *r)
{
	const char	*key, *value, *eq;
	json_t		*vars = json_object(), *s;
	char		 cause[128];
	size_t		 len;

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
		else
			log_warn("%s: line %zu: ignoring %s", __func__,
			    upgstate_line(r), key);
	}
	upgstate_unread(r);
	if (json_object_size(vars) > 0 &&
	    envstate_merge_vars(vars, cause, sizeof cause) != 0)
		log_warn("%s: ignoring the envVars: %s", __func__, cause);
	json_decref(vars);
	log_debug("%s: user %s, workdir %s, %zu variables, token from %s",
	    __func__, envstate_user(), envstate_default_workdir != NULL ?
	    envstate_default_workdir : "-", json_object_size(envstate_json),
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
	envstate_default_user = envstate_default_workdir = NULL;
	envstate_list = NULL;
	envstate_json = NULL;
	envstate_init_token = 0;
}
