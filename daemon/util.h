/*
 * flame_profd — durations, sizes, clocks and whole writes (util.c).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/** 500ms, 10s, 5m, 2h (a bare number is seconds) into *@us; 0 or
 * -EINVAL. */
int
fpd_parse_duration(const char *str, uint64_t *us);

/** 64M, 1G, 500k (binary units), a bare number is bytes; 0 or -EINVAL. */
int
fpd_parse_size(const char *str, uint64_t *bytes);

/** @us in the largest unit that says it whole (1h, 90s, 250ms). */
void
fpd_format_duration(uint64_t us, char *buf, size_t size);

/** CLOCK_MONOTONIC in microseconds. */
uint64_t
fpd_now_mono_us(void);

/* CPU time of this process, all threads, in microseconds; between
 * fpd_cpu_enter() and fpd_cpu_leave(), that account's time instead. */
uint64_t
fpd_cpu_us(void);

/* From here the CPU time this process spends is also counted in
 * *@account (µs), and fpd_cpu_us() reads the account: a run of several
 * nodes charges each node's session with its own work (the loop enters
 * around every call into a source that keeps an account). */
void
fpd_cpu_enter(uint64_t *account);

/* The account entered last is charged and left. */
void
fpd_cpu_leave(void);

/* Wall-clock microseconds that never go backwards within a run. */
uint64_t
fpd_now_epoch_us(void);

/* @epoch_us as UTC ISO 8601 with microseconds (2026-11-21T07:56:30.018286Z);
 * file names carry their own form (fp/perf-file.h). */
void
fpd_format_utc(uint64_t epoch_us, char *buf, size_t size);

/**
 * Write all @len bytes of @data to @fd, again after EINTR and short
 * writes.
 * @return 0, or a negative errno (-EIO for a write that wrote nothing).
 */
int
fpd_write_all(int fd, const void *data, size_t len);
