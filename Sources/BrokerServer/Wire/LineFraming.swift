#if canImport(Glibc)
import Glibc
#endif

/// The framing rule of the protocol, free of NIO so the fuzzer can drive the very code the
/// daemon runs: a line ends at `\n`, a `\r` before it is dropped, and a line longer than
/// the cap is refused before anything is decoded.
enum LineFraming {
    enum Next: Equatable {
        /// A whole line: its bytes are `[0, length)`; `consumed` bytes (with the `\n`) are used up.
        case line(length: Int, consumed: Int)
        /// No `\n` yet, and the bytes so far are within the cap.
        case needMoreData
        /// The line is longer than the cap.
        case tooLong
    }

    /// A line of spaces and tabs only (or none): skipped between requests, as many line
    /// protocols do.
    static func isBlank<Bytes: Sequence<UInt8>>(_ line: Bytes) -> Bool {
        line.allSatisfy { $0 == 0x20 || $0 == 0x09 }
    }

    /// The cap counts the line's own bytes: neither its `\n` nor a `\r` before it, so a
    /// line of `maxLength` bytes ending in `\r\n` is whole, also while its `\n` is still to come.
    static func next(_ bytes: UnsafeRawBufferPointer, maxLength: Int) -> Next {
        guard let newline = newline(in: bytes) else {
            return fits(bytes, maxLength: maxLength) ? .needMoreData : .tooLong
        }
        let length = newline > 0 && bytes[newline - 1] == UInt8(ascii: "\r") ? newline - 1 : newline
        if length > maxLength { return .tooLong }
        return .line(length: length, consumed: newline + 1)
    }

    /// Whether `bytes`, the start of a line without its `\n`, is still within the cap (a `\r`
    /// at the end may be the one before the `\n`: not counted).
    static func fits(_ bytes: UnsafeRawBufferPointer, maxLength: Int) -> Bool {
        bytes.count - (bytes.last == UInt8(ascii: "\r") ? 1 : 0) <= maxLength
    }

    /// Where the first `\n` is: `memchr`, a word at a time, instead of the generic
    /// `firstIndex(of:)`'s byte loop (~800 instructions per request line).
    static func newline(in bytes: UnsafeRawBufferPointer) -> Int? {
        guard let base = bytes.baseAddress, let found = memchr(base, 0x0A, bytes.count) else { return nil }
        return UnsafeRawPointer(found) - base
    }
}
