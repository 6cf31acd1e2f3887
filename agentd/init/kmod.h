/*
 * kmod.h -- the kernel modules of the machine's devices (the NIC's, for
 * ip=), and named ones (sock_diag's, for GET /v1/ports), loaded by PID 1
 * of a bare VM from /lib/modules: no modprobe is there to answer the
 * kernel's requests.  Runs once, before
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

/*
 * Load the modules named in names (NULL-terminated; '-' and '_' alike)
 * after their dependencies, from modroot's modules.dep (NULL as above).
 * A name modules.dep lacks (built in, or not shipped) is skipped.  Returns
 * the number of modules loaded now (dependencies too), or -errno when
 * modules.dep cannot be read.
 */
int	kmod_load_names(const char *modroot, const char *const *names);

#endif /* AGENTD_KMOD_H */
