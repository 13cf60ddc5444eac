/*
 * flame_profd — helpers shared by the SVG and JSON writers (private to formats/).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/**
 * Length of the valid UTF-8 sequence starting at @p (a byte >= 0x80), or
 * 0 if it is not one (overlong, surrogate, past U+10FFFF, cut short). With
 * @xml, U+FFFE and U+FFFF count as invalid too (not XML characters).
 */
size_t
fp_utf8_seq(const unsigned char *p, bool xml);

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
