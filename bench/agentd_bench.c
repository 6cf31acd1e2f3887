/*
 * agentd_bench.c -- main: options, the shared agentd instance, the order of
 * the scenarios, and the one table (stdout, and files for docs/benchmarks.md
 * and the plot).
 *
 * usage: agentd-bench --agentd BIN [--agentd-dev BIN] [--ring-bench BIN]
 *            [--ssh-config FILE --ssh-host HOST] [--tmux-socket PATH]
 *            --tmpdir DIR --outdir DIR [--only 1,2,...] [--quick]
 *
 * bench/run.sh sets all of this up (sshd, tmux, builds); run it instead.
 */
#include <sys/utsname.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define ROWS_MAX	64
#define PLOT_MAX	32

struct row {
	char	 scenario[128];
	char	 ours[32];
	char	 base[32];
	double	 ratio;
	char	 goal[24];
	int	 met;
	double	 score;
	int	 order;
};

struct bench_cfg	 cfg;
struct agentd		 bench_ag;

static struct row	 rows[ROWS_MAX];
static int		 nrows;
static struct {
	char	 label[64];
	double	 us;
} lat[PLOT_MAX];
static int		 nlat;

static void (*const scenario_fn[14])(void) = {
	NULL, sc_exec, sc_echo, sc_throughput, sc_startup, sc_footprint,
	sc_fairness, sc_scale, sc_ring, sc_wrk, sc_streams, NULL, NULL,
	sc_upgrade,
};
/* Quiet ones first: startup and exec are the most sensitive to noise. */
static const int	 run_order[] = { 4, 1, 2, 3, 6, 5, 7, 9, 8, 10, 13 };

void
table_row(const char *scenario, const char *ours, const char *base,
    double ratio, const char *goal, int met, double score)
{
	struct row	*r;

	if (nrows == ROWS_MAX)
		die("too many rows");
	r = &rows[nrows];
	snprintf(r->scenario, sizeof r->scenario, "%s", scenario);
	snprintf(r->ours, sizeof r->ours, "%s", ours);
	snprintf(r->base, sizeof r->base, "%s", base);
	snprintf(r->goal, sizeof r->goal, "%s", goal);
	r->ratio = ratio;
	r->met = isnan(ratio) && met != MET_INFO ? MET_NO : met;
	r->score = score;
	r->order = nrows++;
}

void
plot_latency(const char *label, double us)
{
	if (nlat == PLOT_MAX || isnan(us))
		return;
	snprintf(lat[nlat].label, sizeof lat[nlat].label, "%s", label);
	lat[nlat++].us = us;
}

/* Scenario number first, then the order the rows came in. */
static int
row_cmp(const void *a, const void *b)
{
	const struct row	*x = a, *y = b;
	int			 nx = atoi(x->scenario), ny = atoi(y->scenario);

	if (nx != ny)
		return nx - ny;
	return x->order - y->order;
}

static const char *
met_str(int met)
{
	return met == MET_YES ? "met" : met == MET_NO ? "**missed**" : "—";
}

/* The table, as Markdown, to f. */
static void
table_print(FILE *f)
{
	char	ratio[32];
	int	i;

	fprintf(f, "| scenario | ours | baseline | ratio | goal | met |\n");
	fprintf(f, "|---|---:|---:|---:|---|---|\n");
	for (i = 0; i < nrows; i++) {
		if (isnan(rows[i].ratio))
			snprintf(ratio, sizeof ratio, "n/a");
		else
			snprintf(ratio, sizeof ratio, "%.2f×", rows[i].ratio);
		fprintf(f, "| %s | %s | %s | %s | %s | %s |\n",
		    rows[i].scenario, rows[i].ours, rows[i].base, ratio,
		    rows[i].goal, met_str(rows[i].met));
	}
}

/* The table and the plot's data files in outdir. */
static void
table_write(const char *header)
{
	char	 path[512];
	FILE	*f;
	int	 i, met = 0, missed = 0;

	for (i = 0; i < nrows; i++) {
		met += rows[i].met == MET_YES;
		missed += rows[i].met == MET_NO;
	}
	snprintf(path, sizeof path, "%s/bench.md", cfg.outdir);
	if ((f = fopen(path, "w")) == NULL)
		die("%s: %s", path, strerror(errno));
	fprintf(f, "%s\n", header);
	table_print(f);
	fprintf(f, "\nGoals: %d met, %d missed.\n", met, missed);
	fclose(f);

	snprintf(path, sizeof path, "%s/bench.tsv", cfg.outdir);
	if ((f = fopen(path, "w")) == NULL)
		die("%s: %s", path, strerror(errno));
	fprintf(f, "scenario\tours\tbaseline\tratio\tgoal\tmet\tscore\n");
	for (i = 0; i < nrows; i++)
		fprintf(f, "%s\t%s\t%s\t%.4f\t%s\t%s\t%.4f\n",
		    rows[i].scenario, rows[i].ours, rows[i].base, rows[i].ratio,
		    rows[i].goal, rows[i].met == MET_YES ? "met" :
		    rows[i].met == MET_NO ? "missed" : "-", rows[i].score);
	fclose(f);

	/* Goals: measured / limit, <= 1 met (the plot's first panel). */
	snprintf(path, sizeof path, "%s/goals.dat", cfg.outdir);
	if ((f = fopen(path, "w")) == NULL)
		die("%s: %s", path, strerror(errno));
	for (i = 0; i < nrows; i++) {
		if (rows[i].met == MET_INFO || isnan(rows[i].score))
			continue;
		fprintf(f, "\"%.70s\"\t%.4f\n", rows[i].scenario,
		    rows[i].score);
	}
	fclose(f);

	snprintf(path, sizeof path, "%s/latency.dat", cfg.outdir);
	if ((f = fopen(path, "w")) == NULL)
		die("%s: %s", path, strerror(errno));
	for (i = 0; i < nlat; i++)
		fprintf(f, "\"%s\"\t%.1f\n", lat[i].label, lat[i].us);
	fclose(f);
	fprintf(stderr, "agentd-bench: %d goals met, %d missed\n", met,
	    missed);
}

static void
on_signal(int sig)
{
	agentd_stop_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
usage(void)
{
	fprintf(stderr, "usage: agentd-bench --agentd BIN [--agentd-dev BIN] "
	    "[--ring-bench BIN]\n\t[--ssh-config FILE --ssh-host HOST] "
	    "[--tmux-socket PATH]\n\t--tmpdir DIR --outdir DIR "
	    "[--only 1,2,...] [--quick] [--header TEXT]\n");
	exit(2);
}

/* A random token for this run. */
static void
make_token(void)
{
	static char	tok[33];
	unsigned char	raw[16];
	int		fd, i;

	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd == -1 || read(fd, raw, sizeof raw) != (ssize_t)sizeof raw)
		die("/dev/urandom: %s", strerror(errno));
	close(fd);
	for (i = 0; i < 16; i++)
		snprintf(tok + 2 * i, 3, "%02x", raw[i]);
	cfg.token = tok;
}

int
main(int argc, char **argv)
{
	const char	*header = "";
	char		 num[16], only[256];
	size_t		 i;
	double		 t;
	int		 k;

	for (k = 1; k < argc; k++) {
		const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;

		if (strcmp(a, "--quick") == 0) {
			cfg.quick = 1;
			continue;
		}
		if (v == NULL)
			usage();
		if (strcmp(a, "--agentd") == 0)
			cfg.agentd = v;
		else if (strcmp(a, "--agentd-dev") == 0)
			cfg.agentd_dev = v;
		else if (strcmp(a, "--ring-bench") == 0)
			cfg.ring_bench = v;
		else if (strcmp(a, "--ssh-config") == 0)
			cfg.ssh_config = v;
		else if (strcmp(a, "--ssh-host") == 0)
			cfg.ssh_host = v;
		else if (strcmp(a, "--tmux-socket") == 0)
			cfg.tmux_socket = v;
		else if (strcmp(a, "--tmpdir") == 0)
			cfg.tmpdir = v;
		else if (strcmp(a, "--outdir") == 0)
			cfg.outdir = v;
		else if (strcmp(a, "--only") == 0)
			cfg.only = v;
		else if (strcmp(a, "--header") == 0)
			header = v;
		else
			usage();
		k++;
	}
	if (cfg.agentd == NULL || cfg.tmpdir == NULL || cfg.outdir == NULL)
		usage();
	if (cfg.ssh_config != NULL && cfg.ssh_host == NULL)
		usage();
	make_token();
	raise_nofile();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	atexit(agentd_stop_all);
	setvbuf(stderr, NULL, _IONBF, 0);

	if (agentd_start(&bench_ag, cfg.agentd, (const char *const[]){
	    "--max-sessions", "4000", NULL }) != 0)
		die("cannot start %s", cfg.agentd);
	for (i = 0; i < sizeof run_order / sizeof run_order[0]; i++) {
		/* ",10," in ",1,10,": 1 is not 10. */
		snprintf(num, sizeof num, ",%d,", run_order[i]);
		snprintf(only, sizeof only, ",%s,", cfg.only != NULL ?
		    cfg.only : "");
		if (cfg.only != NULL && strstr(only, num) == NULL)
			continue;
		t = now_us();
		scenario_fn[run_order[i]]();
		note("   (%.1f s)", (now_us() - t) / 1e6);
	}
	agentd_stop(&bench_ag);

	qsort(rows, nrows, sizeof rows[0], row_cmp);
	table_print(stdout);
	fflush(stdout);
	table_write(header);
	return 0;
}
