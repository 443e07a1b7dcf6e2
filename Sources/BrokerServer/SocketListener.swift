#if canImport(Glibc)
import Glibc
#endif

/// Prepares the socket path before binding: the folder exists and is private, a stale
/// socket left by a crashed daemon is removed, and a live daemon is never displaced.
enum SocketListener {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func prepare(path: String) throws(Failure) {
        guard path.utf8.count < 108 else {
            throw Failure(description: "the socket path \(path) is longer than the 107 bytes a Unix socket path may have: set AUTHBROKER_SOCKET to a shorter one")
        }
        let folder = parent(of: path)
        var st = stat()
        // lstat first: a symlink as the folder is followed only when it is the user's own.
        // Another user could point theirs anywhere at any time, the socket with it.
        if lstat(folder, &st) == 0, st.st_mode & S_IFMT == S_IFLNK {
            guard st.st_uid == geteuid() else {
                throw Failure(description: "the socket folder \(folder) is a symbolic link owned by uid \(st.st_uid), not by uid \(geteuid()) that runs authbrokerd: set AUTHBROKER_SOCKET to a path in a folder of your own (mode 700)")
            }
        }
        if stat(folder, &st) != 0 {
            guard mkdir(folder, 0o700) == 0 || errno == EEXIST else {
                throw Failure(description: "cannot create \(folder): \(String(cString: strerror(errno)))")
            }
            guard stat(folder, &st) == 0 else {
                throw Failure(description: "cannot read \(folder): \(String(cString: strerror(errno)))")
            }
        } else if isDefaultFolder(folder), st.st_uid == geteuid(), st.st_mode & 0o077 != 0 {
            // Our own folder under XDG_RUNTIME_DIR: keep it private even if something loosened it.
            chmod(folder, 0o700)
            st.st_mode &= ~0o077
        }
        try checkOwned(folder, st)
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else {
                throw Failure(description: "\(path) exists and is not a socket: move it away or set AUTHBROKER_SOCKET")
            }
            if isLive(path) {
                throw Failure(description: "another authbrokerd is already serving \(path): stop it first (`systemctl --user stop authbroker.service`) or set AUTHBROKER_SOCKET to another path")
            }
            unlink(path)
        }
    }

    /// Refuses a socket folder another user owns or may write to: its owner (or anyone who
    /// may write there) could replace the socket and read what clients send.
    private static func checkOwned(_ folder: String, _ st: stat) throws(Failure) {
        let me = geteuid()
        if st.st_uid != me {
            throw Failure(description: "the socket folder \(folder) belongs to uid \(st.st_uid), not to uid \(me) that runs authbrokerd: set AUTHBROKER_SOCKET to a path in a folder of your own (mode 700)")
        }
        if st.st_mode & 0o022 != 0 {
            throw Failure(description: "the socket folder \(folder) may be written by other users (mode \(String(st.st_mode & 0o7777, radix: 8))): make it private (`chmod 700 \(folder)`) or set AUTHBROKER_SOCKET to a path in a folder of your own")
        }
    }

    /// Makes the bound socket owner-only (the bind itself ran under a umask of 0177).
    static func secure(path: String) {
        chmod(path, 0o600)
    }

    /// Which file a path names: device and inode, read right after bind.
    struct Identity: Equatable, Sendable {
        let device: UInt64
        let inode: UInt64
    }

    static func identity(of path: String) -> Identity? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// Removes the socket file only while it is still the one this daemon bound. A daemon
    /// that lingers over requests in flight after it stopped accepting must not remove
    /// the socket a daemon started meanwhile made at the same path.
    static func remove(path: String, ifStill made: Identity) {
        guard identity(of: path) == made else { return }
        unlink(path)
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let p = String(path[..<slash])
        return p.isEmpty ? "/" : p
    }

    private static func isDefaultFolder(_ folder: String) -> Bool {
        guard let runtime = getenv("XDG_RUNTIME_DIR") else { return false }
        return folder == String(cString: runtime) + "/authbroker"
    }

    /// True when something accepts connections on the path.
    private static func isLive(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = address(path)
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return r == 0
    }

    /// Binds and listens on the path (prepared by `prepare`): a non-blocking socket, made
    /// owner-only before anyone can connect (bound under a umask of 0177, then chmod 600).
    /// A burst of clients (a build farm's jobs all starting at once) waits in the queue of
    /// 4096 rather than failing to connect; the kernel caps it at somaxconn.
    static func listen(path: String) throws(Failure) -> CInt {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "cannot make a socket: \(String(cString: strerror(errno)))") }
        var addr = address(path)
        let old = umask(0o177)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        umask(old)
        guard bound == 0, Glibc.listen(fd, 4096) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "cannot listen on \(path): \(reason)")
        }
        secure(path: path)
        return fd
    }

    /// Makes an inherited listening socket (systemd's) non-blocking, as the front door reads it.
    static func adopt(_ fd: CInt) throws(Failure) {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw Failure(description: "cannot use the socket systemd passed (fd \(fd)): \(String(cString: strerror(errno))); check authbroker.socket (`systemctl --user status authbroker.socket`)")
        }
    }

    private static func address(_ path: String) -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return addr
    }
}
