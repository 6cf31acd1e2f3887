/*
 * envd.h -- envd's protocol on the --envd-listen listeners, so that the E2B
 * SDKs run against agentd alone (docs/envd-sdk.md, docs/envd-platform.md):
 * the wiring of the Connect core (connect.h), its services (process.h, the
 * filesystem's) and envd's plain routes: GET /health, POST /init, GET /envs.
 *
 * POST /init (envVars, accessToken, defaultUser, defaultWorkdir,
 * timestamp) sets what every later call gets: the variables under each
 * process's own, the user and the cwd when a call names none; an
 * accessToken, when agentd has no token, becomes agentd's token on every
 * listener (its own API's too).  GET /envs answers /init's envVars.
 * Event loop thread only.
 */
#ifndef AGENTD_ENVD_H
#define AGENTD_ENVD_H

struct config;
struct event_base;
struct session;

/*
 * Register the services and listen on cfg's --envd-listen addresses (none:
 * nothing happens).  cfg's token may be set by /init later.  After
 * http_start().  Returns 0, or -1 after logging why.
 */
int	envd_start(struct event_base *, struct config *cfg);
/* The session observer's part: the processes' streams. */
void	envd_session_event(struct session *, int events);
/* Free what /init kept and the processes' records (at the end, after
   session_remove_all()). */
void	envd_free(void);

#endif /* AGENTD_ENVD_H */
