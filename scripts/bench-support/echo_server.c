/* The floor for scripts/bench: the least a server on a Unix socket can do per request.
 * One thread, epoll, non-blocking sockets; every `\n`-terminated line read is written back
 * unchanged. No parsing, no allocation per request. Usage: echo_server SOCKET_PATH */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define BUF 65536

struct conn { int fd; size_t len; char buf[BUF]; };

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: echo_server SOCKET_PATH\n"); return 64; }
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(argv[1]) >= sizeof addr.sun_path) { fprintf(stderr, "echo_server: path too long\n"); return 64; }
    strcpy(addr.sun_path, argv[1]);
    unlink(argv[1]);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 256) < 0) {
        perror("echo_server"); return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        if (n < 0) { if (errno == EINTR) continue; perror("epoll_wait"); return 1; }
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c == NULL) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    struct conn *nc = malloc(sizeof *nc);
                    if (!nc) { close(fd); continue; }
                    nc->fd = fd; nc->len = 0;
                    struct epoll_event cev = { .events = EPOLLIN, .data.ptr = nc };
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            ssize_t r = read(c->fd, c->buf + c->len, BUF - c->len);
            if (r <= 0) {
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                close(c->fd); free(c); continue;
            }
            c->len += (size_t)r;
            /* Write back every complete line; keep a partial one for the next read. */
            char *end = memrchr(c->buf, '\n', c->len);
            if (end) {
                size_t whole = (size_t)(end - c->buf) + 1, off = 0;
                while (off < whole) {
                    ssize_t w = write(c->fd, c->buf + off, whole - off);
                    if (w < 0) { if (errno == EINTR || errno == EAGAIN) continue; break; }
                    off += (size_t)w;
                }
                memmove(c->buf, c->buf + whole, c->len - whole);
                c->len -= whole;
            } else if (c->len == BUF) {
                close(c->fd); free(c);
            }
        }
    }
}
