/*
 * flame_prof — the command line: picks the command; options.c reads its
 * options, stack.c the input, render.c and procs.c write what the
 * command makes.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "flame_prof.h"

int
fpp_main(int argc, char **argv)
{
	struct fpp_options o = { 0 };
	char *const *inputs;
	size_t ninputs;
	int c = -1, ex;

	if (argc < 2) {
		fpp_usage_main(stderr);
		return FPP_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		for (int i = 0; argc > 2 && i < FPP_CMD_COUNT; i++) {
			if (strcmp(argv[2], fpp_command_names[i]) == 0) {
				fpp_usage_command((enum fpp_command)i, stdout);
				return FPP_EXIT_OK;
			}
		}
		fpp_usage_main(stdout);
		return FPP_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("flame_prof %s\n", FP_VERSION);
		return FPP_EXIT_OK;
	}
	for (int i = 0; i < FPP_CMD_COUNT; i++) {
		if (strcmp(argv[1], fpp_command_names[i]) == 0)
			c = i;
	}
	if (c < 0) {
		fpp_fail("unknown command '%s'", argv[1]);
		fpp_usage_main(stderr);
		return FPP_EXIT_USAGE;
	}
	o.command = (enum fpp_command)c;
	/* getopt_long on the arguments after the command */
	if (fpp_options_parse(argc - 1, argv + 1, &o) < 0) {
		fprintf(stderr, "Try 'flame_prof %s --help'.\n", fpp_command_names[c]);
		ex = FPP_EXIT_USAGE;
		goto free_options;
	}
	if (o.help) {
		fpp_usage_command(o.command, stdout);
		ex = FPP_EXIT_OK;
		goto free_options;
	}
	if (optind + 1 >= argc) {
		fpp_fail("%s: no input (a file, a directory, or - for standard input)",
			 fpp_command_names[c]);
		fprintf(stderr, "Try 'flame_prof %s --help'.\n", fpp_command_names[c]);
		ex = FPP_EXIT_USAGE;
		goto free_options;
	}
	inputs = argv + 1 + optind;
	ninputs = (size_t)(argc - 1 - optind);
	if (o.follow && ninputs != 1) {
		fpp_fail("top --follow: one directory to follow");
		fprintf(stderr, "Try 'flame_prof top --help'.\n");
		ex = FPP_EXIT_USAGE;
		goto free_options;
	}
	if (o.follow) {
		ex = fpp_cmd_follow(&o, inputs[0]);
		goto free_options;
	}
	switch (o.command) {
	case FPP_CMD_DIFF:
		ex = fpp_cmd_diff(&o, inputs, ninputs);
		break;
	case FPP_CMD_PROCS:
		ex = fpp_cmd_procs(&o, inputs, ninputs);
		break;
	case FPP_CMD_PPROF:
		ex = fpp_cmd_pprof(&o, inputs, ninputs);
		break;
	case FPP_CMD_NODES:
		ex = fpp_cmd_nodes(&o, inputs, ninputs);
		break;
	default:
		ex = fpp_cmd_render(&o, inputs, ninputs);
		break;
	}

free_options:
	fpp_options_free(&o);
	return ex;
}
