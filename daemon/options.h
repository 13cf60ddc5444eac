/*
 * flame_profd — the command line: one table gives each option's name,
 * argument, parser and --help lines (options.c).
 */
#pragma once

#include "flame_profd.h"

/**
 * Fill @o from the command line. --help and --version print and exit 0.
 * @return 0, or FPD_EXIT_USAGE with the reason on stderr. @o holds
 *         allocations either way: fpd_options_release().
 */
int
fpd_options_parse(int argc, char **argv, struct fpd_options *o);

void
fpd_options_release(struct fpd_options *o);

/** The --help text, generated from the table. */
void
fpd_options_usage(FILE *f);
