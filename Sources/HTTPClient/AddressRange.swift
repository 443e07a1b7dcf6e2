import Glibc

/// An IP address range in CIDR notation, "10.0.0.0/8" or "fd00::/32", as `no_proxy`
/// lists them for curl (7.86 and later) and Go.
struct AddressRange: Sendable, Equatable {
    /// The range's address, 4 or 16 bytes in network order.
    private let network: [UInt8]
    /// How many leading bits of an address must equal the network's.
    private let bits: Int

    /// Reads "ADDRESS/BITS"; nil for anything else (a host name, a bare address, a prefix
    /// longer than the address).
    init?(_ text: String) {
        guard let slash = text.firstIndex(of: "/"), let network = Self.bytes(String(text[..<slash])) else { return nil }
        let digits = text[text.index(after: slash)...]
        guard !digits.isEmpty, digits.count <= 3, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let bits = Int(digits), bits <= network.count * 8
        else { return nil }
        self.network = network
        self.bits = bits
    }

    /// True when `host`, an IP address without brackets, lies in the range; false for a
    /// host name or an address of the other family.
    func contains(_ host: String) -> Bool {
        guard let address = Self.bytes(host), address.count == network.count else { return false }
        var left = bits
        for (byte, networkByte) in zip(address, network) where left > 0 {
            let mask: UInt8 = left >= 8 ? 0xFF : ~(UInt8(0xFF) >> left)
            if byte & mask != networkByte & mask { return false }
            left -= 8
        }
        return true
    }

    /// The bytes of an IPv4 or IPv6 address, nil for anything else.
    private static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
