// libcurl (apt libcurl4-openssl-dev) for the HTTPClient module. curl_easy_setopt/getinfo, curl_share_setopt and
// curl_multi_setopt are variadic, which Swift cannot call: these fixed-signature wrappers pass one argument of each
// kind, and one reads the union of a CURLMsg. No logic beyond argument passing.
#ifndef OFFERGATE_CCURL_SHIM_H
#define OFFERGATE_CCURL_SHIM_H

#include <curl/curl.h>

static inline CURLcode og_curl_set_long(CURL *handle, CURLoption option, long value)
{
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode og_curl_set_pointer(CURL *handle, CURLoption option, const void *value)
{
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode og_curl_set_write_callback(
    CURL *handle, size_t (*callback)(char *, size_t, size_t, void *), void *context)
{
    CURLcode code = curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
    return code != CURLE_OK ? code : curl_easy_setopt(handle, CURLOPT_WRITEDATA, context);
}

static inline CURLcode og_curl_set_header_callback(
    CURL *handle, size_t (*callback)(char *, size_t, size_t, void *), void *context)
{
    CURLcode code = curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
    return code != CURLE_OK ? code : curl_easy_setopt(handle, CURLOPT_HEADERDATA, context);
}

static inline CURLSHcode og_curl_share_set_long(CURLSH *share, CURLSHoption option, long value)
{
    return curl_share_setopt(share, option, value);
}

static inline CURLcode og_curl_set_private(CURL *handle, void *value)
{
    return curl_easy_setopt(handle, CURLOPT_PRIVATE, value);
}

static inline void *og_curl_private(CURL *handle)
{
    char *value = NULL;
    curl_easy_getinfo(handle, CURLINFO_PRIVATE, &value);
    return value;
}

static inline long og_curl_response_code(CURL *handle)
{
    long code = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

// The multi interface driven by our own epoll loop (curl_multi_socket_action): libcurl reports the sockets it wants
// watched and the timeout it wants kept through these two callbacks.
static inline CURLMcode og_curl_multi_set_long(CURLM *multi, CURLMoption option, long value)
{
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode og_curl_multi_set_callbacks(
    CURLM *multi, int (*socket)(CURL *, curl_socket_t, int, void *, void *), int (*timer)(CURLM *, long, void *),
    void *context)
{
    CURLMcode code = curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket);
    if (code == CURLM_OK) code = curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, context);
    if (code == CURLM_OK) code = curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer);
    if (code == CURLM_OK) code = curl_multi_setopt(multi, CURLMOPT_TIMERDATA, context);
    return code;
}

// The easy handle of a finished transfer and its result (NULL for any other message).
static inline CURL *og_curl_multi_done(CURLMsg *message, CURLcode *result)
{
    if (message->msg != CURLMSG_DONE) return NULL;
    *result = message->data.result;
    return message->easy_handle;
}

#endif
