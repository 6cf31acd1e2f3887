/*
 * netcfg.h -- the network of a bare VM, as PID 1: loopback up, the NIC's
 * kernel modules loaded, and the kernel's ip= parameter applied.
 */
#ifndef AGENTD_NETCFG_H
#define AGENTD_NETCFG_H

/* Bring lo up and apply ip= from the kernel command line; logs failures. */
void	netcfg_setup(void);

#endif /* AGENTD_NETCFG_H */
