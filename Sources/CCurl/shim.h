// CCurl: libcurl for Swift. curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic, which Swift
// cannot call, so this shim gives each argument type its own typed wrapper.
#ifndef RANGEFS_CCURL_SHIM_H
#define RANGEFS_CCURL_SHIM_H

#include <curl/curl.h>

typedef size_t (*rfs_curl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*rfs_curl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                          curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode rfs_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode rfs_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode rfs_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode rfs_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode rfs_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode rfs_easy_setopt_data_callback(CURL *h, CURLoption o, rfs_curl_data_callback v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode rfs_easy_setopt_xferinfo_callback(CURL *h, rfs_curl_xferinfo_callback v) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, v);
}

static inline CURLcode rfs_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode rfs_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode rfs_easy_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode rfs_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode rfs_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/// CURL_WRITEFUNC_PAUSE and CURL_ERROR_SIZE are macros.
static inline size_t rfs_curl_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }
static inline int rfs_curl_error_size(void) { return CURL_ERROR_SIZE; }

#endif
