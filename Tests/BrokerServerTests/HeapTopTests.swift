import CLinux
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import XCTest

/// What `clinux_malloc_configure` (the daemon's `MemoryTrim.configureHeaps`, called at
/// start) changes in glibc's malloc: a thread heap that shrinks hands back all of its free
/// top instead of keeping 128 KiB of it resident.
final class HeapTopTests: XCTestCase {
    /// Shared by the test and its worker thread; the worker allocates nothing of its own
    /// between its blocks and their frees (anything it allocated would sit above them and
    /// keep them from the heap's top).
    final class Worker: @unchecked Sendable {
        let step = Atomic<Int>(0)
        /// The blocks the worker made, in order (nil past the last).
        let blocks = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 128)
        /// The index of the second of the two blocks side by side at the heap's top, once found.
        var pair: Int?

        init() { blocks.initialize(repeating: nil, count: 128) }

        deinit { blocks.deallocate() }

        func wait(for value: Int) {
            while step.load(ordering: .acquiring) != value { usleep(1_000) }
        }
    }

    static let blockSize = 100 << 10

    func testAThreadHeapThatShrinksKeepsNoneOfItsFreedTopResident() throws {
        // The daemon's settings, with room for a heap of the worker's own: at 3 heaps the
        // test process (which has more threads than the daemon) may give it the main heap,
        // which malloc_trim does shrink, and which is not what this is about.
        XCTAssertEqual(clinux_malloc_configure(64), 1)
        let worker = Worker()
        var thread = pthread_t()
        // 100 KiB blocks on a thread of its own (so from a thread heap, whose top malloc_trim
        // never shrinks), written, until two lie side by side at the heap's top (the thread
        // may be given a heap another thread used, with free chunks in its middle, several
        // MiB after other tests' large answers); then those two are freed: ~200 KiB free at
        // the heap's top.
        let made = pthread_create(&thread, nil, { arg in
            let worker = Unmanaged<Worker>.fromOpaque(arg!).takeUnretainedValue()
            for i in 0..<128 {
                guard let block = malloc(HeapTopTests.blockSize) else { break }
                memset(block, 1, HeapTopTests.blockSize)
                worker.blocks[i] = block
                if i > 0, let last = worker.blocks[i - 1], HeapTopTests.follows(block, last), HeapTopTests.atTheTop(block) {
                    worker.pair = i
                    break
                }
            }
            worker.step.store(1, ordering: .releasing)
            worker.wait(for: 2)
            if let i = worker.pair {
                free(worker.blocks[i])
                free(worker.blocks[i - 1])
                worker.blocks[i] = nil
                worker.blocks[i - 1] = nil
            }
            worker.step.store(3, ordering: .releasing)
            return nil
        }, Unmanaged.passUnretained(worker).toOpaque())
        XCTAssertEqual(made, 0)
        worker.wait(for: 1)
        let second = try XCTUnwrap(worker.pair, "128 blocks and never two side by side at the heap's top")
        let block = try XCTUnwrap(worker.blocks[second - 1])
        let grown = Self.residentKB(of: block)
        worker.step.store(2, ordering: .releasing)
        worker.wait(for: 3)
        let shrunk = Self.residentKB(of: block)
        pthread_join(thread, nil)
        for i in 0..<128 { free(worker.blocks[i]) }
        XCTAssertGreaterThan(grown, 200, "both blocks resident in the thread's heap")
        // With glibc's default pad the heap kept 128 KiB of the freed top resident (204 KiB,
        // then 132 in a C program doing the same); without, it hands back (almost) all 200.
        XCTAssertGreaterThan(grown - shrunk, 180, "grown \(grown) KiB, then \(shrunk) KiB")
    }

    /// glibc's chunk size: the word just before a block, less its three flag bits.
    static func chunkSize(_ block: UnsafeMutableRawPointer) -> Int { (block - 8).load(as: Int.self) & ~7 }

    /// Whether `block`'s chunk comes right after `previous`'s.
    static func follows(_ block: UnsafeMutableRawPointer, _ previous: UnsafeMutableRawPointer) -> Bool {
        previous + chunkSize(previous) == block
    }

    /// Whether the chunk after `block`'s is its heap's top: glibc 2.36's layout on x86-64
    /// (as `scripts/heap-walk` reads it), a thread heap 64 MiB-aligned and starting with its
    /// arena's address, the arena's top chunk at offset 96.
    static func atTheTop(_ block: UnsafeMutableRawPointer) -> Bool {
        // Not from the main heap, which lies below the program break (thread heaps are
        // mapped far above it).
        guard let brk = sbrk(0), UnsafeMutableRawPointer(brk) < block else { return false }
        let heap = UnsafeRawPointer(bitPattern: UInt(bitPattern: block) & ~UInt((64 << 20) - 1))!
        let arena = heap.load(as: UnsafeRawPointer.self)
        let top = arena.load(fromByteOffset: 96, as: UnsafeRawPointer.self)
        return top == UnsafeRawPointer(block + chunkSize(block) - 16)
    }

    /// Resident KiB of the mapping that holds `pointer` (/proc/self/smaps).
    static func residentKB(of pointer: UnsafeMutableRawPointer) -> Int {
        let address = UInt(bitPattern: pointer)
        // /proc files report no size: read until the end.
        let fd = open("/proc/self/smaps", O_RDONLY)
        guard fd >= 0 else { return -1 }
        defer { close(fd) }
        var bytes = [UInt8](), chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        var inside = false
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), !range.hasSuffix(":") {
                let ends = range.split(separator: "-").compactMap { UInt($0, radix: 16) }
                inside = ends.count == 2 && ends[0] <= address && address < ends[1]
            } else if inside, fields.first == "Rss:", fields.count > 1 {
                return Int(fields[1]) ?? -1
            }
        }
        return -1
    }
}
