/*
 * Fuzz target: nkey seed and public key decoding, and the base32 and
 * base64url codecs. Besides not crashing, decoding must be canonical:
 * whatever decodes re-encodes to exactly the input.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/creds/jwt.h"
#include "lib/creds/nkeys.h"

#define CODEC_MAX 512 /* bytes of input given to the raw codecs */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_seed(const uint8_t *data, size_t size)
{
	char err[256], text[NKEY_SEED_LEN + 1];
	struct nkey k;

	if (nkey_from_seed((const char *)data, size, &k, err, sizeof(err)) != 0)
		return;
	nkey_seed_text(&k, text);
	if (size != NKEY_SEED_LEN || memcmp(text, data, size) != 0)
		abort();
	nkey_wipe(&k);
}

static void
check_public(const uint8_t *data, size_t size)
{
	char buf[NKEY_PUBLIC_LEN + 8], err[256], text[NKEY_PUBLIC_LEN + 1];
	struct nkey k;

	if (size >= sizeof(buf))
		size = sizeof(buf) - 1;
	memcpy(buf, data, size);
	buf[size] = '\0';
	memset(&k, 0, sizeof(k));
	if (nkey_decode_public(buf, -1, &k.type, k.pub, err, sizeof(err)) != 0)
		return;
	nkey_public(&k, text);
	if (strcmp(text, buf) != 0)
		abort();
}

static void
check_codecs(const uint8_t *data, size_t size)
{
	uint8_t raw[CODEC_MAX];
	char text[CODEC_MAX * 2 + 1];
	long n;

	if (size > CODEC_MAX)
		size = CODEC_MAX;
	n = nkey_base32_decode((const char *)data, size, raw, sizeof(raw));
	if (n >= 0 && (nkey_base32_encode(raw, (size_t)n, text,
	    sizeof(text)) != size || memcmp(text, data, size) != 0))
		abort();
	n = b64url_decode((const char *)data, size, raw, sizeof(raw));
	if (n >= 0 && (b64url_encode(raw, (size_t)n, text, sizeof(text)) !=
	    size || memcmp(text, data, size) != 0))
		abort();

	/* And the other way: any bytes survive encode then decode. */
	if (nkey_base32_encode(data, size, text, sizeof(text)) == 0 && size > 0)
		abort();
	if (nkey_base32_decode(text, strlen(text), raw, sizeof(raw)) !=
	    (long)size || memcmp(raw, data, size) != 0)
		abort();
	if (b64url_encode(data, size, text, sizeof(text)) == 0 && size > 0)
		abort();
	if (b64url_decode(text, strlen(text), raw, sizeof(raw)) != (long)size ||
	    memcmp(raw, data, size) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_seed(data, size);
	check_public(data, size);
	check_codecs(data, size);
	return 0;
}
