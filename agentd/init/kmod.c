/*
 * kmod.c -- the NIC's kernel modules loaded, as PID 1 of a bare VM.
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/utsname.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kmod.h"
#include "log.h"
#include "util.h"

#ifndef MODULE_INIT_COMPRESSED_FILE
#define MODULE_INIT_COMPRESSED_FILE	4	/* linux/module.h, Linux 5.17 */
#endif

#define KMOD_ROUNDS		8	/* coldplug scans at most */
#define KMOD_FILE_MAX		(64u << 20) /* bytes of a modules.* file read */

/* One module of modules.dep. */
struct kmod {
	char		 *name;		/* "virtio_net" ('-' made '_') */
	char		 *path;		/* as written in modules.dep */
	char		**deps;		/* paths, NULL-terminated */
	int		  state;
#define KMOD_NEW		0
#define KMOD_BUSY		1	/* its dependencies are loading */
#define KMOD_DONE		2	/* loaded, or was already */
#define KMOD_FAILED		3
};

/* One line of modules.alias. */
struct kmod_alias {
	const char	*pattern;
	const char	*name;
	size_t		 prefix;	/* bytes before the first wildcard */
};

/* modules.dep and modules.alias of one kernel release, parsed. */
struct kmod_set {
	const char		*root;
	char			*dep_text;
	char			*alias_text;
	struct kmod		*mods;
	size_t			 nmods;
	struct kmod_alias	*aliases;
	size_t			 naliases;
	int			 loaded;
};

static char	*kmod_read_file(const char *, size_t *);
static int	kmod_parse_dep(struct kmod_set *);
static int	kmod_parse_alias(struct kmod_set *);
static void	kmod_set_free(struct kmod_set *);
static struct kmod *kmod_by_path(struct kmod_set *, const char *);
static struct kmod *kmod_by_name(struct kmod_set *, const char *);
static int	kmod_load_one(struct kmod_set *, struct kmod *);
static int	kmod_finit(const char *, const char *);
static int	kmod_coldplug_round(struct kmod_set *);
static const char *kmod_root(const char *, char *, size_t);
static void	kmod_coldplug_dev(struct kmod_set *, const char *);

/* A whole file, NUL-terminated, malloc'd; NULL with errno. */
static char *
kmod_read_file(const char *path, size_t *lenp)
{
	struct stat	 st;
	char		*buf;
	size_t		 len = 0;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (NULL);
	if (fstat(fd, &st) == -1 || st.st_size < 0 ||
	    (uint64_t)st.st_size > KMOD_FILE_MAX ||
	    (buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		errno = EFBIG;
		return (NULL);
	}
	len = fd_read_full(fd, buf, (size_t)st.st_size);
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
kmod_parse_dep(struct kmod_set *mm)
{
	struct kmod		*mod;
	char			 path[4096], *line, *next, *colon, *p, *q;
	size_t			 lines = 0, ndeps;

	snprintf(path, sizeof path, "%s/modules.dep", mm->root);
	if ((mm->dep_text = kmod_read_file(path, NULL)) == NULL)
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
kmod_parse_alias(struct kmod_set *mm)
{
	struct kmod_alias	*al;
	char			 path[4096], *line, *next, *pat, *name, *q;
	size_t			 lines = 0;

	snprintf(path, sizeof path, "%s/modules.alias", mm->root);
	if ((mm->alias_text = kmod_read_file(path, NULL)) == NULL)
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
kmod_set_free(struct kmod_set *mm)
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
static struct kmod *
kmod_by_path(struct kmod_set *mm, const char *path)
{
	size_t	i;

	for (i = 0; i < mm->nmods; i++) {
		if (strcmp(mm->mods[i].path, path) == 0)
			return (&mm->mods[i]);
	}
	return (NULL);
}

/* The module of modules.dep with that name ('-' and '_' alike), or NULL. */
static struct kmod *
kmod_by_name(struct kmod_set *mm, const char *name)
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
kmod_finit(const char *root, const char *path)
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
kmod_load_one(struct kmod_set *mm, struct kmod *mod)
{
	struct kmod		*dep;
	char			 sys[512];
	size_t			 i;
	int			 error;

	switch (mod->state) {
	case KMOD_DONE:
		return (0);
	case KMOD_BUSY:
		return (-ELOOP);
	case KMOD_FAILED:
		return (-EINVAL);
	}
	snprintf(sys, sizeof sys, "/sys/module/%s/initstate", mod->name);
	if (access(sys, F_OK) == 0) {
		mod->state = KMOD_DONE;
		return (0);
	}
	mod->state = KMOD_BUSY;
	for (i = 0; mod->deps[i] != NULL; i++) {
		if ((dep = kmod_by_path(mm, mod->deps[i])) == NULL) {
			log_warn("%s: %s: dependency %s is not in modules.dep",
			    __func__, mod->name, mod->deps[i]);
			continue;
		}
		if ((error = kmod_load_one(mm, dep)) != 0) {
			mod->state = KMOD_FAILED;
			log_warn("%s: %s: dependency %s failed", __func__,
			    mod->name, dep->name);
			return (error);
		}
	}
	if ((error = kmod_finit(mm->root, mod->path)) != 0) {
		mod->state = KMOD_FAILED;
		log_warn("%s: finit_module %s: %s", __func__, mod->path,
		    strerror(-error));
		return (error);
	}
	mod->state = KMOD_DONE;
	mm->loaded++;
	log_debug("%s: loaded %s", __func__, mod->name);
	return (0);
}

/* Load the modules whose aliases match one device's modalias. */
static void
kmod_coldplug_dev(struct kmod_set *mm, const char *modalias)
{
	struct kmod_alias	*al;
	struct kmod		*mod;
	size_t			 i;

	for (i = 0; i < mm->naliases; i++) {
		al = &mm->aliases[i];
		if (strncmp(al->pattern, modalias, al->prefix) != 0 ||
		    fnmatch(al->pattern, modalias, 0) != 0)
			continue;
		/* Not in modules.dep: built in, or not shipped. */
		if ((mod = kmod_by_name(mm, al->name)) != NULL)
			kmod_load_one(mm, mod);
	}
}

/* One scan of /sys/bus/<bus>/devices/<dev>/modalias; modules loaded. */
static int
kmod_coldplug_round(struct kmod_set *mm)
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
			kmod_coldplug_dev(mm, alias);
		}
		closedir(devs);
	}
	closedir(buses);
	return (mm->loaded - before);
}

/* modroot, or /lib/modules/$(uname -r) into buf when NULL; NULL if none. */
static const char *
kmod_root(const char *modroot, char *buf, size_t len)
{
	struct utsname	u;
	struct stat	st;

	if (modroot == NULL) {
		if (uname(&u) == -1)
			return (NULL);
		snprintf(buf, len, "/lib/modules/%s", u.release);
		modroot = buf;
	}
	if (stat(modroot, &st) == -1 || !S_ISDIR(st.st_mode))
		return (NULL);
	return (modroot);
}

/* Load named modules; see kmod.h. */
int
kmod_load_names(const char *modroot, const char *const *names)
{
	struct kmod_set	 mm;
	struct kmod	*mod;
	char		 root[512];
	int		 error;

	if ((modroot = kmod_root(modroot, root, sizeof root)) == NULL)
		return (-ENOENT);
	memset(&mm, 0, sizeof mm);
	mm.root = modroot;
	if ((error = kmod_parse_dep(&mm)) != 0) {
		kmod_set_free(&mm);
		return (error);
	}
	for (; *names != NULL; names++) {
		if ((mod = kmod_by_name(&mm, *names)) != NULL)
			kmod_load_one(&mm, mod);
	}
	log_info("%s: %d modules loaded from %s", __func__, mm.loaded,
	    modroot);
	error = mm.loaded;
	kmod_set_free(&mm);
	return (error);
}

/* Load the modules the machine's devices need; see kmod.h. */
int
kmod_load(const char *modroot)
{
	struct kmod_set		 mm;
	char			 root[512];
	size_t			 i;
	int			 round, error;

	if ((modroot = kmod_root(modroot, root, sizeof root)) == NULL)
		return (0);
	memset(&mm, 0, sizeof mm);
	mm.root = modroot;
	if ((error = kmod_parse_dep(&mm)) != 0) {
		log_warn("%s: %s/modules.dep: %s", __func__, modroot,
		    strerror(-error));
		kmod_set_free(&mm);
		return (0);
	}
	error = kmod_parse_alias(&mm);
	if (error == 0 && mm.naliases > 0) {
		for (round = 0; round < KMOD_ROUNDS; round++) {
			if (kmod_coldplug_round(&mm) == 0)
				break;
		}
	} else {
		/* No aliases: the image ships only what it needs. */
		for (i = 0; i < mm.nmods; i++)
			kmod_load_one(&mm, &mm.mods[i]);
	}
	log_info("%s: %d modules loaded from %s", __func__, mm.loaded,
	    modroot);
	error = mm.loaded;
	kmod_set_free(&mm);
	return (error);
}
