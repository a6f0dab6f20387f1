// libcurl (apt libcurl4-openssl-dev) for the HTTPClient module. curl_easy_setopt/getinfo are variadic, which Swift
// cannot call: these fixed-signature wrappers pass one argument of each kind. No logic beyond argument passing.
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

static inline long og_curl_response_code(CURL *handle)
{
    long code = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

#endif
