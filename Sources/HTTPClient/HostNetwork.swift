import Glibc
import Synchronization

/// Whether this computer has a network to reach a server over, and the sentence when it
/// has none: a request that cannot leave the computer fails at once with the reason
/// (`HTTPClientError.noNetwork`) instead of waiting out its deadline.
///
/// Three signs, each read without a network round trip:
/// - the kernel has no route to the address (connect's `ENETUNREACH`, `EHOSTUNREACH`);
/// - the links the daemon's netlink watch reported (`update`): a loopback address while `lo`
///   is down, or any other address (not one of this computer's own) while no link but `lo`
///   is up and running. Such a link keeps its routes (a cable pulled, `lo` taken down), so
///   connect does not fail: its packets go nowhere until the deadline;
/// - a host name that did not resolve while no route leads off this computer, in either
///   family: no name server can have been asked.
///
/// Until `update` is first called (every process but the daemon) nothing is known of the
/// links, and only the kernel's own refusals count.
public enum HostNetwork {
    /// What the netlink watch last saw of this computer's links.
    public struct Links: Sendable, Equatable {
        /// `lo` is up.
        public var loopbackUp: Bool
        /// Some link other than `lo` is up and running (has a carrier).
        public var otherRunning: Bool

        public init(loopbackUp: Bool, otherRunning: Bool) {
            self.loopbackUp = loopbackUp
            self.otherRunning = otherRunning
        }

        /// The links from their `IFF_*` flags.
        public init(flags: some Sequence<UInt32>) {
            var loopbackUp = false
            var otherRunning = false
            for f in flags where f & UInt32(IFF_UP) != 0 {
                if f & UInt32(IFF_LOOPBACK) != 0 {
                    loopbackUp = true
                } else if f & UInt32(IFF_RUNNING) != 0 {
                    otherRunning = true
                }
            }
            self.init(loopbackUp: loopbackUp, otherRunning: otherRunning)
        }
    }

    /// 0 nothing known; else 1 | 2 (loopback up) | 4 (another link running).
    private static let state = Atomic<UInt8>(0)

    /// Records what the watch saw; read by every connection from then on.
    public static func update(_ links: Links) {
        state.store(1 | (links.loopbackUp ? 2 : 0) | (links.otherRunning ? 4 : 0), ordering: .releasing)
    }

    /// The links last recorded, nil when none were.
    public static var links: Links? {
        let value = state.load(ordering: .acquiring)
        return value == 0 ? nil : Links(loopbackUp: value & 2 != 0, otherRunning: value & 4 != 0)
    }

    /// Why `address` (an IPv4 or IPv6 literal, of `host` as the URL named it) cannot be
    /// reached over `links`, or nil when it may be. `isOwn` says whether the address is one
    /// of this computer's (asked only when no other link runs).
    public static func unreachable(_ address: String, host: String, links: Links?, isOwn: (String) -> Bool) -> String? {
        guard let links else { return nil }
        if Endpoint.isLoopback(address) {
            guard !links.loopbackUp else { return nil }
            return "this computer's loopback interface (lo) is down, so nothing reaches \(host): bring it up (ip link set lo up)"
        }
        guard !links.otherRunning, !isOwn(address) else { return nil }
        return "no network interface of this computer is connected (no network?), so \(host) cannot be reached: connect to a network"
    }

    /// The sentence for a connect that failed with `code`, nil when it is not about the way
    /// to the host.
    public static func connectFailure(_ code: Int32, host: String) -> String? {
        switch code {
        case ENETUNREACH: return "this computer has no route to \(host) (no network?): connect to a network, or check the routes (ip route)"
        case EHOSTUNREACH: return "there is no route to \(host) (no network, or the host is down?): check this computer's network, and that \(host) is up"
        default: return nil
        }
    }

    /// The sentence for `host`, whose name did not resolve, when `routeOut` found no route
    /// off this computer in either family; nil when one leads off it (a name server may have
    /// answered that the name does not exist).
    public static func lookupFailure(host: String, routeOut: (Int32) -> Bool) -> String? {
        guard !routeOut(AF_INET), !routeOut(AF_INET6) else { return nil }
        return "this computer has no network (no route leads off it), so the name \(host) could not be looked up: connect to a network"
    }

    /// Whether the kernel has a route for `family` off this computer: a UDP socket connected
    /// to a documentation address (RFC 5737, RFC 3849), which sends nothing.
    static func routeOut(_ family: Int32) -> Bool {
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withAddress(family == AF_INET ? "192.0.2.1" : "2001:db8::1", port: 53) { connect(fd, $0, $1) == 0 }
    }

    /// Whether `address` is one of this computer's: a UDP socket can be bound to it.
    static func isOwn(_ address: String) -> Bool {
        let fd = socket(address.contains(":") ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withAddress(address, port: 0) { bind(fd, $0, $1) == 0 }
    }

    /// `call` with the numeric address `text` (IPv6 when it has a colon) and `port` as a
    /// socket address; false when `text` is no address.
    private static func withAddress(_ text: String, port: UInt16,
                                    _ call: (UnsafePointer<sockaddr>, socklen_t) -> Bool) -> Bool {
        if text.contains(":") {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, text, &a.sin6_addr) == 1 else { return false }
            return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        guard inet_pton(AF_INET, text, &a.sin_addr) == 1 else { return false }
        return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    }

    /// The numeric address of a getaddrinfo entry.
    static func text(of address: UnsafePointer<sockaddr>, length: socklen_t) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(address, length, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST) == 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
