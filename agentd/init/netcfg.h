/*
 * netcfg.h -- the network of a bare VM, as PID 1: loopback up, and the
 * kernel's ip= parameter applied (the NIC's modules by kmod.h).
 *
 * The kernel's own ip= (CONFIG_IP_PNP, Documentation/admin-guide/nfs/
 * nfsroot.rst) is absent from most distribution kernels, whose NIC drivers
 * are modules anyway; agentd does the static part of it itself:
 *
 *	ip=<client>:<server>:<gw>:<netmask>:<hostname>:<device>:<autoconf>:
 *	   <dns0>:<dns1>:<ntp0>
 *
 * with <autoconf> empty, "off" or "none".  DHCP, BOOTP and RARP are not
 * done.  Everything here runs once, at start, before the event loop; it
 * logs what fails and never stops agentd.
 */
#ifndef AGENTD_NETCFG_H
#define AGENTD_NETCFG_H

#include <netinet/in.h>
#include <net/if.h>
#include <stddef.h>

#define NETCFG_HOSTNAME_MAX	64	/* bytes of a hostname, as the kernel's */
#define NETCFG_IFACE_WAIT_MS	2000	/* wait this long for the NIC to appear */
#define NETCFG_CAUSE_MAX	128	/* bytes, a cause buffer's size */

/* A parsed ip= value; addresses in network order, 0 where absent. */
struct netcfg_ip {
	struct in_addr	 client;
	struct in_addr	 server;
	struct in_addr	 gateway;
	struct in_addr	 netmask;	/* classful default when absent */
	struct in_addr	 dns[2];
	char		 hostname[NETCFG_HOSTNAME_MAX + 1];	/* "" when absent */
	char		 device[IFNAMSIZ];	/* "": the first NIC to appear */
};

/*
 * Parse the value of ip= (without "ip=").  Pure: no I/O.  Returns
 *   0		a static configuration to apply, in *out (client is set);
 *   1		nothing to do: "off", "none", "", or no client address (*out
 *		may still carry a hostname);
 *   -EINVAL	malformed: cause names the field;
 *   -ENOTSUP	an autoconfiguration agentd does not do (dhcp, bootp, rarp,
 *		both, on, any): cause says so.
 */
int	netcfg_parse_ip(const char *value, struct netcfg_ip *out, char *cause,
	    size_t causelen);

/* Bring lo up. */
void	netcfg_lo_up(void);

/*
 * Apply a parsed static configuration: when the device is missing, load the
 * kernel modules for the machine's devices (kmod_load()) and wait up to
 * NETCFG_IFACE_WAIT_MS for it; then set the address and netmask, bring it
 * up, add the default route through the gateway and, when there are DNS
 * servers and no /etc/resolv.conf yet, write one.  Returns 0 or -errno
 * (logged).
 */
int	netcfg_apply(const struct netcfg_ip *);

#endif /* AGENTD_NETCFG_H */
