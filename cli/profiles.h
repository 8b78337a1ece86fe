/*
 * Credential profiles: the exact publish/subscribe grants of each role a dev
 * mesh mints (WIRE.md §7 for the delivery credential). One table, read by
 * `cotal creds mint` to mint and by reviewers to audit.
 */
#ifndef COTAL_CLI_PROFILES_H
#define COTAL_CLI_PROFILES_H

#include <jansson.h>
#include <stddef.h>

enum profile {
	PROFILE_DELIVERY,
	PROFILE_AGENT,
	PROFILE_SUPERVISOR,
	PROFILE_PROVISIONER,
	PROFILE_SYS_OBSERVER,
	PROFILE_SYS_EVICTOR,
};

#define PROFILE_MAX_ALLOW 64 /* channel patterns an agent profile may carry */

struct profile_params {
	const char *space;       /* space name (the token is derived) */
	const char *user_pub;    /* the credential's own user key (inbox) */
	const char *owner;       /* principal of the holder, when it has one */
	const char *actor;
	const char *uid;         /* agent: its lifecycle UID */
	const char *const *allow; /* agent: read ACL patterns (channels) */
	size_t nallow;
	const char *space_account; /* sys-observer: the space's account key */
};

struct grants {
	json_t *pub_allow, *pub_deny, *sub_allow, *sub_deny, *tags;
};

int profile_from_name(const char *name, enum profile *out);
const char *profile_name(enum profile p);
/* True when the profile's user lives in the system account. */
int profile_is_system(enum profile p);

/* Build the grants. 0 on success, -1 with err naming the bad parameter. */
int profile_grants(enum profile p, const struct profile_params *pp,
		   struct grants *out, char *err, size_t errlen);
void grants_free(struct grants *g);

/*
 * The grants another Cotal toolchain mints for profile p, read from a file
 * shaped like delivery-grants.json: {"<profile>": {"pub": {"allow": [...],
 * "deny": [...]}, "sub": {...}}}, with <s> (space token), <user> (the user
 * key) and <space account> filled in. 0, or -1 with err naming the
 * file and field.
 */
int profile_grants_from_file(const char *path, enum profile p, const struct profile_params *pp,
			     struct grants *out, char *err, size_t errlen);

#endif
