/*
 * flame_profd — helpers shared by the SVG writers (private to formats/).
 */
#pragma once

#include <stdio.h>

/**
 * Write @s as XML character data or attribute text: & < > " ' escaped,
 * control characters (not allowed in XML 1.0) and invalid UTF-8 as
 * U+FFFD.
 */
void
fp_svg_write_escaped(FILE *out, const char *s);

/** Format a time in microseconds since the epoch as ISO-8601 UTC. */
void
fp_svg_format_time(char *dst, size_t size, unsigned long long time_us);
