/*
 * flame_profd — fuzz target for the --perf map reader: any bytes as the
 * node's /tmp/perf-PID.map.
 *
 * The input becomes this process's map in a directory of its own (a
 * regular file of its own user, as the reader accepts), read by
 * fpd_symbols_new() in two parts (the first half, then the whole, as a
 * map grows while the JIT writes it), and looked up at the start, the
 * last byte and the end of every range its lines name and at a few
 * addresses of no range. Every name handed out must be UTF-8 (the
 * writer's files are read as UTF-8); what the sanitizers catch (and a
 * hang or an allocation past libFuzzer's limit) is the finding.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf-symbols.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/fuzz-perf-map-XXXXXX";
static char path[128];

static void
remove_map(void)
{
	unlink(path);
	rmdir(dir);
}

static void
put_map(const uint8_t *data, size_t size, bool append)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC |
			    (append ? O_APPEND : O_TRUNC), 0644);

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	close(fd);
}

static void
check_utf8(const char *s)
{
	char copy[2 * FPD_PERF_MAP_LINE_MAX];
	size_t len = strlen(s);

	if (len >= sizeof(copy))
		abort();
	memcpy(copy, s, len + 1);
	if (fpd_utf8_fix(copy, len))
		abort();
}

static void
look_up(struct fpd_symbols *syms, uint64_t addr)
{
	struct fp_frame f;

	fpd_symbols_lookup(syms, addr, &f);
	if (!f.module || !f.function)
		abort();
	check_utf8(f.module);
	check_utf8(f.function);
	if (f.file)
		check_utf8(f.file);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t elsewhere[] = { 0, 0x1000, 0x10000, 0x40001000,
					      0x7f0000000000, UINT64_MAX };
	struct fpd_symbols *syms;
	size_t half = size / 2;

	if (!path[0]) {
		if (!mkdtemp(dir))
			abort();
		snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)getpid());
		atexit(remove_map);
	}
	put_map(data, half, false);
	syms = fpd_symbols_new(getpid(), dir);
	put_map(data + half, size - half, true);

	for (size_t at = 0; at < size;) {
		const char *line = (const char *)data + at;
		const char *nl = memchr(line, '\n', size - at);
		size_t len = nl ? (size_t)(nl - line) : size - at;
		uint64_t start, range;
		const char *name;
		size_t name_len;

		if (fpd_perf_map_line(line, len, &start, &range, &name, &name_len)) {
			look_up(syms, start);
			look_up(syms, start + range - 1);
			look_up(syms, start + range);
		}
		at += len + 1;
	}
	for (size_t i = 0; i < sizeof(elsewhere) / sizeof(elsewhere[0]); i++)
		look_up(syms, elsewhere[i]);
	fpd_symbols_destroy(syms);
	return 0;
}
