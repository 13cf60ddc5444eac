/*
 * flame_profd — a run of several nodes: every --node, and with
 * --discover every node epmd on a host lists, each in a session of its
 * own (session.c) with its own output directory (DIR/<node>/), manifest,
 * recorder, cost budget and reconnection, all in the one loop.
 *
 * What a run of one node does stays in run.c, unchanged; here each node
 * is that run's session made patient (a node that cannot be reached yet
 * is tried again instead of ending the run) and named in the log lines
 * of its work. Discovery is a source of its own: every DISCOVER_EVERY_US
 * it asks epmd for its names, adds a session for each new one, and wakes
 * the session of a node that epmd lists again, so that a restarted node
 * is reattached at once rather than after the reconnect backoff.
 *
 * --cluster follows a cluster the same way, with the cluster's own list
 * for epmd's: every DISCOVER_EVERY_US one node of the cluster (the one
 * named, or while it is away any other attached) is asked for
 * erlang:nodes(), one cheap timed request counted on that node; the
 * names come back through its session and are taken here, in this
 * source's tick, as epmd's are: a new one attached with the named
 * node's cookie, one listed again woken. The daemon's own connections
 * are hidden, so they are not in the list, and nor are other hidden
 * nodes (remote shells, other C nodes).
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "run.h"
#include "ctl.h"
#include "daemon-log.h"
#include "flight.h"
#include "loop.h"
#include "options.h"
#include "output.h"
#include "push.h"
#include "recorder.h"
#include "session.h"
#include "util.h"
#include "fp/node.h"
#include "util-buf.h"
#include "util-escape.h"
#include "util-mem.h"

/* epmd is asked for its names this often, and waited for at most
 * DISCOVER_TIMEOUT_MS: the loop waits while it answers (a local epmd
 * answers in well under a millisecond). */
#define DISCOVER_EVERY_US 2000000u
#define DISCOVER_TIMEOUT_MS 1000u
/* A nodes() reply may name thousands of nodes, and each attach makes
 * and locks a directory, recovers its files and binds a control socket
 * inside the loop: at most this many a tick, the rest the ticks after. */
#define CLUSTER_ATTACH_PER_TICK 16u
/* Nodes one daemon profiles at most: each holds up to FDS_PER_NODE
 * descriptors (connection, output directory, its lock, the open file,
 * one while recovering or retiring files, the control socket and a
 * client of it, a capture's directory and file), FDS_PUSH_PER_NODE more
 * with --push (the pusher's dup of the directory and the spool's), the
 * daemon FDS_OWN (the pusher's thread's file, spool file and connection
 * among them). */
#define FLEET_MAX 4096
#define FDS_PER_NODE 10
#define FDS_PUSH_PER_NODE 2
#define FDS_OWN 64

/* A node of the run. One discovered whose directory could not be had
 * keeps its place with neither recorder nor session: it is not tried
 * again. */
struct fleet_node {
	struct fpd_options o;		/* the run's, of this node */
	char *name;			/* NAME@HOST */
	char *tag;			/* ... escaped, for the log */
	char *cookie;			/* the cookie this node is reached with */
	struct fpd_recorder *rec;	/* owns the output */
	struct fpd_session *session;
	struct fpd_flight *flight;	/* --flight-recorder, or NULL */
	char *header;			/* ... its file header */
	struct fpd_ctl *ctl;		/* the node's control socket, or NULL */
	bool discovered;		/* found by --discover or --cluster,
					 * not a --node */
	bool listed;			/* in epmd's last list */
	bool in_cluster;		/* --cluster's node, or in its nodes() */
	uint64_t peer_gen;		/* the last nodes() list naming it */
};

struct fleet {
	struct fpd_source source;	/* discovery, when --discover or --cluster */
	const struct fpd_options *o;
	const char *cookie;		/* for every node without its own */
	struct fpd_loop *loop;
	struct fleet_node **nodes;
	size_t n, cap;
	uint64_t next_scan_mono;
	int last_scan_rc;		/* said once per change */
	bool full_said;
	/* --cluster */
	const char *cluster_cookie;	/* the named node's */
	struct fleet_node *asked;	/* the node nodes() was last asked of */
	char **peers;			/* ... the names of its reply so far */
	size_t npeers, peers_cap;
	bool peers_whole;		/* ... read whole, not yet taken */
	uint64_t peer_gen;		/* lists taken, + 1 */
	uint64_t next_ask_mono;
};

static struct fleet_node *
node_new(const struct fleet *f, const char *name, const char *cookie,
	 bool discovered)
{
	struct fleet_node *fn = xnew(struct fleet_node);
	struct fp_text tag = { 0 };

	fn->name = xstrdup(name);
	fp_text_puts_escaped(&tag, name, NULL);
	fp_text_putc(&tag, '\0');
	fn->tag = tag.buf;
	fn->cookie = xstrdup(cookie);
	fn->o = *f->o;
	fn->o.node = fn->name;
	fn->discovered = discovered;
	return fn;
}

static void
node_destroy(struct fleet_node *fn)
{
	if (!fn)
		return;
	fpd_ctl_destroy(fn->ctl);
	/* a capture being written ends with the last samples, and its
	 * burst with it, while the session and the output are there */
	fpd_flight_destroy(fn->flight);
	free(fn->header);
	fpd_session_destroy(fn->session);
	fpd_recorder_destroy(fn->rec);
	explicit_bzero(fn->cookie, strlen(fn->cookie));
	free(fn->cookie);
	free(fn->tag);
	free(fn->name);
	free(fn);
}

/* Work of one node outside the loop: named and charged as the loop's
 * calls into its session are (loop.c). */
static void
enter(struct fleet_node *fn)
{
	fpd_log_set_node(fn->tag);
	fpd_cpu_enter(&fpd_session_source(fn->session)->cpu_us);
}

static void
leave(void)
{
	fpd_cpu_leave();
	fpd_log_set_node(NULL);
}

/* The node's session, in the loop. */
static void
node_start(struct fleet *f, struct fleet_node *fn)
{
	struct fpd_loop *loop = f->loop;
	struct fpd_source *src;
	uint64_t cpu_us = 0;

	/* the session's clocks of our CPU start on its own account */
	fpd_cpu_enter(&cpu_us);
	fn->session = fpd_session_new(&fn->o, fn->cookie, fn->rec,
				      fpd_loop_run_state(loop),
				      fpd_loop_give_up, loop);
	fpd_cpu_leave();
	fpd_session_set_patient(fn->session);
	src = fpd_session_source(fn->session);
	src->log_node = fn->tag;
	src->cpu_us = cpu_us;
	fpd_loop_add(loop, src);
	/* each node its own ring (each within --flight-recorder-max) and
	 * control socket, in its own directory; made as the run's user */
	fpd_log_set_node(fn->tag);
	fn->flight = fpd_run_open_flight(&fn->o, fn->rec, &fn->header);
	if (fpd_run_open_ctl(&fn->o, fn->rec, fn->flight, &fn->ctl) == 0) {
		fpd_ctl_set_session(fn->ctl, fn->session);
		fpd_ctl_source(fn->ctl)->log_node = fn->tag;
		fpd_loop_add(loop, fpd_ctl_source(fn->ctl));
	}
	fpd_log_set_node(NULL);
	if (fn->flight) {
		fpd_flight_set_burst(fn->flight, fpd_run_burst, fn->session);
		fpd_flight_source(fn->flight)->log_node = fn->tag;
		fpd_loop_add(loop, fpd_flight_source(fn->flight));
	}
	/* no connect here: the session's first tick connects, one node a
	 * tick, so that no node connected first waits, unread, for the
	 * connects of all the others */
}

static bool
find(const struct fleet *f, const char *name, size_t *at)
{
	for (size_t i = 0; i < f->n; i++) {
		if (strcmp(f->nodes[i]->name, name) == 0) {
			*at = i;
			return true;
		}
	}
	return false;
}

static void
raise_fd_limit(size_t nodes, bool push);

static void
add(struct fleet *f, struct fleet_node *fn)
{
	raise_fd_limit(f->n + 1, f->o->push != NULL);
	FP_GROW(f->nodes, f->cap, f->n + 1);
	f->nodes[f->n++] = fn;
}

/* What epmd lists is its to say: only plain names are taken (they make
 * the directory's name and the log's tag). */
static bool
plain_alive(const char *alive)
{
	if (!*alive)
		return false;
	for (const char *p = alive; *p; p++) {
		char c = *p;

		if (!(c == '_' || c == '-' || (c >= '0' && c <= '9') ||
		      (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
			return false;
	}
	return true;
}

/*
 * A node found by @how (--discover, --cluster), reached with @cookie: a
 * directory and a session of its own. NULL when FLEET_MAX nodes are
 * profiled already; a node whose directory cannot be had keeps its
 * place, left alone.
 */
static struct fleet_node *
attach(struct fleet *f, const char *name, const char *cookie, const char *how)
{
	struct fleet_node *fn;
	int rc;

	if (f->n >= FLEET_MAX) {
		if (!f->full_said)
			fpd_warn("%s: %u nodes profiled already: no more are attached",
				 how, FLEET_MAX);
		f->full_said = true;
		return NULL;
	}
	fn = node_new(f, name, cookie, true);
	fpd_log_set_node(fn->tag);
	{
		struct fpd_output *out = fpd_run_open_output(&fn->o, &rc);

		if (out)
			fn->rec = fpd_recorder_new(&fn->o, out);
	}
	fpd_log_set_node(NULL);
	add(f, fn);
	if (!fn->rec) {
		/* a directory that cannot be made or is locked (by a
		 * daemon of the node's own): said once, the node left
		 * alone for the run */
		fpd_warn("%s: %s found, and left alone: no output directory of its own",
			 how, fn->tag);
		return fn;
	}
	fpd_info("%s: %s found; attaching", how, fn->tag);
	node_start(f, fn);
	return fn;
}

/* A node epmd lists: attached if new, woken if it was away. */
static void
on_listed(const char *alive, void *data)
{
	struct fleet *f = data;
	struct fleet_node *fn;
	char name[512];
	const char *why;
	size_t at;

	if (!plain_alive(alive)) {
		struct fp_text t = { 0 };

		fp_text_puts_escaped(&t, alive, NULL);
		fp_text_putc(&t, '\0');
		fpd_warn("--discover: epmd on %s lists a node named '%s': not a plain name, left alone",
			 f->o->discover, t.buf);
		fp_text_free(&t);
		return;
	}
	snprintf(name, sizeof(name), "%s@%s", alive, f->o->discover);
	if (fp_node_name_check(name, &why) < 0)
		return;
	if (f->o->discover_match && fnmatch(f->o->discover_match, name, 0) != 0)
		return;
	if (find(f, name, &at)) {
		fn = f->nodes[at];
		if (fn->session && !fn->listed && !fpd_session_connected(fn->session))
			fpd_session_wake(fn->session);
		fn->listed = true;
		return;
	}
	fn = attach(f, name, f->cookie, "--discover");
	if (fn)
		fn->listed = true;
}

static void
scan(struct fleet *f)
{
	int rc;

	for (size_t i = 0; i < f->n; i++)
		f->nodes[i]->listed = false;
	rc = fp_epmd_names(f->o->discover, DISCOVER_TIMEOUT_MS, on_listed, f);
	if (rc < 0 && rc != f->last_scan_rc)
		fpd_warn("--discover: cannot list the nodes of epmd on %s: %s; asking again every %u s",
			 f->o->discover,
			 rc == -ECONNREFUSED ? "no epmd answers" :
			 rc == -EHOSTUNREACH ? "the host does not resolve" :
			 rc == -EPROTO ? "the answer is no list of names" :
			 strerror(-rc), DISCOVER_EVERY_US / 1000000u);
	else if (rc == 0 && f->last_scan_rc < 0)
		fpd_info("--discover: epmd on %s answers again", f->o->discover);
	f->last_scan_rc = rc;
	if (rc < 0) {
		/* nothing known: nobody is taken for gone */
		for (size_t i = 0; i < f->n; i++)
			f->nodes[i]->listed = true;
	}
}

/* ---- --cluster ------------------------------------------------------------ */

/*
 * A name a node's nodes() gives: the node's text, and the name of a
 * directory of ours. Beyond fp_node_name_check(), only a plain name part
 * and a host of letters, digits, '.', '-' and '_' are taken.
 */
static bool
plain_peer(const char *name)
{
	const char *at = strchr(name, '@'), *why;
	char alive[256];

	if (!at || (size_t)(at - name) >= sizeof(alive) ||
	    fp_node_name_check(name, &why) < 0)
		return false;
	memcpy(alive, name, (size_t)(at - name));
	alive[at - name] = '\0';
	if (!plain_alive(alive))
		return false;
	for (const char *p = at + 1; *p; p++) {
		char c = *p;

		if (!(c == '_' || c == '-' || c == '.' || (c >= '0' && c <= '9') ||
		      (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
			return false;
	}
	return true;
}

/* The asked node's session hands over its reply, name by name, then
 * NULL (all in one call into the session: a list is never taken half
 * read): kept for the next tick, since attaching here would be work of
 * the asked node's, inside its handler. */
static void
on_peer(const char *name, void *data)
{
	struct fleet *f = data;

	if (!name) {
		f->peers_whole = true;
		return;
	}
	FP_GROW(f->peers, f->peers_cap, f->npeers + 1);
	f->peers[f->npeers++] = xstrdup(name);
}

static void
drop_peers(struct fleet *f)
{
	for (size_t i = 0; i < f->npeers; i++)
		free(f->peers[i]);
	f->npeers = 0;
	f->peers_whole = false;
}

/* One name of a whole nodes() list: attached if new, woken if it was
 * away. False when it is new and this tick has attached its share
 * (CLUSTER_ATTACH_PER_TICK): it is taken next tick. */
static bool
take_peer(struct fleet *f, const char *name, unsigned *attached)
{
	struct fleet_node *fn;
	size_t at;

	if (!plain_peer(name)) {
		struct fp_text t = { 0 };

		fp_text_puts_escaped(&t, name, NULL);
		fp_text_putc(&t, '\0');
		fpd_warn("--cluster: %s lists a node named '%s': not a plain name, left alone",
			 f->asked->tag, t.buf);
		fp_text_free(&t);
		return true;
	}
	if (f->o->discover_match && fnmatch(f->o->discover_match, name, 0) != 0)
		return true;
	if (find(f, name, &at)) {
		fn = f->nodes[at];
		if (fn->peer_gen == f->peer_gen)
			return true;	/* taken in an earlier tick of this list */
		/* away, and back in the list since the last one */
		if (fn->session && fn->peer_gen + 1 != f->peer_gen &&
		    !fpd_session_connected(fn->session))
			fpd_session_wake(fn->session);
	} else {
		if (*attached >= CLUSTER_ATTACH_PER_TICK)
			return false;
		fn = attach(f, name, f->cluster_cookie, "--cluster");
		if (!fn)
			return true;
		++*attached;
	}
	fn->in_cluster = true;
	fn->peer_gen = f->peer_gen;
	return true;
}

/* A whole nodes() list: taken, and the nodes it no longer names said
 * once (their sessions find them gone, or still there, themselves).
 * False while names are left for the next tick (the list is kept). */
static bool
take_peers(struct fleet *f)
{
	unsigned attached = 0;
	bool whole = true;

	f->asked->peer_gen = f->peer_gen;	/* not in its own list */
	for (size_t i = 0; i < f->npeers; i++) {
		if (!take_peer(f, f->peers[i], &attached))
			whole = false;
	}
	if (!whole)
		return false;
	for (size_t i = 0; i < f->n; i++) {
		struct fleet_node *fn = f->nodes[i];

		if (fn->in_cluster && f->peer_gen > 1 &&
		    fn->peer_gen + 1 == f->peer_gen)
			fpd_info("--cluster: %s no longer in the nodes() of %s",
				 fn->tag, f->asked->tag);
	}
	f->peer_gen++;
	drop_peers(f);
	return true;
}

/* The node to ask: the one named if connected, else the first of the
 * cluster that is. */
static struct fleet_node *
asker(const struct fleet *f)
{
	struct fleet_node *any = NULL;

	for (size_t i = 0; i < f->n; i++) {
		struct fleet_node *fn = f->nodes[i];

		if (!fn->in_cluster || !fn->session ||
		    !fpd_session_connected(fn->session))
			continue;
		if (strcmp(fn->name, f->o->cluster) == 0)
			return fn;
		if (!any)
			any = fn;
	}
	return any;
}

static void
cluster_tick(struct fleet *f, uint64_t now)
{
	struct fleet_node *fn;

	/* a list not yet taken whole is not asked again: its names would
	 * be appended to it */
	if (f->peers_whole && !take_peers(f))
		return;
	if (now < f->next_ask_mono)
		return;
	f->next_ask_mono = now + DISCOVER_EVERY_US;
	fn = asker(f);
	if (!fn)
		return;
	f->asked = fn;
	enter(fn);
	fpd_session_ask_peers(fn->session, now, on_peer, f);
	leave();
}

/* ---- the source ------------------------------------------------------------ */

static int
discovery_fd(struct fpd_source *src)
{
	(void)src;
	return -1;
}

static void
discovery_input(struct fpd_source *src)
{
	(void)src;
}

static void
discovery_tick(struct fpd_source *src, uint64_t now)
{
	struct fleet *f = (struct fleet *)src;

	if (fpd_loop_run_state(f->loop)->stopping)
		return;
	if (f->o->cluster)
		cluster_tick(f, now);
	if (!f->o->discover || now < f->next_scan_mono)
		return;
	scan(f);
	f->next_scan_mono = fpd_now_mono_us() + DISCOVER_EVERY_US;
}

static const struct fpd_source_ops discovery_ops = {
	.fd = discovery_fd,
	.input = discovery_input,
	.tick = discovery_tick,
};

/*
 * Descriptors for @nodes nodes: past what the soft limit holds, it is
 * raised to the hard one (which a service sets with LimitNOFILE=). Only
 * then: a sandbox that forbids setrlimit(2) (systemd's
 * SystemCallFilter=~@resources) still runs a few nodes.
 */
static void
raise_fd_limit(size_t nodes, bool push)
{
	size_t per_node = FDS_PER_NODE + (push ? FDS_PUSH_PER_NODE : 0);
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 ||
	    (rlim_t)(nodes * per_node + FDS_OWN) <= rl.rlim_cur ||
	    rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		fpd_warn("cannot raise the limit of open files to %llu: %s",
			 (unsigned long long)rl.rlim_max, strerror(errno));
}

/* The end of each node's session; the run's exit code. */
static int
close_all(struct fleet *f, int rc)
{
	bool over = fpd_loop_duration_over(f->loop);
	int first = 0;

	for (size_t i = 0; i < f->n; i++) {
		struct fleet_node *fn = f->nodes[i];
		int unreached, code;

		if (!fn->session)
			continue;
		unreached = fpd_session_unreached(fn->session);

		enter(fn);
		code = fpd_session_close(fn->session, rc, over && !unreached);
		if (unreached && !rc) {
			fpd_err("%s was never reached", fn->tag);
			/* a discovered node was only a name in epmd's list
			 * (a short-lived node, a CLI's): said, not failed */
			code = fn->discovered ? 0 : unreached;
		}
		leave();
		if (code && !first)
			first = code;
	}
	return rc ? rc : first;
}

int
fpd_run_fleet(const struct fpd_options *o, const char *cookie,
	      char *const *cookies)
{
	struct fleet f = { .o = o, .cookie = cookie };
	int rc = 0;

	for (size_t i = 0; i < o->nnodes; i++) {
		struct fleet_node *fn = node_new(&f, o->nodes[i],
						 cookies[i] ? cookies[i] : cookie,
						 false);
		struct fpd_output *out;

		add(&f, fn);
		fpd_log_set_node(fn->tag);
		out = fpd_run_open_output(&fn->o, &rc);
		fpd_log_set_node(NULL);
		if (!out)
			goto out;
		fn->rec = fpd_recorder_new(&fn->o, out);
		if (o->cluster && strcmp(fn->name, o->cluster) == 0) {
			fn->in_cluster = true;
			f.cluster_cookie = fn->cookie;
		}
	}
	f.peer_gen = 1;
	if (o->user) {
		for (size_t i = 0; i < f.n; i++) {
			rc = fpd_run_hand_over(o, fpd_recorder_output(f.nodes[i]->rec));
			if (rc)
				goto out;
		}
		rc = fpd_run_drop_privileges(o);
		if (rc)
			goto out;
	}
	rc = fpd_loop_new(o->duration_us, o->user, &f.loop);
	if (rc < 0) {
		rc = FPD_EXIT_SOFTWARE;
		goto out;
	}
	if (o->discover)
		fpd_info("profiling %zu node%s given and every node epmd on %s lists%s%s",
			 o->nnodes, o->nnodes == 1 ? "" : "s", o->discover,
			 o->discover_match ? " matching " : "",
			 o->discover_match ? o->discover_match : "");
	else if (o->cluster)
		fpd_info("profiling %zu node%s given and every node in the nodes() of %s%s%s",
			 o->nnodes, o->nnodes == 1 ? "" : "s", o->cluster,
			 o->discover_match ? " matching " : "",
			 o->discover_match ? o->discover_match : "");
	else
		fpd_info("profiling %zu nodes", o->nnodes);
	if (o->push)
		fpd_push_start(o->push);
	for (size_t i = 0; i < f.n; i++)
		node_start(&f, f.nodes[i]);
	if (o->discover || o->cluster) {
		f.source.ops = &discovery_ops;
		fpd_loop_add(f.loop, &f.source);
	}
	rc = fpd_loop_run(f.loop);
	rc = close_all(&f, rc);
out:
	for (size_t i = 0; i < f.n; i++)
		node_destroy(f.nodes[i]);
	free(f.nodes);
	drop_peers(&f);
	free(f.peers);
	fpd_loop_destroy(f.loop);
	return rc;
}
