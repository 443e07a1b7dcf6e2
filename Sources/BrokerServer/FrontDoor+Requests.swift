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
            n = read(connection.fd, buffer.baseAddress, buffer.count)
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
        let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
        // One whole line and nothing after it, the way callers ask: handled here. Anything
        // else is NIO's to frame (a line in pieces, several lines, one longer than a read).
        guard n < buffer.count,
              case .line(let length, let consumed) = LineFraming.next(chunk, maxLength: BrokerServer.maxLineLength),
              consumed == n
        else {
            give(connection, Handover(unread: ByteBuffer(bytes: chunk)))
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
        guard let scanned = ScannedRequest.scan(line), scanned.jsonrpc == "2.0",
              let method = scanned.method, let handler = table[method],
              table.callerPolicy().isOpen
        else {
            give(connection, Handover(unread: ByteBuffer(bytes: chunk)))
            return false
        }
        counters.requests.increment()
        activity.touch()
        // An answer to a sign-in's question may be a password: the read buffer keeps no copy.
        defer { if method == RPCMethod.loginAnswer.rawValue { SecretBytes.wipe(UnsafeMutableRawBufferPointer(mutating: chunk)) } }
        let id = scanned.id ?? .null
        let hasID = scanned.hasID
        // Rules may come in between the check above and the handler's own: then, as on any
        // connection opened before them, the request is refused and the connection closed.
        var identified = false
        // The scanned request is handed over, not copied: its copy and that copy's
        // destruction were ~400 instructions per request.
        let reply = handler(RequestLine(scanned: consume scanned, borrowing: line), id, codec, { _ throws(BrokerError) in
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
            return hasID ? answer(connection, data) : true
        case .later, .untilClosed:
            give(connection, Handover(adopted: AdoptedRequest(reply: reply, id: id, answer: hasID, mints: table.mints(method))))
            return false
        }
    }

    /// Writes one answer line. What the socket does not take waits in `unsent`, and the
    /// lifecycle waits to write: nothing more is read until it is out. Returns false when the connection was closed.
    private func answer(_ connection: Connection, _ data: Data) -> Bool {
        var newline = UInt8(ascii: "\n")
        let total = data.count + 1
        let sent: Int = data.withUnsafeBytes { json in
            withUnsafeMutablePointer(to: &newline) { nl in
                var parts = [
                    iovec(iov_base: UnsafeMutableRawPointer(mutating: json.baseAddress), iov_len: json.count),
                    iovec(iov_base: UnsafeMutableRawPointer(nl), iov_len: 1),
                ]
                return parts.withUnsafeMutableBufferPointer { iov in
                    var message = msghdr()
                    message.msg_iov = iov.baseAddress
                    message.msg_iovlen = 2
                    var n: Int
                    repeat {
                        n = sendmsg(connection.fd, &message, CInt(MSG_NOSIGNAL))
                    } while n < 0 && errno == EINTR
                    return n
                }
            }
        }
        if sent == total {
            return perform(connection, connection.life.writeDrained(now: ServerActivity.monotonicNanoseconds()))
        }
        if sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK {
            hangUp(connection)  // the peer is gone
            return false
        }
        let done = max(sent, 0)
        var rest = [UInt8]()
        rest.reserveCapacity(total - done)
        if done < data.count { rest.append(contentsOf: data[data.startIndex + done ..< data.endIndex]) }
        rest.append(newline)
        connection.unsent = rest
        connection.life.writeBlocked(progress: false, now: ServerActivity.monotonicNanoseconds())
        register(connection, events: Self.watched | EPOLLOUT.rawValue)
        return held[connection.fd] != nil
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
