/*
 * netcfg.c -- loopback up, and the kernel's ip= parameter applied.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <net/if.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "netcfg.h"

static int	netcfg_if_up(int sock, const char *ifname);

/* Set IFF_UP on an interface. */
static int
netcfg_if_up(int sock, const char *ifname)
{
	struct ifreq	ifr;

	memset(&ifr, 0, sizeof ifr);
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	if (ioctl(sock, SIOCGIFFLAGS, &ifr) == -1)
		return (-errno);
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(sock, SIOCSIFFLAGS, &ifr) == -1)
		return (-errno);
	return (0);
}

/* Bring lo up. */
void
netcfg_setup(void)
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
