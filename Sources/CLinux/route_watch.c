#include "route_watch.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int clinux_route_watch_open(void) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -errno;
    struct sockaddr_nl local;
    memset(&local, 0, sizeof local);
    local.nl_family = AF_NETLINK;
    local.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
    if (bind(fd, (struct sockaddr *)&local, sizeof local) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int clinux_route_watch_ask_links(int fd) {
    struct {
        struct nlmsghdr header;
        struct ifinfomsg link;
    } request;
    memset(&request, 0, sizeof request);
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
    request.header.nlmsg_type = RTM_GETLINK;
    request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    request.header.nlmsg_seq = 1;
    request.link.ifi_family = AF_UNSPEC;
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    ssize_t sent;
    do {
        sent = sendto(fd, &request, request.header.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel);
    } while (sent < 0 && errno == EINTR);
    return sent < 0 ? -errno : 0;
}

int clinux_route_watch_read(int fd, void *buffer, int size, int *news, int *indices, unsigned int *flags, int max) {
    struct sockaddr_nl sender;
    socklen_t length;
    ssize_t n;
    *news = 0;
    do {
        length = sizeof sender;
        n = recvfrom(fd, buffer, (size_t)size, 0, (struct sockaddr *)&sender, &length);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    if (length != sizeof sender || sender.nl_pid != 0) return 0;
    int count = 0;
    int left = (int)n;
    for (struct nlmsghdr *header = buffer; NLMSG_OK(header, left); header = NLMSG_NEXT(header, left)) {
        switch (header->nlmsg_type) {
        case RTM_NEWADDR:
        case RTM_NEWROUTE:
            *news |= CLINUX_ROUTE_GAINED;
            break;
        case NLMSG_DONE:
            *news |= CLINUX_ROUTE_DUMP_DONE;
            break;
        case RTM_NEWLINK:
        case RTM_DELLINK:
            if (header->nlmsg_len >= NLMSG_LENGTH(sizeof(struct ifinfomsg)) && count < max) {
                const struct ifinfomsg *link = NLMSG_DATA(header);
                indices[count] = link->ifi_index;
                flags[count] = header->nlmsg_type == RTM_DELLINK ? 0 : link->ifi_flags;
                count++;
            }
            break;
        default:
            break;
        }
    }
    return count;
}
