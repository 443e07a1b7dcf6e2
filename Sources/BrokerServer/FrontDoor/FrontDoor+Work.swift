#if canImport(Glibc)
import Glibc
#endif
import BrokerProtocol
import CLinux
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Answers that come later (a refresh, a token the cache does not have) on connections the
/// front door keeps: the work runs as a task, and its answer comes back to the front door's
/// thread (`LaterAnswers`), which writes it as it writes any other.
///
/// Why not NIO: a cold burst (a thousand callers asking at once for a token that has to be
/// refreshed first) made a NIO channel, a pipeline and its buffers per caller on the event
/// loop's heap, for an answer that is one line. Afterwards the few of those allocations still
/// live (and each thread's cache of freed chunks) sat spread over the pages the burst used, so
/// the daemon kept ~0.2 MB of private memory on each of the event loop's and the front door's
/// heaps for good (docs/performance.md, "The daemon's memory").
///
/// The work runs as on NIO's connections (`LaterWork`): with the connection's
/// `cache_misses_per_minute` allowance for token work, its origin for the refresh queue's
/// turns and who is asking, capped by the daemon's `max_requests_in_flight`. One request at
/// a time: the lifecycle reads nothing more while an answer is worked on.
extension FrontDoor {
    /// The connection an answer is worked on for. Touched only on the front door's thread
    /// (`deliverFinished`); the task only carries it there.
    struct Owed: @unchecked Sendable {
        let connection: Connection
        /// False for a notification: carried out, never answered.
        let answer: Bool
    }

    /// An answer worked out off the front door's thread.
    struct Finished: Sendable {
        let owed: Owed
        let data: Data
    }

    /// What answers that come later need: who asks (the program behind a connection, for
    /// work that shows the user something), the answers finished since the front door last
    /// looked, and the eventfd that wakes it for them. The tasks hold it, not the front
    /// door: the eventfd stays open until the last of them has posted, however long after
    /// `stop` that is.
    final class LaterAnswers: Sendable {
        let inspector: ProcessInspector
        private let list = Mutex<[Finished]>([])
        let wake: CInt

        init(inspector: ProcessInspector) throws(ServerError) {
            self.inspector = inspector
            wake = eventfd(0, CInt(EFD_CLOEXEC | EFD_NONBLOCK))
            guard wake >= 0 else {
                throw ServerError(description: "cannot make the eventfd for answers worked on: \(String(cString: strerror(errno)))")
            }
        }

        deinit {
            close(wake)
        }

        func post(_ finished: Finished) {
            let first = list.withLock { list in
                list.append(finished)
                return list.count == 1
            }
            guard first else { return }  // the front door is woken already
            var one: UInt64 = 1
            _ = write(wake, &one, 8)
        }

        func take() -> [Finished] {
            var count: UInt64 = 0
            _ = read(wake, &count, 8)
            return list.withLock { list in
                defer { list = [] }
                return list
            }
        }
    }

    /// Starts the work of an answer that comes later and keeps the connection, reading
    /// nothing more on it until the answer is out. Returns false when the connection is no
    /// longer the front door's.
    func startWork(_ connection: Connection, _ work: @escaping @Sendable () async -> Data,
                   id: RequestID, answer: Bool, mints: Bool) -> Bool {
        if let refusal = rules.startWork() {
            guard answer else { return true }
            return self.answer(connection, scratch.codec.failure(id, refusal))
        }
        let now = ServerActivity.monotonicNanoseconds()
        connection.life.answersOwed(true, now: now)
        let allowance = mints ? connection.allowance(perMinute: table.cacheMissesPerMinute) : nil
        let origin = connection.origin
        let pid = connection.pid > 0 ? connection.pid : nil
        let later = self.later
        let activity = rules.server.activity
        let owed = Owed(connection: connection, answer: answer)
        Task {
            let data = await LaterWork.run(work, asker: pid, inspector: later.inspector, origin: origin, allowance: allowance)
            activity.finished()
            later.post(Finished(owed: owed, data: data))
        }
        return true
    }

    /// Writes the answers that finished, each on its connection if that is still the front
    /// door's (a peer that hung up fully was closed when its answer could not be written,
    /// or at `stop`).
    func deliverFinished() {
        for done in later.take() {
            let connection = done.owed.connection
            guard connection.life.answersOwed, held[connection.fd] === connection else { continue }
            let now = ServerActivity.monotonicNanoseconds()
            connection.life.answersOwed(false, now: now)
            if done.owed.answer {
                guard answer(connection, done.data) else { continue }
            } else {
                guard perform(connection, connection.life.writeDrained(now: now)) else { continue }
            }
            perform(connection, connection.life.settled())
        }
    }
}

extension FrontDoor.Connection {
    /// The connection's `cache_misses_per_minute`, made on its first cache miss.
    func allowance(perMinute: @escaping @Sendable () -> Int) -> ConnectionAllowance {
        if let made = madeAllowance { return made }
        let made = ConnectionAllowance(perMinute: perMinute)
        madeAllowance = made
        return made
    }
}
