#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// The front door's epoll set, watching the listening socket, the eventfd that stops its
/// thread (`FrontDoor.stop`) and the one that says answers worked on are ready
/// (`FrontDoor.LaterAnswers`, which owns it).
struct Poller {
    let epoll: CInt
    let wake: CInt

    init(listening: CInt, finished: CInt) throws(ServerError) {
        epoll = epoll_create1(CInt(EPOLL_CLOEXEC))
        wake = eventfd(0, CInt(EFD_CLOEXEC | EFD_NONBLOCK))
        guard epoll >= 0, wake >= 0,
              clinux_epoll_ctl(epoll, EPOLL_CTL_ADD, listening, EPOLLIN.rawValue) == 0,
              clinux_epoll_ctl(epoll, EPOLL_CTL_ADD, wake, EPOLLIN.rawValue) == 0,
              clinux_epoll_ctl(epoll, EPOLL_CTL_ADD, finished, EPOLLIN.rawValue) == 0
        else {
            let reason = String(cString: strerror(errno))
            if epoll >= 0 { Glibc.close(epoll) }
            if wake >= 0 { Glibc.close(wake) }
            throw ServerError(description: "cannot watch the socket for connections: \(reason)")
        }
    }

    /// Wakes the thread waiting on the set, for it to stop.
    func signal() {
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }

    func close() {
        Glibc.close(epoll)
        Glibc.close(wake)
    }
}
