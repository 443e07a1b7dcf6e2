#if canImport(Glibc)
import Glibc
#endif

/// What a file is, rather than where it is: its device and inode. Two paths name the same
/// program when their FileIDs are equal; a bind mount or a copy has another one.
public struct FileID: Sendable, Hashable, CustomStringConvertible {
    public var device: UInt64
    public var inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    /// The file at `path`, following symbolic links (so `/proc/PID/exe` gives the running
    /// program's file), or nil when it cannot be stat'ed.
    public init?(path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    public var description: String { "\(device):\(inode)" }
}
