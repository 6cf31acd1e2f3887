/*
 * kmod.h -- the kernel modules of the machine's devices (the NIC's, for
 * ip=), loaded by PID 1 of a bare VM from /lib/modules.  Runs once, before
 * the event loop; logs what fails and never stops agentd.
 */
#ifndef AGENTD_KMOD_H
#define AGENTD_KMOD_H

/*
 * Load the modules for the devices the kernel sees (those whose modalias
 * matches a line of modules.alias), with their dependencies from
 * modules.dep, until no more match; without modules.alias, every module of
 * modules.dep, in dependency order.  Returns the number of modules loaded.
 * modroot NULL: /lib/modules/$(uname -r).
 */
int	kmod_load(const char *modroot);

#endif /* AGENTD_KMOD_H */
