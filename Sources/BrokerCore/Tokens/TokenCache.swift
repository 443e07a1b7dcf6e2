import BrokerProtocol
import OAuth
import Synchronization

extension TokenGetResult {
    /// The answer for a cached token, carrying what the cache found about its escaping.
    init(cached token: CachedToken, at now: ClockReading, resource: String?, provider: String, account: String) {
        self.init(accessToken: token.accessToken, tokenType: token.tokenType, expiresAt: Int64(token.expiresAt(at: now)),
                  scope: token.scope, resource: resource, provider: provider, account: account)
        accessTokenIsPlainJSON = token.accessTokenIsPlainJSON
    }
}

/// What a cached access token is filed under: one account, one resource, one scope set,
/// one set of extra parameters.
struct CacheKey: Hashable, Sendable {
    var account: AccountKey
    var resource: String?
    /// Sorted and without duplicates, so the order a caller lists scopes in never matters.
    var scopes: [String]
    /// Extra token request parameters (`params` of `token.get`); different ones are
    /// different tokens.
    var params: [String: String]
    /// Set for a token minted by `token.exchange`: never the same token as a `token.get`
    /// of the same resource and scopes.
    var exchange: ExchangeTarget?

    init(account: AccountKey, resource: String?, scopes: [String], params: [String: String]? = nil,
         exchange: ExchangeTarget? = nil) {
        self.account = account
        self.resource = resource
        self.scopes = Self.normalized(scopes)
        self.params = params ?? [:]
        self.exchange = exchange
    }

    /// Sorted and without duplicates. What callers send is usually none, one, or an already
    /// sorted list: those are kept as they are, without building a set and a new array on
    /// every cache hit.
    static func normalized(_ scopes: [String]) -> [String] {
        var index = scopes.startIndex + 1
        while index < scopes.endIndex {
            guard scopes[index - 1] < scopes[index] else { return Array(Set(scopes)).sorted() }
            index += 1
        }
        return scopes
    }
}

/// What an exchanged token (RFC 8693) is for, besides its resource and scopes.
struct ExchangeTarget: Hashable, Sendable {
    var audience: String?
    /// Token type URNs.
    var subjectTokenType: String
    var requestedTokenType: String?
}

/// An access token in memory. Never written anywhere.
struct CachedToken: Sendable {
    let accessToken: String
    /// Whether `accessToken` holds nothing JSON escapes, found once here: a token never
    /// changes, and a cache hit's answer then copies it whole instead of scanning its
    /// kilobyte again (`JSONString.append(_:plain:to:)`).
    let accessTokenIsPlainJSON: Bool
    var tokenType: String
    /// When it expires on CLOCK_BOOTTIME (`WallClock.boottime`): counted from the moment
    /// its request was sent, `expiry(sent:received:expiresIn:exp:)`. A step of the wall
    /// clock moves it not at all; a suspend counts.
    var deadline: Double
    /// The access token's JWT `exp` (Unix seconds) when it is one: it is also never served
    /// past it read on this computer's wall clock, whichever way either clock steps.
    var exp: Double?
    /// `expires_at` as it was at receipt (Unix seconds, a whole second), and the wall
    /// clock's offset from boot time then: the wire's `expires_at` stays these same bytes
    /// while the wall clock does not step (`expiresAt(at:)`).
    private var expiresAtThen: Double
    private var offsetThen: Double
    var scope: String?
    /// The refresh-token chain that minted it: nil for the account's shared refresh token,
    /// else the resource whose own refresh token it was (`refresh_tokens = "one-per-resource"`).
    var chain: String? = nil
    /// The program whose request minted it (nil: unknown, a background refresh keeps the
    /// one before), and when it was last stored or served (boot time): for `TokenCache.makeRoom`.
    var owner: ProgramShare? = nil
    var lastUsed: Double = 0

    /// A token whose `expiry` was worked out at receipt.
    init(accessToken: String, tokenType: String, expiry: Expiry, scope: String? = nil, chain: String? = nil) {
        self.accessToken = accessToken
        self.accessTokenIsPlainJSON = !JSONString.needsEscaping(accessToken)
        self.tokenType = tokenType
        self.deadline = expiry.deadline
        self.exp = expiry.exp
        self.expiresAtThen = expiry.expiresAt
        self.offsetThen = expiry.offset
        self.scope = scope
        self.chain = chain
    }

    /// A token expiring at `expiresAt` on both clocks read as one (tests, whose clocks
    /// agree unless they step one).
    init(accessToken: String, tokenType: String, expiresAt: Double, scope: String? = nil, chain: String? = nil) {
        self.init(accessToken: accessToken, tokenType: tokenType,
                  expiry: Expiry(deadline: expiresAt, exp: nil, expiresAt: expiresAt, offset: 0), scope: scope, chain: chain)
    }

    /// How long it has left at `now`: to its deadline on boot time and, for a JWT, to its
    /// `exp` on the wall clock, whichever is sooner.
    func life(at now: ClockReading) -> Double {
        let left = deadline - now.boot
        guard let exp else { return left }
        return min(left, exp - now.wall)
    }

    /// `expires_at` for the wire at `now` (Unix seconds, whole): the one worked out at
    /// receipt while the wall clock has not stepped since (by half a second or more);
    /// after a step, the deadline read through the wall clock's new offset. Never later
    /// than the JWT's `exp`.
    func expiresAt(at now: ClockReading) -> Double {
        let stepped = now.offset - offsetThen
        let at = abs(stepped) < Self.stepNoticed ? expiresAtThen : (deadline + now.offset).rounded(.down)
        guard let exp else { return at }
        return min(at, exp)
    }

    /// A step of the wall clock smaller than this leaves `expires_at` as it was: two
    /// readings of the clocks differ by microseconds, and the wire's seconds would flap.
    static let stepNoticed: Double = 0.5

    /// When a token expires, worked out at receipt.
    struct Expiry: Sendable, Equatable {
        /// On boot time.
        var deadline: Double
        /// The JWT's `exp`, Unix seconds.
        var exp: Double?
        /// `expires_at` at receipt, Unix seconds, never later than `exp`.
        var expiresAt: Double
        /// The wall clock's offset from boot time at receipt.
        var offset: Double

        /// The life it had when its request was sent.
        func life(at sent: ClockReading) -> Double {
            let left = deadline - sent.boot
            guard let exp else { return left }
            return min(left, exp - sent.wall)
        }
    }

    /// When a token the provider said lives `expiresIn` seconds expires: counted from the
    /// whole second before the one its request was sent in. Providers compute `exp` in
    /// whole seconds from their own clock when they take the request, and that clock may
    /// be a little behind ours: Glewlwyd's `time()` is the kernel's coarse clock, a few
    /// milliseconds late, so a request sent just after a second began gets the previous
    /// second's `exp`; another host's clock may differ by NTP's error. Counting from the
    /// fractional send time was up to a second late; from its floor, still late in those
    /// cases. One second less of life is not noticed.
    static func expiry(sentAt: Double, expiresIn: Int?) -> Double {
        sentAt.rounded(.down) - providerClockLag + Double(expiresIn ?? 300)
    }

    /// `expiry(sentAt:expiresIn:)`, and never later than the access token's own `exp` when
    /// it is a JWT (RFC 9068 §2.2), `exp` read on this computer's clock as the resource
    /// servers read it: a provider whose clock is behind ours issues tokens that expire
    /// earlier than `expires_in` says, and one served past its `exp` is refused.
    static func expiry(sentAt: Double, expiresIn: Int?, exp: Double?) -> Double {
        let counted = expiry(sentAt: sentAt, expiresIn: expiresIn)
        guard let exp else { return counted }
        return min(counted, exp)
    }

    /// The same on both clocks: the deadline on boot time is `expires_in` counted from the
    /// send (as `expiry(sentAt:expiresIn:)`, through the offset at the send), and never
    /// later than the JWT's `exp` read through the offset at receipt; `expires_at` at
    /// receipt is that deadline on the wall clock at receipt, never later than `exp`. A
    /// wall clock that steps while the request is out moves neither deadline.
    static func expiry(sent: ClockReading, received: ClockReading, expiresIn: Int?, exp: Double?) -> Expiry {
        let counted = expiry(sentAt: sent.wall, expiresIn: expiresIn)
        var deadline = counted - sent.offset
        if let exp { deadline = min(deadline, exp - received.offset) }
        let stepped = received.offset - sent.offset
        var expiresAt = abs(stepped) < stepNoticed ? counted : (deadline + received.offset).rounded(.down)
        if let exp { expiresAt = min(expiresAt, exp) }
        return Expiry(deadline: deadline, exp: exp, expiresAt: expiresAt, offset: received.offset)
    }

    /// The `exp` of an access token that is a JWT, Unix seconds; nil for an opaque token.
    /// Read without checking the signature: the token came straight from the provider.
    static func jwtExpiry(_ accessToken: String) -> Double? {
        guard accessToken.utf8.first == UInt8(ascii: "e"),  // a JSON object's header: "ey…"
              let exp = JWT.decodeClaims(accessToken)?["exp"]?.numberValue, exp.isFinite else { return nil }
        return exp
    }

    /// How far behind ours a provider's clock may be (whole seconds) without a token being
    /// counted past its `exp`.
    static let providerClockLag: Double = 1

    /// The scope a token answer grants (RFC 6749 §5.1, RFC 8693 §2.2.1): the answer's own
    /// `scope`; an answer that names none grants exactly the scopes asked for (nil when
    /// none were, the sign-in's).
    static func scope(answered: String?, asked: [String]) -> String? {
        answered ?? (asked.isEmpty ? nil : asked.joined(separator: " "))
    }

    /// The scopes asked for that the answer's `scope` does not grant (RFC 6749 §3.3: a
    /// provider may grant fewer); none when the answer names no scope.
    static func notGranted(answered: String?, asked: [String]) -> [String] {
        guard let answered else { return [] }
        let granted = Set(answered.split(separator: " ").map(String.init))
        return asked.filter { !granted.contains($0) }
    }
}

/// Access tokens by key, in memory only.
final class TokenCache: Sendable {
    private struct Entries {
        var byKey: [CacheKey: CachedToken] = [:]
        /// The size at which `store` next drops expired entries: doubling, so the sweeps
        /// cost O(1) per store, and a daemon asked for ever new (resource, scopes) keys
        /// keeps only the tokens that can still be served.
        var nextSweep = TokenCache.firstSweep
    }

    static let firstSweep = 1024
    /// The life a token always has left when it is served, whatever the caller's `min_ttl`
    /// and `refresh_margin` (0 allowed): a token served in its last second may reach the API
    /// after its `exp`, and the answer's `expires_at` (whole seconds) would already be past.
    static let reserve: Double = 1
    /// Every store, removal or restore counts as a change: a cache hit's answer read at one
    /// generation is still the answer while the generation is the same
    /// (`TokensService.generation`, `CacheHitStamp`).
    private let entries = CountedMutex(Entries())

    /// Changes with every store, removal or restore (never goes back).
    var generation: UInt64 { entries.generation }

    /// The token if it still has more than `minimumLife` seconds (and more than `reserve`)
    /// to live.
    func lookup(_ key: CacheKey, now: ClockReading, minimumLife: Double) -> CachedToken? {
        entries.withLock { all in
            guard let index = all.byKey.index(forKey: key) else { return nil }
            let t = all.byKey.values[index]
            guard t.life(at: now) > max(minimumLife, Self.reserve) else { return nil }
            // Not a change of what is served: the generation stays.
            all.byKey.values[index].lastUsed = now.boot
            return t
        }
    }

    /// Stores `token` at `key`, minted for `owner` (by default the program whose request is
    /// being worked on; without one, a background refresh, the key's owner stays).
    func store(_ token: CachedToken, for key: CacheKey, now: ClockReading, owner: ProgramShare? = Requester.share) {
        entries.changing { all in
            var token = token
            token.lastUsed = now.boot
            token.owner = owner ?? all.byKey[key]?.owner
            all.byKey[key] = token
            if all.byKey.count >= all.nextSweep {
                // An expired token is never served (not even while the provider is down).
                all.byKey = all.byKey.filter { $0.value.life(at: now) > 0 }
                all.nextSweep = max(Self.firstSweep, all.byKey.count * 2)
            }
        }
    }

    /// Whether a token `owner` asks for may be stored at `key` with the account at most
    /// `limit` live tokens, making room when the account is full. A key already held (a
    /// refresh replaces its token) always may. When full, the program holding the most of
    /// the account's live tokens pays: if another program holds more than `owner` does,
    /// that program's least recently used token is dropped and the answer is yes; if none
    /// does (`owner` holds the most, or only it holds any), no, and nothing is dropped. So
    /// one program's flood fills its own share and is refused there, and never refuses
    /// another program's first token (docs/security.md, "Fair shares"). Tokens of unknown
    /// owners (nil) count as one program's.
    func makeRoom(for key: CacheKey, owner: ProgramShare?, limit: Int, now: ClockReading) -> Bool {
        let full = entries.withLock { all -> Bool in
            if all.byKey[key] != nil { return false }
            return Self.live(of: key.account, in: all.byKey, now: now) >= limit
        }
        guard full else { return true }
        return entries.changing { all -> Bool in
            guard all.byKey[key] == nil, Self.live(of: key.account, in: all.byKey, now: now) >= limit else { return true }
            var held: [ProgramShare?: (count: Int, oldest: CacheKey, used: Double)] = [:]
            for (other, token) in all.byKey where other.account == key.account && token.life(at: now) > 0 {
                if var group = held[token.owner] {
                    group.count += 1
                    if token.lastUsed < group.used { (group.oldest, group.used) = (other, token.lastUsed) }
                    held[token.owner] = group
                } else {
                    held[token.owner] = (1, other, token.lastUsed)
                }
            }
            let mine = held[owner]?.count ?? 0
            let victim = held.filter { $0.key != owner }.values
                .max { ($0.count, -$0.used) < ($1.count, -$1.used) }
            guard let victim, victim.count > mine else { return false }
            all.byKey[victim.oldest] = nil
            return true
        }
    }

    /// The live tokens of `account`.
    private static func live(of account: AccountKey, in byKey: [CacheKey: CachedToken], now: ClockReading) -> Int {
        var live = 0
        for (other, token) in byKey where other.account == account && token.life(at: now) > 0 { live += 1 }
        return live
    }

    /// How many tokens are held, expired ones included.
    var count: Int { entries.withLock { $0.byKey.count } }

    func removeAll(for account: AccountKey) {
        entries.changing { all in
            all.byKey = all.byKey.filter { $0.key.account != account }
        }
    }

    /// Drops every token `account`'s refresh-token `chain` minted, and returns them by key:
    /// the provider revokes them all when that chain is refreshed
    /// (`access_tokens = "one-per-refresh-token"`).
    func removeChain(_ chain: String?, of account: AccountKey) -> [CacheKey: CachedToken] {
        entries.changing { all in
            var removed: [CacheKey: CachedToken] = [:]
            all.byKey = all.byKey.filter { key, token in
                guard key.account == account, token.chain == chain else { return true }
                removed[key] = token
                return false
            }
            return removed
        }
    }

    /// Puts back the tokens taken by `removeChain` when the refresh that took them did not
    /// reach the provider, each where nothing newer was stored since.
    func restore(_ removed: [CacheKey: CachedToken]) {
        guard !removed.isEmpty else { return }
        entries.changing { all in
            for (key, token) in removed where all.byKey[key] == nil { all.byKey[key] = token }
        }
    }

    /// Drops the token at `key`, but only while it is still `token` when one is given (so a
    /// rejection never drops the newer token a refresh has put there since). True if dropped.
    func remove(_ key: CacheKey, ifHolding token: String? = nil) -> Bool {
        entries.changing { all in
            guard let held = all.byKey[key], token == nil || held.accessToken == token else { return false }
            all.byKey[key] = nil
            return true
        }
    }

    /// The key under which `token` is cached, if it is.
    func key(holding token: String) -> CacheKey? {
        entries.withLock { all in all.byKey.first { $0.value.accessToken == token }?.key }
    }

    /// The unexpired entries of one account, for `daemon.status`.
    func entries(for account: AccountKey, now: ClockReading) -> [(key: CacheKey, token: CachedToken)] {
        entries.withLock { all in
            all.byKey.filter { $0.key.account == account && $0.value.life(at: now) > 0 }.map { ($0.key, $0.value) }
        }.sorted { ($0.key.resource ?? "", $0.key.scopes.joined(separator: " ")) < ($1.key.resource ?? "", $1.key.scopes.joined(separator: " ")) }
    }
}

