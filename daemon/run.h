/*
 * flame_profd — one run of the daemon (run.c).
 */
#pragma once

struct fpd_options;

/** Run the daemon with @o and the node's @cookie until it stops.
 * @return its exit code (enum fpd_exit). */
int
fpd_run(const struct fpd_options *o, const char *cookie);
