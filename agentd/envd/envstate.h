/*
 * envstate.h -- what envd's POST /init set, in one leaf: the default user,
 * the default workdir, the environment variables, and where agentd's token
 * came from (its configuration: --token-file, AGENTD_TOKEN, agentd.token=;
 * or /init's accessToken).  What /init sets later (a CA bundle, the
 * hyperloop address, volume mounts) goes here too.
 *
 * envd.c's /init sets it; the services (process.c, fs.c, envfiles.c) read
 * it; a live upgrade hands it over (envstate_save() writes an [envd]
 * section of upgstate.h's text, envstate_load() reads it back), so that
 * the same call runs as the same user, in the same folder, with the same
 * variables, after any number of upgrades.  The token's bytes travel in
 * the state's own "token" item (upgrade.c); only its origin is here.
 *
 * Nothing here knows envd's routes, the Connect core or the listeners.
 * Errors: -1 with a cause.  Event loop thread only.
 */
#ifndef AGENTD_ENVSTATE_H
#define AGENTD_ENVSTATE_H

#include <stddef.h>

#include <jansson.h>

#define ENVSTATE_VARS_MAX	4096	/* /init's envVars at most, merged */
#define ENVSTATE_VARS_BYTES_MAX	(1 << 20) /* their NAME=value bytes, merged */

struct upgstate;
struct upgstate_w;

/* The default user's name: /init's, else "root" (else agentd's uid). */
const char	*envstate_user(void);
/* /init's defaultWorkdir, or NULL. */
const char	*envstate_workdir(void);
/* /init's envVars as "K=V", NULL-terminated (never NULL; the module's). */
char *const	*envstate_env(void);
/* /init's envVars as a JSON object (borrowed), or NULL when none. */
const json_t	*envstate_vars(void);

/* Set the default user, the workdir ("" clears either). */
void		 envstate_set_user(const char *);
void		 envstate_set_workdir(const char *);
/*
 * Merge vars (an object of strings) into those set before, as envd does;
 * -1 with cause, and nothing changed, past ENVSTATE_VARS_MAX names or
 * ENVSTATE_VARS_BYTES_MAX bytes in all, or for a name that is empty,
 * holds '=', or whose value is no string.
 */
int		 envstate_merge_vars(json_t *vars, char *cause, size_t len);

/* Whether agentd's token is /init's (it may be replaced by /init). */
int		 envstate_token_from_init(void);
/* agentd's token is /init's now (1), or its configuration's (0). */
void		 envstate_set_token_from_init(int);

/* Write the [envd] section (nothing when /init set nothing). */
void		 envstate_save(struct upgstate_w *);
/*
 * Read the items of an [envd] section, the section line just read, up to
 * the next section (given back with upgstate_unread()); an item it does
 * not know, or cannot take, is logged and skipped.
 */
void		 envstate_load(struct upgstate *);
/* Forget everything (at the end). */
void		 envstate_free(void);

#endif /* AGENTD_ENVSTATE_H */
