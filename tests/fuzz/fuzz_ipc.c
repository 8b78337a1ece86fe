/*
 * Fuzz target: ipc_decode at both ends of a channel, the bytes a
 * compromised worker (or a broken supervisor) controls entirely. Besides
 * not crashing, a frame that decodes must be exactly what ipc_encode
 * makes of the decoded message, and must satisfy its catalogue entry.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc.h"

#define ERR_MAX 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t frame[IPC_MAX_FRAME];

static void
check_decode(const uint8_t *data, size_t size, enum ipc_dir dir)
{
	const struct ipc_type_info *t;
	struct ipc_msg m;
	char err[ERR_MAX];
	size_t n;

	if (ipc_decode(data, size, dir, &m, err, sizeof(err)) != 0) {
		/* A refusal always says why. */
		if (err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL)
			abort();
		return;
	}
	if ((t = ipc_type_info(m.type)) == NULL || (t->dir & dir) == 0)
		abort();
	if (m.len < t->min_len || m.len > t->max_len)
		abort();
	if (m.payload != data + IPC_HDR_LEN || m.len != size - IPC_HDR_LEN)
		abort();
	n = ipc_encode(frame, sizeof(frame), m.type, m.payload, m.len);
	if (n != size || memcmp(frame, data, size) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_decode(data, size, IPC_TO_WORKER);
	check_decode(data, size, IPC_TO_SUPERVISOR);
	return 0;
}
