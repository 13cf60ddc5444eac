/*
 * flame_profd — one run of the daemon (run.c).
 */
#pragma once

struct fpd_options;
struct fpd_output;

/** Run the daemon with @o and the node's @cookie until it stops.
 * @return its exit code (enum fpd_exit). */
int
fpd_run(const struct fpd_options *o, const char *cookie);

/**
 * The output of o->node under o->out_dir (fpd_output_new()), with the
 * file header and manifest options of @o.
 * @return it (the caller's), or NULL with *@exit_code set and why logged.
 */
struct fpd_output *
fpd_run_open_output(const struct fpd_options *o, int *exit_code);

/** --user: hand @out's directory to o->user. @return 0 or an exit code,
 * with why logged. */
int
fpd_run_hand_over(const struct fpd_options *o, struct fpd_output *out);

/** --user: drop root for good. @return 0 or an exit code, with why
 * logged. */
int
fpd_run_drop_privileges(const struct fpd_options *o);

/**
 * Run the daemon on several nodes (fpd_options_fleet()): every --node,
 * each with @cookies[i] (or @cookie where NULL), and with --discover
 * every node epmd lists, with @cookie (fleet.c).
 * @return its exit code (enum fpd_exit).
 */
int
fpd_run_fleet(const struct fpd_options *o, const char *cookie,
	      char *const *cookies);
