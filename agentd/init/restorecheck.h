/*
 * restorecheck.h -- the decisions of restore.c as pure functions: whether a
 * uevent is vmgenid's, whether the RTC moved away from CLOCK_REALTIME,
 * whether two signals are the same restore, and the RTC's time as
 * milliseconds.  No I/O, no globals, no logging: tests/agentd/test_restore.c
 * checks them.
 */
#ifndef AGENTD_RESTORECHECK_H
#define AGENTD_RESTORECHECK_H

#include <stddef.h>
#include <stdint.h>

struct rtc_time;

/*
 * Whether a NETLINK_KOBJECT_UEVENT datagram (the kernel's "ACTION@DEVPATH"
 * then NUL-separated KEY=VALUE lines) carries NEW_VMGENID=1: the VM
 * generation changed (Linux 6.8 and later send it).
 */
int	restorecheck_uevent(const char *buf, size_t len);

/*
 * Whether the RTC moved: drift and last are RTC minus CLOCK_REALTIME (ms)
 * now and at the check before; more than threshold_ms apart is a restore
 * (the RTC has whole seconds: two readings of a steady drift differ by less
 * than 1000 ms).
 */
int	restorecheck_rtc_moved(int64_t last_ms, int64_t drift_ms,
	    int64_t threshold_ms);

/*
 * Whether a signal of a restore at now_ms (CLOCK_MONOTONIC, which stands
 * still while the VM is stopped) is the restore first seen at first_ms
 * (-1: none yet): within window_ms of it.
 */
int	restorecheck_same(int64_t first_ms, int64_t now_ms, int64_t window_ms);

/*
 * The RTC's broken-down time (UTC) as milliseconds since the epoch; -1 when
 * a field is out of range.
 */
int64_t	restorecheck_rtc_ms(const struct rtc_time *);

#endif /* AGENTD_RESTORECHECK_H */
