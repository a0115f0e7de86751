/* listen.c - see listen.h. Tries each address getaddrinfo returns for host
 * until one binds; the socket of a failed attempt is closed before the next. */
#include "serve/listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LISTEN_BACKLOG 511

int serve_socket_port(int fd, int fallback) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl)) return fallback;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return fallback;
}

int serve_listen(const char *host, int port, int *fd_out, int *port_out, cf_err *err) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, ps, &hints, &res);
    if (g) return cf_fail(err, "cannot listen on %s:%d: %s", host, port, gai_strerror(g));
    int e = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, LISTEN_BACKLOG) == 0) {
            freeaddrinfo(res);
            *fd_out = fd;
            *port_out = serve_socket_port(fd, port);
            return 0;
        }
        e = errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (e == EADDRINUSE)
        return cf_fail(err,
                       "cannot listen on %s:%d: the port is already in use (choose another with --port, or "
                       "--port 0 for any free port)",
                       host, port);
    return cf_fail(err, "cannot listen on %s:%d (%s)", host, port, strerror(e ? e : EINVAL));
}
