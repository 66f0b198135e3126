/* Unicode NFC for tokenizer.json's NFC normalizer, through ICU (its C API
 * works on UTF-16, hence the round trip). Text that is already NFC by ICU's
 * quick check, which all ASCII text is, is copied as it is. */
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <stdint.h>
#include <stdlib.h>

#include "tok/tok_internal.h"

static bool all_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

vkv_status tok_nfc_append(vkv_strbuf *out, const char *text, size_t len)
{
    if (all_ascii(text, len)) {
        vkv_strbuf_put(out, text, len);
        return out->oom ? vkv_error(VKV_ERR_OOM, "out of memory normalising text") : VKV_OK;
    }
    if (len > INT32_MAX / 2) return vkv_error(VKV_ERR_UNSUPPORTED, "NFC: a text fragment of %zu bytes is too long", len);
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2 *nfc = unorm2_getNFCInstance(&err);
    if (U_FAILURE(err)) return vkv_error(VKV_ERR_UNSUPPORTED, "NFC: ICU has no NFC data (%s)", u_errorName(err));

    /* UTF-8 -> UTF-16 (at most one unit per byte); an invalid byte becomes
     * U+FFFD, as the pre-tokenizer would make it */
    int32_t cap16 = (int32_t)len + 1, n16 = 0, n_norm = 0;
    UChar *src = malloc((size_t)cap16 * sizeof *src), *norm = NULL;
    char *utf8 = NULL;
    vkv_status st = VKV_OK;
    if (!src) goto oom;
    u_strFromUTF8WithSub(src, cap16, &n16, text, (int32_t)len, 0xFFFD, NULL, &err);
    if (U_FAILURE(err)) goto icu;
    if (unorm2_quickCheck(nfc, src, n16, &err) == UNORM_YES && U_SUCCESS(err)) {
        vkv_strbuf_put(out, text, len);
        goto done;
    }
    err = U_ZERO_ERROR;
    /* composition can grow a text at most threefold (a singleton decomposing
     * to three code points) */
    int32_t cap_norm = n16 * 3 + 1;
    if (!(norm = malloc((size_t)cap_norm * sizeof *norm))) goto oom;
    n_norm = unorm2_normalize(nfc, src, n16, norm, cap_norm, &err);
    if (U_FAILURE(err)) goto icu;
    int32_t n8 = 0, cap8 = n_norm * 3 + 1;
    if (!(utf8 = malloc((size_t)cap8))) goto oom;
    u_strToUTF8(utf8, cap8, &n8, norm, n_norm, &err);
    if (U_FAILURE(err)) goto icu;
    vkv_strbuf_put(out, utf8, (size_t)n8);
    goto done;
oom:
    st = vkv_error(VKV_ERR_OOM, "out of memory normalising %zu bytes", len);
    goto done;
icu:
    st = vkv_error(VKV_ERR_UNSUPPORTED, "NFC of %zu bytes failed in ICU: %s", len, u_errorName(err));
done:
    free(src);
    free(norm);
    free(utf8);
    if (!st && out->oom) st = vkv_error(VKV_ERR_OOM, "out of memory normalising text");
    return st;
}
