/*
 * flame_profd — what reading a --perf map costs: memory and time of
 * fpd_symbols_new() and the reads that follow, on a map of the JIT's
 * shape of a given size, and on a sparse file of a given size.
 *
 *   meson compile -C build bench-perf-map
 *   build/bench/bench-perf-map [MAP_MB [SPARSE_GB]]   (default 100 100)
 *
 * The map is written in a directory of its own under /tmp as this
 * process's perf-PID.map and removed afterwards. Memory is the process's
 * resident set (VmRSS) before and after; time is CLOCK_MONOTONIC; then
 * the time of one lookup, of a JIT address and of a C address.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf-symbols.h"

#define LOOKUPS 2000000u

static long
rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	}
	if (f)
		fclose(f);
	return kib;
}

/* not static: looked up as C code by its ELF symbol */
double
now_s(void);

double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Lines as OTP's JIT writes them, up to @bytes. */
static size_t
write_map(const char *path, unsigned long long bytes)
{
	FILE *f = fopen(path, "we");
	unsigned long long addr = 0x7f0000000000ull, written = 0;
	size_t lines = 0;

	if (!f) {
		perror(path);
		exit(1);
	}
	while (written < bytes) {
		int n = fprintf(f, "0x%llx %x $bench_module_%zu:function_%zu/%zu\n",
				addr, 0x40 + (unsigned)(lines % 512), lines / 40,
				lines % 40, lines % 5);

		addr += 0x400;
		written += (unsigned long long)n;
		lines++;
	}
	fclose(f);
	return lines;
}

/* Read all that will be read: each miss reads the next part. */
static void
measure(const char *what, const char *dir, unsigned long long bytes)
{
	struct fpd_symbols *syms;
	struct fp_frame f;
	long before = rss_kib();
	double t0 = now_s();

	syms = fpd_symbols_new(getpid(), dir);
	for (int i = 0; i < 16; i++)
		fpd_symbols_lookup(syms, 0x10000, &f);
	fpd_symbols_lookup(syms, 0x7f0000000400ull + 8, &f);
	printf("%s: %llu MiB file: %.2f s, resident +%ld MiB (%s:%s)\n", what,
	       bytes >> 20, now_s() - t0, (rss_kib() - before) >> 10,
	       f.module, f.function);
	/* the cost per frame of a sample: JIT addresses the map names and
	 * C addresses (this program's own code) */
	t0 = now_s();
	for (unsigned i = 0; i < LOOKUPS; i++)
		fpd_symbols_lookup(syms, 0x7f0000000000ull + 0x400ull * (i % 100000) + 8, &f);
	double jit_ns = (now_s() - t0) * 1e9 / LOOKUPS;
	t0 = now_s();
	for (unsigned i = 0; i < LOOKUPS; i++)
		fpd_symbols_lookup(syms, (uint64_t)(uintptr_t)now_s + (i % 16), &f);
	printf("%s: lookups: JIT %.0f ns, C %.0f ns (%s:%s)\n", what, jit_ns,
	       (now_s() - t0) * 1e9 / LOOKUPS, f.module, f.function);
	fpd_symbols_destroy(syms);
}

int
main(int argc, char **argv)
{
	unsigned long long map_mb = argc > 1 ? strtoull(argv[1], NULL, 10) : 100;
	unsigned long long sparse_gb = argc > 2 ? strtoull(argv[2], NULL, 10) : 100;
	char dir[] = "/tmp/bench-perf-map-XXXXXX", path[128];
	size_t lines;
	int fd;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)getpid());
	lines = write_map(path, map_mb << 20);
	printf("map: %zu lines\n", lines);
	measure("map", dir, map_mb << 20);

	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)(sparse_gb << 30)) < 0) {
		perror("sparse map");
		return 1;
	}
	close(fd);
	measure("sparse", dir, sparse_gb << 30);
	unlink(path);
	rmdir(dir);
	return 0;
}
