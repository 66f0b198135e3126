/* UTF-8 helpers shared by the JSON reader and writer, the tier dump and the tokenizers. */
#ifndef VKV_UTF8_H
#define VKV_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Writes code point cp (<= 0x10FFFF) as UTF-8 into o (room for 4 bytes);
 * returns the bytes written. */
size_t vkv_utf8_encode(uint32_t cp, char *o);

/* Length of the valid UTF-8 sequence starting at s (n bytes available), 0
 * when the bytes there are not valid UTF-8 (overlong, surrogate, > U+10FFFF). */
size_t vkv_utf8_valid_len(const unsigned char *s, size_t n);

/* The value of 4 hex digits (a JSON \u escape), -1 if they are not. */
int vkv_hex4(const char *s);

#endif
