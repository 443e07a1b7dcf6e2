#ifndef AUTHBROKER_ROUTE_WATCH_H
#define AUTHBROKER_ROUTE_WATCH_H

/// A NETLINK_ROUTE socket (close-on-exec, blocking) that only listens: subscribed to link
/// changes and to IPv4 and IPv6 address and route changes (RTMGRP_LINK, RTMGRP_IPV4_IFADDR,
/// RTMGRP_IPV6_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE). A descriptor, or -errno
/// (-EAFNOSUPPORT or -EPERM when a system-call filter refuses AF_NETLINK).
int clinux_route_watch_open(void);

/// Asks the kernel for every link (an RTM_GETLINK dump) on the watch's socket; the answer
/// arrives through clinux_route_watch_read. 0, or -errno.
int clinux_route_watch_ask_links(int fd);

/// What clinux_route_watch_read found besides links, as bits of *news.
enum {
    /// An address or a route was added.
    CLINUX_ROUTE_GAINED = 1,
    /// The end of a link dump (clinux_route_watch_ask_links) was read.
    CLINUX_ROUTE_DUMP_DONE = 2,
};

/// Blocks for the kernel's next datagram on the watch's socket (into `buffer` of `size`
/// bytes; 32 KiB holds any) and reads it: writes up to `max` links into `indices` and
/// `flags` (the link's IFF_* flags; 0 for a link that was removed) and sets the bits of
/// *news. Datagrams from anyone but the kernel are ignored. Returns the number of links
/// written, or -errno (-ENOBUFS: the kernel dropped messages; ask for the links again).
int clinux_route_watch_read(int fd, void *buffer, int size, int *news, int *indices, unsigned int *flags, int max);

#endif
