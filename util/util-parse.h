/*
 * flame_profd — durations, sizes and names of choices as both programs
 * take them on the command line (flame_profd(1) and flame_prof(1) say the
 * same).
 */
#pragma once

#include <stdint.h>

/**
 * A duration: a number (strtod(3): "1.5", "2e3") followed by a unit us,
 * ms, s, m (minutes), h or d; a bare number is seconds. No sign.
 *
 * @param max_us  the largest duration taken
 * @return 0 with *@us rounded to the nearest microsecond; -EINVAL if
 *         @text is not a duration; -ERANGE if it is longer than @max_us.
 */
int
parse_duration(const char *text, uint64_t max_us, uint64_t *us);

/**
 * A size: a number of bytes, or a number followed by K, M, G or T (powers
 * of 1024, either case) and optionally B or iB ("100", "64M", "64MiB",
 * "1.5g"). No sign.
 *
 * @param max_bytes  the largest size taken
 * @return 0 with *@bytes rounded to the nearest byte; -EINVAL if @text
 *         is not a size; -ERANGE if it is larger than @max_bytes.
 */
int
parse_size(const char *text, uint64_t max_bytes, uint64_t *bytes);

/**
 * One of a fixed set of words, such as an option's choices: @names is
 * NULL-terminated, in the order of the values they stand for (an enum's,
 * from 0). Compared byte for byte.
 *
 * @return the index of @text in @names; -EINVAL if it is none of them.
 */
int
parse_enum(const char *text, const char *const *names);
