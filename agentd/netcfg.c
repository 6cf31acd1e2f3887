/*
 * netcfg.c -- loopback up, the NIC's kernel modules loaded, and the kernel's
 * ip= parameter applied with ioctls.
 *
 * Module loading is a small coldplug: every device the kernel sees has a
 * modalias in /sys/bus/<bus>/devices/<dev>/modalias; a module whose alias
 * pattern (modules.alias) matches it drives it.  Loading a bus driver
 * (virtio_pci) makes new devices appear (virtio0, whose driver is
 * virtio_net), so the scan repeats until nothing more loads.  Without
 * modules.alias (an initramfs that ships a hand-written modules.dep with only
 * what it needs) every module of modules.dep is loaded.  The kernel
 * decompresses .ko.xz/.ko.zst/.ko.gz itself (MODULE_INIT_COMPRESSED_FILE,
 * Linux 5.17); EEXIST means loaded already.
 *
 * Nothing here uses agentd's x*alloc: a failure to allocate is a failure of
 * this optional setup, logged, never the fatal path.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "netcfg.h"
#include "util.h"

#ifndef MODULE_INIT_COMPRESSED_FILE
#define MODULE_INIT_COMPRESSED_FILE	4	/* linux/module.h, Linux 5.17 */
#endif

#define NETCFG_FIELD_MAX	256	/* bytes of one ip= field */
#define NETCFG_FIELDS		10	/* fields of ip= that mean something */
#define NETCFG_MODROUNDS	8	/* coldplug scans at most */
#define NETCFG_POLL_MS		10	/* between two looks for the NIC */
#define NETCFG_FILE_MAX		(64u << 20) /* bytes of a modules.* file read */

/* One module of modules.dep. */
struct netcfg_mod {
	char		 *name;		/* "virtio_net" ('-' made '_') */
	char		 *path;		/* as written in modules.dep */
	char		**deps;		/* paths, NULL-terminated */
	int		  state;
#define NETCFG_MOD_NEW		0
#define NETCFG_MOD_BUSY		1	/* its dependencies are loading */
#define NETCFG_MOD_DONE		2	/* loaded, or was already */
#define NETCFG_MOD_FAILED	3
};

/* One line of modules.alias. */
struct netcfg_alias {
	const char	*pattern;
	const char	*name;
	size_t		 prefix;	/* bytes before the first wildcard */
};

/* modules.dep and modules.alias of one kernel release, parsed. */
struct netcfg_modules {
	const char		*root;
	char			*dep_text;
	char			*alias_text;
	struct netcfg_mod	*mods;
	size_t			 nmods;
	struct netcfg_alias	*aliases;
	size_t			 naliases;
	int			 loaded;
};

static void	netcfg_cause(char *, size_t, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
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
static char	*netcfg_read_file(const char *, size_t *);
static int	netcfg_mods_parse_dep(struct netcfg_modules *);
static int	netcfg_mods_parse_alias(struct netcfg_modules *);
static void	netcfg_mods_free(struct netcfg_modules *);
static struct netcfg_mod *netcfg_mod_by_path(struct netcfg_modules *,
		    const char *);
static struct netcfg_mod *netcfg_mod_by_name(struct netcfg_modules *,
		    const char *);
static int	netcfg_mod_load(struct netcfg_modules *, struct netcfg_mod *);
static int	netcfg_mod_finit(const char *, const char *);
static int	netcfg_coldplug_round(struct netcfg_modules *);
static void	netcfg_coldplug_dev(struct netcfg_modules *, const char *);

/* Write a cause, as snprintf, when there is a buffer. */
static void
netcfg_cause(char *cause, size_t causelen, const char *fmt, ...)
{
	va_list	ap;

	if (cause == NULL || causelen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(cause, causelen, fmt, ap);
	va_end(ap);
}

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
	netcfg_cause(cause, causelen, "ip=: autoconfiguration '%.32s' is not "
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
			netcfg_cause(cause, causelen, "ip=: field %s is too long",
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
			netcfg_cause(cause, causelen, "ip=: %s '%.64s' is not "
			    "an IPv4 address", names[addrs[i].field],
			    f[addrs[i].field]);
			return (-EINVAL);
		}
	}
	if (f[3][0] != '\0' && !netcfg_mask_ok(out->netmask)) {
		netcfg_cause(cause, causelen, "ip=: netmask '%.64s' is not a "
		    "netmask", f[3]);
		return (-EINVAL);
	}
	if (strlen(f[4]) > NETCFG_HOSTNAME_MAX) {
		netcfg_cause(cause, causelen, "ip=: hostname is longer than %d "
		    "bytes", NETCFG_HOSTNAME_MAX);
		return (-EINVAL);
	}
	memcpy(out->hostname, f[4], strlen(f[4]) + 1);
	if (strlen(f[5]) >= IFNAMSIZ || strchr(f[5], '/') != NULL ||
	    strcmp(f[5], ".") == 0 || strcmp(f[5], "..") == 0) {
		netcfg_cause(cause, causelen, "ip=: device '%.64s' is not an "
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
		loaded = netcfg_load_modules(NULL);
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

/* A whole file, NUL-terminated, malloc'd; NULL with errno. */
static char *
netcfg_read_file(const char *path, size_t *lenp)
{
	struct stat	 st;
	char		*buf;
	ssize_t		 n;
	size_t		 len = 0;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (NULL);
	if (fstat(fd, &st) == -1 || st.st_size < 0 ||
	    (uint64_t)st.st_size > NETCFG_FILE_MAX ||
	    (buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		errno = EFBIG;
		return (NULL);
	}
	while (len < (size_t)st.st_size) {
		n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	if (lenp != NULL)
		*lenp = len;
	return (buf);
}

/*
 * Parse modules.dep: "kernel/a/b.ko.xz: kernel/c.ko.xz kernel/d.ko.xz"
 * per line, in place.  Returns 0 or -errno.
 */
static int
netcfg_mods_parse_dep(struct netcfg_modules *mm)
{
	struct netcfg_mod	*mod;
	char			 path[4096], *line, *next, *colon, *p, *q;
	size_t			 lines = 0, ndeps;

	snprintf(path, sizeof path, "%s/modules.dep", mm->root);
	if ((mm->dep_text = netcfg_read_file(path, NULL)) == NULL)
		return (-errno);
	for (p = mm->dep_text; *p != '\0'; p++)
		lines += *p == '\n';
	if ((mm->mods = calloc(lines + 1, sizeof *mm->mods)) == NULL)
		return (-ENOMEM);
	for (line = mm->dep_text; line != NULL && *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if ((colon = strchr(line, ':')) == NULL)
			continue;
		*colon = '\0';
		mod = &mm->mods[mm->nmods];
		mod->path = line;
		/* The name: the basename up to ".ko", '-' made '_'. */
		p = strrchr(line, '/');
		if ((mod->name = strdup(p != NULL ? p + 1 : line)) == NULL)
			return (-ENOMEM);
		if ((p = strstr(mod->name, ".ko")) != NULL)
			*p = '\0';
		for (p = mod->name; *p != '\0'; p++)
			*p = *p == '-' ? '_' : *p;
		mm->nmods++;
		ndeps = 0;
		for (p = colon + 1; *p != '\0'; p++)
			ndeps += *p == ' ' || *p == '\t';
		if ((mod->deps = calloc(ndeps + 2, sizeof *mod->deps)) == NULL)
			return (-ENOMEM);
		ndeps = 0;
		for (p = strtok_r(colon + 1, " \t", &q); p != NULL;
		    p = strtok_r(NULL, " \t", &q))
			mod->deps[ndeps++] = p;
	}
	return (0);
}

/* Parse modules.alias: "alias PATTERN NAME" per line, in place. */
static int
netcfg_mods_parse_alias(struct netcfg_modules *mm)
{
	struct netcfg_alias	*al;
	char			 path[4096], *line, *next, *pat, *name, *q;
	size_t			 lines = 0;

	snprintf(path, sizeof path, "%s/modules.alias", mm->root);
	if ((mm->alias_text = netcfg_read_file(path, NULL)) == NULL)
		return (-errno);
	for (q = mm->alias_text; *q != '\0'; q++)
		lines += *q == '\n';
	if ((mm->aliases = calloc(lines + 1, sizeof *mm->aliases)) == NULL)
		return (-ENOMEM);
	for (line = mm->alias_text; line != NULL && *line != '\0';
	    line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (strncmp(line, "alias ", 6) != 0)
			continue;
		if ((pat = strtok_r(line + 6, " \t", &q)) == NULL ||
		    (name = strtok_r(NULL, " \t", &q)) == NULL)
			continue;
		al = &mm->aliases[mm->naliases++];
		al->pattern = pat;
		al->name = name;
		al->prefix = strcspn(pat, "*?[\\");
	}
	return (0);
}

/* Free what the parsers allocated. */
static void
netcfg_mods_free(struct netcfg_modules *mm)
{
	size_t	i;

	for (i = 0; i < mm->nmods; i++) {
		free(mm->mods[i].name);
		free(mm->mods[i].deps);
	}
	free(mm->mods);
	free(mm->aliases);
	free(mm->dep_text);
	free(mm->alias_text);
}

/* The module of modules.dep with that path, or NULL. */
static struct netcfg_mod *
netcfg_mod_by_path(struct netcfg_modules *mm, const char *path)
{
	size_t	i;

	for (i = 0; i < mm->nmods; i++) {
		if (strcmp(mm->mods[i].path, path) == 0)
			return (&mm->mods[i]);
	}
	return (NULL);
}

/* The module of modules.dep with that name ('-' and '_' alike), or NULL. */
static struct netcfg_mod *
netcfg_mod_by_name(struct netcfg_modules *mm, const char *name)
{
	const char	*a, *b;
	size_t		 i;

	for (i = 0; i < mm->nmods; i++) {
		for (a = mm->mods[i].name, b = name; *a != '\0'; a++, b++) {
			if (*a != (*b == '-' ? '_' : *b))
				break;
		}
		if (*a == '\0' && *b == '\0')
			return (&mm->mods[i]);
	}
	return (NULL);
}

/* finit_module one file; 0 (EEXIST too) or -errno. */
static int
netcfg_mod_finit(const char *root, const char *path)
{
	char		 full[4096];
	const char	*ext;
	int		 fd, flags = 0, error = 0;

	if (*path == '/')
		snprintf(full, sizeof full, "%s", path);
	else
		snprintf(full, sizeof full, "%s/%s", root, path);
	ext = strrchr(full, '.');
	if (ext != NULL && (strcmp(ext, ".xz") == 0 ||
	    strcmp(ext, ".zst") == 0 || strcmp(ext, ".gz") == 0))
		flags |= MODULE_INIT_COMPRESSED_FILE;
	if ((fd = open(full, O_RDONLY | O_CLOEXEC)) == -1)
		return (-errno);
	if (syscall(SYS_finit_module, fd, "", flags) == -1 && errno != EEXIST)
		error = -errno;
	close(fd);
	return (error);
}

/* Load a module after its dependencies; 0 or -errno. */
static int
netcfg_mod_load(struct netcfg_modules *mm, struct netcfg_mod *mod)
{
	struct netcfg_mod	*dep;
	char			 sys[512];
	size_t			 i;
	int			 error;

	switch (mod->state) {
	case NETCFG_MOD_DONE:
		return (0);
	case NETCFG_MOD_BUSY:
		return (-ELOOP);
	case NETCFG_MOD_FAILED:
		return (-EINVAL);
	}
	snprintf(sys, sizeof sys, "/sys/module/%s/initstate", mod->name);
	if (access(sys, F_OK) == 0) {
		mod->state = NETCFG_MOD_DONE;
		return (0);
	}
	mod->state = NETCFG_MOD_BUSY;
	for (i = 0; mod->deps[i] != NULL; i++) {
		if ((dep = netcfg_mod_by_path(mm, mod->deps[i])) == NULL) {
			log_warn("%s: %s: dependency %s is not in modules.dep",
			    __func__, mod->name, mod->deps[i]);
			continue;
		}
		if ((error = netcfg_mod_load(mm, dep)) != 0) {
			mod->state = NETCFG_MOD_FAILED;
			log_warn("%s: %s: dependency %s failed", __func__,
			    mod->name, dep->name);
			return (error);
		}
	}
	if ((error = netcfg_mod_finit(mm->root, mod->path)) != 0) {
		mod->state = NETCFG_MOD_FAILED;
		log_warn("%s: finit_module %s: %s", __func__, mod->path,
		    strerror(-error));
		return (error);
	}
	mod->state = NETCFG_MOD_DONE;
	mm->loaded++;
	log_debug("%s: loaded %s", __func__, mod->name);
	return (0);
}

/* Load the modules whose aliases match one device's modalias. */
static void
netcfg_coldplug_dev(struct netcfg_modules *mm, const char *modalias)
{
	struct netcfg_alias	*al;
	struct netcfg_mod	*mod;
	size_t			 i;

	for (i = 0; i < mm->naliases; i++) {
		al = &mm->aliases[i];
		if (strncmp(al->pattern, modalias, al->prefix) != 0 ||
		    fnmatch(al->pattern, modalias, 0) != 0)
			continue;
		/* Not in modules.dep: built in, or not shipped. */
		if ((mod = netcfg_mod_by_name(mm, al->name)) != NULL)
			netcfg_mod_load(mm, mod);
	}
}

/* One scan of /sys/bus/<bus>/devices/<dev>/modalias; modules loaded. */
static int
netcfg_coldplug_round(struct netcfg_modules *mm)
{
	struct dirent	*b, *d;
	DIR		*buses, *devs;
	char		 path[1024], alias[512];
	ssize_t		 n;
	int		 fd, before = mm->loaded;

	if ((buses = opendir("/sys/bus")) == NULL)
		return (0);
	while ((b = readdir(buses)) != NULL) {
		if (b->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/sys/bus/%s/devices", b->d_name);
		if ((devs = opendir(path)) == NULL)
			continue;
		while ((d = readdir(devs)) != NULL) {
			if (d->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "/sys/bus/%s/devices/%s/"
			    "modalias", b->d_name, d->d_name);
			if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
				continue;
			n = read(fd, alias, sizeof alias - 1);
			close(fd);
			if (n <= 0)
				continue;
			alias[n] = '\0';
			alias[strcspn(alias, "\n")] = '\0';
			netcfg_coldplug_dev(mm, alias);
		}
		closedir(devs);
	}
	closedir(buses);
	return (mm->loaded - before);
}

/* Load the modules the machine's devices need; see netcfg.h. */
int
netcfg_load_modules(const char *modroot)
{
	struct netcfg_modules	 mm;
	struct utsname		 u;
	struct stat		 st;
	char			 root[512];
	size_t			 i;
	int			 round, error;

	if (modroot == NULL) {
		if (uname(&u) == -1)
			return (0);
		snprintf(root, sizeof root, "/lib/modules/%s", u.release);
		modroot = root;
	}
	if (stat(modroot, &st) == -1 || !S_ISDIR(st.st_mode))
		return (0);
	memset(&mm, 0, sizeof mm);
	mm.root = modroot;
	if ((error = netcfg_mods_parse_dep(&mm)) != 0) {
		log_warn("%s: %s/modules.dep: %s", __func__, modroot,
		    strerror(-error));
		netcfg_mods_free(&mm);
		return (0);
	}
	error = netcfg_mods_parse_alias(&mm);
	if (error == 0 && mm.naliases > 0) {
		for (round = 0; round < NETCFG_MODROUNDS; round++) {
			if (netcfg_coldplug_round(&mm) == 0)
				break;
		}
	} else {
		/* No aliases: the image ships only what it needs. */
		for (i = 0; i < mm.nmods; i++)
			netcfg_mod_load(&mm, &mm.mods[i]);
	}
	log_info("%s: %d modules loaded from %s", __func__, mm.loaded,
	    modroot);
	error = mm.loaded;
	netcfg_mods_free(&mm);
	return (error);
}
