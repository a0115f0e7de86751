/* tenant.c - tenant ids and per-tenant cache salts (see tenant.h). Stateless. */
#include "serve/tenant.h"

#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int tenant_of_key(const char *key, char out[TENANT_ID_CAP]) {
    static const char hex[] = "0123456789abcdef";
    static const char domain[] = "cinfer-tenant:";
    out[0] = 0;
    if (!key) return 0;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, domain, sizeof domain - 1) &&
             EVP_DigestUpdate(ctx, key, strlen(key)) && EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen >= 16;
    EVP_MD_CTX_free(ctx);
    if (!ok) return -1;
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[32] = 0;
    return 0;
}

int tenant_of_request(const serve_config *cfg, struct evhttp_request *req, char out[TENANT_ID_CAP]) {
    out[0] = 0;
    if (!cfg->keys || cfg->keys->n <= 1) return 0; /* no key or one key: one tenant */
    struct evkeyvalq *hdr = evhttp_request_get_input_headers(req);
    const char *k = evhttp_find_header(hdr, "x-api-key");
    if (!k) {
        const char *h = evhttp_find_header(hdr, "Authorization");
        if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
        k = h + 7;
    }
    return tenant_of_key(k, out);
}

int tenant_cache_salt(const char *tenant, bool share, char **cache_salt) {
    if (!tenant || !*tenant || share) return 0;
    const char *own = *cache_salt;
    size_t n = strlen("tenant:") + strlen(tenant) + (own ? 1 + strlen(own) : 0) + 1;
    char *s = malloc(n);
    if (!s) return -1;
    snprintf(s, n, "tenant:%s%s%s", tenant, own ? "\x1f" : "", own ? own : "");
    free(*cache_salt);
    *cache_salt = s;
    return 0;
}
