/*
 * flame_profd — the control socket's protocol (ctl.h): what either end
 * makes of a line. Kept apart from the socket so the unit tests drive it
 * with any bytes.
 */
#include <errno.h>
#include <string.h>

#include "ctl.h"

static const char *const error_names[FPD_CTL_ERRORS] = {
	[FPD_CTL_ERR_REQUEST] = "request",
	[FPD_CTL_ERR_REFUSED] = "refused",
	[FPD_CTL_ERR_NO_RECORDER] = "no-recorder",
	[FPD_CTL_ERR_HELD_OFF] = "held-off",
	[FPD_CTL_ERR_CAPPED] = "capped",
};

const char *
fpd_ctl_error_name(enum fpd_ctl_error e)
{
	return error_names[e];
}

int
fpd_ctl_answer_error(const char *line)
{
	static const char err[] = "error: ";

	if (strcmp(line, "ok") == 0)
		return FPD_CTL_ERRORS;
	if (strncmp(line, err, sizeof(err) - 1) != 0)
		return -1;
	line += sizeof(err) - 1;
	for (int e = 0; e < FPD_CTL_ERRORS; e++) {
		size_t n = strlen(error_names[e]);

		if (strncmp(line, error_names[e], n) == 0 &&
		    (line[n] == ' ' || line[n] == '\0'))
			return e;
	}
	return -1;
}

int
fpd_ctl_parse(const char *line, size_t len, struct fpd_ctl_request *req,
	      const char **why)
{
	static const char trigger[] = "trigger ";

	*why = NULL;
	memset(req, 0, sizeof(*req));
	if (memchr(line, '\0', len) || memchr(line, '\n', len)) {
		*why = "a request is one line of text";
		return -EINVAL;
	}
	if (len == 6 && memcmp(line, "status", 6) == 0) {
		req->verb = FPD_CTL_STATUS;
		return 0;
	}
	if (len >= sizeof(trigger) - 1 &&
	    memcmp(line, trigger, sizeof(trigger) - 1) == 0) {
		size_t n = len - (sizeof(trigger) - 1);

		if (n == 0 || n > FPD_CAPTURE_REASON_RAW) {
			*why = "trigger takes a reason of 1 to 128 bytes";
			return -EINVAL;
		}
		req->verb = FPD_CTL_TRIGGER;
		memcpy(req->reason, line + sizeof(trigger) - 1, n);
		req->reason[n] = '\0';
		return 0;
	}
	if (len == 7 && memcmp(line, "trigger", 7) == 0) {
		*why = "trigger takes a reason of 1 to 128 bytes";
		return -EINVAL;
	}
	*why = "expected status or trigger REASON";
	return -EINVAL;
}
