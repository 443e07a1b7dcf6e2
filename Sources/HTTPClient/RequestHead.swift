/// The bytes of a request head: request line, the fields this client sets, then the
/// caller's fields. One request per connection, so always `Connection: close`.
enum RequestHead {
    /// Fields the client manages itself; a caller's field of one of these names is dropped.
    static let reserved: Set<String> = ["host", "content-length", "connection", "transfer-encoding", "proxy-authorization", "te", "upgrade"]

    static func make(method: String, target: String, endpoint: Endpoint, headers: [String: String], bodyLength: Int?,
                     proxyAuthorization: String?) throws(HTTPClientError) -> [UInt8] {
        guard !method.isEmpty, method.utf8.allSatisfy(HTTPToken.isByte) else {
            throw .invalidURL(reason: "the method is not an HTTP token")
        }
        var fields: [(String, String)] = [
            ("Host", endpoint.hostHeader),
            ("User-Agent", "authbroker"),
            ("Accept-Encoding", "identity"),
            ("Connection", "close"),
        ]
        if let bodyLength {
            fields.append(("Content-Length", String(bodyLength)))
        } else if method == "POST" || method == "PUT" {
            fields.append(("Content-Length", "0"))
        }
        if let proxyAuthorization { fields.append(("Proxy-Authorization", proxyAuthorization)) }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            let lower = name.lowercased()
            guard !name.isEmpty, name.utf8.allSatisfy(HTTPToken.isByte) else {
                throw .invalidURL(reason: "a header field name is not an HTTP token")
            }
            // The value is never quoted: it may be a credential.
            guard value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                throw .invalidURL(reason: "the header field \(name) holds control characters")
            }
            if reserved.contains(lower) { continue }
            if let index = fields.firstIndex(where: { $0.0.lowercased() == lower }) {
                fields[index].1 = value
            } else {
                fields.append((name, value))
            }
        }
        var text = "\(method) \(target) HTTP/1.1\r\n"
        for (name, value) in fields { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }
}
