/*
 * flame_prof — read flame_profd's perf-script files and render them:
 * folded stacks, SVG flame graphs and heat maps, top tables, speedscope
 * JSON, differential summaries for CI gates and a table of processes.
 *
 * The program is this file; the command (cli.c and the rest) is a static
 * library that the fuzz target and the tests link as well.
 */
#include "flame_prof.h"

int
main(int argc, char **argv)
{
	return fpp_main(argc, argv);
}
