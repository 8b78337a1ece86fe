/* The identity, lifecycle and channel tokens of WIRE.md §1 and the reply
 * inbox of §7: pure functions, no allocation. */
#include "lib/wire/tokens.h"

#include <stdint.h>
#include <string.h>

bool
identity_token_valid(const char *s)
{
	if (s == NULL || *s == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (!name_token_char((unsigned char)*s) || *s == '-')
			return false;
	return true;
}

bool
principal_owner_valid(const char *s)
{
	if (s == NULL)
		return false;
	if (strcmp(s, "local") == 0)
		return true;
	if (strncmp(s, "u_", 2) != 0 || strlen(s) != 28)
		return false;
	for (s += 2; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '2' && *s <= '7')))
			return false;
	return true;
}

bool
lifecycle_uid_valid(const char *s)
{
	size_t n;

	if (s == NULL)
		return false;
	n = strlen(s);
	if (n < 26 || n > 32)
		return false;
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

#define CHANNEL_MAX 4096

static bool
channel_check(const char *s, bool wildcards)
{
	size_t n, start = 0;

	if (s == NULL)
		return false;
	n = strlen(s);
	if (n == 0 || n > CHANNEL_MAX)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.')
			continue;
		size_t len = i - start;
		const char *seg = s + start;
		start = i + 1;
		if (len == 0)
			return false;
		if (wildcards && len == 1 && seg[0] == '*')
			continue;
		if (wildcards && len == 1 && seg[0] == '>' && i == n)
			continue;
		for (size_t k = 0; k < len; k++)
			if (!name_token_char((unsigned char)seg[k]))
				return false;
	}
	return true;
}

bool
channel_concrete_valid(const char *s)
{
	return channel_check(s, false);
}

bool
channel_pattern_valid(const char *s)
{
	return channel_check(s, true);
}

bool
inbox_prefix(const char *user_pub, char *out, size_t outlen)
{
	if (user_pub == NULL || strlen(user_pub) != INBOX_ID_LEN || user_pub[0] != 'U' ||
	    outlen < INBOX_PREFIX_MAX)
		return false;
	memcpy(out, "_INBOX_", 7);
	memcpy(out + 7, user_pub, INBOX_ID_LEN);
	out[7 + INBOX_ID_LEN] = '\0';
	for (size_t i = 7; i < 7 + INBOX_ID_LEN; i++)
		if (!((out[i] >= 'A' && out[i] <= 'Z') || (out[i] >= '2' && out[i] <= '7')))
			return false;
	return true;
}
