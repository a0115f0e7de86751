/* listen.h - opens the server's listening socket on its own, so that
 * `cinfer serve` can bind its port before it spends seconds loading a model:
 * a busy port or a bad address then fails in milliseconds. The socket is then
 * handed to serve_run (serve_config.listen_fd), which owns it from then on. */
#ifndef CINFER_SERVE_LISTEN_H
#define CINFER_SERVE_LISTEN_H

#include "base/error.h"

/* Resolves host (numeric or a name), binds TCP port (0: any free port) with
 * SO_REUSEADDR and listens. *fd_out: the non-blocking, close-on-exec socket;
 * *port_out: the port actually bound. Returns 0, or -1 with err naming the
 * address and the reason (e.g. "port 8080 on 127.0.0.1 is already in use"). */
int serve_listen(const char *host, int port, int *fd_out, int *port_out, cf_err *err);

/* The local port of a bound socket; fallback when it cannot be read. */
int serve_socket_port(int fd, int fallback);

#endif
