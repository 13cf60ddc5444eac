/*
 * flame_profd — fuzz target for flame_prof: the whole command on one
 * input file, as a user runs it.
 *
 * The input becomes a file (a memfd, named by its /proc path, so the
 * command's own input expansion and stat checks see a regular file) and
 * flame_prof's fpp_main() runs over it once per command, with the options
 * that reach the most code: weights (signed and not), process and status
 * frames, line stripping, both name forms, diff with its SVG. Outputs go
 * to /dev/null. Anything the reader refuses ends in an exit code; what
 * the sanitizers catch (and a hang or an allocation past libFuzzer's
 * limit) is the finding.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "flame_prof.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 16

static const char *const commands[][MAX_ARGS] = {
	{ "top", "-n", "0", "-w", "memory_delta", NULL },
	{ "top", "--sort", "total", "--strip-lines", NULL },
	{ "folded", "--process", "--strip-lines", NULL },
	{ "folded", "--erlang-names", "-w", "reductions", NULL },
	{ "svg", "-w", "message_queue_len_delta", "--sign", "split", NULL },
	{ "svg", "--inverted", "--minwidth", "0", NULL },
	{ "heatmap", "-w", "binary_bytes_delta", "--rows", "10", NULL },
	{ "speedscope", "--per-status", "-w", "memory", NULL },
	{ "speedscope", "--process", NULL },
	{ "procs", "--format", "json", "--sort", "memory", NULL },
	{ "top", "--sign", "negative", "-w", "heap_size_delta", NULL },
	{ "diff", "--by", "total", "--svg", "/dev/null", NULL },
	{ "pprof", "--strip-lines", NULL },
	{ "nodes", "--where", "node~@", NULL },
};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];

	if (fd < 0) {
		fd = memfd_create("fuzz-perf-read", MFD_CLOEXEC);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) < 0 ||
	    (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();

	for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++) {
		char *argv[MAX_ARGS + 8];
		int argc = 0;

		argv[argc++] = (char *)"flame_prof";
		for (size_t i = 0; commands[c][i]; i++)
			argv[argc++] = (char *)commands[c][i];
		argv[argc++] = (char *)"-q";
		argv[argc++] = (char *)"-o";
		argv[argc++] = (char *)"/dev/null";
		argv[argc++] = path;
		if (commands[c][0][0] == 'd')	/* diff: BEFORE AFTER */
			argv[argc++] = path;
		argv[argc] = NULL;
		/* getopt_long keeps state across calls: 0 starts it over */
		optind = 0;
		fpp_main(argc, argv);
	}
	return 0;
}
