/* What `authctl token --resource URL` does, in C, for scripts/bench's start-up
 * comparison: connect to $AUTHBROKER_SOCKET, send one token.get line, read the answer line,
 * print the access_token member. No JSON library: the value is found by its key.
 * Usage: token_client RESOURCE [PROVIDER] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *path = getenv("AUTHBROKER_SOCKET");
    if (argc < 2 || argc > 3 || !path) { fprintf(stderr, "usage: AUTHBROKER_SOCKET=PATH token_client RESOURCE [PROVIDER]\n"); return 64; }
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof addr.sun_path) return 3;
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) { perror("token_client"); return 3; }
    char req[4096];
    int n = argc == 3
        ? snprintf(req, sizeof req,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"token.get\",\"params\":{\"resource\":\"%s\",\"provider\":\"%s\"}}\n", argv[1], argv[2])
        : snprintf(req, sizeof req,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"token.get\",\"params\":{\"resource\":\"%s\"}}\n", argv[1]);
    if (n <= 0 || (size_t)n >= sizeof req || send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) return 3;
    static char buf[1 << 20];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
        if (r <= 0) return 3;
        len += (size_t)r;
        if (memchr(buf, '\n', len) || len == sizeof buf - 1) break;
    }
    buf[len] = 0;
    char *v = strstr(buf, "\"access_token\":\"");
    if (!v) { fprintf(stderr, "token_client: no token in the answer\n"); return 1; }
    v += strlen("\"access_token\":\"");
    char *e = strchr(v, '"');
    if (!e) return 1;
    *e = 0;
    printf("%s\n", v);
    return 0;
}
