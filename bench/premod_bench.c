// SPDX-License-Identifier: GPL-2.0
/*
 * Microbenchmarks of the operations the pre-modification hooks sit on:
 * 1-byte pwrite, create+unlink, rename and chmod, in a directory DIR.
 * Prints one line per operation: "NAME ns/op" (median of RUNS runs of
 * N operations each).
 *
 *   premod_bench DIR [N [RUNS]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void die(const char *what)
{
	fprintf(stderr, "premod_bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static const char *dir;
static char f[4096], g[4096], h[4096];
static int fd;

static void op_pwrite(long n)
{
	for (long i = 0; i < n; i++)
		if (pwrite(fd, "x", 1, i & 4095) != 1)
			die("pwrite");
}

static void op_create_unlink(long n)
{
	for (long i = 0; i < n; i++) {
		int c = open(g, O_WRONLY | O_CREAT | O_EXCL, 0644);

		if (c < 0)
			die("create");
		close(c);
		if (unlink(g))
			die("unlink");
	}
}

static void op_rename(long n)
{
	for (long i = 0; i < n; i++)
		if (rename(i & 1 ? h : f, i & 1 ? f : h))
			die("rename");
	if (n & 1 && rename(h, f))
		die("rename back");
}

static void op_chmod(long n)
{
	for (long i = 0; i < n; i++)
		if (chmod(f, i & 1 ? 0600 : 0644))
			die("chmod");
}

static const struct {
	const char *name;
	void (*fn)(long n);
} ops[] = {
	{ "pwrite", op_pwrite },
	{ "create+unlink", op_create_unlink },
	{ "rename", op_rename },
	{ "chmod", op_chmod },
};

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 20000;
	int runs = argc > 3 ? atoi(argv[3]) : 5;
	double t[64];

	if (argc < 2 || runs < 1 || runs > 64 || n < 1) {
		fprintf(stderr, "usage: premod_bench DIR [N [RUNS]]\n");
		return 2;
	}
	dir = argv[1];
	snprintf(f, sizeof(f), "%s/f", dir);
	snprintf(g, sizeof(g), "%s/g", dir);
	snprintf(h, sizeof(h), "%s/h", dir);
	fd = open(f, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		die(f);
	for (unsigned int o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		ops[o].fn(n / 10);	/* warm up */
		for (int r = 0; r < runs; r++) {
			double t0 = now_ns();

			ops[o].fn(n);
			t[r] = (now_ns() - t0) / n;
		}
		qsort(t, runs, sizeof(t[0]), cmp);
		printf("%s %.0f\n", ops[o].name, t[runs / 2]);
	}
	close(fd);
	return 0;
}
