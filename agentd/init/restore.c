/*
 * restore.c -- seeing a snapshot's restore, and what agentd does then
 * (restore.h).
 *
 * Clocks.  Every timer of agentd runs on CLOCK_MONOTONIC (libevent's, and
 * clock_mono_ms()).  In a guest it stands still while the VM is stopped:
 * qemu saves its virtual clock with the snapshot and goes on from there;
 * Firecracker and KVM restore kvmclock the same way.  CLOCK_REALTIME stands
 * still too, which is why it is behind after a restore and why the RTC
 * (which follows the host's clock) sees it.  So the window of one restore,
 * and every deadline, count running time only.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <linux/netlink.h>
#include <linux/random.h>
#include <linux/rtc.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "config.h"
#include "conn.h"
#include "events.h"
#include "log.h"
#include "proto.h"
#include "restore.h"
#include "restorecheck.h"
#include "util.h"

#define RESTORE_RTC		"/dev/rtc0"
#define RESTORE_RNG		"/dev/urandom"
#define RESTORE_UEVENT_BYTES	8192	/* of one uevent datagram, at most */
#define RESTORE_RTC_NOISE_MS	1000	/* the RTC has whole seconds */
#define RESTORE_FAR_S		(100LL * 365 * 86400) /* the set watch's expiry */

static void	restore_seen(const char *by);
static void	restore_do(const char *by, int64_t unix_ms,
		    const uint8_t *entropy, size_t len, struct restore_result *);
static void	restore_clock(int64_t unix_ms, struct restore_result *);
static void	restore_rng(const uint8_t *, size_t, struct restore_result *);
static void	restore_announce(const struct restore_result *);
static int	restore_rtc_drift(int64_t *);
static void	restore_rtc_rebase(void);
static void	restore_rtc_cb(evutil_socket_t, short, void *);
static int	restore_set_arm(void);
static int	restore_was_set(void);
static void	restore_set_cb(evutil_socket_t, short, void *);
static void	restore_uevent_open(void);
static void	restore_uevent_cb(evutil_socket_t, short, void *);
static void	restore_unprobe_cb(evutil_socket_t, short, void *);

static struct event_base	*restore_base;
static const struct config	*cfg;
static uint64_t			 generation;
static int64_t			 first_ms = -1;	/* monotonic: the last restore */
static int			 rtc_ok;	/* /dev/rtc0 was read */
static int64_t			 rtc_last;	/* drift at the last check, ms */
static struct event		*rtc_ev;
static int			 set_fd = -1;	/* timerfd: CLOCK_REALTIME set */
static struct event		*set_ev;
static int			 uevent_fd = -1;
static struct event		*uevent_ev;
static struct event		*unprobe_ev;

/* Start the uevent socket and the RTC check. */
void
restore_start(struct event_base *base, const struct config *c)
{
	struct timeval	tv;

	restore_base = base;
	cfg = c;
	restore_uevent_open();
	if (cfg->rtc_interval_ms == 0)
		return;
	if (restore_rtc_drift(&rtc_last) != 0)
		return;
	rtc_ok = 1;
	log_debug("%s: %s is %" PRId64 " ms from CLOCK_REALTIME", __func__,
	    RESTORE_RTC, rtc_last);
	rtc_ev = event_new(base, -1, EV_PERSIST, restore_rtc_cb, NULL);
	if (rtc_ev == NULL)
		fatal("%s: out of memory", __func__);
	event_add(rtc_ev, timeval_ms(&tv, cfg->rtc_interval_ms));
	/* Someone setting the clock is no restore: watch for it. */
	set_fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
	if (set_fd == -1 || restore_set_arm() != 0) {
		log_warn("%s: timerfd: %s", __func__, strerror(errno));
		if (set_fd != -1)
			close(set_fd);
		set_fd = -1;
		return;
	}
	set_ev = event_new(base, set_fd, EV_READ | EV_PERSIST, restore_set_cb,
	    NULL);
	if (set_ev == NULL)
		fatal("%s: out of memory", __func__);
	event_add(set_ev, NULL);
}

/* Free the events and close the fds. */
void
restore_free(void)
{
	if (rtc_ev != NULL)
		event_free(rtc_ev);
	if (set_ev != NULL)
		event_free(set_ev);
	if (uevent_ev != NULL)
		event_free(uevent_ev);
	if (unprobe_ev != NULL)
		event_free(unprobe_ev);
	rtc_ev = set_ev = uevent_ev = unprobe_ev = NULL;
	if (set_fd != -1)
		close(set_fd);
	if (uevent_fd != -1)
		close(uevent_fd);
	set_fd = uevent_fd = -1;
}

/* Restores counted. */
uint64_t
restore_generation(void)
{
	return (generation);
}

/* The platform reports a restore. */
void
restore_resumed(int64_t unix_ms, const uint8_t *entropy, size_t len,
    struct restore_result *r)
{
	restore_do("platform", unix_ms, entropy, len, r);
}

/* Set the generation (an upgrade's successor). */
void
restore_generation_set(uint64_t g)
{
	generation = g;
}

/* agentd_generation for /metrics. */
void
restore_metrics(struct proto_buf *b)
{
	proto_buf_printf(b, "# TYPE agentd_generation gauge\n"
	    "agentd_generation %" PRIu64 "\n", generation);
}

/* agentd saw a restore by itself. */
static void
restore_seen(const char *by)
{
	struct restore_result	r;

	restore_do(by, -1, NULL, 0, &r);
}

/*
 * One signal of a restore: count it unless it is the one seen within the
 * window, step the clock, feed the RNG, probe the connections.
 */
static void
restore_do(const char *by, int64_t unix_ms, const uint8_t *entropy,
    size_t len, struct restore_result *r)
{
	struct timeval	tv;
	int64_t		now = clock_mono_ms();
	int		secs;

	memset(r, 0, sizeof *r);
	r->by = by;
	r->same = restorecheck_same(first_ms, now, cfg->restore_window_ms);
	if (!r->same) {
		generation++;
		first_ms = now;
	}
	r->generation = generation;
	restore_clock(unix_ms, r);
	restore_rng(entropy, len, r);
	if (!r->same) {
		secs = (int)(cfg->restore_probe_ms / 1000);
		r->probed = conn_probe(secs, RESTORE_PROBE_COUNT);
		/* Those still open then answered: no more probes. */
		if (unprobe_ev == NULL && (unprobe_ev = evtimer_new(
		    restore_base, restore_unprobe_cb, NULL)) == NULL)
			fatal("%s: out of memory", __func__);
		evtimer_add(unprobe_ev, timeval_ms(&tv,
		    (int64_t)secs * (RESTORE_PROBE_COUNT + 2) * 1000));
	}
	restore_announce(r);
}

/*
 * Step CLOCK_REALTIME to unix_ms, else by the RTC's move since the last
 * check; then take the RTC's drift afresh.
 */
static void
restore_clock(int64_t unix_ms, struct restore_result *r)
{
	struct timespec	ts;
	int64_t		drift, step = 0, ns;

	if (unix_ms >= 0) {
		r->clock = "unix_ms";
		step = unix_ms - clock_wall_ms();
	} else if (rtc_ok && restore_rtc_drift(&drift) == 0) {
		r->clock = "rtc";
		step = drift - rtc_last;
		if (step < RESTORE_RTC_NOISE_MS && step > -RESTORE_RTC_NOISE_MS)
			step = 0;	/* the RTC's seconds, not a move */
	} else {
		r->clock = "none";
		cause_set(r->clock_error, sizeof r->clock_error, "no unix_ms "
		    "and no %s: the clock is left as it is", RESTORE_RTC);
		return;
	}
	if (step == 0)
		return;
	if (!cfg->clock_step) {
		r->clock = "none";
		cause_set(r->clock_error, sizeof r->clock_error, "--clock-step "
		    "0: the clock is left to the platform (%" PRId64 " ms off)",
		    step);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ns = (int64_t)ts.tv_nsec + (step % 1000) * 1000000;
	ts.tv_sec += (time_t)(step / 1000 + (ns < 0 ? -1 : ns / 1000000000));
	ts.tv_nsec = (long)(ns < 0 ? ns + 1000000000 : ns % 1000000000);
	if (clock_settime(CLOCK_REALTIME, &ts) == -1) {
		cause_set(r->clock_error, sizeof r->clock_error,
		    "clock_settime: %s", strerror(errno));
		r->clock = "none";
		return;
	}
	r->clock_step_ms = step;
	restore_rtc_rebase();
}

/* Feed the entropy to the kernel and reseed its CRNG. */
static void
restore_rng(const uint8_t *entropy, size_t len, struct restore_result *r)
{
	struct rand_pool_info	*info;
	int			 fd, ok = 1;

	if ((fd = open(RESTORE_RNG, O_WRONLY | O_CLOEXEC)) == -1) {
		cause_set(r->entropy_error, sizeof r->entropy_error,
		    "%s: %s", RESTORE_RNG, strerror(errno));
		return;
	}
	if (len > 0) {
		info = xmalloc(sizeof *info + len);
		info->entropy_count = (int)(len * 8);	/* bits */
		info->buf_size = (int)len;
		memcpy(info->buf, entropy, len);
		if (ioctl(fd, RNDADDENTROPY, info) == -1) {
			cause_set(r->entropy_error, sizeof r->entropy_error,
			    "RNDADDENTROPY: %s", strerror(errno));
			ok = 0;
		} else
			r->entropy_bytes = len;
		explicit_bzero(info->buf, len);
		free(info);
	}
	/* Also without entropy: what the pool took in since goes out now. */
	if (ok && ioctl(fd, RNDRESEEDCRNG) == -1) {
		if (len > 0)
			cause_set(r->entropy_error, sizeof r->entropy_error,
			    "RNDRESEEDCRNG: %s", strerror(errno));
		else
			log_debug("%s: RNDRESEEDCRNG: %s", __func__,
			    strerror(errno));
	}
	close(fd);
}

/*
 * Say what a restore did: the log, and for a new restore (not a later
 * signal of the same one) the sandbox.resumed event of the feed.
 */
static void
restore_announce(const struct restore_result *r)
{
	if (!r->same)
		events_post("sandbox.resumed", NULL, json_pack("{sIsssssI}",
		    "generation", (json_int_t)r->generation, "by", r->by,
		    "clock", r->clock, "clock_step_ms",
		    (json_int_t)r->clock_step_ms));
	log_info("%s: %s generation %" PRIu64 " (by %s): clock %s, step %"
	    PRId64 " ms%s%s; %zu entropy bytes%s%s; %zu connections probed",
	    __func__, r->same ? "the same restore," : "restore,", r->generation,
	    r->by, r->clock, r->clock_step_ms,
	    r->clock_error[0] != '\0' ? ": " : "", r->clock_error,
	    r->entropy_bytes, r->entropy_error[0] != '\0' ? ": " : "",
	    r->entropy_error, r->probed);
}

/* RTC minus CLOCK_REALTIME into *drift (ms); 0, or -1 (logged at debug). */
static int
restore_rtc_drift(int64_t *drift)
{
	struct rtc_time	tm;
	int64_t		ms;
	int		fd, rc;

	/* Opened for each check: /dev/rtc0 takes one opener at a time. */
	if ((fd = open(RESTORE_RTC, O_RDONLY | O_CLOEXEC)) == -1) {
		log_debug("%s: %s: %s", __func__, RESTORE_RTC,
		    strerror(errno));
		return (-1);
	}
	memset(&tm, 0, sizeof tm);
	rc = ioctl(fd, RTC_RD_TIME, &tm);
	close(fd);
	if (rc == -1 || (ms = restorecheck_rtc_ms(&tm)) < 0) {
		log_debug("%s: RTC_RD_TIME: %s", __func__,
		    rc == -1 ? strerror(errno) : "out of range");
		return (-1);
	}
	*drift = ms - clock_wall_ms();
	return (0);
}

/* The clock was set: the RTC's drift now is the one to compare with. */
static void
restore_rtc_rebase(void)
{
	int64_t	drift;

	if (rtc_ok && restore_rtc_drift(&drift) == 0)
		rtc_last = drift;
}

/* --rtc-interval: has the RTC moved away from CLOCK_REALTIME? */
static void
restore_rtc_cb(evutil_socket_t fd, short events, void *arg)
{
	int64_t	drift;

	(void)fd;
	(void)events;
	(void)arg;
	if (restore_rtc_drift(&drift) != 0)
		return;		/* busy (hwclock in a session): next time */
	if (restore_was_set() ||
	    !restorecheck_rtc_moved(rtc_last, drift, cfg->rtc_drift_ms)) {
		rtc_last = drift;
		return;
	}
	log_info("%s: %s moved %" PRId64 " ms away from CLOCK_REALTIME",
	    __func__, RESTORE_RTC, drift - rtc_last);
	restore_seen("rtc");
	rtc_last = drift;
	restore_rtc_rebase();	/* after the step, if there was one */
}

/* Arm the timerfd that a set of CLOCK_REALTIME cancels. */
static int
restore_set_arm(void)
{
	struct itimerspec	its;

	memset(&its, 0, sizeof its);
	clock_gettime(CLOCK_REALTIME, &its.it_value);
	its.it_value.tv_sec += (time_t)RESTORE_FAR_S;
	return (timerfd_settime(set_fd, TFD_TIMER_ABSTIME |
	    TFD_TIMER_CANCEL_ON_SET, &its, NULL));
}

/* Whether CLOCK_REALTIME was set since the last look (then re-armed). */
static int
restore_was_set(void)
{
	uint64_t	n;

	if (set_fd == -1 || read(set_fd, &n, sizeof n) != -1 ||
	    errno != ECANCELED)
		return (0);
	if (restore_set_arm() != 0)
		log_warn("%s: timerfd_settime: %s", __func__, strerror(errno));
	return (1);
}

/* CLOCK_REALTIME was set (settimeofday, date -s, ours): not a restore. */
static void
restore_set_cb(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	if (restore_was_set()) {
		log_debug("%s: CLOCK_REALTIME was set", __func__);
		restore_rtc_rebase();
	}
}

/* Listen to the kernel's uevents for vmgenid's NEW_VMGENID. */
static void
restore_uevent_open(void)
{
	struct sockaddr_nl	sa;

	uevent_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
	if (uevent_fd == -1) {
		log_debug("%s: socket: %s", __func__, strerror(errno));
		return;
	}
	memset(&sa, 0, sizeof sa);
	sa.nl_family = AF_NETLINK;
	sa.nl_groups = 1;	/* the kernel's, not udev's */
	if (bind(uevent_fd, (struct sockaddr *)&sa, sizeof sa) == -1) {
		log_debug("%s: bind: %s", __func__, strerror(errno));
		close(uevent_fd);
		uevent_fd = -1;
		return;
	}
	uevent_ev = event_new(restore_base, uevent_fd, EV_READ | EV_PERSIST,
	    restore_uevent_cb, NULL);
	if (uevent_ev == NULL)
		fatal("%s: out of memory", __func__);
	event_add(uevent_ev, NULL);
}

/* Uevents arrived: any NEW_VMGENID=1 from the kernel is a restore. */
static void
restore_uevent_cb(evutil_socket_t fd, short events, void *arg)
{
	static char		buf[RESTORE_UEVENT_BYTES];
	struct sockaddr_nl	sa;
	socklen_t		salen;
	ssize_t			n;
	int			seen = 0;

	(void)events;
	(void)arg;
	for (;;) {
		salen = sizeof sa;
		n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&sa,
		    &salen);
		if (n == -1) {
			if (errno == EINTR || errno == ENOBUFS)
				continue;	/* ENOBUFS: some were lost */
			break;			/* EAGAIN */
		}
		if (sa.nl_pid == 0 && restorecheck_uevent(buf, (size_t)n))
			seen = 1;
	}
	if (seen)
		restore_seen("vmgenid");
}

/* The probing after a restore is over: keepalive off again. */
static void
restore_unprobe_cb(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	log_debug("%s: %zu connections left from the probing", __func__,
	    conn_probe(0, 0));
}
