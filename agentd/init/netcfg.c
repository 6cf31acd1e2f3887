/*
 * netcfg.c -- loopback up, and the kernel's ip= parameter parsed and applied
 * with ioctls (the NIC's modules loaded first by kmod.c when it is missing).
 *
 * Nothing here uses agentd's x*alloc: a failure to allocate is a failure of
 * this optional setup, logged, never the fatal path.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kmod.h"
#include "log.h"
#include "netcfg.h"
#include "util.h"

#define NETCFG_FIELD_MAX	256	/* bytes of one ip= field */
#define NETCFG_FIELDS		10	/* fields of ip= that mean something */
#define NETCFG_POLL_MS		10	/* between two looks for the NIC */

static int	netcfg_addr(const char *, struct in_addr *);
static int	netcfg_mask_ok(struct in_addr);
static struct in_addr netcfg_classful(struct in_addr);
static int	netcfg_autoconf(const char *, char *, size_t);
static void	netcfg_ifr_name(struct ifreq *, const char *);
static int	netcfg_if_up(int, const char *);
static int	netcfg_if_exists(const char *);
static int	netcfg_first_nic(char *, size_t);
static int	netcfg_wait_nic(char *, size_t, int64_t);
static void	netcfg_sleep_ms(int);
static void	netcfg_resolv(const struct netcfg_ip *);

/* A dotted IPv4 address; "" leaves *a at 0.  Returns 0 or -1. */
static int
netcfg_addr(const char *s, struct in_addr *a)
{
	a->s_addr = 0;
	if (*s == '\0')
		return (0);
	return (inet_pton(AF_INET, s, a) == 1 ? 0 : -1);
}

/* Whether a netmask is contiguous ones then zeros, and not 0. */
static int
netcfg_mask_ok(struct in_addr m)
{
	uint32_t	v = ntohl(m.s_addr);
	uint32_t	inv = ~v;

	return (v != 0 && (inv & (inv + 1)) == 0);
}

/* The classful netmask of an address, as the kernel's ip= assumes. */
static struct in_addr
netcfg_classful(struct in_addr a)
{
	struct in_addr	m;
	uint32_t	v = ntohl(a.s_addr);

	if ((v & 0x80000000u) == 0)
		m.s_addr = htonl(0xff000000u);		/* class A */
	else if ((v & 0xc0000000u) == 0x80000000u)
		m.s_addr = htonl(0xffff0000u);		/* class B */
	else
		m.s_addr = htonl(0xffffff00u);		/* C and beyond */
	return (m);
}

/* 1 for no autoconfiguration, -ENOTSUP for one agentd does not do. */
static int
netcfg_autoconf(const char *s, char *cause, size_t causelen)
{
	static const char *const off[] = { "", "off", "none" };
	size_t	i;

	for (i = 0; i < sizeof off / sizeof off[0]; i++) {
		if (strcmp(s, off[i]) == 0)
			return (1);
	}
	cause_set(cause, causelen, "ip=: autoconfiguration '%.32s' is not "
	    "supported; use ip=CLIENT::GW:NETMASK:HOST:DEVICE:off", s);
	return (-ENOTSUP);
}

/* Parse ip=; see netcfg.h. */
int
netcfg_parse_ip(const char *value, struct netcfg_ip *out, char *cause,
    size_t causelen)
{
	static const char *const names[NETCFG_FIELDS] = { "client", "server",
	    "gateway", "netmask", "hostname", "device", "autoconf", "dns0",
	    "dns1", "ntp0" };
	char		 f[NETCFG_FIELDS][NETCFG_FIELD_MAX];
	const struct {
		int		 field;
		struct in_addr	*addr;
	} addrs[] = { { 0, &out->client }, { 1, &out->server },
	    { 2, &out->gateway }, { 3, &out->netmask }, { 7, &out->dns[0] },
	    { 8, &out->dns[1] } };
	const char	*p = value, *end;
	size_t		 n, i;
	int		 error;

	memset(out, 0, sizeof *out);
	if (strchr(value, ':') == NULL)
		return (netcfg_autoconf(value, cause, causelen));

	memset(f, 0, sizeof f);
	for (i = 0; i < NETCFG_FIELDS && p != NULL; i++) {
		end = strchr(p, ':');
		n = end != NULL ? (size_t)(end - p) : strlen(p);
		if (n >= NETCFG_FIELD_MAX) {
			cause_set(cause, causelen, "ip=: field %s is too long",
			    names[i]);
			return (-EINVAL);
		}
		memcpy(f[i], p, n);
		f[i][n] = '\0';
		p = end != NULL ? end + 1 : NULL;
	}
	/* Fields after ntp0 are ignored, as by the kernel. */

	if ((error = netcfg_autoconf(f[6], cause, causelen)) < 0)
		return (error);
	for (i = 0; i < sizeof addrs / sizeof addrs[0]; i++) {
		if (netcfg_addr(f[addrs[i].field], addrs[i].addr) != 0) {
			cause_set(cause, causelen, "ip=: %s '%.64s' is not "
			    "an IPv4 address", names[addrs[i].field],
			    f[addrs[i].field]);
			return (-EINVAL);
		}
	}
	if (f[3][0] != '\0' && !netcfg_mask_ok(out->netmask)) {
		cause_set(cause, causelen, "ip=: netmask '%.64s' is not a "
		    "netmask", f[3]);
		return (-EINVAL);
	}
	if (strlen(f[4]) > NETCFG_HOSTNAME_MAX) {
		cause_set(cause, causelen, "ip=: hostname is longer than %d "
		    "bytes", NETCFG_HOSTNAME_MAX);
		return (-EINVAL);
	}
	memcpy(out->hostname, f[4], strlen(f[4]) + 1);
	if (strlen(f[5]) >= IFNAMSIZ || strchr(f[5], '/') != NULL ||
	    strcmp(f[5], ".") == 0 || strcmp(f[5], "..") == 0) {
		cause_set(cause, causelen, "ip=: device '%.64s' is not an "
		    "interface name", f[5]);
		return (-EINVAL);
	}
	memcpy(out->device, f[5], strlen(f[5]) + 1);
	if (out->client.s_addr == 0)
		return (1);
	if (f[3][0] == '\0')
		out->netmask = netcfg_classful(out->client);
	return (0);
}

/* Put an interface name into a zeroed ifreq, cut to IFNAMSIZ - 1 bytes. */
static void
netcfg_ifr_name(struct ifreq *ifr, const char *name)
{
	memcpy(ifr->ifr_name, name, strnlen(name, IFNAMSIZ - 1));
}

/* Set IFF_UP on an interface. */
static int
netcfg_if_up(int sock, const char *ifname)
{
	struct ifreq	ifr;

	memset(&ifr, 0, sizeof ifr);
	netcfg_ifr_name(&ifr, ifname);
	if (ioctl(sock, SIOCGIFFLAGS, &ifr) == -1)
		return (-errno);
	if (ifr.ifr_flags & IFF_UP)
		return (0);
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(sock, SIOCSIFFLAGS, &ifr) == -1)
		return (-errno);
	return (0);
}

/* Bring lo up. */
void
netcfg_lo_up(void)
{
	int	sock, error;

	if ((sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1) {
		log_warn("%s: socket: %s", __func__, strerror(errno));
		return;
	}
	if ((error = netcfg_if_up(sock, "lo")) != 0)
		log_warn("%s: lo up: %s", __func__, strerror(-error));
	close(sock);
}

/* Sleep, through signals (they are blocked or handled by nobody yet). */
static void
netcfg_sleep_ms(int ms)
{
	struct timespec	ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Whether an interface of that name exists. */
static int
netcfg_if_exists(const char *name)
{
	return (if_nametoindex(name) != 0);
}

/* The name of the first interface that is not a loopback; 0 or -ENODEV. */
static int
netcfg_first_nic(char *name, size_t len)
{
	struct if_nameindex	*ifs, *i;
	struct ifreq		 ifr;
	int			 sock, found = 0;

	if ((ifs = if_nameindex()) == NULL)
		return (-ENODEV);
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	for (i = ifs; sock != -1 && i->if_index != 0 && !found; i++) {
		memset(&ifr, 0, sizeof ifr);
		netcfg_ifr_name(&ifr, i->if_name);
		if (ioctl(sock, SIOCGIFFLAGS, &ifr) == -1 ||
		    (ifr.ifr_flags & IFF_LOOPBACK))
			continue;
		snprintf(name, len, "%s", i->if_name);
		found = 1;
	}
	if (sock != -1)
		close(sock);
	if_freenameindex(ifs);
	return (found ? 0 : -ENODEV);
}

/* Wait until the device (or, name "", any NIC) exists; 0 or -ENODEV. */
static int
netcfg_wait_nic(char *name, size_t len, int64_t wait_ms)
{
	int64_t	deadline = clock_mono_ms() + wait_ms;

	for (;;) {
		if (*name != '\0' ? netcfg_if_exists(name) :
		    netcfg_first_nic(name, len) == 0)
			return (0);
		if (clock_mono_ms() >= deadline)
			return (-ENODEV);
		netcfg_sleep_ms(NETCFG_POLL_MS);
	}
}

/* Write /etc/resolv.conf from the DNS servers, unless one is there. */
static void
netcfg_resolv(const struct netcfg_ip *ip)
{
	struct stat	st;
	char		buf[128], a[INET_ADDRSTRLEN];
	size_t		i, n = 0;
	int		fd;

	if (ip->dns[0].s_addr == 0 && ip->dns[1].s_addr == 0)
		return;
	if (stat("/etc/resolv.conf", &st) == 0 && st.st_size > 0)
		return;
	for (i = 0; i < 2; i++) {
		if (ip->dns[i].s_addr == 0)
			continue;
		inet_ntop(AF_INET, &ip->dns[i], a, sizeof a);
		n += snprintf(buf + n, sizeof buf - n, "nameserver %s\n", a);
	}
	fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644);
	if (fd == -1 || write(fd, buf, n) != (ssize_t)n)
		log_warn("%s: /etc/resolv.conf: %s", __func__, strerror(errno));
	if (fd != -1)
		close(fd);
}

/* Apply a static configuration; see netcfg.h. */
int
netcfg_apply(const struct netcfg_ip *ip)
{
	struct ifreq		 ifr;
	struct rtentry		 rt;
	struct sockaddr_in	*sin;
	char			 dev[IFNAMSIZ], a[INET_ADDRSTRLEN];
	char			 m[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
	int			 sock, error = 0, loaded;

	snprintf(dev, sizeof dev, "%s", ip->device);
	if (netcfg_wait_nic(dev, sizeof dev, 0) != 0) {
		loaded = kmod_load(NULL);
		if (netcfg_wait_nic(dev, sizeof dev, NETCFG_IFACE_WAIT_MS) != 0) {
			log_warn("%s: ip=: no interface %s after %d ms (%d "
			    "modules loaded)", __func__, *dev != '\0' ? dev :
			    "but lo", NETCFG_IFACE_WAIT_MS, loaded);
			return (-ENODEV);
		}
	}

	if ((sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1) {
		error = -errno;
		log_warn("%s: socket: %s", __func__, strerror(errno));
		return (error);
	}
	memset(&ifr, 0, sizeof ifr);
	netcfg_ifr_name(&ifr, dev);
	sin = (struct sockaddr_in *)&ifr.ifr_addr;
	sin->sin_family = AF_INET;
	sin->sin_addr = ip->client;
	if (ioctl(sock, SIOCSIFADDR, &ifr) == -1) {
		error = -errno;
		log_warn("%s: %s: SIOCSIFADDR: %s", __func__, dev,
		    strerror(errno));
		goto out;
	}
	sin = (struct sockaddr_in *)&ifr.ifr_netmask;
	sin->sin_family = AF_INET;
	sin->sin_addr = ip->netmask;
	if (ioctl(sock, SIOCSIFNETMASK, &ifr) == -1) {
		error = -errno;
		log_warn("%s: %s: SIOCSIFNETMASK: %s", __func__, dev,
		    strerror(errno));
		goto out;
	}
	if ((error = netcfg_if_up(sock, dev)) != 0) {
		log_warn("%s: %s up: %s", __func__, dev, strerror(-error));
		goto out;
	}
	if (ip->gateway.s_addr != 0) {
		memset(&rt, 0, sizeof rt);
		((struct sockaddr_in *)&rt.rt_dst)->sin_family = AF_INET;
		((struct sockaddr_in *)&rt.rt_genmask)->sin_family = AF_INET;
		sin = (struct sockaddr_in *)&rt.rt_gateway;
		sin->sin_family = AF_INET;
		sin->sin_addr = ip->gateway;
		rt.rt_flags = RTF_UP | RTF_GATEWAY;
		rt.rt_dev = dev;
		if (ioctl(sock, SIOCADDRT, &rt) == -1 && errno != EEXIST) {
			error = -errno;
			log_warn("%s: %s: default route: %s", __func__, dev,
			    strerror(errno));
			goto out;
		}
	}
	netcfg_resolv(ip);
	inet_ntop(AF_INET, &ip->client, a, sizeof a);
	inet_ntop(AF_INET, &ip->netmask, m, sizeof m);
	inet_ntop(AF_INET, &ip->gateway, g, sizeof g);
	log_info("%s: %s: %s netmask %s, default route via %s", __func__, dev,
	    a, m, ip->gateway.s_addr != 0 ? g : "none");
out:
	close(sock);
	return (error);
}
