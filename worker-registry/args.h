/*
 * The registry's request path as far as an agent's bytes steer it and
 * nothing is touched: a rail request's body decoded (lib/wire/ctlreq.c),
 * its op found on its rail, and that op's arguments read and checked
 * (WIRE.md §5), before the op reads or writes a bucket. Every refusal here
 * names the field. fuzz_registry drives exactly this, then the reply.
 *
 * Pure: lib/wire and jansson only; thread-safe.
 */
#ifndef COTAL_REGISTRY_ARGS_H
#define COTAL_REGISTRY_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/wire/ctlreq.h"
#include "lib/wire/records.h"

#define REG_HISTORY_DEFAULT 100  /* readHistory's limit when absent */
#define REG_HISTORY_MAX 200
#define REG_DESCRIPTION_MAX 4096 /* registerChannel's description, bytes */
#define REG_EVICT_MAX 256        /* principals in one evictPrincipals */
#define REG_SHA256_HEX 64

enum reg_op {
	REG_OP_NONE = 0,
	/* ctl.delivery */
	REG_OP_JOIN, REG_OP_LEAVE, REG_OP_LIST, REG_OP_HISTORY, REG_OP_REGISTER,
	/* ctl.delivery-admin */
	REG_OP_INVENTORY, REG_OP_EVICT_MANY, REG_OP_EVICT, REG_OP_LIVENESS, REG_OP_RELOAD,
};

/* What an op takes; each field is set for the ops that name it. */
struct reg_args {
	enum reg_op op;
	char channel[CHANNEL_MAX + 1];      /* join, leave, history, register */
	char uid[UID_MAX + 1];              /* leave, list, inventory: args.lifecycleUid */
	uint64_t generation;                /* leave */
	uint64_t limit;                     /* history */
	const char *description;            /* register: borrowed from the request, or NULL */
	char principal[PRINCIPAL_MAX + 1];  /* inventory, evict, liveness */
	char (*principals)[PRINCIPAL_MAX + 1]; /* evict many: malloc'd, nprincipals of them */
	int nprincipals;
	char expected[REG_SHA256_HEX + 1];  /* reload: expected.delivery, "" when absent */
};

/* The op a rail serves by that name, or REG_OP_NONE. */
enum reg_op reg_op_find(enum rail rail, const char *name);

/*
 * Decode body, a request of caller (its rail and identity from the
 * subject), into req and its op's arguments into args: 0, or -1 with the
 * refusal to answer in why (CTL_ERR_SENDER, a malformed body, an op the
 * rail does not serve, an argument). On 0 free both with reg_request_free;
 * args borrows from req.
 */
int reg_request_read(const char *body, size_t len, const struct rail_caller *caller,
		     struct ctl_request *req, struct reg_args *args, char *why, size_t whylen);
void reg_request_free(struct ctl_request *req, struct reg_args *args);

#endif
