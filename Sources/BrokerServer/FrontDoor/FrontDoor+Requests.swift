#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import BrokerCrypto
import BrokerProtocol
import CLinux
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NIOCore

extension FrontDoor {
    /// Reads what the connection sent and answers it, or hands the connection to NIO.
    /// Returns false when the connection is no longer the front door's (closed, handed over).
    func readRequest(_ connection: Connection) -> Bool {
        var n: Int
        repeat {
            n = read(connection.fd, scratch.buffer.baseAddress, scratch.buffer.count)
        } while n < 0 && errno == EINTR
        if n < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { return true }
            hangUp(connection)
            return false
        }
        if n == 0 {
            // The peer hung up; everything it sent was answered (reading waits for unsent answers).
            hangUp(connection)
            return false
        }
        let chunk = UnsafeRawBufferPointer(rebasing: scratch.buffer[0..<n])
        // One whole line and nothing after it, the way callers ask: handled here. Anything
        // else is NIO's to frame (a line in pieces, several lines, one longer than a read).
        guard n < scratch.buffer.count,
              case .line(let length, let consumed) = LineFraming.next(chunk, maxLength: BrokerServer.maxLineLength),
              consumed == n
        else {
            give(connection, read: chunk)
            return false
        }
        // A whole line: none is left started.
        connection.life.chunkRead(endsLine: true, hasNewline: true, now: ServerActivity.monotonicNanoseconds())
        return serve(connection, line: UnsafeRawBufferPointer(rebasing: chunk[0..<length]), chunk: chunk)
    }

    /// Answers one request line at once, or hands the connection to NIO with it: a request
    /// NIO answers differently (an error in the request, a method the table does not have)
    /// goes unread, one whose answer comes later goes as taken in (`AdoptedRequest`).
    private func serve(_ connection: Connection, line: UnsafeRawBufferPointer, chunk: UnsafeRawBufferPointer) -> Bool {
        if LineFraming.isBlank(line) { return true }
        // The same request as one of the last cache hits', answered the same while that
        // answer stands: its stamp is asked each time, and counts the hit as the cache would.
        // The caller gate has nothing to ask while no rule is in force, and only then does
        // the front door serve a request itself.
        if let stillServes = table.stillServes,
           let sent = scratch.memo.answer(line, stands: { stamp, audit in
               guard table.gate.isOpen, stillServes(stamp) else { return false }
               // Served from memory as the full path would: one audit line, rate-limited.
               if let audit, let trail = table.gate.audit {
                   trail.record(.served, audit, grant: .open, pid: connection.pid > 0 ? connection.pid : nil, resolve: table.program)
               }
               return true
           }, { head, id, rest in
               rules.countRequest()
               return send(connection.fd, head, id, rest)
           }) {
            return answered(connection, sent)
        }
        guard let scanned = ScannedRequest.scan(line), scanned.jsonrpc == "2.0",
              let method = scanned.method, let handler = table[method],
              table.gate.isOpen
        else {
            give(connection, read: chunk)
            return false
        }
        rules.countRequest()
        // An answer to a sign-in's question may be a password: the read buffer keeps no copy.
        defer { if method == RPCMethod.loginAnswer.rawValue { SecretBytes.wipe(UnsafeMutableRawBufferPointer(mutating: chunk)) } }
        let id = scanned.id ?? .null
        let hasID = scanned.hasID
        let idRange = scanned.idRange
        let codec = scratch.codec
        codec.lastHit = nil
        codec.lastAudit = nil
        // Rules may come in between the check above and the handler's own: then, as on any
        // connection opened before them, the request is refused and the connection closed.
        var identified = false
        // The scanned request is handed over, not copied: its copy and that copy's
        // destruction were ~400 instructions per request.
        let asker = connection.pid > 0 ? connection.pid : nil
        let reply = handler(RequestLine(scanned: consume scanned, borrowing: line, asker: asker), id, codec, { _ throws(BrokerError) in
            identified = true
            throw PeerIdentity.openedBeforeRulesError
        }, nil)
        switch reply {
        case .now(let data):
            if identified {
                connection.life.closeAfterAnswer()
                return answer(connection, data)
            }
            // A notification (no id) is carried out but never answered (JSON-RPC 2.0 §4.1).
            guard hasID else { return true }
            if table.stillServes != nil, let hit = codec.lastHit, let idRange {
                scratch.memo.keep(line: line, idRange: idRange, answer: data, resultStart: hit.resultStart, stamp: hit.stamp,
                                  audit: codec.lastAudit)
            }
            return answer(connection, data)
        case .later(let work):
            // Worked on here: a cold burst's callers make no NIO channel each (`startWork`).
            return startWork(connection, work, id: id, answer: hasID, mints: table.mints(method))
        case .untilClosed, .subscription:
            // Cancelled when the connection closes (a sign-in's wait), or a subscriber: NIO's to watch.
            give(connection, Handover(adopted: AdoptedRequest(reply: reply, id: id, answer: hasID, mints: table.mints(method))))
            return false
        }
    }

    /// Hands the connection to NIO with the bytes read of it, and keeps no copy of them in
    /// the read buffer: they may hold a `login.answer`'s value (a password, with an escape or
    /// non-ASCII, or behind another line) that NIO reads and wipes in its own copy, and that
    /// the next short request would not overwrite here.
    private func give(_ connection: Connection, read chunk: UnsafeRawBufferPointer) {
        let unread = ByteBuffer(bytes: chunk)
        SecretBytes.wipe(UnsafeMutableRawBufferPointer(mutating: chunk))
        give(connection, Handover(unread: unread))
    }

    /// Writes one answer line. What the socket does not take waits in `unsent`, and the
    /// lifecycle waits to write: nothing more is read until it is out. Returns false when the connection was closed.
    func answer(_ connection: Connection, _ data: Data) -> Bool {
        let sent = data.withUnsafeBytes { json in
            send(connection.fd, json, UnsafeRawBufferPointer(start: Self.newline.utf8Start, count: 1), UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return answered(connection, sent)
    }

    private static let newline: StaticString = "\n"

    /// What became of an answer written with `send`.
    enum Sent {
        /// The socket took it all.
        case all
        /// The peer is gone.
        case failed
        /// The socket took only part: the rest.
        case partly([UInt8])
    }

    /// Writes the three parts as one answer with one `sendmsg`; copies what the socket did
    /// not take. Touches nothing of the front door's: its callers may lend it their bytes.
    func send(_ fd: CInt, _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ c: UnsafeRawBufferPointer) -> Sent {
        var parts = (
            iovec(iov_base: UnsafeMutableRawPointer(mutating: a.baseAddress), iov_len: a.count),
            iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count),
            iovec(iov_base: UnsafeMutableRawPointer(mutating: c.baseAddress), iov_len: c.count))
        let total = a.count + b.count + c.count
        let n: Int = withUnsafeMutableBytes(of: &parts) { raw in
            var message = msghdr()
            message.msg_iov = raw.baseAddress?.assumingMemoryBound(to: iovec.self)
            message.msg_iovlen = c.isEmpty ? 2 : 3
            var n: Int
            repeat {
                n = sendmsg(fd, &message, CInt(MSG_NOSIGNAL))
            } while n < 0 && errno == EINTR
            return n
        }
        if n == total { return .all }
        if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK { return .failed }
        var skip = max(n, 0)
        var rest = [UInt8]()
        rest.reserveCapacity(total - skip)
        for part in [a, b, c] {
            if skip < part.count { rest.append(contentsOf: UnsafeRawBufferPointer(rebasing: part[skip...])) }
            skip = max(0, skip - part.count)
        }
        return .partly(rest)
    }

    /// Does what follows an answer's write: the lifecycle's next step when it went out
    /// whole, else waits for the socket with the rest in `unsent`. Returns false when the
    /// connection is no longer the front door's.
    func answered(_ connection: Connection, _ sent: Sent) -> Bool {
        switch sent {
        case .all:
            return perform(connection, connection.life.writeDrained(now: ServerActivity.monotonicNanoseconds()))
        case .failed:
            hangUp(connection)  // the peer is gone
            return false
        case .partly(let rest):
            connection.unsent = rest
            connection.life.writeBlocked(progress: false, now: ServerActivity.monotonicNanoseconds())
            register(connection, events: Self.watched | EPOLLOUT.rawValue)
            return held[connection.fd] != nil
        }
    }

    /// Writes what waits in `unsent`; once all is out, does what the lifecycle says next
    /// (reads what came meanwhile, closes after a last answer). Returns false when the
    /// connection is no longer the front door's.
    func flush(_ connection: Connection) -> Bool {
        let sent: Int = connection.unsent.withUnsafeBytes { bytes in
            var n: Int
            repeat {
                n = Glibc.send(connection.fd, bytes.baseAddress, bytes.count, CInt(MSG_NOSIGNAL))
            } while n < 0 && errno == EINTR
            return n
        }
        if sent < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { return true }
            hangUp(connection)
            return false
        }
        connection.unsent.removeFirst(sent)
        let now = ServerActivity.monotonicNanoseconds()
        // The stall is counted from the last progress, as NIO's is: a slow reader that keeps
        // taking bytes gets a long answer whole.
        guard connection.unsent.isEmpty else {
            connection.life.writeBlocked(progress: sent > 0, now: now)
            return true
        }
        let next = connection.life.writeDrained(now: now)
        if case .close = next { return perform(connection, next) }
        register(connection, events: Self.watched)
        guard held[connection.fd] != nil else { return false }
        return perform(connection, next)
    }
}
