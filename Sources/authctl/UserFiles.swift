#if canImport(Glibc)
import Glibc
#endif

/// Reading and replacing the small configuration files of other tools that `setup-aws`
/// and `setup-gcloud` write (no secret is ever in them), and the output file of
/// `gcloud-credential` (which the user's configuration asks for).
enum UserFiles {
    /// `$HOME`, else the password database's home folder.
    static func home() -> String? {
        if let h = getenv("HOME").map({ String(cString: $0) }), !h.isEmpty { return h }
        guard let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir else { return nil }
        return String(cString: dir)
    }

    /// `name`'s value, when set and not empty.
    static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The file's text; nil when it does not exist; throws its reason when it cannot be read.
    static func read(_ path: String) throws(UserFileError) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw UserFileError(path: path, doing: "read", errno: errno)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw UserFileError(path: path, doing: "read", errno: errno) }
            if n == 0 { break }
            bytes += chunk[0..<n]
            guard bytes.count <= 1 << 22 else { throw UserFileError(path: path, doing: "read", errno: EFBIG) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Replaces the file with `text` in one step (a file beside it, renamed over it), with
    /// the old file's mode, else `mode`; missing folders are made, readable by the user only.
    static func replace(_ path: String, with text: String, mode: mode_t = 0o600) throws(UserFileError) {
        try makeFolders(of: path)
        var old = stat()
        let keep = stat(path, &old) == 0 ? old.st_mode & 0o7777 : mode
        let temporary = path + ".authctl-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, keep)
        guard fd >= 0 else { throw UserFileError(path: path, doing: "write", errno: errno) }
        var failed: Int32 = 0
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
                if n < 0, errno == EINTR { continue }
                if n < 0 { failed = errno; return }
                offset += n
            }
        }
        if failed == 0, fsync(fd) != 0 { failed = errno }
        close(fd)
        if failed == 0, rename(temporary, path) != 0 { failed = errno }
        guard failed == 0 else {
            unlink(temporary)
            throw UserFileError(path: path, doing: "write", errno: failed)
        }
    }

    /// Makes the folders above `path` that are missing, mode 0700.
    private static func makeFolders(of path: String) throws(UserFileError) {
        var folder = ""
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        for (i, part) in parts.enumerated() {
            folder += (i == 0 ? "" : "/") + part
            guard !folder.isEmpty, !part.isEmpty else { continue }
            if mkdir(folder, 0o700) != 0, errno != EEXIST {
                throw UserFileError(path: folder, doing: "make the folder", errno: errno)
            }
        }
    }
}

/// A file that could not be read or written: a sentence naming it and why.
struct UserFileError: Error {
    var path: String
    var doing: String
    var errno: Int32

    var sentence: String {
        "cannot \(doing) \(Output.safe(path)) (\(String(cString: strerror(errno)))): check the path and its permissions"
    }
}
