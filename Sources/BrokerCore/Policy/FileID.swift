#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// What a file is, rather than where it is: its device, inode number and when that inode
/// was made. Two paths name the same program when their FileIDs are equal; a bind mount or
/// a copy has another one, and so has a new file the file system gave a freed inode number
/// to (a package upgrade frees the old program's; any process of the user can make files
/// until it gets it back).
public struct FileID: Sendable, Hashable, CustomStringConvertible {
    public var device: UInt64
    public var inode: UInt64
    /// The inode's birth time (statx `stx_btime`, nanoseconds) where the file system records
    /// one, else its last status change (ctime): a reused inode number comes with another
    /// one. nil when not read (`stamped: false`).
    public var stamp: Int64?

    public init(device: UInt64, inode: UInt64, stamp: Int64? = nil) {
        self.device = device
        self.inode = inode
        self.stamp = stamp
    }

    /// The file at `path`, following symbolic links (so `/proc/PID/exe` gives the running
    /// program's file), or nil when it cannot be stat'ed.
    /// - Parameter stamped: false for what is not a file's contents (namespaces under
    ///   `/proc/PID/ns`, whose inodes the kernel makes anew, with a new ctime, as it likes).
    public init?(path: String, stamped: Bool = true) {
        var device: UInt64 = 0, inode: UInt64 = 0, stamp: Int64 = 0
        guard clinux_file_identity(path, &device, &inode, &stamp) == 0 else { return nil }
        self.init(device: device, inode: inode, stamp: stamped ? stamp : nil)
    }

    /// Whether `other` is the same inode, whatever its stamp: for a file a running process
    /// holds (`/proc/PID/exe`), whose number cannot be given away while it runs, and whose
    /// ctime a chmod or a new hard link may change.
    public func isSameInode(as other: FileID?) -> Bool {
        guard let other else { return false }
        return device == other.device && inode == other.inode
    }

    public var description: String { "\(device):\(inode)" }
}
